"""Untrusted text is text: never console markup, never trusted as a result until it has the shape of one."""

from __future__ import annotations

import ast
import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from podctl.core.console import make_console
from podctl.validate.envelope import parse_envelope
from podctl.validate.judge import CheckRun, Verdict, judge
from podctl.validate.report import print_summary, write_report
from tests.helpers.cli import podctl
from tests.helpers.repo import REPO
from validation.result import Report, envelope_problems

GLOO = (
    "[E ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
    "[/opt/conda/conda-bld/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer"
)


def _captured(console: Console) -> str:
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_no_console_reads_markup() -> None:
    """Every Console podctl makes comes from podctl.core.console.make_console (markup and emoji off)."""
    offenders = []
    for path in (REPO / "podctl").rglob("*.py"):
        if path.name == "console.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Console":
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "[/" in node.value
                and "[/" + node.value.split("[/", 1)[1][:1] in ("[/r", "[/g", "[/b", "[/d", "[/y")
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno} markup in a literal")
    assert not offenders, offenders


def test_the_verdict_prints_gloo_errors_and_markup_verbatim() -> None:
    console = make_console()
    console.file = io.StringIO()
    cert = judge("pod [bold]x[/bold]", {"node[/x]": []}, [])
    cert.fail("node[/x]", f"collectives: {GLOO}")
    cert.verdicts.append(
        Verdict("node[/x]", "fig", "gpu:smile:", False, math.inf, 1.0, 1.0, 0.0, "GB/s", "[/src]", "[red]r")
    )
    print_summary(console, cert)
    out = _captured(console)
    assert GLOO in out.replace("\n", "") or "pair.cc:598] Connection closed" in out
    assert "pod [bold]x[/bold]" in out and ":smile:" in out


def test_deploy_progress_prints_a_failed_task_message_verbatim() -> None:
    from podctl.deploy.cli import LiveProgress
    from podctl.deploy.recap import Recap

    console = make_console(width=400)
    console.file = io.StringIO()
    recap = Recap(["node01"])
    progress = LiveProgress(["os"], ["node01"])
    event = {
        "event": "runner_on_failed",
        "event_data": {
            "host": "node01",
            "task": "Install [/x] :smile:",
            "task_path": "/p/roles/os/tasks/install.yml:3",
            "res": {"msg": GLOO},
        },
    }
    recap.feed(event)
    progress.on_event(event, recap, console)
    console.print(progress)
    assert "Connection closed by peer" in _captured(console)


def test_plan_prints_site_text_verbatim(tmp_path: Path) -> None:
    text = (
        (REPO / "inventory" / "sim" / "site.yaml")
        .read_text()
        .replace(
            "description: 1 head + 3 compute nodes as podman containers on this machine",
            "description: '[/x] [bold]1 :smile: head'",
        )
    )
    site = tmp_path / "site.yaml"
    site.write_text(text.replace("wheels: ../../.cache", f"wheels: {REPO}/.cache"))
    ran = podctl("plan", str(site))
    assert ran.rc == 0, ran.err
    ran = podctl("check", str(site))
    assert ran.rc == 0


WRONG_SHAPES = {
    "list": "[1, 2, 3]",
    "status-only": '{"status": "pass"}',
    "bad-status": '{"check": "health", "host": "n1", "status": "great", "measurements": [], "findings": [], "details": {}}',
    "measurements-not-list": '{"check": "health", "host": "n1", "status": "pass", "measurements": {"a": 1}, "findings": []}',
    "value-string": '{"check": "health", "host": "n1", "status": "pass", "measurements": [{"figure": "x", "value": "9", "unit": "GB/s"}], "findings": []}',
    "value-nan": '{"check": "health", "host": "n1", "status": "pass", "measurements": [{"figure": "x", "value": NaN, "unit": "GB/s"}], "findings": []}',
    "value-inf": '{"check": "health", "host": "n1", "status": "pass", "measurements": [{"figure": "x", "value": Infinity, "unit": "GB/s"}], "findings": []}',
    "finding-no-message": '{"check": "health", "host": "n1", "status": "fail", "measurements": [], "findings": [{"severity": "error"}]}',
    "details-list": '{"check": "health", "host": "n1", "status": "pass", "measurements": [], "findings": [], "details": []}',
    "deep": "[" * 100000 + "]" * 100000,
}


@pytest.mark.parametrize("name", sorted(WRONG_SHAPES))
def test_a_malformed_envelope_fails_the_check_with_a_quote(name: str) -> None:
    printed = WRONG_SHAPES[name]
    env = parse_envelope(printed + "\n", 0, "", "health", "node01")
    assert env["status"] == "error"
    assert envelope_problems(env) == []
    message = env["findings"][0]["message"]
    if printed.startswith("{"):
        assert "not a valid health envelope" in message and printed[:40] in message, message
    else:
        assert "without a JSON result" in message and printed[-20:] in message, message


def test_a_malformed_envelope_fails_its_node_and_the_report_is_written(tmp_path: Path) -> None:
    good = Report("burnin", host="node02")
    good.measure("gemm_fp32_gflops", 100.0, "GFLOP/s")
    runs = [
        CheckRun("burnin", "node", "node01", parse_envelope(WRONG_SHAPES["value-nan"], 0, "", "burnin", "node01")),
        CheckRun("burnin", "node", "node02", json.loads(json.dumps(good.to_dict()))),
    ]
    from podctl.core.model import Reference

    rows = [Reference("gemm_fp32_gflops", 100.0, 0.1, "GFLOP/s", "test")]
    cert = judge("pod", {"node01": rows, "node02": rows}, runs)
    assert sorted(cert.failures) == ["node01"]
    assert any("not a valid burnin envelope" in r for r in cert.failures["node01"])
    paths = write_report(tmp_path / "report", cert, runs, {"suites": ["burnin"]})
    assert "not a valid burnin envelope" in paths["html"].read_text()


def test_a_non_finite_measurement_is_a_failure_on_the_node() -> None:
    report = Report("burnin", host="n1")
    assert report.measure("gemm_bf16_tflops", math.nan, "TFLOP/s", "gpu0") is None
    assert report.measure("hbm_bandwidth", math.inf, "TB/s", "gpu0") is None
    assert report.status == "fail" and not report.measurements
    assert "measured nan" in report.findings[0].message


FAKE_PYTHON = """#!/bin/sh
# Stands in for the validation virtualenv's python: $2 is the check's module.
case "$2" in
  validation.health) echo '[1, 2]'; echo '%(gloo)s' >&2; exit 1 ;;
  validation.burnin) echo '{"check": "burnin", "host": "h", "status": "pass", "findings": [], "details": {},'\
      '"measurements": [{"figure": "gemm_fp32_gflops", "value": NaN, "unit": "GFLOP/s"}]}' ;;
  validation.collectives) echo '[bold red]not markup[/bold red] :smile:'; echo '%(gloo)s' >&2; exit 3 ;;
  validation.smoke) echo '{"check": "smoke", "host": "h", "status": "pass", "findings": [], "details": {},'\
      '"measurements": [{"figure": "smoke_tflops_per_node", "value": Infinity, "unit": "TFLOP/s"}]}' ;;
esac
"""


def test_validate_local_with_hostile_node_output_writes_its_report(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON % {"gloo": GLOO})
    fake.chmod(0o755)
    report = tmp_path / "report"
    ran = podctl("validate", "--local", "--profile", "sim", "--python", str(fake), "--report", str(report))
    assert ran.rc == 1, ran.out + ran.err
    assert "Traceback" not in ran.err and "internal error" not in ran.err
    assert "NOT CERTIFIED" in ran.out
    data = json.loads((report / "report.json").read_text())
    reasons = " ".join(r for rs in data["failures"].values() for r in rs)
    assert "not a valid burnin envelope" in reasons and "not a valid smoke envelope" in reasons
    assert "pair.cc:598] Connection closed" in reasons  # the collectives stderr, quoted as text
    assert "[bold red]not markup[/bold red]" in reasons
