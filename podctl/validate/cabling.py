"""The cabling check as certification results: one CheckRun per element at fault.

`podctl validate` hands the fabric tools' output (`--ibnetdiscover`,
`--iblinkinfo`) to `cabling_runs`, and the runs join the others in the judge
and the report. Each finding goes to what a technician would go and fix:

- a node-leaf cable (missing, on the wrong port or switch, at the wrong rate)
  to its compute node, scope "node", so that the node fails certification;
- the node's cable on an HCA the plan does not use (a device "<host> <hca>"
  the plan does not know) to that node as well;
- a switch-switch cable to its lower switch (the leaf of a leaf-spine cable),
  and a cable to an unknown device to the switch it is plugged into, scope
  "fabric": those fail the certification under the switch's name.

When the fabric matches the plan, one passing run (scope and node "fabric")
says how many cables were checked. The compute fabric is the one checked:
that is where the tools' output comes from on a pod.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Site
from podctl.derive.facts import cached_plan, hca_names
from podctl.derive.topology import SWITCH_TIERS, FabricPlan
from podctl.ibfabric.check import CableFinding, CablingReport, FabricCheckError, check_sources, planned_ends
from podctl.ibfabric.identity import Anchors, node_anchors, parse_guid
from podctl.localize.routing import Forwarding
from podctl.runtime.remote import Nodes
from podctl.validate.envelope import envelope, finding
from podctl.validate.judge import CheckRun

FABRIC = "compute"
_PORT_END = re.compile(r"^(.*)\[(\d+)\]$")


# Each HCA's port GUID, as sysfs shows it on the node: `<device> <GID 0 of port 1>` per line.
READ_GUIDS = (
    "cd /sys/class/infiniband 2>/dev/null && for d in *; do "
    'printf "%s %s\\n" "$d" "$(cat "$d/ports/1/gids/0" 2>/dev/null)"; done'
)


def parse_node_guids(text: str) -> dict[str, int]:
    """`<device> <gid>` lines (READ_GUIDS's output) as {device: port GUID}; lines that say nothing are skipped."""
    guids: dict[str, int] = {}
    for line in text.splitlines()[:256]:
        fields = line.split()
        if len(fields) == 2 and (guid := parse_guid(fields[1])):
            guids[fields[0]] = guid
    return guids


def node_anchors_over_ssh(site: Site, nodes: Nodes) -> tuple[Anchors, list[str]]:
    """The GUID of every HCA of the compute fabric's nodes, read on the nodes; and notes on what was not found."""
    fabric = site.fabrics.get(FABRIC)
    if fabric is None:
        return {}, []
    names = hca_names(site, FABRIC)
    results = nodes.run_each({host: READ_GUIDS for host in fabric.nodes}, timeout_s=30)
    anchors: Anchors = {}
    silent = []
    for host in fabric.nodes:
        result = results[host]
        found = node_anchors(host, names[host], parse_node_guids(result.stdout)) if not result.error else {}
        anchors.update(found)
        if not found:
            silent.append(host)
    notes = []
    if silent:
        notes.append(
            f"no HCA GUID read on {fold_hostlist(silent)} (no /sys/class/infiniband there, or unreachable): their "
            "HCAs are known by description and by where they land"
        )
    return anchors, notes


def cabling_runs(
    site: Site, ibnetdiscover: Path | None, iblinkinfo: Path | None, anchors: Anchors | None = None
) -> list[CheckRun]:
    """The cabling check of the site's compute fabric against the tools' output, as CheckRuns.

    No files, no runs. A file that cannot be read or parsed raises CablingError
    (a PodctlError) naming the file and line. `anchors` (host, rail -> GUID)
    identify HCAs by GUID whatever their descriptions say.
    """
    sources = [
        (str(path), fmt)
        for path, fmt in ((ibnetdiscover, "ibnetdiscover"), (iblinkinfo, "iblinkinfo"))
        if path is not None
    ]
    if not sources:
        return []
    fabric = site.fabrics.get(FABRIC)
    if fabric is None:
        known = ", ".join(sorted(site.fabrics)) or "none"
        raise FabricCheckError(
            f"{site.source}: no {FABRIC!r} fabric to check the cabling of "
            f"(fabrics declared: {known}); leave out --ibnetdiscover/--iblinkinfo"
        )
    started = time.monotonic()
    plan = cached_plan(fabric)
    names = hca_names(site, FABRIC)
    reports = check_sources(fabric, plan, names, sources, anchors)
    summary: dict[str, Any] = {
        "fabric": plan.fabric,
        "sources": [r.source for r in reports],
        "cables_planned": len(plan.cables),
        "links_found": {r.source: r.links_found for r in reports},
        "warnings": [w for r in reports for w in r.warnings],
        "anchored_hcas": len(anchors or {}),
    }
    elements = _by_element(plan, names, reports)
    # Each run gets its share of the check's time, so that the report's times add up.
    share = round((time.monotonic() - started) / max(len(elements), 1), 3)
    if not elements:
        found = ", ".join(f"{n} in {source}" for source, n in summary["links_found"].items())
        message = f"fabric {plan.fabric!r}: {len(plan.cables)} cables planned, links found: {found}; matches the plan"
        return [_run("fabric", "fabric", {**summary, "cables": []}, share, message)]
    return [_run(scope, node, {**summary, "cables": cables}, share) for (scope, node), cables in elements.items()]


def _by_element(
    plan: FabricPlan, names: dict[str, tuple[str, ...]], reports: list[CablingReport]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(scope, node) -> one row per cable at fault there; a cable both tools show wrong is one row."""
    host_of: dict[str, str] = {}  # a planned HCA end as the findings print it -> its host
    for cable in plan.cables_in("node-leaf"):
        _, lower = planned_ends(cable, names)
        host_of[str(lower)] = cable.lower.device
    level = {s.name: (SWITCH_TIERS.index(s.tier), s.name) for s in plan.switches}
    hosts = set(names)
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    rows: dict[str, dict[str, Any]] = {}
    for report in reports:
        for cable_finding in report.findings:
            message = cable_finding.render(align=False)
            if message in rows:
                rows[message]["sources"].append(report.source)
                continue
            scope, node, device = _element(cable_finding, host_of, level, hosts)
            rows[message] = {
                **cable_finding.as_dict(),
                "problem": cable_finding.problem,
                "message": message,
                "device": device,
                "sources": [report.source],
            }
            out.setdefault((scope, node), []).append(rows[message])
    return out


def _element(
    finding: CableFinding, host_of: dict[str, str], level: dict[str, tuple[int, str]], hosts: set[str]
) -> tuple[str, str, str]:
    """(scope, node, device) of the element a finding is laid at."""
    if finding.kind == "unexpected-device":
        stranger = finding.found or finding.end_b
        owner = stranger.split(" ", 1)[0]
        if " " in stranger and owner in hosts:
            # A node of the fabric on an HCA the plan does not cable here: the node's cable is wrong.
            return "node", owner, stranger.split(" ", 1)[1]
        ends = [finding.end_a]
    elif finding.kind == "unexpected-link":
        ends = [finding.end_a, finding.end_b]
    else:
        ends = [finding.end_b]  # the planned lower end: the HCA, or the lower switch's up-port
    for end in ends:
        if end in host_of:
            return "node", host_of[end], end.split(" ", 1)[1]
    switches = [_device(end) for end in ends]
    lowest = min(switches, key=lambda name: level.get(name, (len(SWITCH_TIERS), name)))
    return "fabric", lowest, next(end for end in ends if _device(end) == lowest)


def _device(end: str) -> str:
    match = _PORT_END.match(end)
    return match.group(1) if match else end


def _run(scope: str, node: str, details: dict[str, Any], duration_s: float, passed: str | None = None) -> CheckRun:
    findings = (
        [finding(passed, "info")]
        if passed is not None
        else [finding(row["message"], device=row["device"]) for row in details["cables"]]
    )
    result = envelope(
        "cabling", node, "pass" if passed is not None else "fail", findings, details=details, duration_s=duration_s
    )
    return CheckRun(check="cabling", scope=scope, node=node, envelope=result)


def names_by_guid(site: Site, ibnetdiscover: Path | None, anchors: Anchors | None = None) -> dict[str, str]:
    """The planned name of each device an ibnetdiscover dump shows ("0x<guid>" -> name), as the
    cabling check identifies them: what places an ibqueryerrors report's ports on the plan
    when switches carry factory names."""
    fabric = site.fabrics.get(FABRIC)
    if ibnetdiscover is None or fabric is None:
        return {}
    reports = check_sources(
        fabric, cached_plan(fabric), hca_names(site, FABRIC), [(str(ibnetdiscover), "ibnetdiscover")], anchors
    )
    return dict(reports[0].names) if reports else {}


def _follow_routes(site: Site, lfts: Path, names: dict[str, str]):  # type: ignore[no-untyped-def]
    """(tables, RouteCheck) of `lfts` placed on the compute fabric's plan; FabricCheckError when the
    file cannot be read or placed at all."""
    from podctl.ibfabric.identity import naming_from_templates
    from podctl.ibfabric.lft import routes_from_dump
    from podctl.ibfabric.topofile import CablingError

    fabric = site.fabrics.get(FABRIC)
    if fabric is None:
        raise FabricCheckError("--lfts: the site declares no compute fabric to route")
    plan = cached_plan(fabric)
    try:
        naming = naming_from_templates(fabric.naming_switch, fabric.naming_hca)
        return routes_from_dump(plan, str(lfts), hca_names(site, FABRIC), naming, names, compare_model=False)
    except CablingError as exc:
        raise FabricCheckError(f"--lfts {lfts}: {exc}") from None


def _route_notes(lfts: Path, tables, result) -> list[str]:  # type: ignore[no-untyped-def]
    notes = [f"routes: {lfts}: {result.placed.summary()}; localization follows them"]
    notes += [f"routes: {w}" for w in tables.warnings[:5]] + [f"routes: {u}" for u in result.placed.unplaced[:5]]
    if result.modelled:
        notes.append(f"routes: no table for {len(result.modelled)} switch(es) a route crosses; modelled there")
    return notes


def subnet_manager_routes(site: Site, lfts: Path, names: dict[str, str]) -> tuple[Forwarding, list[str]]:
    """The forwarding tables of `--lfts FILE`, placed on the compute fabric's plan and followed from every
    leaf to every node; notes for the log. Tables that cannot be followed (a loop, a port without a
    planned cable, no table of the plan's switches) are a FabricCheckError: localizing on routes the
    pod does not have would accuse the wrong cables."""
    tables, result = _follow_routes(site, lfts, names)
    if result.problem_count:
        more = result.problem_count - len(result.problems)
        raise FabricCheckError(
            f"--lfts {lfts}: the subnet manager's routes cannot be followed on the plan "
            f"({result.problem_count} route(s)):\n  "
            + "\n  ".join(result.problems)
            + (f"\n  ... and {more} more" if more else "")
            + "\ncheck the cabling (podctl fabric check) and dump the tables again after the subnet manager sweeps"
        )
    return result.placed.forwarding, _route_notes(lfts, tables, result)


def routes_run(site: Site, lfts: Path, names: dict[str, str]) -> tuple[CheckRun, Forwarding | None, list[str]]:
    """The subnet manager's routes as a check of the certification (check `routes`, scope fabric):
    passing when every route of the tables can be followed on the plan, else failing with each route
    that cannot (a loop, a port with no planned cable, an HCA no table routes: its cable named), and
    no forwarding for localization, which then follows podctl's model. What a sim pod's validate
    collects itself is judged so; a file given with --lfts is refused instead (subnet_manager_routes)."""
    started = time.monotonic()
    tables, result = _follow_routes(site, lfts, names)
    duration = round(time.monotonic() - started, 3)
    details = {"source": str(lfts), **result.as_dict()}
    if result.problem_count:
        more = result.problem_count - len(result.problems)
        found = [finding(p) for p in result.problems]
        if more:
            found.append(finding(f"... and {more} more route(s) that cannot be followed", "warning"))
        run = CheckRun("routes", "fabric", "fabric", envelope("routes", "fabric", "fail", found, details=details,
                                                              duration_s=duration))  # fmt: skip
        return run, None, [f"routes: {lfts}: {result.problem_count} route(s) cannot be followed on the plan"]
    message = f"the subnet manager's tables ({lfts.name}): {result.placed.summary()}; every route followed"
    run = CheckRun(
        "routes", "fabric", "fabric",
        envelope("routes", "fabric", "pass", [finding(message, "info")], details=details, duration_s=duration),
    )  # fmt: skip
    return run, result.placed.forwarding, _route_notes(lfts, tables, result)
