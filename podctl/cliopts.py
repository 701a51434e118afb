"""What more than one command shares: its options and arguments, declared once, and the one way
every command reports an error (a layer beneath the commands' cli modules, which never import
each other)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from podctl.core.errors import EXIT_ERRORS, EXIT_INTERNAL, PodctlError

if TYPE_CHECKING:
    from podctl.core.model import Site

F = TypeVar("F", bound=Callable[..., Any])

_SITE_FILE = click.Path(dir_okay=False, path_type=Path)
# Where a run's report goes when --report is not given: a new folder for each run.
REPORTS_DIR = Path("reports")


def site_argument(command: F) -> F:
    """SITE: the site file the command reads."""
    return click.argument("site_file", metavar="SITE", type=_SITE_FILE)(command)


def optional_site_argument(command: F) -> F:
    """[SITE]: the site file, for a command that can also run without one (validate --local)."""
    return click.argument("site_file", metavar="[SITE]", required=False, type=_SITE_FILE)(command)


def private_key_option(command: F) -> F:
    """--private-key: the SSH key for root on the site's nodes (podctl.core.state.private_key_for)."""
    return click.option(
        "--private-key",
        "private_key",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="SSH key for root on the nodes (default for a sim pod: the key `podctl sim up` made).",
    )(command)


def default_report_dir(run: str) -> Path:
    """The report folder of a run started now when --report is not given: ./reports/<UTC time>-<run>."""
    return REPORTS_DIR / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{run}"


def report_option(run: str) -> Callable[[F], F]:
    """--report: the folder for the run's report.json, junit.xml and report.html; the command
    receives default_report_dir(run) when it is not given, so it never sees None."""

    def filled(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path:
        return value if value is not None else default_report_dir(run)

    def add(command: F) -> F:
        return click.option(
            "--report",
            "report_dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            callback=filled,
            help=f"Folder for report.json, junit.xml and report.html (default ./{REPORTS_DIR}/<time>-{run}).",
        )(command)

    return add


# (option, parameter, help) of each file fabric_dumps_options adds, in the order --help lists them.
FABRIC_DUMPS = (
    (
        "--ibnetdiscover",
        "ibnetdiscover",
        "ibnetdiscover output of the compute fabric: check the cabling and add it to the report.",
    ),
    ("--iblinkinfo", "iblinkinfo", "iblinkinfo output of the compute fabric: check link speed and width too."),
    (
        "--ibqueryerrors",
        "ibqueryerrors",
        "ibqueryerrors output of the compute fabric (counters cleared before the run): cables whose ports count "
        "errors fail, and fault localization names them even where no test crosses them.",
    ),
    (
        "--lfts",
        "lfts",
        "The subnet manager's forwarding tables (dump_lfts.sh, opensm-lfts.dump): fault localization follows "
        "the pod's real routes instead of podctl's model of them.",
    ),
    (
        "--anchors",
        "anchors_file",
        "The HCAs' GUIDs ('HOST RAIL GUID' lines) for the cabling check; default: read on the nodes over SSH.",
    ),
)


def fabric_dumps_options(command: F) -> F:
    """--ibnetdiscover, --iblinkinfo, --ibqueryerrors, --lfts and --anchors: the fabric tools' output
    and the HCAs' GUIDs that validate checks the cabling with (podctl.validate.fabric_inputs)."""
    # A decorator applied later lists its option earlier: the last of FABRIC_DUMPS goes on first.
    for name, parameter, help_text in reversed(FABRIC_DUMPS):
        file = click.Path(dir_okay=False, exists=True, path_type=Path)
        command = click.option(name, parameter, type=file, help=help_text)(command)
    return command


def load_site_and_key(site_file: Path, private_key: Path | None) -> tuple[Site, Path | None]:
    """The site of SITE and the SSH key for root on its nodes (--private-key, else a sim pod's own):
    where a command that reaches a deployed pod's nodes starts."""
    from podctl.core.state import private_key_for
    from podctl.derive.site import load_site

    site = load_site(site_file)
    return site, private_key_for(site, private_key, f"podctl sim up {site_file} && podctl deploy {site_file}")


def mitogen_option(command: F) -> F:
    """--no-mitogen: plain Ansible over OpenSSH (multiplexed, pipelined) instead of Mitogen."""
    return click.option(
        "--no-mitogen",
        "no_mitogen",
        is_flag=True,
        envvar="PODCTL_NO_MITOGEN",
        help="Run Ansible's own ssh strategy (multiplexed, pipelined) instead of Mitogen's (env PODCTL_NO_MITOGEN=1).",
    )(command)


def full_drift_option(command: F) -> F:
    """--full-drift: the drift check runs the roles in check mode even where every node's record of
    its last converged deploy holds (podctl.runtime.converged)."""
    return click.option(
        "--full-drift",
        "full_drift",
        is_flag=True,
        envvar="PODCTL_FULL_DRIFT",
        help="Run the roles in check mode for the drift check even when every node is as its last deploy "
        "left it (env PODCTL_FULL_DRIFT=1).",
    )(command)


def vault_options(command: F) -> F:
    """--vault-password-file and --vault-id: the vault secret Ansible opens the site's `!vault`
    values with (podctl.derive.secrets)."""
    command = click.option(
        "--vault-id",
        "vault_ids",
        multiple=True,
        metavar="ID@FILE",
        help="An ansible-vault identity for the site's !vault values (repeatable); FILE holds the password.",
    )(command)
    return click.option(
        "--vault-password-file",
        "vault_password_files",
        multiple=True,
        type=click.Path(dir_okay=False, exists=True),
        help="A file holding the ansible-vault password of the site's !vault values (repeatable).",
    )(command)


# -- errors ---------------------------------------------------------------------------------

# What each optional part of podctl needs (pyproject.toml's extras), by top-level module: a command
# that reaches one of them on a podctl installed without it says which extra to install.
EXTRA_OF_MODULE = {
    "paramiko": "deploy",
    "fabric": "deploy",
    "invoke": "deploy",
    "ansible": "deploy",
    "ansible_runner": "deploy",
    "testinfra": "deploy",
    "pytest": "deploy",
    "torch": "validation",
    "numpy": "validation",
    "pynvml": "validation",
}


def verbose_option(command: F) -> F:
    """-v/--verbose: errors come with their traceback. Kept in the context's obj, where
    CommandGroup reads it, so that every subcommand's errors honour it."""

    def remember(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        ctx.ensure_object(dict)["verbose"] = value
        return value

    return click.option(
        "-v",
        "--verbose",
        is_flag=True,
        expose_value=False,
        envvar="PODCTL_DEBUG",
        callback=remember,
        help="Show tracebacks for errors (env PODCTL_DEBUG=1).",
    )(command)


def _verbose(ctx: click.Context) -> bool:
    return bool(ctx.obj and ctx.obj.get("verbose"))


class CommandGroup(click.Group):
    """A group whose commands report errors the one way podctl does: an error the user can fix
    (PodctlError) as `error: ...` and its exit code, a missing extra as the pip command that
    installs it, an interruption as exit 130, anything else as a bug in podctl (exit 70); a
    traceback only under -v (verbose_option)."""

    program = "podctl"  # how an error names the command: `podctl deploy needs ...`

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except PodctlError as exc:
            if _verbose(ctx):
                raise
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except ModuleNotFoundError as exc:
            extra = EXTRA_OF_MODULE.get((exc.name or "").split(".")[0])
            if extra is None or _verbose(ctx):
                raise
            command = ctx.invoked_subcommand or "this command"
            click.echo(
                f"error: {self.program} {command} needs {exc.name}, which podctl installed without extras lacks: "
                f"pip install 'podctl[{extra}]'",
                err=True,
            )
            ctx.exit(EXIT_ERRORS)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug in podctl, not the user's doing
            if _verbose(ctx):
                raise
            click.echo(
                f"internal error: {type(exc).__name__}: {exc}\n"
                "this is a bug in podctl; run again with -v for the traceback and report it",
                err=True,
            )
            ctx.exit(EXIT_INTERNAL)
