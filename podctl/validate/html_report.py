"""report.html: one self-contained file that reads at pod scale.

Why one module of this size: the page is one document whose sections share their data (the
verdict table turned into columns, the fabric order of the nodes) and one small script; split
up, every piece would pass the same arrays around.

Top to bottom:

1. the verdict, and what failed first: failing switches and nodes, each with its reasons and
   the figures that fell short (evidence), then the excluded nodes;
2. per figure, the distribution over every node (or GPU) against its bound and reference,
   with the outliers named (an inline SVG histogram each);
3. a node x figure heat map normalised to each figure's reference, nodes in fabric order
   (scalable unit, then position), so a sick rail or a slow switch shows as a stripe;
4. the pairwise bandwidth matrix of the paired collectives, and the fabric's switches with
   the failing ones marked, with the cabling check's findings;
5. per-node detail on demand (pick a node: its figures, its checks' findings), and the
   checks that did not pass.

The heat map, matrix and node detail are drawn by a short script from one JSON block in the
page (no network, no library); everything else is plain HTML and SVG. At 1,344 nodes the
file stays a few MB (tests/validate/test_report_scale.py).
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from typing import Any

from podctl.validate.judge import Certification, CheckRun, Verdict

PASS, FAIL, MISSING = "#2a9d8f", "#e63946", "#bbbbbb"
# How many failing entries and outliers are listed in full; the rest are counted.
LIST_LIMIT = 200
OUTLIERS = 8

e = html.escape


def _device(v: Verdict) -> str:
    """The device without its host: a job across nodes names GPUs "node07/gpu3"."""
    device = v.device or ""
    return device[len(v.node) + 1 :] if device.startswith(f"{v.node}/") else device


def _column(v: Verdict) -> tuple[str, str, str]:
    return (v.figure, v.measured_by, _device(v))


def _fmt(value: float | None) -> str:
    return "missing" if value is None else f"{value:.4g}"


def _quantile(values: list[float], q: float) -> float:
    position = (len(values) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return values[low] + (values[high] - values[low]) * (position - low)


# -- 1. verdict and failures ------------------------------------------------------------------


def _header(cert: Certification, meta: dict[str, Any], switches: set[str]) -> str:
    verdict = "CERTIFIED" if cert.certified else "NOT CERTIFIED"
    color = PASS if cert.certified else FAIL
    failing_nodes = [n for n in cert.failures if n not in switches]
    failing_switches = [n for n in cert.failures if n in switches or n not in cert.nodes]
    judged = len(cert.verdicts)
    failed = sum(1 for v in cert.verdicts if not v.passed)
    return (
        f"<h1>{e(cert.subject)}: <span style='color:{color}'>{verdict}</span></h1>"
        f"<p>{e(str(meta.get('started', '')))} &middot; podctl {e(str(meta.get('podctl', '')))} &middot; "
        f"suites: {e(', '.join(meta.get('suites', [])))} &middot; mode {e(str(meta.get('mode', '')))}</p>"
        f"<p class=summary><b>{len(cert.nodes)}</b> node(s) judged, <b class={'fail' if failing_nodes else 'pass'}>"
        f"{len(failing_nodes)}</b> failing; <b class={'fail' if failing_switches else 'pass'}>"
        f"{len(failing_switches)}</b> switch(es) or fabric element(s) failing; {judged} figure verdicts, "
        f"{failed} below their bound or missing; {len(cert.excluded)} excluded.</p>"
    )


def _failures(cert: Certification, by_node: dict[str, list[Verdict]]) -> str:
    if not cert.failures:
        return "<h2 id=failed>What failed</h2><p class=pass>Nothing: every node and fabric element passed.</p>"
    # Fabric elements first (a switch, its cables: they explain nodes' failures), then nodes.
    order = sorted(cert.failures, key=lambda n: (n in cert.nodes, n))
    rows = []
    for name in order[:LIST_LIMIT]:
        reasons = cert.failures[name]
        evidence = [v for v in by_node.get(name, []) if not v.passed][:6]
        ev = "<br>".join(
            f"{e(v.figure)}{' ' + e(v.device) if v.device else ''} ({e(v.measured_by)}): "
            f"{_fmt(v.value)} {e(v.unit)} &lt; {v.bound:.4g}"
            for v in evidence
        )
        shown = "<br>".join(e(r) for r in reasons[:5]) + (f"<br>(+{len(reasons) - 5} more)" if len(reasons) > 5 else "")
        kind = "node" if name in cert.nodes else "fabric"
        rows.append(f"<tr><td class=fail>{e(name)}</td><td>{kind}</td><td>{shown}</td><td>{ev}</td></tr>")
    more = f"<p>and {len(order) - LIST_LIMIT} more (report.json lists all)</p>" if len(order) > LIST_LIMIT else ""
    return (
        "<h2 id=failed>What failed</h2><table><tr><th>node or element</th><th>kind</th><th>reasons</th>"
        "<th>evidence: figures below their bound</th></tr>" + "".join(rows) + "</table>" + more
    )


# -- 2. distributions ------------------------------------------------------------------------------


def _histogram(values: list[float], bound: float, reference: float, unit: str) -> str:
    """An inline SVG histogram of `values` with the bound (dashed) and the reference (dotted)."""
    w, h, pad = 420, 120, 28
    low = min(values + [bound, reference])
    high = max(values + [bound, reference])
    if high <= low:
        high = low + (abs(low) or 1.0)
    span = high - low
    low, high = low - 0.03 * span, high + 0.03 * span
    bins = 40
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / (high - low) * bins))] += 1
    top = max(counts) or 1
    bw = (w - 2 * pad) / bins

    def x(value: float) -> float:
        return pad + (value - low) / (high - low) * (w - 2 * pad)

    bars = []
    for i, c in enumerate(counts):
        if c:
            bh = (h - 2 * pad) * c / top
            left = low + (i + 0.5) / bins * (high - low)
            color = FAIL if left < bound else PASS
            bars.append(
                f"<rect x='{pad + i * bw:.1f}' y='{h - pad - bh:.1f}' width='{max(bw - 1, 1):.1f}' "
                f"height='{bh:.1f}' fill='{color}'><title>{c}</title></rect>"
            )
    return (
        f"<svg width='{w}' height='{h}' viewBox='0 0 {w} {h}' role='img'>"
        + "".join(bars)
        + f"<line x1='{x(bound):.1f}' x2='{x(bound):.1f}' y1='{pad - 8}' y2='{h - pad}' stroke='black' "
        f"stroke-dasharray='4 3'/><text x='{x(bound) + 3:.1f}' y='{pad - 10}' font-size='10'>bound {bound:.4g}</text>"
        f"<line x1='{x(reference):.1f}' x2='{x(reference):.1f}' y1='{pad + 6}' y2='{h - pad}' stroke='#555' "
        f"stroke-dasharray='1 2'/>"
        f"<line x1='{pad}' x2='{w - pad}' y1='{h - pad}' y2='{h - pad}' stroke='#888'/>"
        f"<text x='{pad}' y='{h - 8}' font-size='10'>{low:.4g}</text>"
        f"<text x='{w - pad}' y='{h - 8}' font-size='10' text-anchor='end'>{high:.4g} {e(unit)}</text></svg>"
    )


def _distributions(cert: Certification) -> str:
    groups: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for v in cert.verdicts:
        groups[(v.figure, v.measured_by)].append(v)
    out = [
        "<h2 id=figures>Figures across the pod</h2><p>Each figure over every node (or GPU) judged on it, against "
        "its bound (dashed) and reference (dotted); red bars lie below the bound. Outliers: the values below the "
        "bound, then the lowest of the rest that sit more than five median absolute deviations under the median.</p>"
        "<table><tr><th>figure</th><th>measured by</th><th>n</th><th>missing</th><th>below bound</th><th>min</th>"
        "<th>median</th><th>max</th><th>bound</th><th>reference</th><th>distribution</th><th>outliers</th></tr>"
    ]
    for (figure, by), vs in sorted(groups.items()):
        present = sorted(((v.value, v) for v in vs if v.value is not None), key=lambda p: p[0])
        values = [p[0] for p in present]
        missing = len(vs) - len(values)
        below = [v for v in vs if not v.passed and v.value is not None]
        first = vs[0]
        if values:
            median = _quantile(values, 0.5)
            mad = _quantile(sorted(abs(x - median) for x in values), 0.5)
            outliers = [v for _, v in present if not v.passed] + [
                v for x, v in present if v.passed and mad > 0 and x < median - 5 * 1.4826 * mad
            ]
            named = ", ".join(
                f"{e(v.node)}{'/' + e(v.device) if v.device else ''} {v.value:.4g}" for v in outliers[:OUTLIERS]
            )
            if len(outliers) > OUTLIERS:
                named += f" (+{len(outliers) - OUTLIERS} more)"
            stats = f"<td>{values[0]:.4g}</td><td>{median:.4g}</td><td>{values[-1]:.4g}</td>"
            plot = _histogram(values, first.bound, first.reference, first.unit)
        else:
            named, stats, plot = "", "<td></td><td></td><td></td>", ""
        out.append(
            f"<tr><td>{e(figure)}</td><td>{e(by)}</td><td>{len(vs)}</td><td class={'fail' if missing else 'pass'}>"
            f"{missing}</td><td class={'fail' if below else 'pass'}>{len(below)}</td>{stats}<td>{first.bound:.4g}</td>"
            f"<td>{first.reference:.4g} {e(first.unit)}</td><td>{plot}</td><td>{named}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


# -- data for the script ---------------------------------------------------------------------------


def _pair_value(run: CheckRun) -> tuple[str, str, float] | None:
    hosts = sorted({str(h) for h in run.envelope.get("hosts", [])})
    if len(hosts) != 2:
        return None
    values = [m.get("value") for m in run.envelope.get("measurements", []) if "busbw" in str(m.get("figure"))]
    values = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return (hosts[0], hosts[1], max(values)) if values else None


def page_data(cert: Certification, runs: list[CheckRun], meta: dict[str, Any]) -> dict[str, Any]:
    """What the script draws: verdict columns, nodes in fabric order, values, pairs."""
    fabric = meta.get("fabric") or {}
    order = [n for n in fabric.get("node_order", []) if n in cert.nodes]
    nodes = order + sorted(n for n in cert.nodes if n not in set(order))
    index = {n: i for i, n in enumerate(nodes)}
    columns: dict[tuple[str, str, str], int] = {}
    meta_cols: list[list[Any]] = []
    for v in sorted(cert.verdicts, key=_column):
        key = _column(v)
        if key not in columns:
            columns[key] = len(columns)
            meta_cols.append([v.figure, v.measured_by, _device(v), v.unit, v.bound, v.reference])
    values: list[list[float | None]] = [[None] * len(columns) for _ in nodes]
    failed: list[list[int]] = [[] for _ in nodes]
    for v in cert.verdicts:
        if v.node in index:
            row, col = index[v.node], columns[_column(v)]
            values[row][col] = None if v.value is None else float(f"{v.value:.5g}")
            if not v.passed:
                failed[row].append(col)
    pairs = []
    for run in runs:
        if run.scope == "pair":
            found = _pair_value(run)
            if found and found[0] in index and found[1] in index:
                pairs.append([index[found[0]], index[found[1]], round(found[2], 3)])
    bounds = [v.bound for v in cert.verdicts if v.figure.startswith("allreduce_busbw_multinode")]
    su_sizes = fabric.get("su_sizes", [])
    return {
        "nodes": nodes,
        "cols": meta_cols,
        "values": values,
        "failed": failed,
        "reasons": {n: cert.failures.get(n, []) for n in nodes if n in cert.failures},
        "pairs": pairs,
        "pair_bound": min(bounds) if bounds else None,
        "su_sizes": su_sizes if sum(su_sizes) == len(order) == len(nodes) else [],
        "findings": _node_findings(runs, index),
    }


def _node_findings(runs: list[CheckRun], index: dict[str, int]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        if r.status in ("fail", "error") and r.node in index:
            for f in r.envelope.get("findings", [])[:5]:
                if f.get("severity") in ("error", "warning"):
                    out[r.node].append(f"{r.check}: {f.get('severity')}: {f.get('message')}")
    return dict(out)


# -- 4. fabric -------------------------------------------------------------------------------------


def _fabric(cert: Certification, meta: dict[str, Any]) -> str:
    fabric = meta.get("fabric") or {}
    tiers: dict[str, list[str]] = fabric.get("switches") or {}
    if not tiers:
        return ""
    out = ["<h2 id=fabric>Fabric</h2><p>Every switch of the compute fabric by tier; red: a failure names it.</p>"]
    width = 1000
    rows = [(tier, names) for tier, names in tiers.items() if names][::-1]
    svg = [f"<svg width='{width}' height='{34 * len(rows) + 10}' role='img'>"]
    for r, (tier, names) in enumerate(rows):
        y = 8 + 34 * r
        cell = max(2.0, min(24.0, (width - 80) / len(names)))
        svg.append(f"<text x='0' y='{y + 14}' font-size='11'>{e(tier)} ({len(names)})</text>")
        for i, name in enumerate(names):
            bad = name in cert.failures
            svg.append(
                f"<rect x='{80 + i * cell:.1f}' y='{y}' width='{max(cell - 1, 1):.1f}' height='20' "
                f"fill='{FAIL if bad else '#8ecae6'}'><title>{e(name)}</title></rect>"
            )
    svg.append("</svg>")
    out.append("".join(svg))
    failing = sorted(n for n in cert.failures if n not in cert.nodes)
    if failing:
        out.append(
            "<ul>"
            + "".join(f"<li class=fail>{e(n)}: {e('; '.join(cert.failures[n][:3]))}</li>" for n in failing[:LIST_LIMIT])
            + "</ul>"
        )
    return "".join(out)


def _cabling_html(runs: list[CheckRun]) -> str:
    """The cabling check's section: what was compared, then one row per cable at fault, both ends named."""
    if not runs:
        return ""
    details = runs[0].envelope.get("details", {})
    found = ", ".join(f"{n} in {e(source)}" for source, n in details.get("links_found", {}).items())
    out = [
        f"<h2>Cabling</h2><p>fabric {e(str(details.get('fabric', '')))}: {details.get('cables_planned', 0)} "
        f"cables planned; links found: {found}</p>"
    ]
    rows = [(r, cable) for r in runs for cable in r.envelope.get("details", {}).get("cables", [])]
    if not rows:
        out.append("<p class=pass>Every cable matches the plan.</p>")
        return "".join(out)
    out.append("<table><tr><th>at fault</th><th>end</th><th>other end</th><th>what is wrong</th><th>seen in</th></tr>")
    for run, cable in rows[:LIST_LIMIT]:
        at = f"{run.node} (switch)" if run.scope == "fabric" else run.node
        wrong = cable["kind"] + (f": {cable['problem']}" if cable.get("problem") else "")
        out.append(
            f"<tr><td class=fail>{e(at)}</td><td>{e(cable['end_a'])}</td><td>{e(cable['end_b'])}</td>"
            f"<td>{e(wrong)}</td><td>{e(', '.join(cable.get('sources', [])))}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _fabric_tools_html(runs: list[CheckRun], meta: dict[str, Any]) -> str:
    """Where the fabric tools' output came from (a sim pod's SM host), and what the subnet manager's
    routes and the ports' counters say, one row per finding."""
    tools = meta.get("fabric_tools") or {}
    chosen = [r for r in runs if r.check in ("routes", "port-counters")]
    if not chosen and not tools:
        return ""
    out = ["<h2>Routes and port counters</h2>"]
    if tools:
        names = ", ".join(f"{e(n)} ({tools.get('seconds', {}).get(n, 0)} s)" for n in sorted(tools.get("files", {})))
        out.append(
            f"<p>The real tools, run on {e(str(tools.get('host', '')))} against the sim pod's emulated fabric "
            f"(ibsim, OpenSM under umad2sim): {names}.</p>"
        )
    out.append("<table><tr><th>check</th><th>at fault</th><th>status</th><th>finding</th></tr>")
    for run in chosen:
        found = run.envelope.get("findings", []) or [{"message": "nothing past a threshold", "severity": "info"}]
        for item in found[:LIST_LIMIT]:
            style = "fail" if item.get("severity") == "error" else "pass"
            out.append(
                f"<tr><td>{e(run.check)}</td><td>{e(run.node)}</td><td class={style}>{e(run.status)}</td>"
                f"<td>{e(str(item.get('message', '')))}</td></tr>"
            )
    out.append("</table>")
    return "".join(out)


# -- 5. checks -------------------------------------------------------------------------------------


def _checks(runs: list[CheckRun]) -> str:
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in runs:
        counts[(r.check, r.scope)][r.status] += 1
    out = [
        "<h2 id=checks>Checks</h2><table><tr><th>check</th><th>scope</th><th>pass</th><th>fail</th><th>error</th>"
        "<th>skip</th></tr>"
    ]
    for (check, scope), c in sorted(counts.items()):
        out.append(
            f"<tr><td>{e(check)}</td><td>{e(scope)}</td><td>{c['pass']}</td><td class={'fail' if c['fail'] else 'pass'}>"
            f"{c['fail']}</td><td class={'fail' if c['error'] else 'pass'}>{c['error']}</td><td>{c['skip']}</td></tr>"
        )
    out.append("</table>")
    bad = [r for r in runs if r.status in ("fail", "error")]
    if bad:
        out.append(
            "<details open><summary>Checks that did not pass</summary><table><tr><th>check</th><th>scope</th>"
            "<th>node</th><th>status</th><th>seconds</th><th>findings</th></tr>"
        )
        for r in bad[:LIST_LIMIT]:
            findings = "<br>".join(
                f"{e(str(f.get('severity')))}: {e(str(f.get('message')))}" for f in r.envelope.get("findings", [])[:8]
            )
            out.append(
                f"<tr><td>{e(r.check)}</td><td>{e(r.scope)}</td><td>{e(r.node)}</td><td class=fail>{e(r.status)}</td>"
                f"<td>{float(r.envelope.get('duration_s', 0) or 0):.1f}</td><td>{findings}</td></tr>"
            )
        out.append("</table></details>")
    return "".join(out)


STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1300px;color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:2px 7px;font-size:13px;
text-align:left;vertical-align:top}.fail{color:#e63946;font-weight:600}.pass{color:#2a9d8f}
nav a{margin-right:1em}canvas{border:1px solid #ccc;image-rendering:pixelated}#tip{font-size:12px;min-height:1.2em}
.summary{font-size:15px}svg{max-width:100%;height:auto}"""

SCRIPT = r"""
(function () {
  var D = JSON.parse(document.getElementById('podctl-data').textContent);
  function colour(ratio, bad) {
    if (ratio === null) return '#bbbbbb';
    if (bad) return 'rgb(230,57,70)';
    var t = Math.max(0, Math.min(1, (ratio - 0.85) / 0.3));   // 0.85x .. 1.15x of the reference
    return 'rgb(' + Math.round(255 - 200 * t) + ',' + Math.round(190 + 40 * t) + ',' + Math.round(90 + 60 * t) + ')';
  }
  function heat() {
    var c = document.getElementById('heat'); if (!c || !D.cols.length) return;
    var rows = D.nodes.length, cols = D.cols.length;
    var cw = Math.max(4, Math.min(28, Math.floor(1000 / cols))), rh = Math.max(1, Math.min(12, Math.floor(1400 / rows)));
    c.width = cols * cw; c.height = rows * rh;
    var g = c.getContext('2d');
    for (var i = 0; i < rows; i++) {
      var bad = {}; D.failed[i].forEach(function (k) { bad[k] = 1; });
      for (var j = 0; j < cols; j++) {
        var v = D.values[i][j], ref = D.cols[j][5];
        g.fillStyle = colour(v === null ? null : v / ref, bad[j]);
        g.fillRect(j * cw, i * rh, cw, rh);
      }
    }
    var y = 0; g.fillStyle = '#000';
    D.su_sizes.forEach(function (n) { y += n; g.fillRect(0, y * rh, c.width, 1); });
    c.onmousemove = function (ev) {
      var r = c.getBoundingClientRect(), j = Math.floor((ev.clientX - r.left) * c.width / r.width / cw),
          i = Math.floor((ev.clientY - r.top) * c.height / r.height / rh);
      if (i < 0 || i >= rows || j < 0 || j >= cols) return;
      var col = D.cols[j], v = D.values[i][j];
      document.getElementById('tip').textContent = D.nodes[i] + '  ' + col[0] + (col[2] ? ' ' + col[2] : '') +
        ' (' + col[1] + '): ' + (v === null ? 'missing' : v + ' ' + col[3] + ' = ' + (v / col[5]).toFixed(3) +
        'x reference; bound ' + col[4]);
    };
    c.onclick = function () { var t = document.getElementById('tip').textContent.split(' ')[0]; show(t); };
    var head = document.getElementById('heat-cols');
    head.textContent = D.cols.map(function (c, k) { return (k + 1) + ': ' + c[0] + (c[2] ? ' ' + c[2] : '') +
      (c[1] !== 'podctl' ? ' (' + c[1] + ')' : ''); }).join('   ');
  }
  function matrix() {
    var c = document.getElementById('pairs'); if (!c) return;
    var n = D.nodes.length, s = Math.max(1, Math.min(6, Math.floor(800 / n)));
    c.width = c.height = n * s;
    var g = c.getContext('2d'); g.fillStyle = '#f4f4f4'; g.fillRect(0, 0, c.width, c.height);
    D.pairs.forEach(function (p) {
      var ratio = D.pair_bound ? p[2] / D.pair_bound : 1;
      g.fillStyle = ratio < 1 ? 'rgb(230,57,70)' : colour(Math.min(1.15, 0.85 + 0.3 * (ratio - 1) / 0.3), false);
      var w = Math.max(s, 2);
      g.fillRect(p[0] * s, p[1] * s, w, w); g.fillRect(p[1] * s, p[0] * s, w, w);
    });
  }
  function cell(tr, text, cls) { var td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }
  function show(name) {
    var i = D.nodes.indexOf(name), box = document.getElementById('detail');
    while (box.firstChild) box.removeChild(box.firstChild);
    if (i < 0) { box.textContent = name ? 'no node ' + name : ''; return; }
    var h = document.createElement('h3'); h.textContent = name + (D.reasons[name] ? ': FAILED' : ': passed');
    h.className = D.reasons[name] ? 'fail' : 'pass'; box.appendChild(h);
    (D.reasons[name] || []).concat(D.findings[name] || []).forEach(function (r) {
      var p = document.createElement('div'); p.textContent = r; box.appendChild(p); });
    var t = document.createElement('table'), hr = document.createElement('tr');
    ['figure', 'device', 'measured by', 'value', 'bound', 'reference', 'result'].forEach(function (x) {
      var th = document.createElement('th'); th.textContent = x; hr.appendChild(th); });
    t.appendChild(hr);
    var bad = {}; D.failed[i].forEach(function (k) { bad[k] = 1; });
    D.cols.forEach(function (c, j) {
      var v = D.values[i][j]; if (v === null && !bad[j]) return;
      var tr = document.createElement('tr');
      cell(tr, c[0]); cell(tr, c[2]); cell(tr, c[1]); cell(tr, v === null ? 'missing' : v + ' ' + c[3]);
      cell(tr, c[4]); cell(tr, c[5]); cell(tr, bad[j] ? 'FAIL' : 'pass', bad[j] ? 'fail' : 'pass');
      t.appendChild(tr);
    });
    box.appendChild(t);
  }
  heat(); matrix();
  var pick = document.getElementById('pick');
  pick.onchange = function () { show(pick.value.trim()); };
  document.body.setAttribute('data-rendered', String(D.nodes.length));
})();
"""


def _script_json(data: dict[str, Any]) -> str:
    # Inside <script>, "</" would end the element: escaped, the JSON still parses to the same.
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def report_html(
    cert: Certification, runs: list[CheckRun], meta: dict[str, Any], plots: list[tuple[str, str]] | None = None
) -> str:
    fabric = meta.get("fabric") or {}
    switches = {n for names in (fabric.get("switches") or {}).values() for n in names}
    by_node: dict[str, list[Verdict]] = defaultdict(list)
    for v in cert.verdicts:
        by_node[v.node].append(v)
    data = page_data(cert, runs, meta)
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>podctl certification: {e(cert.subject)}</title>"
        f"<style>{STYLE}</style></head><body>",
        _header(cert, meta, switches),
        "<nav><a href='#failed'>what failed</a><a href='#figures'>figures</a><a href='#heatmap'>heat map</a>"
        "<a href='#pairs-h'>pairs</a><a href='#fabric'>fabric</a><a href='#node'>node detail</a>"
        "<a href='#checks'>checks</a></nav>",
        _failures(cert, by_node),
    ]
    if cert.excluded:
        parts.append(
            "<h2>Excluded</h2><ul>"
            + "".join(f"<li>{e(n)}: {e(r)}</li>" for n, r in sorted(cert.excluded.items()))
            + "</ul>"
        )
    parts.append(_distributions(cert))
    parts.append(
        "<h2 id=heatmap>Heat map: node x figure, against the reference</h2><p>Rows: nodes in fabric order "
        "(black lines between scalable units); columns below. Green at or above the reference, yellow to orange "
        "down to 0.85x, red below the bound, grey missing. Hover for the value, click for the node.</p>"
        "<canvas id=heat></canvas><div id=tip></div><p id=heat-cols style='font-size:11px'></p>"
    )
    if data["pairs"]:
        parts.append(
            f"<h2 id=pairs-h>Pairwise bus bandwidth</h2><p>{len(data['pairs'])} node pairs measured; red: below the "
            "multi-node bound. Nodes in the heat map's order.</p><canvas id=pairs></canvas>"
        )
    parts.append(_fabric(cert, meta))
    parts.append(_cabling_html([r for r in runs if r.check == "cabling"]))
    parts.append(_fabric_tools_html(runs, meta))
    options = "".join(f"<option value='{e(n)}'>" for n in data["nodes"])
    parts.append(
        "<h2 id=node>Node detail</h2><p>Pick a node (or click one in the heat map): every figure judged on it "
        f"and its checks' findings.</p><input id=pick list=node-list placeholder='node name'><datalist id=node-list>"
        f"{options}</datalist><div id=detail></div>"
    )
    parts.append(_checks(runs))
    for title, svg in plots or []:
        parts.append(f"<h2>{e(title)}</h2>{svg}")
    parts.append(f"<script type='application/json' id='podctl-data'>{_script_json(data)}</script>")
    parts.append(f"<script>{SCRIPT}</script></body></html>\n")
    return "\n".join(parts)
