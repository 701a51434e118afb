"""The certification report: report.json, junit.xml and a self-contained report.html
(laid out for a pod in html_report.py; the bus bandwidth sweeps drawn here with matplotlib
as inline SVG), and the summary a command prints of it."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from podctl.core.console import styled
from podctl.core.fsio import OutputFolder
from podctl.validate.html_report import report_html
from podctl.validate.judge import Certification, CheckRun


def report_folder(path: Path) -> OutputFolder:
    """The report's folder: new, empty, or one podctl wrote a report into before."""
    return OutputFolder(path, "report", "choose another folder with --report")


def report_data(cert: Certification, runs: list[CheckRun], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        **cert.as_dict(),
        "meta": meta,
        "runs": [{"check": r.check, "scope": r.scope, "node": r.node, "result": r.envelope} for r in runs],
    }


def junit_xml(cert: Certification, runs: list[CheckRun]) -> str:
    suites = ET.Element("testsuites", name=f"podctl certification: {cert.subject}")
    checks = ET.SubElement(suites, "testsuite", name="checks")
    for run in runs:
        case = ET.SubElement(
            checks,
            "testcase",
            classname=f"{run.check}.{run.scope}",
            name=run.node,
            time=f"{float(run.envelope.get('duration_s', 0.0)):.3f}",
        )
        errors = [f["message"] for f in run.envelope.get("findings", []) if f.get("severity") == "error"]
        if run.status == "fail":
            ET.SubElement(case, "failure", message="; ".join(errors)[:500] or "failed").text = "\n".join(errors)
        elif run.status == "error":
            ET.SubElement(case, "error", message="; ".join(errors)[:500] or "error").text = "\n".join(errors)
        elif run.status == "skip":
            ET.SubElement(case, "skipped", message=str(run.envelope.get("details", {}).get("skip_reason", "skipped")))
    figures = ET.SubElement(suites, "testsuite", name="figures")
    for v in cert.verdicts:
        name = f"{v.node}:{v.device}" if v.device else v.node
        case = ET.SubElement(figures, "testcase", classname=v.figure, name=name)
        if not v.passed:
            ET.SubElement(case, "failure", message=v.reason).text = f"{v.reason}\nsource: {v.source}"
    for suite in suites:
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
        suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


# -- plots ---------------------------------------------------------------------------------


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def plots(runs: list[CheckRun]) -> list[tuple[str, str]]:
    """(title, inline SVG) of the bus bandwidth sweeps: the pod-wide ones, and each node's while a
    handful of nodes ran (at pod scale, a node's sweep is in its detail in report.json)."""
    sweeps = [r for r in runs if r.check == "collectives" and r.envelope.get("details", {}).get("sweep")]
    node_sweeps = [r for r in sweeps if r.scope == "node"]
    if len(node_sweeps) > 8:
        sweeps = [r for r in sweeps if r.scope != "node"]
    if not sweeps:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out: list[tuple[str, str]] = []
    for run in sweeps:
        sweep = run.envelope["details"]["sweep"]
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for collective, rows in sorted(sweep.items()):
            if rows:
                ax.plot(
                    [r["size_bytes"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o", ms=3, label=collective
                )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        world = run.envelope.get("details", {}).get("world_size")
        out.append((f"Bus bandwidth against message size: {run.node} ({run.scope}, {world} ranks)", _svg(fig)))
    return out


def write_report(out_dir: Path, cert: Certification, runs: list[CheckRun], meta: dict[str, Any]) -> dict[str, Path]:
    folder = report_folder(out_dir)
    return {
        # No indent: json's C encoder serves only unindented output, 5-10x faster on a pod's results.
        "json": folder.write("report.json", json.dumps(report_data(cert, runs, meta), sort_keys=True) + "\n"),
        "junit": folder.write("junit.xml", junit_xml(cert, runs)),
        "html": folder.write("report.html", report_html(cert, runs, meta, plots(runs))),
    }


def print_summary(console: Console, cert: Certification) -> None:
    """Every figure judged, the failing ones first, and the verdict with each node's reasons."""
    table = Table(title="Figures", title_justify="left")
    for col in ("node", "device", "figure", "value", "bound", "result"):
        table.add_column(col)
    for v in sorted(cert.verdicts, key=lambda v: (v.passed, v.node, v.figure, v.device or "")):
        value = "missing" if v.value is None else f"{v.value:.4g} {v.unit}"
        table.add_row(
            v.node,
            v.device or "",
            v.figure if v.measured_by == "podctl" else f"{v.figure} ({v.measured_by})",
            value,
            f"{v.bound:.4g}",
            styled(("pass", "green")) if v.passed else styled(("FAIL", "red")),
        )
    console.print(table)
    if cert.certified:
        console.print(styled(("CERTIFIED", "bold green"), f": {cert.subject}, {len(cert.nodes)} node(s)"))
    else:
        console.print(styled(("NOT CERTIFIED", "bold red"), f": {cert.subject}"))
        for node, reasons in sorted(cert.failures.items()):
            for reason in reasons:
                console.print(f"  {node}: {reason}")
