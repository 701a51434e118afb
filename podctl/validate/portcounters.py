"""The port-counters check of `podctl validate`: what the ports of every planned cable record.

Two sources: the nodes' own HCA ports (state, rate and sysfs counters, in the health suite's
record of each node), and an `ibqueryerrors` report of the whole fabric given with
`--ibqueryerrors FILE` (its switch ports named by their GUIDs when `--ibnetdiscover` identified
them, else by their descriptions). Each cable with evidence fails what it belongs to: a
node-leaf cable its node, a switch cable the switch at its lower end. The same evidence goes to
fault localization, which then names cables no traffic test crosses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podctl.core.model import IB_RATES_GBPS, Site
from podctl.derive.facts import hca_names
from podctl.derive.topology import FabricPlan
from podctl.ibfabric.counters import read_ibqueryerrors
from podctl.ibfabric.evidence import Placed, hca_port_evidence, merged, place_counters
from podctl.ibfabric.identity import naming_from_templates
from podctl.localize.localize import PortEvidence, link_ends
from podctl.validate.envelope import envelope, finding
from podctl.validate.judge import CheckRun

CHECK = "port-counters"


def node_hca_ports(run: CheckRun) -> list[dict[str, Any]]:
    """The HCA ports a health run recorded (validation.health: details.parts.infiniband.ports)."""
    part = run.envelope.get("details", {}).get("parts", {}).get("infiniband", {})
    ports = part.get("ports") if isinstance(part, dict) else None
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def port_evidence(
    site: Site,
    plan: FabricPlan,
    runs: list[CheckRun],
    ibqueryerrors: Path | None,
    names_by_guid: dict[str, str] | None = None,
) -> tuple[list[PortEvidence], list[str]]:
    """Every cable's evidence from both sources, and what could not be placed on the plan."""
    fabric = site.fabrics["compute"]
    names = hca_names(site, "compute")
    evidence: list[PortEvidence] = []
    unplaced: list[str] = []

    def take(placed: Placed) -> None:
        evidence.extend(placed.evidence)
        unplaced.extend(placed.unplaced)

    rate = float(IB_RATES_GBPS.get(fabric.rate, 0)) or None
    for run in runs:
        if run.check == "health" and run.scope == "node" and run.node in fabric.nodes:
            take(hca_port_evidence(plan, run.node, node_hca_ports(run), names, rate))
    if ibqueryerrors is not None:
        naming = naming_from_templates(fabric.naming_switch, fabric.naming_hca)
        take(place_counters(plan, read_ibqueryerrors(str(ibqueryerrors)), naming, names, names_by_guid))
    return merged(evidence), unplaced


def port_counter_runs(
    evidence: list[PortEvidence], unplaced: list[str], site: Site, duration_s: float = 0.0
) -> list[CheckRun]:
    """One failing run per element at fault (a node, or the switch at a cable's lower end); one
    passing run for the fabric when nothing is."""
    names = hca_names(site, "compute")
    findings: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in evidence:
        a, b = link_ends(item.cable, names)
        element = (
            ("node", item.cable.lower.device) if item.cable.tier == "node-leaf" else ("fabric", item.cable.lower.device)
        )
        device = a.split(" ", 1)[1] if item.cable.tier == "node-leaf" else None
        findings.setdefault(element, []).append(finding(f"cable {a} <-> {b}: {item.what}", device=device))
    notes = [finding(u, "warning") for u in unplaced]
    runs = [
        CheckRun(CHECK, scope, node, _envelope("fail", node, found, duration_s))
        for (scope, node), found in sorted(findings.items())
    ]
    if not runs:
        runs.append(CheckRun(CHECK, "fabric", "fabric", _envelope("pass", "fabric", notes, duration_s)))
    elif notes:
        runs.append(CheckRun(CHECK, "fabric", "fabric", _envelope("pass", "fabric", notes, 0.0)))
    return runs


def _envelope(status: str, host: str, findings: list[dict[str, Any]], duration_s: float) -> dict[str, Any]:
    return envelope(CHECK, host, status, findings, duration_s=duration_s)
