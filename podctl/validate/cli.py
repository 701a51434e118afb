"""`podctl validate`: measure, judge against the profile's references, report, verdict."""

from __future__ import annotations

import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import __version__
from ..errors import EXIT_ERRORS
from ..suggest import did_you_mean
from .figures import CHECK_SUITES, FIGURES
from .figures import SITE_SUITES as POD_SUITES
from .judge import Certification, CheckRun, effective_reference, judge
from .local import BURNIN_PROFILES, SUITES, LocalCheck, ValidationError, default_python, plan_local, run_local, scratch_dir
from .report import write_report

EXIT_NOT_CERTIFIED = 1


def _suites(value: tuple[str, ...], known: tuple[str, ...]) -> tuple[str, ...]:
    chosen: list[str] = []
    for item in value or known:
        for name in item.split(","):
            name = name.strip()
            if name not in known:
                hint = did_you_mean(name, known)
                raise click.BadParameter(f"unknown suite {name!r}{f' ({hint})' if hint else ''}; "
                                         f"known: {', '.join(known)}", param_hint="--suite")
            if name not in chosen:
                chosen.append(name)
    return tuple(s for s in known if s in chosen)


@click.command()
@click.argument("site_file", metavar="[SITE]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--local", "local", is_flag=True, help="Certify this host alone, without a site or Slurm.")
@click.option("--profile", "profile_name", help="Hardware profile of this host (with --local).")
@click.option("--suite", "suites", multiple=True,
              help=f"Suites to run, comma-separated (default all: {','.join(POD_SUITES)}; --local: {','.join(SUITES)}).")
@click.option("--burnin", "burnin", type=click.Choice(BURNIN_PROFILES), default="quick", show_default=True,
              help="quick: minutes; long: hours of GEMM stress.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for report.json, junit.xml and report.html (default ./reports/<time>-validate).")
@click.option("--python", "python", default=None, help="Python with torch that runs the checks (default: this one).")
@click.option("--gpus", type=int, default=None, help="Local ranks for nccl/smoke (default: the profile's GPUs).")
@click.option("--private-key", "private_key", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="SSH key for root on the nodes (default for a sim pod: the key `podctl sim up` made).")
@click.option("--drain", is_flag=True, help="Drain every failing compute node in Slurm, with the reason.")
@click.option("--ibnetdiscover", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="ibnetdiscover output of the compute fabric: check the cabling and add it to the report.")
@click.option("--iblinkinfo", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="iblinkinfo output of the compute fabric: check link speed and width too.")
def validate(site_file: Path | None, local: bool, profile_name: str | None, suites: tuple[str, ...], burnin: str,
             report_dir: Path | None, python: str | None, gpus: int | None, private_key: Path | None, drain: bool,
             ibnetdiscover: Path | None, iblinkinfo: Path | None) -> None:
    """Run the validation suites, judge them, and write the certification report.

    `podctl validate SITE` certifies a deployed pod: conformance (testinfra),
    health, burnin and intra-node nccl on every node over SSH, then multi-node
    nccl (with fault localization) and the training smoke test through Slurm.
    `podctl validate --local --profile NAME` certifies this host alone.

    Exit 0 certified, 1 not certified, 2 usage or configuration error.
    """
    if not local:
        if site_file is None:
            raise click.UsageError("give the SITE file of a deployed pod, or certify this host with --local --profile NAME")
        for name, value in (("--profile", profile_name), ("--python", python), ("--gpus", gpus)):
            if value is not None:
                raise click.UsageError(f"{name} is for --local; a site's nodes use their profiles and the "
                                       "validation-tools virtualenv")
        validate_site(site_file, _suites(suites, POD_SUITES), burnin, report_dir, private_key, drain,
                      ibnetdiscover, iblinkinfo)
        return
    chosen = _suites(suites, SUITES)
    if site_file is not None:
        raise click.UsageError("--local takes no SITE; name the host's hardware with --profile")
    for name, value in (("--private-key", private_key), ("--ibnetdiscover", ibnetdiscover),
                        ("--iblinkinfo", iblinkinfo)):
        if value is not None:
            raise click.UsageError(f"{name} is for a site, not --local")
    if drain:
        raise click.UsageError("--drain is for a site, not --local")
    if not profile_name:
        raise click.UsageError("--local needs --profile (e.g. hgx-h200-2, dgx-h100, sim)")
    from ..site import builtin_profiles

    profiles = builtin_profiles()
    if profile_name not in profiles:
        raise ValidationError(f"unknown profile {profile_name!r}; built-in profiles: {', '.join(sorted(profiles))}")
    profile = profiles[profile_name]
    started = datetime.now(timezone.utc)
    report_dir = report_dir or Path("reports") / f"{started:%Y%m%dT%H%M%SZ}-validate"
    workdir = scratch_dir(report_dir)
    console = Console(stderr=True, highlight=False)
    checks = plan_local(profile, chosen, burnin, gpus)
    t0 = time.monotonic()

    def on_event(kind: str, check: LocalCheck, run: CheckRun | None, seconds: float) -> None:
        if kind == "start":
            console.print(f"[bold]{check.suite}[/bold] running ({' '.join(check.argv[:1])}) ...")
        elif run is not None:
            style = {"pass": "green", "skip": "yellow"}.get(run.status, "red")
            console.print(f"  {check.suite}: [{style}]{run.status}[/{style}] in {seconds:.1f} s")

    runs = run_local(checks, python or default_python(), workdir, on_event)
    host = socket.gethostname()
    rows = effective_reference(profile, {})
    wanted = {FIGURE_SUITES.get(r.figure) for r in rows}
    rows = [r for r in rows if FIGURE_SUITES.get(r.figure) in chosen or FIGURE_SUITES.get(r.figure) is None]
    cert = judge(f"{host} ({profile.name})", {host: rows}, runs)
    meta = {"started": started.isoformat(timespec="seconds"), "podctl": __version__, "suites": list(chosen),
            "profile": profile.name, "mode": "local", "burnin": burnin, "wall_s": round(time.monotonic() - t0, 1),
            "skipped_suites": sorted(s for s in wanted - set(chosen) if s)}
    paths = write_report(report_dir, cert, runs, meta)
    print_summary(Console(highlight=False), cert)
    click.echo(f"report: {paths['html'].resolve()}")
    sys.exit(0 if cert.certified else EXIT_NOT_CERTIFIED)


def validate_site(site_file: Path, chosen: tuple[str, ...], burnin: str, report_dir: Path | None,
                  private_key: Path | None, drain: bool, ibnetdiscover: Path | None, iblinkinfo: Path | None) -> None:
    from ..deploy.cli import site_private_key
    from ..site import load_site
    from .pod import validate_pod

    site = load_site(site_file)
    private_key = site_private_key(site, private_key, f"podctl sim up {site_file} && podctl deploy {site_file}")
    extra: list[CheckRun] = []
    if ibnetdiscover or iblinkinfo:
        from ..cabling.certify import cabling_runs

        extra = cabling_runs(site, ibnetdiscover, iblinkinfo)
    started = datetime.now(timezone.utc)
    report_dir = report_dir or Path("reports") / f"{started:%Y%m%dT%H%M%SZ}-validate"
    workdir = scratch_dir(report_dir)
    console = Console(stderr=True, highlight=False)
    t0 = time.monotonic()

    def progress(message: str) -> None:
        console.print(f"[dim]{time.monotonic() - t0:6.1f}s[/dim] {message}")

    progress(f"validate {site.name}: suites {', '.join(chosen)}")
    result = validate_pod(site, chosen, burnin, workdir, private_key, drain, extra, progress)
    meta = {**result.meta, "podctl": __version__}
    paths = write_report(report_dir, result.cert, result.runs, meta)
    print_summary(Console(highlight=False), result.cert)
    for host, why in sorted(result.drained.items()):
        click.echo(f"drained {host} in Slurm" if why is None else f"could not drain {host}: {why}")
    click.echo(f"report: {paths['html'].resolve()}")
    sys.exit(0 if result.cert.certified else EXIT_NOT_CERTIFIED)


FIGURE_SUITES = {name: CHECK_SUITES[fig.check] for name, fig in FIGURES.items()}


def print_summary(console: Console, cert: Certification) -> None:
    table = Table(title="Figures", title_justify="left")
    for col in ("node", "device", "figure", "value", "bound", "result"):
        table.add_column(col)
    for v in sorted(cert.verdicts, key=lambda v: (v.passed, v.node, v.figure, v.device or "")):
        value = "missing" if v.value is None else f"{v.value:.4g} {v.unit}"
        table.add_row(escape(v.node), escape(v.device or ""), v.figure, value, f"{v.bound:.4g}",
                      "[green]pass[/green]" if v.passed else "[red]FAIL[/red]")
    console.print(table)
    if cert.certified:
        console.print(f"[bold green]CERTIFIED[/bold green]: {cert.subject}, {len(cert.nodes)} node(s)")
    else:
        console.print(f"[bold red]NOT CERTIFIED[/bold red]: {cert.subject}")
        for node, reasons in sorted(cert.failures.items()):
            for reason in reasons:
                console.print(f"  {escape(node)}: {escape(reason)}")


__all__ = ["validate", "EXIT_ERRORS"]
