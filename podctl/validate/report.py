"""The certification report: report.json, junit.xml and a self-contained report.html.

Plots are inline SVG (matplotlib, Agg), so the HTML file is the whole report:
busbw against message size for each collective run, GEMM throughput per GPU
per node against its bound, and the pairwise bandwidth matrix when pairwise
rounds ran.
"""

from __future__ import annotations

import html
import io
import json
import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from .judge import Certification, CheckRun


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def report_data(cert: Certification, runs: list[CheckRun], meta: dict[str, Any]) -> dict[str, Any]:
    return {**cert.as_dict(), "meta": meta,
            "runs": [{"check": r.check, "scope": r.scope, "node": r.node, "result": r.envelope} for r in runs]}


def junit_xml(cert: Certification, runs: list[CheckRun]) -> str:
    suites = ET.Element("testsuites", name=f"podctl certification: {cert.subject}")
    checks = ET.SubElement(suites, "testsuite", name="checks")
    for run in runs:
        case = ET.SubElement(checks, "testcase", classname=f"{run.check}.{run.scope}", name=run.node,
                             time=f"{float(run.envelope.get('duration_s', 0.0)):.3f}")
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
    return text[text.index("<svg"):]


def plots(cert: Certification, runs: list[CheckRun]) -> list[tuple[str, str]]:
    """(title, inline SVG) for every plot the results allow."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out: list[tuple[str, str]] = []
    for run in runs:
        sweep = run.envelope.get("details", {}).get("sweep")
        if run.check != "collectives" or not sweep:
            continue
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for collective, rows in sorted(sweep.items()):
            if rows:
                ax.plot([r["size_bytes"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o", ms=3,
                        label=collective)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        world = run.envelope.get("details", {}).get("world_size")
        out.append((f"Bus bandwidth against message size: {run.node} ({run.scope}, {world} ranks)", _svg(fig)))
    gemm = [v for v in cert.verdicts if v.figure in ("gemm_bf16_tflops", "gemm_fp32_gflops") and v.value is not None]
    if gemm:
        fig, ax = plt.subplots(figsize=(max(5, 0.5 * len(gemm) + 2), 3.6))
        labels = [f"{v.node}\n{v.device or ''}" for v in gemm]
        colors = ["#2a9d8f" if v.passed else "#e63946" for v in gemm]
        ax.bar(range(len(gemm)), [v.value for v in gemm], color=colors)
        ax.axhline(gemm[0].bound, color="black", ls="--", lw=1, label=f"bound {gemm[0].bound:.4g} {gemm[0].unit}")
        ax.set_xticks(range(len(gemm)), labels, fontsize=7)
        ax.set_ylabel(gemm[0].unit)
        ax.legend(fontsize=8)
        out.append((f"GEMM throughput per {'GPU' if gemm[0].device else 'node'} ({gemm[0].figure})", _svg(fig)))
    pairs = [r for r in runs if r.scope == "pair" and r.envelope.get("details", {}).get("ranks")]
    if pairs:
        hosts = sorted({h for r in pairs for h in _pair_hosts(r)})
        index = {h: i for i, h in enumerate(hosts)}
        import numpy as np

        matrix = np.full((len(hosts), len(hosts)), np.nan)
        for r in pairs:
            a, b = _pair_hosts(r)[:2]
            best = max((m["value"] for m in r.envelope.get("measurements", []) if "busbw" in m["figure"]),
                       default=np.nan)
            matrix[index[a], index[b]] = matrix[index[b], index[a]] = best
        fig, ax = plt.subplots(figsize=(1 + 0.5 * len(hosts), 0.8 + 0.5 * len(hosts)))
        im = ax.imshow(matrix, cmap="viridis")
        ax.set_xticks(range(len(hosts)), hosts, rotation=90, fontsize=7)
        ax.set_yticks(range(len(hosts)), hosts, fontsize=7)
        fig.colorbar(im, ax=ax, label="busbw (GB/s)")
        out.append(("Pairwise bus bandwidth between nodes", _svg(fig)))
    return out


def _cabling_html(runs: list[CheckRun]) -> list[str]:
    """The cabling check's section: what was compared, then one row per cable at fault, both ends named."""
    if not runs:
        return []
    e = html.escape
    details = runs[0].envelope.get("details", {})
    found = ", ".join(f"{n} in {e(source)}" for source, n in details.get("links_found", {}).items())
    out = [f"<h2>Cabling</h2><p>fabric {e(str(details.get('fabric', '')))}: {details.get('cables_planned', 0)} "
           f"cables planned; links found: {found}</p>"]
    rows = [(r, cable) for r in runs for cable in r.envelope.get("details", {}).get("cables", [])]
    if not rows:
        out.append("<p class=pass>Every cable matches the plan.</p>")
        return out
    out.append("<table><tr><th>at fault</th><th>end</th><th>other end</th><th>what is wrong</th>"
               "<th>seen in</th></tr>")
    for run, cable in rows:
        at = f"{run.node} (switch)" if run.scope == "fabric" else run.node
        wrong = cable["kind"] + (f": {cable['problem']}" if cable.get("problem") else "")
        out.append(f"<tr><td class=fail>{e(at)}</td><td>{e(cable['end_a'])}</td><td>{e(cable['end_b'])}</td>"
                   f"<td>{e(wrong)}</td><td>{e(', '.join(cable.get('sources', [])))}</td></tr>")
    out.append("</table>")
    return out


def _pair_hosts(run: CheckRun) -> list[str]:
    return sorted({r["host"] for r in run.envelope["details"]["ranks"]})


def report_html(cert: Certification, runs: list[CheckRun], meta: dict[str, Any]) -> str:
    e = html.escape
    verdict = "CERTIFIED" if cert.certified else "NOT CERTIFIED"
    color = "#2a9d8f" if cert.certified else "#e63946"
    parts = [f"""<!doctype html><html><head><meta charset="utf-8"><title>podctl certification: {e(cert.subject)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}}.fail{{color:#e63946;font-weight:600}}
.pass{{color:#2a9d8f}}h1 span{{color:{color}}}svg{{max-width:100%;height:auto}}</style></head><body>
<h1>{e(cert.subject)}: <span>{verdict}</span></h1>
<p>{e(str(meta.get('started', '')))} &middot; podctl {e(str(meta.get('podctl', '')))} &middot; suites: {e(', '.join(meta.get('suites', [])))}
 &middot; {len(cert.nodes)} node(s)</p>"""]
    if cert.failures:
        parts.append("<h2>Failing nodes</h2><table><tr><th>node or switch</th><th>reasons</th></tr>")
        for node, reasons in sorted(cert.failures.items()):
            parts.append(f"<tr><td class=fail>{e(node)}</td><td>{'<br>'.join(e(r) for r in reasons)}</td></tr>")
        parts.append("</table>")
    if cert.excluded:
        parts.append("<h2>Excluded</h2><ul>" + "".join(f"<li>{e(n)}: {e(r)}</li>" for n, r in cert.excluded.items())
                     + "</ul>")
    parts.append("<h2>Figures</h2><table><tr><th>node</th><th>device</th><th>figure</th><th>value</th><th>bound</th>"
                 "<th>result</th><th>source</th></tr>")
    for v in sorted(cert.verdicts, key=lambda v: (v.passed, v.node, v.figure, v.device or "")):
        value = "missing" if v.value is None else f"{v.value:.4g} {e(v.unit)}"
        parts.append(f"<tr><td>{e(v.node)}</td><td>{e(v.device or '')}</td><td>{e(v.figure)}</td><td>{value}</td>"
                     f"<td>{v.bound:.4g}</td><td class={'pass' if v.passed else 'fail'}>{'pass' if v.passed else 'FAIL'}"
                     f"</td><td>{e(v.source)}</td></tr>")
    parts.append("</table><h2>Checks</h2><table><tr><th>check</th><th>scope</th><th>node</th><th>status</th>"
                 "<th>seconds</th><th>findings</th></tr>")
    for r in runs:
        findings = "<br>".join(f"{e(f['severity'])}: {e(f['message'])}" for f in r.envelope.get("findings", []))
        parts.append(f"<tr><td>{e(r.check)}</td><td>{e(r.scope)}</td><td>{e(r.node)}</td>"
                     f"<td class={'fail' if r.status in ('fail', 'error') else 'pass'}>{e(r.status)}</td>"
                     f"<td>{float(r.envelope.get('duration_s', 0)):.1f}</td><td>{findings}</td></tr>")
    parts.append("</table>")
    parts.extend(_cabling_html([r for r in runs if r.check == "cabling"]))
    for title, svg in plots(cert, runs):
        parts.append(f"<h2>{e(title)}</h2>{svg}")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(out_dir: Path, cert: Certification, runs: list[CheckRun], meta: dict[str, Any]) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "junit": out_dir / "junit.xml", "html": out_dir / "report.html"}
    _atomic_write(paths["json"], json.dumps(report_data(cert, runs, meta), indent=2, sort_keys=True) + "\n")
    _atomic_write(paths["junit"], junit_xml(cert, runs))
    _atomic_write(paths["html"], report_html(cert, runs, meta))
    return paths
