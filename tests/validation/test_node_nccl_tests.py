"""nccl-tests output parser, on real output from the lent 2 x H200 host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validation import nccl_tests
from validation.nccl_tests import parse_output

GIB = 1024**3


@pytest.fixture
def fixture_text(data_dir: Path) -> str:
    return (data_dir / "all_reduce_perf-2xH200-NV18.txt").read_text()


def test_parser_reads_every_row_and_header(fixture_text: str) -> None:
    out = parse_output(fixture_text)
    assert len(out.rows) == 14
    assert out.rows[0].size_bytes == 1048576 and out.rows[-1].size_bytes == 8 * GIB
    assert out.test == "all_reduce_perf"
    assert out.version.startswith("nccl-tests version 2.19.6")
    assert len(out.devices) == 2 and "NVIDIA H200" in out.devices[0]
    assert out.avg_busbw == 240.102
    assert out.out_of_bounds == 0 and out.out_of_bounds_ok is True
    assert out.failures == []


def test_parser_exact_values_at_1_and_8_gib(fixture_text: str) -> None:
    out = parse_output(fixture_text)
    one = out.row_at(1 * GIB)
    assert (one.count, one.dtype, one.redop, one.root) == (268435456, "float", "sum", -1)
    assert (one.oop_time_us, one.oop_algbw, one.oop_busbw, one.oop_wrong) == (3313.52, 324.05, 324.05, 0)
    assert (one.ip_time_us, one.ip_algbw, one.ip_busbw, one.ip_wrong) == (3321.40, 323.28, 323.28, 0)
    eight = out.row_at(8 * GIB)
    assert (eight.oop_time_us, eight.oop_busbw, eight.ip_time_us, eight.ip_busbw) == (24747.2, 347.11, 25084.8, 342.44)


def test_judged_at_sizes_never_on_the_average(fixture_text: str, tmp_path: Path, capsys) -> None:
    log = tmp_path / "run.log"
    log.write_text(fixture_text)
    code = nccl_tests.main(["--from-file", str(log), "--min-busbw", "1G=314.3", "--min-busbw", "8G=336.7"])
    envelope = json.loads(capsys.readouterr().out)
    assert code == 0 and envelope["status"] == "pass"
    values = {m["figure"]: m["value"] for m in envelope["measurements"]}
    assert values == {
        "nccl_all_reduce_busbw_1GiB": 324.05,
        "nccl_all_reduce_busbw_inplace_1GiB": 323.28,
        "nccl_all_reduce_busbw_8GiB": 347.11,
        "nccl_all_reduce_busbw_inplace_8GiB": 342.44,
    }
    assert 240.102 not in values.values()
    assert envelope["details"]["max_busbw"] == {"size_bytes": 8 * GIB, "busbw_gbps": 347.11}


def test_threshold_above_measured_fails(fixture_text: str, tmp_path: Path, capsys) -> None:
    log = tmp_path / "run.log"
    log.write_text(fixture_text)
    code = nccl_tests.main(["--from-file", str(log), "--min-busbw", "8G=460"])
    envelope = json.loads(capsys.readouterr().out)
    assert code == 1 and envelope["status"] == "fail"
    assert any("347.11" in f["message"] and f["severity"] == "error" for f in envelope["findings"])


def test_wrong_results_and_failures_are_errors(fixture_text: str) -> None:
    broken = (
        fixture_text.replace(
            "  1073741824     268435456     float     sum      -1  3313.52  324.05  324.05       0",
            "  1073741824     268435456     float     sum      -1  3313.52  324.05  324.05      17",
        )
        + "dgx01: Test NCCL failure common.cu:1279 'unhandled system error'\n"
    )
    from validation.result import Report

    report = Report("nccl_tests", host="t")
    nccl_tests.judge(report, parse_output(broken), [GIB], {})
    messages = [f.message for f in report.findings if f.severity == "error"]
    assert any("17 wrong elements at 1GiB" in m for m in messages)
    assert any("unhandled system error" in m for m in messages)


def test_unchecked_runs_and_older_layouts_parse() -> None:
    # -c 0 prints N/A for #wrong; older nccl-tests had no root column.
    text = (
        "   134217728      33554432     float     sum    474.45  282.89  282.89    N/A   472.42  284.11  284.11    N/A\n"
        "   134217728      33554432     float    none      -1    474.45  282.89  141.44    N/A   472.42  284.11  142.05    N/A\n"
    )
    rows = parse_output(text).rows
    assert len(rows) == 2
    assert rows[0].root is None and rows[0].oop_wrong is None and rows[0].ip_busbw == 284.11
    assert rows[1].redop == "none" and rows[1].root == -1


def test_missing_binary_is_a_failure_not_a_crash(capsys) -> None:
    code = nccl_tests.main(["--binary", "/nonexistent/all_reduce_perf"])
    envelope = json.loads(capsys.readouterr().out)
    assert code == 1 and envelope["status"] == "fail"
    assert "not found" in envelope["findings"][0]["message"]


# --- Forms no collected log shows: each case below is synthetic, built from a real line and
# --- nccl-tests' own format strings (src/util.cu, src/common.h), and says so.

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
ROW_1MIB_WRONG = "     1048576        262144     float     sum      -1   477.32    2.20    2.20      96   492.81    2.13    2.13      32"


def _findings(report, severity: str = "error") -> list[str]:
    return [f.message for f in report.findings if f.severity == severity]


def _judged(text: str, sizes: list[int] | None = None, collective: str | None = None):
    from validation.result import Report

    report = Report("nccl_tests", host="t")
    nccl_tests.judge_text(report, text, collective, "--collective", sizes or [GIB], {})
    return report


def test_wrong_count_in_exponent_form_is_read_and_fails() -> None:
    # SYNTHETIC: the real 1 MiB row of issue369-gh200-2node-wrong-values.txt with its #wrong
    # counts (96, 32) replaced by what nccl-tests' "%6g" prints for counts past a million.
    real = (CORPUS / "issue369-gh200-2node-wrong-values.txt").read_text()
    assert ROW_1MIB_WRONG in real
    synthetic = ROW_1MIB_WRONG.replace("      96", " 1.04858e+06").replace("      32", "  4.1943e+06")
    out = parse_output(real.replace(ROW_1MIB_WRONG, synthetic))
    row = out.row_at(1048576)
    assert (row.oop_wrong, row.ip_wrong, row.wrong_rounded) == (1048580, 4194300, True)
    assert row.oop_busbw == 2.20 and len(out.rows) == 25
    assert out.wrong_total is None and out.failed  # a rounded count makes no exact total
    report = _judged(real.replace(ROW_1MIB_WRONG, synthetic))
    assert "all_reduce: about 5242880 wrong elements at 1MiB" in _findings(report)
    # Without a header the decimal point tells a %g count from the old layout's '1e+00'.
    alone = parse_output(synthetic + "\n").rows[0]
    assert (alone.oop_wrong, alone.oop_error, alone.root) == (1048580, None, -1)


@pytest.mark.parametrize(("suffix", "ok", "status"), [(" OK", True, "pass"), (" FAILED", False, "fail")])
def test_average_with_min_bw_verdict(fixture_text: str, suffix: str, ok: bool, status: str) -> None:
    # SYNTHETIC: the real footer with the verdict nccl-tests appends when NCCL_TESTS_MIN_BW is set
    # ("# %-20s : %g %s\n"); no collected log was run with it.
    text = fixture_text.replace("# Avg bus bandwidth    : 240.102 \n", f"# Avg bus bandwidth    : 240.102{suffix}\n")
    out = parse_output(text)
    assert (out.avg_busbw, out.avg_busbw_ok, out.failed) == (240.102, ok, not ok)
    report = _judged(text)
    assert report.status == status
    assert any("NCCL_TESTS_MIN_BW" in m for m in _findings(report)) is (not ok)


def test_a_row_that_cannot_be_read_is_an_error_naming_its_line(fixture_text: str) -> None:
    row = "  1073741824     268435456     float     sum      -1  3313.52  324.05  324.05       0  3321.40  323.28  323.28       0"
    cut = row[:70]
    fused = row[:60] + "vm:1869:1869 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC"
    for broken in (cut, fused):
        out = parse_output(fixture_text.replace(row, broken))
        assert len(out.rows) == 13 and out.failed
        assert out.problems[0].startswith("line 22: a result row that cannot be read")
        assert broken.strip()[:40] in out.problems[0]
        findings = _findings(_judged(fixture_text.replace(row, broken)))
        assert any(m.startswith("all_reduce: line 22: a result row") for m in findings)


def test_root_never_lands_in_redop() -> None:
    # Real rows: superbench broadcast (root, no redop) and reduce (both), read with and without their headers.
    broadcast = (
        "  8589934592    2147483648   float       0    36896  232.81  232.81    N/A    36599  234.70  234.70    N/A"
    )
    reduce = "  8589934592    2147483648   float     sum       0    37613  228.38  228.38    N/A    37539  228.83  228.83    N/A"
    assert broadcast in (CORPUS / "superbench-a100-broadcast-c0.txt").read_text()
    assert reduce in (CORPUS / "superbench-a100-reduce-c0.txt").read_text()
    row = parse_output(broadcast).rows[0]
    assert (row.redop, row.root, row.oop_busbw) == (None, 0, 232.81)
    row = parse_output(reduce).rows[0]
    assert (row.redop, row.root) == ("sum", 0)
    # A number under a 'redop' header is refused rather than taken as an operation.
    header = (
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error"
    )
    out = parse_output(header + "\n" + broadcast + "\n")
    assert out.rows == [] and "redop '0' is a number" in out.problems[0]


def test_per_iteration_and_timestamp_columns() -> None:
    # SYNTHETIC: header and row in the layout of nccl-tests' -I 1 (per-iteration figures) with
    # timestamps, written from writeResultHeader/writeBenchmarkLineBody in src/util.cu around the
    # real 1 GiB row of the lent H200 host; no collected log used these options.
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
        "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv% timestamp"
    )
    row = (
        "  1073741824     268435456     float     sum      -1  3313.52  324.05  324.05       0  3301.10  3330.95"
        "  3329.80     0.21  3321.40  323.28  323.28       0  3310.44  3338.02  3337.11     0.19"
        "  2026-07-09 16:03:21"
    )
    out = parse_output(header + "\n" + row + "\n")
    assert out.problems == [] and out.layout == "#wrong"
    got = out.rows[0]
    assert (got.oop_busbw, got.ip_busbw, got.oop_wrong, got.ip_wrong) == (324.05, 323.28, 0, 0)


def test_launcher_prefixes_are_stripped(fixture_text: str) -> None:
    lines = fixture_text.splitlines()
    for prefix, kind in (
        ("0: ", "srun-label"),
        (" 0: ", "srun-label"),
        ("[1,0]<stdout>:", "mpirun-tag-output"),
        ("[1,0]<stdout>: ", "mpirun-tag-output"),
        ("[0] ", "mpi-rank"),
        ("    ", "indent-4"),
    ):
        out = parse_output("\n".join(prefix + line for line in lines))
        assert (len(out.rows), out.prefix, out.collective, out.avg_busbw) == (14, kind, "all_reduce", 240.102), prefix


def test_rows_of_two_ranks_interleaved_stay_apart() -> None:
    # SYNTHETIC: two real logs, each under its own srun --label prefix, interleaved line by line,
    # as two ranks printing tables at once would look (no collected log shows it).
    first = (CORPUS / "issue290-h100-2node-srun-label-c0.txt").read_text().splitlines()  # ' 0: ' already
    second = ["1: " + line for line in (CORPUS / "cscs-sarus-gh200-2node-v2.18.2-unalign.txt").read_text().splitlines()]
    mixed = [line for pair in zip(first, second) for line in pair] + first[len(second) :]
    outputs = nccl_tests.parse_outputs("\n".join(mixed), "all_reduce")
    assert [(len(o.rows), o.avg_busbw, o.problems) for o in outputs] == [(11, 142.735, []), (8, 14.9966, [])]
    report = _judged("\n".join(mixed), [8 * GIB], "all_reduce")
    assert any("a second all_reduce test" in m for m in _findings(report))
    assert [m.figure for m in report.measurements] == [
        "nccl_all_reduce_busbw_8GiB",
        "nccl_all_reduce_busbw_inplace_8GiB",
    ]


def test_collective_comes_from_the_log_or_the_caller_never_a_generic_name(fixture_text: str) -> None:
    no_banner = fixture_text.replace("# Collective test starting: all_reduce_perf\n", "")
    no_banner = no_banner.replace("# Collective test concluded: all_reduce_perf\n", "")
    assert parse_output(no_banner).collective is None
    report = _judged(no_banner)
    assert report.measurements == []
    assert any("pass --collective" in m for m in _findings(report))
    assert not any("nccl_test" in m.figure for m in report.measurements)
    # A command line in the log names it ...
    out = parse_output("$ mpirun -np 2 /opt/nccl-tests/build/all_gather_perf -b 1M -e 8G\n" + no_banner)
    assert (out.collective, out.collective_source) == ("all_gather", "command line 1")
    # ... the caller's --collective fills the gap ...
    out = parse_output(no_banner, "reduce_scatter")
    assert (out.collective, out.collective_source) == ("reduce_scatter", "--collective")
    # ... and where the log's banner disagrees with the caller, the log wins with a warning.
    report = _judged(fixture_text, collective="all_gather")
    assert [m.figure for m in report.measurements][0] == "nccl_all_reduce_busbw_1GiB"
    assert any("the output says all_reduce ran" in m for m in _findings(report, "warning"))


def test_from_file_takes_collective_and_per_collective_thresholds(tmp_path: Path, capsys) -> None:
    log = tmp_path / "run.log"
    log.write_text((CORPUS / "superbench-a100-reduce-c0.txt").read_text())
    code = nccl_tests.main(["--from-file", str(log), "--collective", "reduce", "--judge-sizes", "8G"])
    envelope = json.loads(capsys.readouterr().out)
    assert code == 0 and envelope["details"]["collective_source"] == "--collective"
    assert {m["figure"]: m["value"] for m in envelope["measurements"]} == {
        "nccl_reduce_busbw_8GiB": 228.38,
        "nccl_reduce_busbw_inplace_8GiB": 228.83,
    }
    code = nccl_tests.main(
        [
            "--from-file",
            str(CORPUS / "wohlbier-dgx2-v100-5tests-error-col.txt"),
            "--judge-sizes",
            "8G",
            "--min-busbw",
            "all_reduce:8G=130",
            "--min-busbw",
            "alltoall:1G=1",
        ]
    )
    envelope = json.loads(capsys.readouterr().out)
    errors = [f["message"] for f in envelope["findings"] if f["severity"] == "error"]
    assert code == 1 and len(envelope["details"]["tests"]) == 5
    assert "all_reduce: busbw at 8GiB is 123.56 GB/s, expected >= 130" in errors
    assert any(m.startswith("alltoall: busbw at 1GiB not measured") for m in errors)
    assert not any(m.startswith(("broadcast:", "reduce:")) for m in errors)
    code = nccl_tests.main(["--from-file", str(log), "--min-busbw", "nonsense:8G=1"])
    assert code == 2 and "unknown collective" in json.loads(capsys.readouterr().out)["findings"][0]["message"]


def test_named_size_takes_the_nearest_row_within_one_percent() -> None:
    outputs = nccl_tests.parse_outputs((CORPUS / "wohlbier-dgx2-v100-5tests-error-col.txt").read_text())
    all_gather = outputs[0]
    assert all_gather.row_at(8 * GIB) is None and all_gather.row_near(8 * GIB).size_bytes == 8589934560
    assert all_gather.row_near(int(8 * GIB * 1.02)) is None
    report = _judged((CORPUS / "wohlbier-dgx2-v100-5tests-error-col.txt").read_text(), [8 * GIB])
    values = {m.figure: m.value for m in report.measurements}
    assert values["nccl_all_gather_busbw_8GiB"] == 73.75 and values["nccl_reduce_scatter_busbw_inplace_8GiB"] == 63.72


def test_several_tests_are_not_squeezed_into_one() -> None:
    text = (CORPUS / "xxrjun-h100-10node-5collectives-v2.17.8.txt").read_text()
    with pytest.raises(nccl_tests.OutputError, match="holds 5 tests"):
        parse_output(text)


def test_failure_before_any_table_and_missing_verdict(fixture_text: str) -> None:
    # The message form of src/util.cu (printed before the table when ranks outnumber GPUs).
    out = parse_output(
        "Invalid number of GPUs: 8 requested but only 2 were found.\n"
        "Please check the number of processes and GPUs per process.\n",
        "all_reduce",
    )
    assert (
        out.rows == []
        and out.failed
        and out.failures == ["line 1: Invalid number of GPUs: 8 requested but only 2 were found."]
    )
    cut = fixture_text[: fixture_text.index("# Out of bounds values")]
    assert any("no 'Out of bounds values' verdict" in m for m in _findings(_judged(cut)))


def test_routine_debug_lines_are_not_failures() -> None:
    out = parse_output((CORPUS / "aws-efa-eks-a100-2node-tag-output-error-col.txt").read_text(), "all_reduce")
    assert out.failures == [] and not out.failed and len(out.rows) == 30
    # NCCL's last error (printed as '# error:' at the end) is a warning, not a failure.
    report = _judged(
        (CORPUS / "issue290-h100-1node-all_reduce.txt").read_text() + "# error: NET/IB : No device found.\n",
        collective="all_reduce",
    )
    assert report.status == "pass" and any("NCCL's last error" in m for m in _findings(report, "warning"))
