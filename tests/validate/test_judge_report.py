"""Judging measurements against reference tables, and the report files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from podctl.core.model import Reference, ThresholdOverride
from podctl.derive.site import builtin_profiles
from podctl.validate.judge import CheckRun, effective_reference, judge
from podctl.validate.report import write_report

GEMM = Reference("gemm_bf16_tflops", 752, 0.05, "TFLOP/s", "figures.md")
BUSBW = Reference("allreduce_busbw_node", 347, 0.05, "GB/s", "figures.md")


def envelope(
    check: str,
    status: str = "pass",
    measurements: list | None = None,
    findings: list | None = None,
    details: dict | None = None,
) -> dict:
    return {
        "check": check,
        "host": "gpu1",
        "status": status,
        "duration_s": 1.5,
        "measurements": measurements or [],
        "findings": findings or [],
        "details": details or {},
    }


def m(figure: str, value: float, device: str | None = None) -> dict:
    return {"figure": figure, "value": value, "unit": "x", "device": device, "samples": 10, "spread": {}}


def test_passing_measurements_certify() -> None:
    runs = [
        CheckRun(
            "burnin",
            "node",
            "gpu1",
            envelope(
                "burnin", measurements=[m("gemm_bf16_tflops", 760, "cuda:0"), m("gemm_bf16_tflops", 755, "cuda:1")]
            ),
        ),
        CheckRun(
            "collectives", "node", "gpu1", envelope("collectives", measurements=[m("all_reduce_busbw_8GiB", 345)])
        ),
    ]
    cert = judge("t", {"gpu1": [GEMM, BUSBW]}, runs)
    assert cert.certified and not cert.failures
    assert [(v.figure, v.device, v.passed) for v in cert.verdicts] == [
        ("gemm_bf16_tflops", "cuda:0", True),
        ("gemm_bf16_tflops", "cuda:1", True),
        ("allreduce_busbw_node", None, True),
    ]


def test_a_slow_gpu_is_named_with_its_figure_and_bound() -> None:
    runs = [
        CheckRun(
            "burnin",
            "node",
            "gpu1",
            envelope(
                "burnin", measurements=[m("gemm_bf16_tflops", 760, "cuda:0"), m("gemm_bf16_tflops", 600, "cuda:1")]
            ),
        )
    ]
    cert = judge("t", {"gpu1": [GEMM]}, runs)
    assert not cert.certified
    (reason,) = cert.failures["gpu1"]
    assert "cuda:1" in reason and "600" in reason and "714.4" in reason


def test_a_missing_measurement_fails() -> None:
    runs = [CheckRun("burnin", "node", "gpu1", envelope("burnin", measurements=[m("gemm_bf16_tflops", 760, "cuda:0")]))]
    cert = judge("t", {"gpu1": [GEMM, BUSBW]}, runs)
    assert not cert.certified
    assert cert.failures["gpu1"] == ["allreduce_busbw_node: missing measurement (collectives did not run)"]
    missing = [v for v in cert.verdicts if v.value is None]
    assert len(missing) == 1 and not missing[0].passed


def test_a_failed_check_fails_its_node_with_the_findings() -> None:
    runs = [
        CheckRun(
            "health",
            "node",
            "gpu1",
            envelope(
                "health",
                "fail",
                findings=[
                    {"severity": "error", "message": "2 logical CPUs online, expected 64", "device": None},
                    {"severity": "warning", "message": "not a reason", "device": None},
                ],
            ),
        )
    ]
    cert = judge("t", {"gpu1": []}, runs)
    assert cert.failures == {"gpu1": ["health: 2 logical CPUs online, expected 64"]}


def test_site_overrides_change_the_bound() -> None:
    profile = builtin_profiles()["hgx-h200-2"]
    rows = effective_reference(profile, {"gemm_bf16_tflops": ThresholdOverride(value=None, tolerance=0.2)})
    gemm = next(r for r in rows if r.figure == "gemm_bf16_tflops")
    assert gemm.bound == 752 * 0.8 and "overridden" in gemm.source


def test_report_files(tmp_path: Path) -> None:
    sweep = {"all_reduce": [{"size_bytes": 1 << 20, "busbw_gbps": 10.0}, {"size_bytes": 1 << 30, "busbw_gbps": 300.0}]}
    runs = [
        CheckRun("burnin", "node", "gpu1", envelope("burnin", measurements=[m("gemm_bf16_tflops", 600, "cuda:0")])),
        CheckRun(
            "collectives",
            "node",
            "gpu1",
            envelope(
                "collectives", details={"sweep": sweep, "world_size": 2}, measurements=[m("all_reduce_busbw_8GiB", 346)]
            ),
        ),
    ]
    cert = judge("gpu1 (hgx-h200-2)", {"gpu1": [GEMM, BUSBW]}, runs)
    paths = write_report(tmp_path, cert, runs, {"started": "now", "podctl": "0", "suites": ["burnin", "nccl"]})
    data = json.loads(paths["json"].read_text())
    assert data["verdict"] == "NOT CERTIFIED" and list(data["failures"]) == ["gpu1"]
    suites = ET.parse(paths["junit"]).getroot()
    figures = next(s for s in suites if s.get("name") == "figures")
    assert figures.get("tests") == "2" and figures.get("failures") == "1"
    page = paths["html"].read_text()
    assert "NOT CERTIFIED" in page and "gpu1" in page
    # A histogram per figure judged (GEMM, busbw) and the node's busbw sweep.
    assert page.count("<svg") == 3 and "Bus bandwidth against message size: gpu1" in page
    failed = page[page.index("<h2 id=failed>") : page.index("<h2 id=figures>")]
    assert "<td class=fail>gpu1</td>" in failed and "gemm_bf16_tflops" in failed


def test_a_failing_fabric_run_fails_the_certification_under_its_element() -> None:
    bad = {"severity": "error", "message": "MISSING ib-spine-01[1] <-> ib-leaf-su01-r1[33]", "device": None}
    runs = [
        CheckRun("cabling", "fabric", "ib-leaf-su01-r1", envelope("cabling", "fail", findings=[bad])),
        CheckRun("cabling", "node", "gpu9", envelope("cabling", "fail", findings=[bad])),
    ]  # not under test
    cert = judge("t", {"gpu1": []}, runs)
    assert not cert.certified
    assert cert.failures == {"ib-leaf-su01-r1": ["cabling: MISSING ib-spine-01[1] <-> ib-leaf-su01-r1[33]"]}
    passing = judge("t", {"gpu1": []}, [CheckRun("cabling", "fabric", "fabric", envelope("cabling"))])
    assert passing.certified and not passing.failures
