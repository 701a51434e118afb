"""Command-line options that more than one command takes (a layer beneath the commands' cli
modules, which never import each other)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


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
    its last converged deploy holds (podctl.converged)."""
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
    values with (podctl.secrets)."""
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
