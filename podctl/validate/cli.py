"""`podctl validate`: parse the options into a request, certify (podctl.validate.certify for a site,
podctl.validate.local for this host), print the verdict and exit with it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import NoReturn

import click

from podctl.cliopts import (
    fabric_dumps_options,
    full_drift_option,
    load_site_and_key,
    mitogen_option,
    optional_site_argument,
    private_key_option,
    report_option,
    vault_options,
)
from podctl.core.console import make_console, styled
from podctl.core.suggest import did_you_mean
from podctl.validate.figures import LOCAL_SUITES, SUITE_ALIASES, SUITES
from podctl.validate.judge import CheckRun
from podctl.validate.local import BURNIN_PROFILES, LocalCheck
from podctl.validate.report import print_summary
from podctl.validate.request import LocalRequest

EXIT_NOT_CERTIFIED = 1


def _suites(value: tuple[str, ...], known: tuple[str, ...]) -> tuple[str, ...]:
    chosen: list[str] = []
    for item in value or known:
        for name in item.split(","):
            name = SUITE_ALIASES.get(name.strip(), name.strip())
            if name not in known:
                hint = did_you_mean(name, known)
                raise click.BadParameter(
                    f"unknown suite {name!r}{f' ({hint})' if hint else ''}; known: {', '.join(known)}",
                    param_hint="--suite",
                )
            if name not in chosen:
                chosen.append(name)
    return tuple(s for s in known if s in chosen)


def _hostlist(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    from podctl.core.hostlist import HostlistError, expand

    try:
        hosts = expand(text)
    except HostlistError as exc:
        raise click.BadParameter(str(exc), param_hint="--nodes") from None
    if not hosts:
        raise click.BadParameter("names no node", param_hint="--nodes")
    return hosts


def _refuse(given: dict[str, object], why: str) -> None:
    """A usage error naming the first option given (not None) that this kind of run does not take."""
    for name, value in given.items():
        if value is not None:
            raise click.UsageError(f"{name} {why}")


@click.command()
@optional_site_argument
@click.option("--local", "local", is_flag=True, help="Certify this host alone, without a site or Slurm.")
@click.option("--profile", "profile_name", help="Hardware profile of this host (with --local).")
@click.option(
    "--suite",
    "suites",
    multiple=True,
    help=f"Suites to run, comma-separated (default all: {','.join(SUITES)}; --local: {','.join(LOCAL_SUITES)}; "
    "nccl is the old name of collectives).",
)
@click.option(
    "--burnin",
    "burnin",
    type=click.Choice(BURNIN_PROFILES),
    default="quick",
    show_default=True,
    help="quick: minutes; long: hours of GEMM stress.",
)
@report_option("validate")
@click.option("--python", "python", default=None, help="Python with torch that runs the checks (default: this one).")
@click.option("--gpus", type=int, default=None, help="Local ranks for nccl/smoke (default: the profile's GPUs).")
@private_key_option
@click.option("--drain", is_flag=True, help="Drain every failing compute node in Slurm, with the reason.")
@fabric_dumps_options
@click.option(
    "--nccl-tests",
    "nccl_tests",
    type=click.Path(file_okay=False, exists=True),
    help="With --local: a folder with an nccl-tests build; all_reduce_perf runs beside podctl's collectives.",
)
@click.option(
    "--nodes",
    "only",
    metavar="HOSTLIST",
    help="Certify only these compute nodes (added or repaired), paired in multi-node jobs with known-good "
    "partners from the rest of the pod.",
)
@vault_options
@mitogen_option
@full_drift_option
def validate(
    site_file: Path | None,
    local: bool,
    profile_name: str | None,
    suites: tuple[str, ...],
    burnin: str,
    report_dir: Path,
    python: str | None,
    gpus: int | None,
    private_key: Path | None,
    drain: bool,
    ibnetdiscover: Path | None,
    iblinkinfo: Path | None,
    ibqueryerrors: Path | None,
    lfts: Path | None,
    anchors_file: Path | None,
    nccl_tests: str | None,
    only: str | None,
    vault_password_files: tuple[str, ...],
    vault_ids: tuple[str, ...],
    no_mitogen: bool,
    full_drift: bool,
) -> None:
    """Run the validation suites, judge them, and write the certification report.

    `podctl validate SITE` certifies a deployed pod: conformance (testinfra),
    health, burnin and intra-node nccl on every node over SSH, then multi-node
    nccl (with fault localization) and the training smoke test through Slurm.
    `podctl validate --local --profile NAME` certifies this host alone.

    Exit 0 certified, 1 not certified, 2 usage or configuration error.
    """
    if local:
        chosen = _suites(suites, LOCAL_SUITES)
        if site_file is not None:
            raise click.UsageError("--local takes no SITE; name the host's hardware with --profile")
        site_only = {
            "--private-key": private_key,
            "--vault-password-file": vault_password_files or None,
            "--vault-id": vault_ids or None,
            "--nodes": only,
            "--ibnetdiscover": ibnetdiscover,
            "--iblinkinfo": iblinkinfo,
            "--ibqueryerrors": ibqueryerrors,
            "--lfts": lfts,
            "--anchors": anchors_file,
            "--drain": drain or None,
        }
        _refuse(site_only, "is for a site, not --local")
        if not profile_name:
            raise click.UsageError("--local needs --profile (e.g. hgx-h200-2, dgx-h100, sim)")
        _certify_local(LocalRequest(profile_name, chosen, report_dir, burnin, python, gpus, nccl_tests))  # exits
    if site_file is None:
        raise click.UsageError("give the SITE file of a deployed pod, or certify this host with --local --profile NAME")
    local_only = {"--profile": profile_name, "--python": python, "--gpus": gpus, "--nccl-tests": nccl_tests}
    _refuse(local_only, "is for --local; a site's nodes use their profiles and the validation-tools virtualenv")
    chosen, hosts = _suites(suites, SUITES), _hostlist(only)
    # Reaching the nodes needs the deploy extra (paramiko): imported once the options are known good.
    from podctl.validate.certify import certify_site
    from podctl.validate.fabric_inputs import FabricDumps
    from podctl.validate.request import ValidateRequest

    site, key = load_site_and_key(site_file, private_key)
    request = ValidateRequest(
        site=site,
        private_key=key,
        suites=chosen,
        report_dir=report_dir,
        burnin=burnin,
        only=hosts,
        drain=drain,
        fabric=FabricDumps(ibnetdiscover, iblinkinfo, anchors_file, ibqueryerrors, lfts),
        vault_password_files=vault_password_files,
        vault_ids=vault_ids,
        mitogen=not no_mitogen,
        full_drift=full_drift,
    )
    console = make_console(stderr=True)
    t0 = time.monotonic()

    def progress(message: str) -> None:
        console.print(styled((f"{time.monotonic() - t0:6.1f}s", "dim"), f" {message}"))

    progress(f"validate {site.name}: suites {', '.join(chosen)}")
    result = certify_site(request, progress)
    for host, why in sorted(result.unrecorded.items()):
        progress(f"could not record the certification on {host}: {why}")
    print_summary(make_console(), result.cert)
    for host, why in sorted(result.drained.items()):
        click.echo(f"drained {host} in Slurm" if why is None else f"could not drain {host}: {why}")
    click.echo(f"report: {result.reports['html'].resolve()}")
    sys.exit(0 if result.cert.certified else EXIT_NOT_CERTIFIED)


def _certify_local(request: LocalRequest) -> NoReturn:
    from podctl.validate.local import certify_local

    console = make_console(stderr=True)

    def on_event(kind: str, check: LocalCheck, run: CheckRun | None, seconds: float) -> None:
        if kind == "start":
            console.print(styled((check.suite, "bold"), f" running ({' '.join(check.argv[:1])}) ..."))
        elif run is not None:
            style = {"pass": "green", "skip": "yellow"}.get(run.status, "red")
            console.print(styled(f"  {check.suite}: ", (run.status, style), f" in {seconds:.1f} s"))

    result = certify_local(request, on_event)
    print_summary(make_console(), result.cert)
    click.echo(f"report: {result.reports['html'].resolve()}")
    sys.exit(0 if result.cert.certified else EXIT_NOT_CERTIFIED)
