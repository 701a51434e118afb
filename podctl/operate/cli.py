"""`podctl nodes recheck` and `podctl status`: keeping a deployed pod certified."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from podctl.cliopts import load_site_and_key, private_key_option, report_option, site_argument
from podctl.core.console import make_console, styled


@click.group()
def nodes() -> None:
    """Return drained nodes to service."""


@nodes.command()
@site_argument
@click.argument("hostlist", metavar="HOSTLIST")
@click.option("--any-reason", is_flag=True, help="Also recheck nodes a person drained (a reason podctl did not write).")
@report_option("recheck")
@private_key_option
def recheck(site_file: Path, hostlist: str, any_reason: bool, report_dir: Path, private_key: Path | None) -> None:
    """Re-run the node suites on drained nodes of HOSTLIST; resume those that pass.

    Each node runs the health gate, then (inside a maintenance reservation that also holds
    idle known-good partners, so no user job lands) health, burn-in and collectives paired
    with the partners. Nodes that pass are resumed; the others stay drained with the new
    reason. Exit 0 when every node rechecked was resumed, 1 otherwise, 2 on a usage error.
    """
    from podctl.core.hostlist import HostlistError, expand
    from podctl.operate.recheck import recheck as run_recheck
    from podctl.validate.report import print_summary, report_folder

    try:
        hosts = expand(hostlist)
    except HostlistError as exc:
        raise click.BadParameter(str(exc), param_hint="HOSTLIST") from None
    site, key = load_site_and_key(site_file, private_key)
    report_folder(report_dir)  # a folder that cannot take the report stops the recheck before any node is touched
    console = make_console(stderr=True)
    result = run_recheck(site, hosts, key, any_reason, "quick", report_dir, lambda m: console.print(m))
    out = make_console()
    for host, why in sorted(result.skipped.items()):
        out.print(styled((f"{host}: ", "bold"), f"skipped: {why}"))
    if result.validation is not None:
        print_summary(out, result.validation.cert)
        click.echo(f"report: {result.validation.reports['html'].resolve()}")
    for host in sorted(result.resumed):
        out.print(styled((f"{host}: ", "bold"), ("resumed", "green")))
    for host, why in sorted(result.still_drained.items()):
        out.print(styled((f"{host}: ", "bold"), ("still drained", "red"), f": {why}"))
    for problem in result.problems:
        out.print(styled(("problem: ", "red"), problem))
    sys.exit(0 if not result.still_drained and not result.problems else 1)


@click.command()
@site_argument
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@private_key_option
def status(site_file: Path, as_json: bool, private_key: Path | None) -> None:
    """The pod at a glance: Slurm state and drain reason, last health result and last
    certification of each compute node, and the alerts firing in Prometheus."""
    from podctl.operate.status import age, iso_age, pod_status

    site, key = load_site_and_key(site_file, private_key)
    pod = pod_status(site, key)
    if as_json:
        click.echo(json.dumps(pod.to_dict(), indent=1, sort_keys=True))
        return
    console = make_console()
    table = Table(title=f"{site.name}: {len(pod.nodes)} compute node(s)", title_justify="left")
    for col in ("node", "slurm", "reason", "health", "certified"):
        table.add_column(col)
    for n in pod.nodes:
        slurm = n.slurm.state if n.slurm else "?"
        reason = n.slurm.reason if n.slurm and n.slurm.reason != "none" else ""
        if n.unreachable:
            health, cert = styled(("unreachable", "red")), n.unreachable[:60]
        else:
            h = n.health
            if h is None:
                health = "no record"
            else:
                mark = {"pass": ("pass", "green"), "fail": ("FAIL", "red")}.get(h.get("status"), ("error", "yellow"))
                detail = str((h.get("findings") or h.get("errors") or [""])[0])
                if h.get("refused"):  # root would have run code another user could write: an alert, no drain
                    mark, detail = ("REFUSED", "red"), f"{h['refused']}" + (f"; {detail}" if h.get("findings") else "")
                elif h.get("warnings") and not h.get("findings"):
                    detail = f"warning: {h['warnings'][0]}"
                health = styled(mark, f" {age(h.get('time'))}" + (f": {detail}" if detail else ""))
            c = n.certification
            if c is None:
                cert = "never"
            else:
                ok = ("yes", "green") if c.get("certified") else ("NO", "red")
                cert = styled(ok, f" {iso_age(c.get('time'))}, {c.get('report', '')}")
        table.add_row(n.host, slurm, reason, health, cert)
    console.print(table)
    firing = [a for a in pod.alerts if a["state"] == "firing"]
    pending = [a for a in pod.alerts if a["state"] != "firing"]
    console.print(styled(("alerts: ", "bold"), f"{len(firing)} firing, {len(pending)} pending"))
    for a in firing + pending:
        colour = "red" if a["state"] == "firing" else "yellow"
        console.print(styled((f"  {a['state']} ", colour), (a["alert"], "bold"), f" {a['instance']}: {a['summary']}"))
    for problem in pod.problems:
        console.print(styled(("could not read: ", "yellow"), problem))
