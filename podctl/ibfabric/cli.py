"""`podctl fabric ...`: checks of the physical fabric against the site's plan.

    podctl fabric check SITE --ibnetdiscover FILE [--iblinkinfo FILE] [--fabric compute] [-o json]
    podctl fabric topology SITE --format ibnetdiscover|iblinkinfo|lfts [--fabric compute]
    podctl fabric routes SITE --lfts FILE [--ibnetdiscover FILE] [--anchors FILE] [--fabric compute] [-o json]
    podctl fabric counters SITE --ibqueryerrors FILE | --perfquery FILE [--ibnetdiscover FILE] [--anchors FILE]
                           [--fabric compute] [-o json]
    podctl fabric schedule SITE [--fabric compute] [-o json]

Exit codes: 0 the cabling (routes, counters) match the plan; 1 they do not (for
counters: a port counts past a threshold); 2 usage or configuration errors (bad
site file, unreadable or unparsable tool output).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from podctl.cliopts import site_argument
from podctl.core.errors import EXIT_OK, EXIT_WARNINGS
from podctl.ibfabric.check import FabricCheckError

if TYPE_CHECKING:
    from podctl.core.model import Fabric, HcaNames
    from podctl.derive.topology import FabricPlan


def _plan(site_file: Path, fabric_name: str):
    """(fabric, its plan, its nodes' HCA names) of the site in `site_file`."""
    from podctl.derive.facts import hca_names
    from podctl.derive.site import load_site
    from podctl.derive.topology import plan_fabric

    site = load_site(site_file)
    fabric = site.fabrics.get(fabric_name)
    if fabric is None:
        known = ", ".join(sorted(site.fabrics)) or "none"
        raise FabricCheckError(f"{site_file}: no fabric {fabric_name!r} (fabrics declared: {known}); pass --fabric")
    return fabric, plan_fabric(fabric), hca_names(site, fabric_name)


# The options every fabric command shares (SITE is cliopts.site_argument, as for every command).
_fabric_option = click.option(
    "--fabric", "fabric_name", default="compute", show_default=True, help="Which declared fabric."
)
_output_option = click.option(
    "--output", "-o", "output", type=click.Choice(["text", "json"]), default="text", show_default=True
)


def _identify_options(what: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """--ibnetdiscover and --anchors: the devices of the fabric's dump, named whatever they are called."""

    def add(command: Callable[..., None]) -> Callable[..., None]:
        command = click.option(
            "--anchors",
            "anchors_file",
            type=click.Path(dir_okay=False, path_type=Path),
            help="The HCAs' GUIDs, one 'HOST RAIL GUID' line each, for identifying the ibnetdiscover dump.",
        )(command)
        return click.option(
            "--ibnetdiscover",
            "ibnetdiscover_file",
            type=click.Path(dir_okay=False, path_type=Path),
            help=f"ibnetdiscover output of the same fabric: its {what} whatever they are called.",
        )(command)

    return add


def _identified(
    fab: Fabric, plan: FabricPlan, names: HcaNames, ibnetdiscover_file: Path | None, anchors_file: Path | None
) -> tuple[dict[str, str], dict[int, str]]:
    """(port and node GUID -> planned name, LID -> name) of the fabric's ibnetdiscover dump; empty without one."""
    from podctl.ibfabric.check import check_sources
    from podctl.ibfabric.identity import read_anchors

    if anchors_file is not None and ibnetdiscover_file is None:
        raise FabricCheckError("--anchors identifies the devices of an ibnetdiscover dump: give --ibnetdiscover too")
    if ibnetdiscover_file is None:
        return {}, {}
    anchors = read_anchors(str(anchors_file)) if anchors_file else None
    report = check_sources(fab, plan, names, [(str(ibnetdiscover_file), "ibnetdiscover")], anchors)[0]
    return dict(report.names), dict(report.lids)


@click.group("fabric")
def fabric() -> None:
    """Check the physical fabric against the cable map podctl derived."""


@fabric.command("check")
@site_argument
@click.option(
    "--ibnetdiscover",
    "ibnetdiscover_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Output of `ibnetdiscover` (a topology file).",
)
@click.option(
    "--iblinkinfo", "iblinkinfo_file", type=click.Path(dir_okay=False, path_type=Path), help="Output of `iblinkinfo`."
)
@click.option(
    "--anchors",
    "anchors_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HCAs' GUIDs, one 'HOST RAIL GUID' line each: HCAs are then known by GUID, whatever they are called.",
)
@_fabric_option
@_output_option
def check(
    site_file: Path,
    ibnetdiscover_file: Path | None,
    iblinkinfo_file: Path | None,
    anchors_file: Path | None,
    fabric_name: str,
    output: str,
) -> None:
    """Compare ibnetdiscover / iblinkinfo output with the planned cables: one line per cable."""
    from podctl.ibfabric.check import check_sources
    from podctl.ibfabric.identity import read_anchors

    sources = [
        (str(p), fmt) for p, fmt in ((ibnetdiscover_file, "ibnetdiscover"), (iblinkinfo_file, "iblinkinfo")) if p
    ]
    if not sources:
        raise FabricCheckError("give the tools' output: --ibnetdiscover FILE and/or --iblinkinfo FILE")
    fab, plan, names = _plan(site_file, fabric_name)
    anchors = read_anchors(str(anchors_file)) if anchors_file else None
    reports = check_sources(fab, plan, names, sources, anchors)
    if output == "json":
        click.echo(
            json.dumps(
                {"site": str(site_file), "ok": all(r.ok for r in reports), "reports": [r.as_dict() for r in reports]},
                indent=2,
            )
        )
    else:
        for report in reports:
            for finding in report.findings:
                click.echo(finding.render())
            for warning in report.warnings:
                click.echo(f"warning: {warning}", err=True)
            summary = ", ".join(f"{n} {kind}" for kind, n in report.counts().items()) or "matches the plan"
            click.echo(
                f"{report.source}: fabric {report.fabric!r}: {report.cables_planned} cables planned, "
                f"{report.links_found} links found; {summary}"
            )
    sys.exit(EXIT_OK if all(r.ok for r in reports) else EXIT_WARNINGS)


@fabric.command("topology")
@site_argument
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["ibnetdiscover", "iblinkinfo", "lfts"]),
    default="ibnetdiscover",
    show_default=True,
    help="lfts: every switch's forwarding table in dump_lfts.sh's format, routed by podctl's ftree model (each "
    "switch's entries for the nodes of its rails).",
)
@_fabric_option
def topology(site_file: Path, fmt: str, fabric_name: str) -> None:
    """Print what the tool would show for a pod cabled exactly as planned."""
    from podctl.ibfabric.formats import topology_from_plan, write_iblinkinfo, write_ibnetdiscover
    from podctl.ibfabric.lft import write_lfts
    from podctl.localize.routing import Router

    fab, plan, names = _plan(site_file, fabric_name)
    topo = topology_from_plan(plan, fab.rate, names)
    if fmt == "lfts":
        click.echo(write_lfts(topo, Router(plan).tables(), plan, names), nl=False)
        return
    click.echo(write_ibnetdiscover(topo) if fmt == "ibnetdiscover" else write_iblinkinfo(topo), nl=False)


@fabric.command("routes")
@site_argument
@click.option(
    "--lfts",
    "lfts_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The subnet manager's unicast forwarding tables: `dump_lfts.sh` output, OpenSM's opensm-lfts.dump, "
    "or `ibroute` of each switch, concatenated.",
)
@_identify_options("GUIDs place switches and HCAs")
@_fabric_option
@_output_option
def routes(
    site_file: Path,
    lfts_file: Path,
    ibnetdiscover_file: Path | None,
    anchors_file: Path | None,
    fabric_name: str,
    output: str,
) -> None:
    """Follow the subnet manager's routes on the plan: every leaf to every node of its rail.

    Says which switch cables no route crosses (only their port counters can speak for them), how
    evenly the tables spread routes over each tier's up-ports, and fails on a loop, a port the
    plan has no cable at, or a route to an HCA that turns up after coming down (a credit-loop
    risk). Everything is read on the tables; podctl's model stands in only for a switch the dump
    has no table (or entry) for, and the output says where."""
    from podctl.ibfabric.balance import route_balance
    from podctl.ibfabric.identity import naming_from_templates
    from podctl.ibfabric.lft import routes_from_dump

    fab, plan, names = _plan(site_file, fabric_name)
    guid_names, lid_names = _identified(fab, plan, names, ibnetdiscover_file, anchors_file)
    naming = naming_from_templates(fab.naming_switch, fab.naming_hca)
    lfts, result = routes_from_dump(plan, str(lfts_file), names, naming, guid_names, names_by_lid=lid_names)
    balance = route_balance(plan, lfts, result.placed.tables)
    source = {
        "tables": str(lfts_file),
        "switches_with_table": len(result.placed.forwarding),
        "switches": len(plan.switches),
        "modelled_switches": len(result.modelled),
    }
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "site": str(site_file),
                    "lfts": str(lfts_file),
                    "routes_source": source,
                    **result.as_dict(),
                    "balance": balance.as_dict(),
                },
                indent=2,
            )
        )
    else:
        for warning in lfts.warnings:
            click.echo(f"warning: {warning}", err=True)
        for line in result.placed.unplaced:
            click.echo(f"not placed: {line}")
        for missing in result.placed.missing_top:
            click.echo(f"not dumped: {missing.render()}")
        for problem in result.problems:
            click.echo(f"route: {problem}")
        if result.problem_count > len(result.problems):
            click.echo(f"route: ... and {result.problem_count - len(result.problems)} more")
        if result.modelled:
            click.echo(
                f"{len(result.modelled)} switch(es) a route crosses have no table (or entry) in the dump; routed by "
                f"the model there: {', '.join(result.modelled[:5])}{' ...' if len(result.modelled) > 5 else ''}"
            )
        click.echo(f"{lfts_file}: {result.placed.summary()}; {result.differ} entries differ from podctl's model")
        click.echo(
            f"routes followed on the subnet manager's tables for {len(result.placed.forwarding)} of "
            f"{len(plan.switches)} switches"
            + (f", on podctl's model for {len(result.modelled)}" if result.modelled else "; none on podctl's model")
        )
        for tier, (n, total) in result.uncrossed.items():
            click.echo(
                f"{tier}: {total - n} of {total} cables carry routed traffic"
                + (f"; {n} carry none (only their port counters can speak for them)" if n else "")
            )
        for line in balance.lines():
            click.echo(line)
    sys.exit(EXIT_OK if not result.problem_count and not balance.credit_loop_risk else EXIT_WARNINGS)


@fabric.command("counters")
@site_argument
@click.option(
    "--ibqueryerrors",
    "ibqueryerrors_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Output of `ibqueryerrors` (with --skip-sl where no SM answers).",
)
@click.option(
    "--perfquery",
    "perfquery_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Output of `perfquery LID PORT` (and -x, -E), one run or many concatenated; its ports are named by "
    "LID: give --ibnetdiscover.",
)
@_identify_options("GUIDs and LIDs name the devices")
@_fabric_option
@_output_option
def counters(
    site_file: Path,
    ibqueryerrors_file: Path | None,
    perfquery_file: Path | None,
    ibnetdiscover_file: Path | None,
    anchors_file: Path | None,
    fabric_name: str,
    output: str,
) -> None:
    """Say which cable each port counter over its threshold is on: switch and port, node and rail.

    The thresholds are validate's (a link that went down counts at 1, symbol errors, link
    recoveries and receive errors past 10); clear the counters before the run they judge."""
    from podctl.ibfabric.counters import read_ibqueryerrors, read_perfquery
    from podctl.ibfabric.evidence import THRESHOLDS, counter_report
    from podctl.ibfabric.identity import naming_from_templates

    if ibqueryerrors_file is None and perfquery_file is None:
        raise FabricCheckError("give the tools' output: --ibqueryerrors FILE and/or --perfquery FILE")
    fab, plan, names = _plan(site_file, fabric_name)
    by_guid, by_lid = _identified(fab, plan, names, ibnetdiscover_file, anchors_file)
    naming = naming_from_templates(fab.naming_switch, fab.naming_hca)
    sources = [
        (str(path), read(str(path)))
        for path, read in ((ibqueryerrors_file, read_ibqueryerrors), (perfquery_file, read_perfquery))
        if path is not None
    ]
    reports = [counter_report(plan, found, path, naming, names, by_guid, by_lid) for path, found in sources]
    thresholds = ", ".join(f"{name} > {limit}" for name, limit in THRESHOLDS.items())
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "site": str(site_file),
                    "ok": all(r.ok for r in reports),
                    "thresholds": dict(THRESHOLDS),
                    "reports": [
                        {
                            "source": r.source,
                            "ok": r.ok,
                            "ports_read": r.ports_read,
                            "cables": r.cables(names),
                            "unplaced": list(r.unplaced),
                            "warnings": list(r.warnings),
                        }
                        for r in reports
                    ],
                },
                indent=2,
            )
        )
    else:
        for report in reports:
            for row in report.cables(names):
                where = f" (node {row['node']}, rail {row['rail']})" if row["node"] else ""
                click.echo(f"COUNTERS  {row['end_a']} <-> {row['end_b']}{where}: {row['what']}")
            for line in report.unplaced:
                click.echo(f"UNPLACED  {line}")
            for warning in report.warnings:
                click.echo(f"warning: {warning}", err=True)
            verdict = (
                f"{len(report.evidence)} cable(s) and {len(report.unplaced)} other port(s) past a threshold"
                if not report.ok
                else "no port past a threshold"
            )
            click.echo(f"{report.source}: fabric {fab.name!r}: {report.ports_read} port record(s) read; {verdict}")
        click.echo(f"thresholds: {thresholds}")
    sys.exit(EXIT_OK if all(r.ok for r in reports) else EXIT_WARNINGS)


@fabric.command("schedule")
@site_argument
@_fabric_option
@_output_option
def schedule(site_file: Path, fabric_name: str, output: str) -> None:
    """Print the rounds of fabric tests: all nodes, SU groups, per-rail leaves, pairwise matchings."""
    from podctl.localize.schedule import plan_rounds

    _, plan, _ = _plan(site_file, fabric_name)
    rounds = plan_rounds(plan)
    if output == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "name": r.name,
                        "tests": [{"nodes": list(t.nodes), "rail": t.rail, "per_rail": t.per_rail} for t in r.tests],
                    }
                    for r in rounds
                ],
                indent=2,
            )
        )
        return
    for r in rounds:
        nodes = sum(len(t.nodes) for t in r.tests)
        sizes = sorted({len(t.nodes) for t in r.tests})
        click.echo(f"{r.name:<20} {len(r.tests):>5} tests of {'/'.join(map(str, sizes))} nodes, {nodes} nodes in all")
