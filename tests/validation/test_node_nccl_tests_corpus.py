"""The nccl-tests reader on real logs from public sources (tests/data/nccl-tests/SOURCES.md),
against the figures read off them by hand (expected.json); then on hostile and mutated input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validation import nccl_tests
from validation.nccl_tests import MAX_LINE_CHARS, OutputError, parse_outputs
from validation.result import dumps, run_check
from validation.units import human_size

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
EXPECTED: dict[str, list[dict]] = {
    name: entry if isinstance(entry, list) else [entry]
    for name, entry in json.loads((CORPUS / "expected.json").read_text()).items()
}
LOGS = sorted(p.name for p in CORPUS.glob("*.txt"))
# Logs that do not say which collective ran (no banner, no *_perf command line): whoever runs
# or keeps such a log knows it (superbench names its fixtures nccl_allreduce.log and so on, the
# others were posted as all_reduce runs), and passes it as --collective.
NOT_NAMED_IN_LOG = {
    "superbench-a100-all_reduce-c0.txt",
    "superbench-a100-all_gather-c0.txt",
    "superbench-a100-alltoall-c0.txt",
    "superbench-a100-broadcast-c0.txt",
    "superbench-a100-reduce-c0.txt",
    "superbench-a100-reduce_scatter-c0.txt",
    "aws-efa-eks-a100-2node-tag-output-error-col.txt",
    "a3mega-h100-2node-mpirun-all_reduce.txt",
    "issue290-h100-1node-all_reduce.txt",
    "issue290-h100-2node-srun-label-c0.txt",
}


def _hint(name: str) -> str | None:
    return EXPECTED[name][0]["collective"] if name in NOT_NAMED_IN_LOG else None


def test_every_log_has_expected_figures_and_a_source() -> None:
    sources = (CORPUS / "SOURCES.md").read_text()
    assert LOGS == sorted(EXPECTED)
    assert all(f"| {name} |" in sources for name in LOGS)


@pytest.mark.parametrize("name", LOGS)
def test_log_says_which_collective_or_leaves_it_open(name: str) -> None:
    outputs = parse_outputs((CORPUS / name).read_text())
    named = [o.collective for o in outputs]
    if name in NOT_NAMED_IN_LOG:
        assert named == [None]
    else:
        assert named == [e["collective"] for e in EXPECTED[name]]
        assert all(o.collective_source.startswith(("banner line", "command line")) for o in outputs)


@pytest.mark.parametrize("name", LOGS)
def test_log_figures_match_the_hand_read_ones(name: str) -> None:
    outputs = parse_outputs((CORPUS / name).read_text(), _hint(name))
    assert len(outputs) == len(EXPECTED[name])
    for out, want in zip(outputs, EXPECTED[name]):
        largest = max((r.size_bytes for r in out.rows), default=None)
        row = out.row_at(largest) if largest is not None else None
        got = {
            "collective": out.collective,
            "rows": len(out.rows),
            "max_size_bytes": largest,
            "busbw_at_max_size_oop": row.oop_busbw if row else None,
            "busbw_at_max_size_ip": row.ip_busbw if row else None,
            "avg_busbw": out.avg_busbw,
            "wrong_total": out.wrong_total,
            "failed": out.failed,
            "prefix": out.prefix,
        }
        assert got == {key: want[key] for key in got}, want["notes"]
        assert out.problems == []


@pytest.mark.parametrize("name", LOGS)
def test_log_through_the_check(name: str, capsys) -> None:
    """The envelope: exit code from the verdict, figures named per collective at each test's largest size."""
    largest = sorted({e["max_size_bytes"] for e in EXPECTED[name] if e["max_size_bytes"]})
    argv = ["--from-file", str(CORPUS / name), "--judge-sizes", ",".join(map(str, largest or [1024]))]
    if _hint(name):
        argv += ["--collective", _hint(name)]
    code = nccl_tests.main(argv)
    envelope = json.loads(capsys.readouterr().out)
    failed = any(e["failed"] for e in EXPECTED[name])
    assert (code, envelope["status"]) == ((1, "fail") if failed else (0, "pass"))
    values = {m["figure"]: m["value"] for m in envelope["measurements"]}
    for want in EXPECTED[name]:
        if want["max_size_bytes"]:
            size = human_size(want["max_size_bytes"])
            assert values[f"nccl_{want['collective']}_busbw_{size}"] == want["busbw_at_max_size_oop"]
            assert values[f"nccl_{want['collective']}_busbw_inplace_{size}"] == want["busbw_at_max_size_ip"]
    details = envelope["details"]
    tests = details["tests"] if len(EXPECTED[name]) > 1 else [details]
    assert [t["avg_busbw_gbps_not_judged"] for t in tests] == [e["avg_busbw"] for e in EXPECTED[name]]


# --- Hostile input. The time bounds below are not benchmarks: a super-linear regular expression
# --- on these lines takes minutes, a linear reader milliseconds, so one second tells them apart.


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


@pytest.mark.parametrize(
    "line",
    [
        "1 " * 150_000,
        " " * 299_999 + "1",
        "9" * 300_000,
        "[1,0]<stdout>:" * 22_000,
        "# Avg bus bandwidth    : " + "1" * 300_000,
    ],
)
def test_a_300_kb_line_is_refused_quickly(line: str, capsys) -> None:
    text = (CORPUS / "issue290-h100-1node-all_reduce.txt").read_text() + line + "\n"
    start = time.perf_counter()
    with pytest.raises(OutputError, match=f"line 25 is {len(line)} characters long"):
        parse_outputs(text)
    assert time.perf_counter() - start < 1.0
    envelope = run_check("nccl_tests", lambda r: nccl_tests.judge_text(r, text, "all_reduce", "--collective", [], {}))
    assert envelope["status"] == "fail" and "characters long" in envelope["findings"][0]["message"]


NEAR_LIMIT = MAX_LINE_CHARS - 100
PATHOLOGICAL = [
    " " * NEAR_LIMIT,
    "1" * NEAR_LIMIT,
    "1 " * (NEAR_LIMIT // 2),
    "1 1 float " + "1." * (NEAR_LIMIT // 2 - 10),
    "1 1 " + "1e" * (NEAR_LIMIT // 2 - 4),
    "1 1 " + "9" * (NEAR_LIMIT - 4),
    "#" * NEAR_LIMIT,
    "# size count type " + "redop " * (NEAR_LIMIT // 6 - 5),
    "# size count type " + "time " * (NEAR_LIMIT // 5 - 5),
    "# Out of bounds values : " + "1 " * (NEAR_LIMIT // 2 - 20),
    "# Collective test starting: " + "a_" * (NEAR_LIMIT // 2 - 20) + "_perf",
    " 0: " * (NEAR_LIMIT // 4),
    "[1,0]<stdout>:" * (NEAR_LIMIT // 14),
    "all_reduce_perf " * (NEAR_LIMIT // 16),
    "Test NCCL failure " * (NEAR_LIMIT // 18),
]


@pytest.mark.parametrize("line", PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_pathological_lines_under_the_limit_read_in_linear_time(line: str) -> None:
    # Inside a table, where the most rules apply; 10 copies so that slow handling would add up.
    base = (CORPUS / "issue290-h100-1node-all_reduce.txt").read_text().split("\n")
    text = "\n".join(base[:16] + [line] * 10 + base[16:])
    outputs: list = []
    assert _seconds(lambda: outputs.extend(parse_outputs(text, "all_reduce"))) < 1.0
    assert sum(len(o.rows) for o in outputs) == 6  # the real rows survive around the noise


# --- Mutated real logs: whatever comes in, the check reads it or says clearly why not.

TOKENS = [
    "N/A",
    "1.04858e+06",
    "1e+00",
    "-1",
    "sum",
    "none",
    "nan",
    "inf",
    "-nan",
    "1_0",
    "\u0661\u0662",
    "\u00b2",
    "#",
    "\x00",
    "\t",
    "\r",
    " 0: ",
    "[1,3]<stdout>:",
    "[2] ",
    "OK",
    "FAILED",
    ":",
    "9" * 45,
    "# Out of bounds values : 3 FAILED",
    "# Avg bus bandwidth    : 1.5 FAILED",
    "# Avg bus bandwidth : nan",
    "# Collective test starting: all_gather_perf",
    "# Collective test concluded: all_gather_perf",
    "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    "#  size count type time algbw busbw error time algbw busbw error timestamp",
    "# nThread 1 nGpus 1",
    "host: Test NCCL failure common.cu:1 'x'",
    "./build/alltoall_perf -b 8",
    "host:1:1 [0] NCCL INFO x",
    "# error: x",
    "#  Rank  0 Group  0 Pid 1 on h device 0 [0x1] GPU",
]


@st.composite
def mutated_logs(draw) -> str:
    text = (CORPUS / draw(st.sampled_from(LOGS))).read_text()
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, max(len(text) - 1, 0)))
        kind = draw(st.sampled_from(["insert", "delete", "replace_line", "duplicate_line", "truncate"]))
        piece = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=20)))
        if kind == "insert":
            text = text[:at] + piece + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 200)) :]
        elif kind == "truncate":
            text = text[:at]
        else:
            lines = text.split("\n")
            i = at % len(lines)
            lines[i : i + 1] = [piece] if kind == "replace_line" else [lines[i], lines[i]]
            text = "\n".join(lines)
    return text


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_logs(), collective=st.sampled_from([None, "all_reduce"]))
def test_mutated_logs_are_read_or_refused_clearly(text: str, collective: str | None) -> None:
    try:
        outputs = parse_outputs(text, collective)
    except OutputError as exc:
        assert str(exc)
    else:
        for out in outputs:
            assert all(r.size_bytes >= 0 and r.count >= 0 for r in out.rows)
            assert out.failed or not out.problems
    envelope = run_check(
        "nccl_tests",
        lambda r: nccl_tests.judge_text(
            r, text, collective, "--collective", [1 << 20, 1 << 30], {(None, 1 << 30): 1.0}
        ),
    )
    assert envelope["status"] in ("pass", "fail"), envelope["findings"]  # "error" would mean the check broke
    json.loads(dumps(envelope))
