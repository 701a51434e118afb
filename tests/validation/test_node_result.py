"""The JSON envelope and its statistics (validation/result.py)."""

from __future__ import annotations

import json

import pytest

from validation.result import Report, dumps, run_check, summarize


def test_summarize_median_and_spread_by_hand() -> None:
    median, spread = summarize([10, 1, 9, 2, 8, 3, 7, 4, 6, 5])
    assert median == 5.5
    assert spread["min"] == 1 and spread["max"] == 10
    # Linear interpolation: position (n-1)*q = 9*0.1 = 0.9 -> 1 + 0.9*(2-1)
    assert spread["p10"] == pytest.approx(1.9)
    assert spread["p90"] == pytest.approx(9.1)
    assert spread["iqr"] == pytest.approx(7.75 - 3.25)


def test_summarize_refuses_no_samples() -> None:
    with pytest.raises(ValueError):
        summarize([])


def test_exception_becomes_error_status_not_traceback() -> None:
    def body(report: Report) -> None:
        report.measure("x", 1.0, "u")
        raise RuntimeError("the GPU caught fire")

    envelope = run_check("demo", body)
    assert envelope["status"] == "error"
    assert any("the GPU caught fire" in f["message"] for f in envelope["findings"])
    assert "RuntimeError" in envelope["details"]["traceback"]


@pytest.mark.parametrize(
    ("severities", "skip", "measured", "expected"),
    [
        ([], False, True, "pass"),
        (["warning", "info"], False, True, "pass"),
        (["warning", "error"], False, True, "fail"),
        ([], True, False, "skip"),
        ([], True, True, "pass"),  # a partial skip with figures is still a result
    ],
)
def test_status_follows_findings(severities: list[str], skip: bool, measured: bool, expected: str) -> None:
    report = Report("demo", host="node1")
    for severity in severities:
        report.find(severity, "something")
    if skip:
        report.skip("not here")
    if measured:
        report.measure("x", 1.0, "u")
    assert report.status == expected


def test_envelope_has_every_field_and_stays_valid_json_with_nan() -> None:
    report = Report("demo", host="node1")
    report.measure_samples("busbw", [1.0, 2.0, 3.0], "GB/s", "gpu0")
    report.details["loss"] = [1.0, float("nan"), float("inf")]
    text = dumps(report.to_dict())
    assert "NaN" not in text and "Infinity" not in text
    envelope = json.loads(text)
    assert set(envelope) == {"check", "host", "status", "started", "duration_s", "measurements", "findings", "details"}
    m = envelope["measurements"][0]
    assert (m["figure"], m["value"], m["unit"], m["device"], m["samples"]) == ("busbw", 2.0, "GB/s", "gpu0", 3)
    assert set(m["spread"]) == {"min", "max", "p10", "p90", "iqr"}
    assert envelope["details"]["loss"][1] == "nan"


def test_unknown_severity_is_refused() -> None:
    with pytest.raises(ValueError):
        Report("demo").find("fatal", "no such severity")


@pytest.mark.parametrize("check", ["health", "burnin", "collectives", "nccl_tests", "smoke"])
def test_bad_arguments_give_an_error_envelope(check: str, capsys) -> None:
    import importlib

    module = importlib.import_module(f"validation.{check}")
    code = module.main(["--no-such-option"])
    envelope = json.loads(capsys.readouterr().out)
    assert code == 2 and envelope["check"] == check and envelope["status"] == "error"
    assert "--no-such-option" in envelope["findings"][0]["message"]
