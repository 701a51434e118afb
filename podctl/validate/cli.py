"""`podctl validate`: measure, judge against the profile's references, report, verdict."""

from __future__ import annotations

import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..errors import EXIT_ERRORS
from .figures import FIGURES
from .judge import Certification, CheckRun, effective_reference, judge
from .local import BURNIN_PROFILES, SUITES, LocalCheck, ValidationError, default_python, plan_local, run_local, scratch_dir
from .report import write_report

EXIT_NOT_CERTIFIED = 1


def _suites(value: tuple[str, ...]) -> tuple[str, ...]:
    chosen: list[str] = []
    for item in value or SUITES:
        for name in item.split(","):
            name = name.strip()
            if name not in SUITES:
                raise click.BadParameter(f"unknown suite {name!r}; known: {', '.join(SUITES)}", param_hint="--suite")
            if name not in chosen:
                chosen.append(name)
    return tuple(s for s in SUITES if s in chosen)


@click.command()
@click.argument("site_file", metavar="[SITE]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--local", "local", is_flag=True, help="Certify this host alone, without a site or Slurm.")
@click.option("--profile", "profile_name", help="Hardware profile of this host (with --local).")
@click.option("--suite", "suites", multiple=True, help=f"Suites to run, comma-separated (default all: {','.join(SUITES)}).")
@click.option("--burnin", "burnin", type=click.Choice(BURNIN_PROFILES), default="quick", show_default=True,
              help="quick: minutes; long: hours of GEMM stress.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for report.json, junit.xml and report.html (default ./reports/<time>-validate).")
@click.option("--python", "python", default=None, help="Python with torch that runs the checks (default: this one).")
@click.option("--gpus", type=int, default=None, help="Local ranks for nccl/smoke (default: the profile's GPUs).")
def validate(site_file: Path | None, local: bool, profile_name: str | None, suites: tuple[str, ...], burnin: str,
             report_dir: Path | None, python: str | None, gpus: int | None) -> None:
    """Run the validation suites, judge them, and write the certification report.

    Exit 0 certified, 1 not certified, 2 usage or configuration error.
    """
    chosen = _suites(suites)
    if not local:
        raise ValidationError("validation across a site (SSH and Slurm) is not available yet; "
                              "certify one host with `podctl validate --local --profile NAME`")
    if site_file is not None:
        raise click.UsageError("--local takes no SITE; name the host's hardware with --profile")
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


# The suite whose run produces each figure; rows of suites not selected are not judged.
CHECK_SUITES = {"health": "health", "burnin": "burnin", "collectives": "nccl", "smoke": "smoke"}
FIGURE_SUITES = {name: CHECK_SUITES[fig.check] for name, fig in FIGURES.items()}


def print_summary(console: Console, cert: Certification) -> None:
    table = Table(title="Figures", title_justify="left")
    for col in ("node", "device", "figure", "value", "bound", "result"):
        table.add_column(col)
    for v in sorted(cert.verdicts, key=lambda v: (v.passed, v.node, v.figure, v.device or "")):
        value = "missing" if v.value is None else f"{v.value:.4g} {v.unit}"
        table.add_row(v.node, v.device or "", v.figure, value, f"{v.bound:.4g}",
                      "[green]pass[/green]" if v.passed else "[red]FAIL[/red]")
    console.print(table)
    if cert.certified:
        console.print(f"[bold green]CERTIFIED[/bold green]: {cert.subject}, {len(cert.nodes)} node(s)")
    else:
        console.print(f"[bold red]NOT CERTIFIED[/bold red]: {cert.subject}")
        for node, reasons in sorted(cert.failures.items()):
            for reason in reasons:
                console.print(f"  {node}: {reason}")


__all__ = ["validate", "EXIT_ERRORS"]
