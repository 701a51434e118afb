"""`podctl validate`: measure, judge against the profile's references, report, verdict."""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..cliopts import full_drift_option, mitogen_option, vault_options
from ..console import make_console, styled
from ..errors import EXIT_ERRORS
from ..model import Site
from ..suggest import did_you_mean
from .figures import LOCAL_SUITES, SUITE_ALIASES, SUITES, suite_of
from .judge import Certification, CheckRun, effective_reference, judge
from .local import BURNIN_PROFILES, LocalCheck, ValidationError, default_python, plan_local, run_local, scratch_dir
from .report import write_report

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


@click.command()
@click.argument("site_file", metavar="[SITE]", required=False, type=click.Path(dir_okay=False, path_type=Path))
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
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for report.json, junit.xml and report.html (default ./reports/<time>-validate).",
)
@click.option("--python", "python", default=None, help="Python with torch that runs the checks (default: this one).")
@click.option("--gpus", type=int, default=None, help="Local ranks for nccl/smoke (default: the profile's GPUs).")
@click.option(
    "--private-key",
    "private_key",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="SSH key for root on the nodes (default for a sim pod: the key `podctl sim up` made).",
)
@click.option("--drain", is_flag=True, help="Drain every failing compute node in Slurm, with the reason.")
@click.option(
    "--ibnetdiscover",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="ibnetdiscover output of the compute fabric: check the cabling and add it to the report.",
)
@click.option(
    "--iblinkinfo",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="iblinkinfo output of the compute fabric: check link speed and width too.",
)
@click.option(
    "--ibqueryerrors",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="ibqueryerrors output of the compute fabric (counters cleared before the run): cables whose ports count "
    "errors fail, and fault localization names them even where no test crosses them.",
)
@click.option(
    "--lfts",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The subnet manager's forwarding tables (dump_lfts.sh, opensm-lfts.dump): fault localization follows "
    "the pod's real routes instead of podctl's model of them.",
)
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
@click.option(
    "--anchors",
    "anchors_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The HCAs' GUIDs ('HOST RAIL GUID' lines) for the cabling check; default: read on the nodes over SSH.",
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
    report_dir: Path | None,
    python: str | None,
    gpus: int | None,
    private_key: Path | None,
    drain: bool,
    ibnetdiscover: Path | None,
    iblinkinfo: Path | None,
    ibqueryerrors: Path | None,
    lfts: Path | None,
    nccl_tests: str | None,
    only: str | None,
    anchors_file: Path | None,
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
    if not local:
        if site_file is None:
            raise click.UsageError(
                "give the SITE file of a deployed pod, or certify this host with --local --profile NAME"
            )
        for name, value in (
            ("--profile", profile_name),
            ("--python", python),
            ("--gpus", gpus),
            ("--nccl-tests", nccl_tests),
        ):
            if value is not None:
                raise click.UsageError(
                    f"{name} is for --local; a site's nodes use their profiles and the validation-tools virtualenv"
                )
        validate_site(
            site_file,
            _suites(suites, SUITES),
            burnin,
            report_dir,
            private_key,
            drain,
            FabricDumps(ibnetdiscover, iblinkinfo, anchors_file, ibqueryerrors, lfts),
            _hostlist(only),
            vault=(vault_password_files, vault_ids),
            mitogen=not no_mitogen,
            full_drift=full_drift,
        )
        return
    chosen = _suites(suites, LOCAL_SUITES)
    if site_file is not None:
        raise click.UsageError("--local takes no SITE; name the host's hardware with --profile")
    for name, value in (
        ("--private-key", private_key),
        ("--vault-password-file", vault_password_files or None),
        ("--vault-id", vault_ids or None),
        ("--nodes", only),
        ("--ibnetdiscover", ibnetdiscover),
        ("--iblinkinfo", iblinkinfo),
        ("--ibqueryerrors", ibqueryerrors),
        ("--lfts", lfts),
        ("--anchors", anchors_file),
    ):
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
    started = datetime.now(UTC)
    report_dir = report_dir or Path("reports") / f"{started:%Y%m%dT%H%M%SZ}-validate"
    workdir = scratch_dir(report_dir)
    console = make_console(stderr=True)
    checks = plan_local(profile, chosen, burnin, gpus, nccl_tests)
    t0 = time.monotonic()

    def on_event(kind: str, check: LocalCheck, run: CheckRun | None, seconds: float) -> None:
        if kind == "start":
            console.print(styled((check.suite, "bold"), f" running ({' '.join(check.argv[:1])}) ..."))
        elif run is not None:
            style = {"pass": "green", "skip": "yellow"}.get(run.status, "red")
            console.print(styled(f"  {check.suite}: ", (run.status, style), f" in {seconds:.1f} s"))

    runs = run_local(checks, python or default_python(), workdir, on_event)
    host = socket.gethostname()
    rows = effective_reference(profile, {})
    wanted = {suite_of(r.figure) for r in rows}
    rows = [r for r in rows if suite_of(r.figure) in chosen]
    cert = judge(f"{host} ({profile.name})", {host: rows}, runs)
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "podctl": __version__,
        "suites": list(chosen),
        "profile": profile.name,
        "mode": "local",
        "burnin": burnin,
        "wall_s": round(time.monotonic() - t0, 1),
        "skipped_suites": sorted(s for s in wanted - set(chosen) if s),
    }
    paths = write_report(report_dir, cert, runs, meta)
    print_summary(make_console(), cert)
    click.echo(f"report: {paths['html'].resolve()}")
    sys.exit(0 if cert.certified else EXIT_NOT_CERTIFIED)


@dataclass(frozen=True)
class FabricDumps:
    """The fabric tools' output to check the cabling of, and the HCAs' GUIDs if given as a file."""

    ibnetdiscover: Path | None
    iblinkinfo: Path | None
    anchors: Path | None
    ibqueryerrors: Path | None = None
    lfts: Path | None = None


def _cabling(
    site: Site, dumps: FabricDumps, private_key: Path | None
) -> tuple[list[CheckRun], list[str], dict[str, str]]:
    """The cabling check's runs, anchored by the GUIDs the nodes report (or the file given); notes for
    the log; the planned name of each device of the ibnetdiscover dump (for ibqueryerrors' ports and
    the forwarding tables' switches and HCAs)."""
    if not (dumps.ibnetdiscover or dumps.iblinkinfo):
        return [], [], {}
    from ..ibfabric.identity import read_anchors
    from ..remote import site_nodes
    from .cabling import cabling_runs, names_by_guid, node_anchors_over_ssh

    if dumps.anchors is not None:
        anchors, notes = read_anchors(str(dumps.anchors)), []
    else:
        anchors, notes = node_anchors_over_ssh(site, site_nodes(site, private_key))
    runs = cabling_runs(site, dumps.ibnetdiscover, dumps.iblinkinfo, anchors)
    warnings = runs[0].envelope["details"].get("warnings", []) if runs else []
    names = names_by_guid(site, dumps.ibnetdiscover, anchors) if dumps.ibqueryerrors or dumps.lfts else {}
    return runs, notes + [f"cabling: {w}" for w in warnings], names


def _collects_fabric(site: Site, dumps: FabricDumps) -> bool:
    """Whether validate reads the fabric tools itself: on a sim pod whose emulated fabric has an SM
    host, when no tool output was given."""
    from ..facts import has_emulated_fabric
    from ..state import sim_pod

    given = (dumps.ibnetdiscover, dumps.iblinkinfo, dumps.ibqueryerrors, dumps.lfts)
    return all(g is None for g in given) and has_emulated_fabric(site) and sim_pod(site)


def _hostlist(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    from ..hostlist import HostlistError, expand

    try:
        hosts = expand(text)
    except HostlistError as exc:
        raise click.BadParameter(str(exc), param_hint="--nodes") from None
    if not hosts:
        raise click.BadParameter("names no node", param_hint="--nodes")
    return hosts


def validate_site(
    site_file: Path,
    chosen: tuple[str, ...],
    burnin: str,
    report_dir: Path | None,
    private_key: Path | None,
    drain: bool,
    dumps: FabricDumps,
    only: tuple[str, ...] = (),
    vault: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
    mitogen: bool = True,
    full_drift: bool = False,
) -> None:
    from ..remote import site_nodes
    from ..secrets import vault_env
    from ..site import load_site
    from ..state import private_key_for
    from .ledger import record_certifications
    from .pod import validate_pod

    site = load_site(site_file)
    private_key = private_key_for(site, private_key, f"podctl sim up {site_file} && podctl deploy {site_file}")
    opens_vault = vault_env(site, *vault, os.environ) if "conformance" in chosen else {}
    started = datetime.now(UTC)
    report_dir = report_dir or Path("reports") / f"{started:%Y%m%dT%H%M%SZ}-validate"
    workdir = scratch_dir(report_dir)
    console = make_console(stderr=True)
    t0 = time.monotonic()

    def progress(message: str) -> None:
        console.print(styled((f"{time.monotonic() - t0:6.1f}s", "dim"), f" {message}"))

    progress(f"validate {site.name}: suites {', '.join(chosen)}")
    collected = None
    if _collects_fabric(site, dumps):
        # A sim pod's fabric is ibsim's: its SM host runs the real tools against it, as a person
        # would on a pod, and their output is judged as the files given with the options.
        from .fabric_tools import collect

        collected = collect(site, site_nodes(site, private_key), workdir / "fabric", progress)
        files = collected.files
        dumps = FabricDumps(files["ibnetdiscover"], files["iblinkinfo"], dumps.anchors, files["ibqueryerrors"],
                            files["lfts"])  # fmt: skip
    extra, notes, guid_names = _cabling(site, dumps, private_key)
    forwarding = None
    if collected is not None and dumps.lfts is not None:
        from .cabling import routes_run

        run, forwarding, route_notes = routes_run(site, dumps.lfts, guid_names)
        extra.append(run)
        notes += route_notes
    elif dumps.lfts is not None:
        from .cabling import subnet_manager_routes

        forwarding, route_notes = subnet_manager_routes(site, dumps.lfts, guid_names)
        notes += route_notes
    elif "compute" in site.fabrics:
        notes.append(
            "routes: podctl's model of ftree, not the subnet manager's (no --lfts): OpenSM numbers "
            "destinations otherwise (a fifth of the entries differ at 4 SUs), so a failing test may "
            "accuse the wrong cable; give --lfts (dump_lfts.sh > FILE) for localization to follow its tables"
        )
    for note in notes:
        progress(note)
    result = validate_pod(
        site,
        chosen,
        burnin,
        workdir,
        private_key,
        drain,
        extra,
        progress,
        only,
        ibqueryerrors=dumps.ibqueryerrors,
        names_by_guid=guid_names,
        forwarding=forwarding,
        vault_env=opens_vault,
        mitogen=mitogen,
        full_drift=full_drift,
    )
    meta = {**result.meta, "podctl": __version__}
    if collected is not None:
        meta["fabric_tools"] = {
            "host": collected.host,
            "emulated": True,
            "files": {name: str(path) for name, path in collected.files.items()},
            "seconds": collected.seconds,
        }
    paths = write_report(report_dir, result.cert, result.runs, meta)
    # Each node keeps its own last certification (podctl status reads it there).
    hosts = result.meta["hosts"]
    for host, why in sorted(
        record_certifications(
            site_nodes(site, private_key), result.cert, hosts, paths["html"].resolve(), chosen, __version__
        ).items()
    ):
        if why:
            progress(f"could not record the certification on {host}: {why}")
    print_summary(make_console(), result.cert)
    for host, why in sorted(result.drained.items()):
        click.echo(f"drained {host} in Slurm" if why is None else f"could not drain {host}: {why}")
    click.echo(f"report: {paths['html'].resolve()}")
    sys.exit(0 if result.cert.certified else EXIT_NOT_CERTIFIED)


def print_summary(console: Console, cert: Certification) -> None:
    table = Table(title="Figures", title_justify="left")
    for col in ("node", "device", "figure", "value", "bound", "result"):
        table.add_column(col)
    for v in sorted(cert.verdicts, key=lambda v: (v.passed, v.node, v.figure, v.device or "")):
        value = "missing" if v.value is None else f"{v.value:.4g} {v.unit}"
        table.add_row(
            v.node,
            v.device or "",
            v.figure if v.measured_by == "podctl" else f"{v.figure} ({v.measured_by})",
            value,
            f"{v.bound:.4g}",
            styled(("pass", "green")) if v.passed else styled(("FAIL", "red")),
        )
    console.print(table)
    if cert.certified:
        console.print(styled(("CERTIFIED", "bold green"), f": {cert.subject}, {len(cert.nodes)} node(s)"))
    else:
        console.print(styled(("NOT CERTIFIED", "bold red"), f": {cert.subject}"))
        for node, reasons in sorted(cert.failures.items()):
            for reason in reasons:
                console.print(f"  {node}: {reason}")


__all__ = ["validate", "EXIT_ERRORS"]
