"""`podctl fabric ...`: checks of the physical fabric against the site's plan.

    podctl fabric check SITE --ibnetdiscover FILE [--iblinkinfo FILE] [--fabric compute] [-o json]
    podctl fabric topology SITE --format ibnetdiscover|iblinkinfo [--fabric compute]
    podctl fabric schedule SITE [--fabric compute] [-o json]

Exit codes: 0 the cabling matches the plan; 1 it does not; 2 usage or
configuration errors (bad site file, unreadable or unparsable tool output).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from podctl.errors import EXIT_OK, EXIT_WARNINGS

from .check import FabricCheckError


def _plan(site_file: Path, fabric_name: str):
    """(fabric, its plan, its nodes' HCA names) of the site in `site_file`."""
    from podctl.facts import hca_names
    from podctl.site import load_site
    from podctl.topology import plan_fabric

    site = load_site(site_file)
    fabric = site.fabrics.get(fabric_name)
    if fabric is None:
        known = ", ".join(sorted(site.fabrics)) or "none"
        raise FabricCheckError(f"{site_file}: no fabric {fabric_name!r} (fabrics declared: {known}); pass --fabric")
    return fabric, plan_fabric(fabric), hca_names(site, fabric_name)


@click.group("fabric")
def fabric() -> None:
    """Check the physical fabric against the cable map podctl derived."""


@fabric.command("check")
@click.argument("site_file", metavar="SITE", type=click.Path(dir_okay=False, path_type=Path))
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
@click.option("--fabric", "fabric_name", default="compute", show_default=True, help="Which declared fabric to check.")
@click.option("--output", "-o", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check(
    site_file: Path,
    ibnetdiscover_file: Path | None,
    iblinkinfo_file: Path | None,
    anchors_file: Path | None,
    fabric_name: str,
    output: str,
) -> None:
    """Compare ibnetdiscover / iblinkinfo output with the planned cables: one line per cable."""
    from .check import check_sources
    from .identity import read_anchors

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
@click.argument("site_file", metavar="SITE", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["ibnetdiscover", "iblinkinfo"]), default="ibnetdiscover", show_default=True
)
@click.option("--fabric", "fabric_name", default="compute", show_default=True)
def topology(site_file: Path, fmt: str, fabric_name: str) -> None:
    """Print what the tool would show for a pod cabled exactly as planned."""
    from .formats import topology_from_plan, write_iblinkinfo, write_ibnetdiscover

    fab, plan, names = _plan(site_file, fabric_name)
    topo = topology_from_plan(plan, fab.rate, names)
    click.echo(write_ibnetdiscover(topo) if fmt == "ibnetdiscover" else write_iblinkinfo(topo), nl=False)


@fabric.command("schedule")
@click.argument("site_file", metavar="SITE", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--fabric", "fabric_name", default="compute", show_default=True)
@click.option("--output", "-o", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
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
