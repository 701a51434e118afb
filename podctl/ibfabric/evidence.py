"""Port counters and link state as evidence against the plan's cables.

A cable that is slow or down leaves a record at its ports whether or not any traffic test
crosses it: a port not Active, or error counters that count (symbol errors, link recoveries,
link-down events, receive errors). This module turns what the tools report (ibqueryerrors for
the switches' and HCAs' ports across the fabric, an HCA's sysfs counters and state on its node)
into `PortEvidence` on the planned cable at that port, for the certification and for fault
localization (podctl.localize), and lists what it could not place on the plan.

Counters count since they were last cleared: clear them (`ibclearcounters`, or `perfquery -R`
per port) before the acceptance run, so that what they hold is the run's own. Thresholds
(`THRESHOLDS`): a link that went down, or any local link integrity, buffer overrun or remote
physical error, is evidence at 1; symbol errors, link error recoveries and receive errors
above 10 (a handful after cabling work is normal; ibqueryerrors itself reports anything above 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from podctl.core.model import HcaNames, hca_name
from podctl.derive.topology import Cable, FabricPlan
from podctl.ibfabric.counters import SYSFS_NAMES, Counters, PortCounters
from podctl.ibfabric.identity import Naming
from podctl.localize.localize import PortEvidence

# Counter -> the value above which it is evidence.
THRESHOLDS: Mapping[str, int] = {
    "SymbolErrorCounter": 10,
    "LinkErrorRecoveryCounter": 10,
    "LinkDownedCounter": 0,
    "PortRcvErrors": 10,
    "PortRcvRemotePhysicalErrors": 0,
    "LocalLinkIntegrityErrors": 0,
    "ExcessiveBufferOverrunErrors": 0,
}


@dataclass(frozen=True)
class Placed:
    evidence: tuple[PortEvidence, ...]
    unplaced: tuple[str, ...]  # ports over threshold that the plan has no cable for, with why


def merged(evidence: Sequence[PortEvidence]) -> list[PortEvidence]:
    """One item per cable, in the order first seen: both ends' (and every source's) evidence joined."""
    by_cable: dict[Cable, list[str]] = {}
    for item in evidence:
        by_cable.setdefault(item.cable, []).append(item.what)
    return [PortEvidence(cable, "; ".join(dict.fromkeys(whats))) for cable, whats in by_cable.items()]


def over_threshold(counters: Mapping[str, int]) -> list[str]:
    """'SymbolErrorCounter 4821 (threshold 10)' for every counter above its threshold."""
    return [
        f"{name} {counters[name]} (threshold {limit})"
        for name, limit in THRESHOLDS.items()
        if counters.get(name, 0) > limit
    ]


class _Cables:
    def __init__(self, plan: FabricPlan, hca_names: HcaNames | None) -> None:
        self.at: dict[tuple[str, int], Cable] = {}
        for cable in plan.cables:
            self.at[(cable.upper.device, cable.upper.port)] = cable
            if cable.tier == "node-leaf":
                host, rail = cable.lower.device, cable.lower.port
                self.at[(f"{host} {hca_name(host, rail, hca_names)}", 1)] = cable
            else:
                self.at[(cable.lower.device, cable.lower.port)] = cable
        self.switches = {s.name for s in plan.switches}


def place_counters(
    plan: FabricPlan,
    counters: Counters,
    naming: Naming | None = None,
    hca_names: HcaNames | None = None,
    names_by_guid: Mapping[str, str] | None = None,
    names_by_lid: Mapping[int, str] | None = None,
) -> Placed:
    """ibqueryerrors' (or perfquery's) ports over threshold, on the plan's cables.

    A port is placed by its device's planned name: `names_by_guid` ("0x<guid>" -> the planned
    name, from identifying an ibnetdiscover dump) first, else what its description says
    (the site's naming templates, MF0's `<name>:<model>`, `<host> <hca>`). perfquery names a port
    by LID alone: `names_by_lid` (LID -> name, CablingReport.lids of the fabric's ibnetdiscover
    dump) names it."""
    naming = naming or Naming()
    cables = _Cables(plan, hca_names)
    evidence: list[PortEvidence] = []
    unplaced: list[str] = []
    # ibqueryerrors reads a switch's counters over all its ports first (`port ALL`) and, when they
    # count, each port's: the ports' lines then hold what the ALL line sums, and count once.
    detailed = {port.node for port in counters.ports if port.port is not None}
    for port in counters.ports:
        found = over_threshold(port.counters)
        if not found or (port.port is None and port.node in detailed):
            continue
        what = ", ".join(found)
        where = f"{port.desc or port.node} port {'ALL' if port.port is None else port.port} ({port.source})"
        if port.port is None:
            unplaced.append(f"{where}: {what}: counted over all ports together, not one cable")
            continue
        by_lid = port.node.startswith("lid ") and port.node[4:].isdigit()
        if by_lid:
            name = (names_by_lid or {}).get(int(port.node[4:]))
        else:
            name = _planned_name(port, naming, names_by_guid or {}, cables.switches)
        cable = cables.at.get((name, port.port)) if name else None
        if cable is None:
            why = (
                "named by LID alone: give the fabric's ibnetdiscover dump, whose LIDs name its devices"
                if by_lid and not names_by_lid
                else "no planned cable at this port"
            )
            unplaced.append(f"{where}: {what}: {why}")
            continue
        evidence.append(PortEvidence(cable, f"{what} at {name}[{port.port}]"))
    return Placed(tuple(evidence), tuple(unplaced))


def _planned_name(port: PortCounters, naming: Naming, by_guid: Mapping[str, str], switches: set[str]) -> str | None:
    if port.node in by_guid:
        return by_guid[port.node]
    switch = naming.switch_name(port.desc) if port.desc else None
    if switch in switches:
        return switch
    claim = naming.hca_claim(port.desc) if port.desc else None
    if claim is not None and claim.hca:
        return f"{claim.host} {claim.hca}"
    return None


def hca_port_evidence(
    plan: FabricPlan,
    host: str,
    ports: Sequence[Mapping[str, object]],
    hca_names: HcaNames | None = None,
    rate_gbps: float | None = None,
) -> Placed:
    """A node's own HCA ports (validation.health's record of sysfs: device, port, state,
    phys_state, rate_gbps, counters) as evidence on its node-leaf cables."""
    cables = _Cables(plan, hca_names)
    evidence: list[PortEvidence] = []
    unplaced: list[str] = []
    for p in ports:
        device, number = str(p.get("device", "")), p.get("port")
        problems = []
        if p.get("state") not in (None, "ACTIVE"):
            problems.append(f"port state {p.get('state')} (physical: {p.get('phys_state')})")
        rate = p.get("rate_gbps")
        if rate_gbps and isinstance(rate, (int, float)) and p.get("state") == "ACTIVE" and rate < rate_gbps:
            problems.append(f"rate {rate:g} Gb/s of {rate_gbps:g}")
        counters = p.get("counters")
        if isinstance(counters, Mapping):
            named = {SYSFS_NAMES.get(str(k), str(k)): v for k, v in counters.items()}
            problems += over_threshold({k: v for k, v in named.items() if isinstance(v, int)})
        if not problems:
            continue
        cable = cables.at.get((f"{host} {device}", 1)) if number == 1 else None
        what = ", ".join(problems)
        if cable is None:
            unplaced.append(f"{host} {device} port {number}: {what}: not an HCA of the plan's fabric")
            continue
        evidence.append(PortEvidence(cable, f"{what} at {host} {device}"))
    return Placed(tuple(evidence), tuple(unplaced))


# -- a report of the fabric's counters: `podctl fabric counters` ------------------------------------


@dataclass(frozen=True)
class CounterReport:
    """What one counters file (ibqueryerrors, perfquery) says against the plan's cables."""

    source: str
    ports_read: int
    evidence: tuple[PortEvidence, ...]  # one per cable over a threshold, both ends' counters joined
    unplaced: tuple[str, ...]  # ports over a threshold that no planned cable is at, with why
    warnings: tuple[str, ...]  # lines of the file skipped

    @property
    def ok(self) -> bool:
        return not self.evidence and not self.unplaced

    def cables(self, hca_names: HcaNames | None = None) -> list[dict[str, object]]:
        """Each cable with evidence: both ends as `fabric check` names them (the switch end first),
        and for a node's cable its node and rail."""
        rows: list[dict[str, object]] = []
        for item in self.evidence:
            cable = item.cable
            lower = (
                f"{cable.lower.device} {hca_name(cable.lower.device, cable.lower.port, hca_names)}"
                if cable.tier == "node-leaf"
                else f"{cable.lower.device}[{cable.lower.port}]"
            )
            node = cable.lower.device if cable.tier == "node-leaf" else None
            rail = cable.lower.port if cable.tier == "node-leaf" else None
            upper = f"{cable.upper.device}[{cable.upper.port}]"
            rows.append(
                {"end_a": upper, "end_b": lower, "tier": cable.tier, "node": node, "rail": rail, "what": item.what}
            )
        return rows


def counter_report(
    plan: FabricPlan,
    counters: Counters,
    source: str,
    naming: Naming | None = None,
    hca_names: HcaNames | None = None,
    names_by_guid: Mapping[str, str] | None = None,
    names_by_lid: Mapping[int, str] | None = None,
) -> CounterReport:
    """The ports of `counters` over THRESHOLDS, on the plan's cables (see place_counters)."""
    placed = place_counters(plan, counters, naming, hca_names, names_by_guid, names_by_lid)
    return CounterReport(
        source, len(counters.ports), tuple(merged(placed.evidence)), placed.unplaced, counters.warnings
    )
