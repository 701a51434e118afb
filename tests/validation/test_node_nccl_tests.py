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
        "nccl_all_reduce_busbw_1GiB": 324.05, "nccl_all_reduce_busbw_inplace_1GiB": 323.28,
        "nccl_all_reduce_busbw_8GiB": 347.11, "nccl_all_reduce_busbw_inplace_8GiB": 342.44,
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
    broken = fixture_text.replace(
        "  1073741824     268435456     float     sum      -1  3313.52  324.05  324.05       0",
        "  1073741824     268435456     float     sum      -1  3313.52  324.05  324.05      17",
    ) + "dgx01: Test NCCL failure common.cu:1279 'unhandled system error'\n"
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
