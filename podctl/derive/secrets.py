"""Site values that are secrets, kept out of the site file: where podctl reads them, and how it
tells Ansible to open them.

A site file may give `validation.tools.index_url` (a package index URL with a token in it) as an
ansible-vault value (`!vault |`): podctl writes the ciphertext into the inventory's 0600 file as it
is, and Ansible decrypts it on the controller with the vault secret podctl passes it
(`--vault-password-file FILE`, `--vault-id ID@FILE`, or ANSIBLE_VAULT_PASSWORD_FILE /
ANSIBLE_VAULT_IDENTITY_LIST already set). Or as `{file: PATH}`: a file of the user's own, mode
0600, that podctl reads when it writes that 0600 file. Neither is ever printed (`podctl plan`
says what kind of secret it is) nor written anywhere else.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from podctl.core.errors import PodctlError
from podctl.core.model import Secret, Site

# A secret file holds one value: a URL is one line, and no token needs more than this.
MAX_SECRET_BYTES = 8192
VAULT_ENV = ("ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST")


class SecretError(PodctlError):
    """A secret the site names cannot be used; the message says which, why, and what to do."""


def site_secrets(site: Site) -> tuple[tuple[str, Secret], ...]:
    """(YAML path, secret) of every site value given as a secret."""
    return tuple(("validation.tools.index_url", s) for s in site.validation.tools.secrets)


def read_secret_file(where: str, path: str) -> str:
    """The one-line value in `path` (named at `where` in the site file): a regular file of this
    user's, readable by nobody else."""
    fix = f"keep the secret of {where} in a file of your own: chmod 600 {path}"
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise SecretError(f"{where}: cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SecretError(f"{where}: {path} is not a regular file (a link, a folder or a device); {fix}")
    if st.st_uid != os.geteuid():
        raise SecretError(f"{where}: {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); {fix}")
    if st.st_mode & 0o077:
        raise SecretError(
            f"{where}: {path} is open to group or others (mode {stat.S_IMODE(st.st_mode):04o}): others may "
            f"have read the secret already; rotate it, then {fix}"
        )
    if st.st_size > MAX_SECRET_BYTES:
        raise SecretError(f"{where}: {path} holds {st.st_size} bytes; a secret file holds one value (a URL)")
    value = Path(path).read_text(encoding="utf-8", errors="strict").strip()
    if not value or "\n" in value:
        raise SecretError(f"{where}: {path} must hold exactly one line, the value itself")
    return value


def resolve_files(site: Site) -> dict[str, str]:
    """file path -> value, for every secret the site keeps in a file."""
    return {s.file: read_secret_file(where, s.file) for where, s in site_secrets(site) if s.file is not None}


def vault_env(
    site: Site, password_files: Sequence[str], vault_ids: Sequence[str], environ: Mapping[str, str]
) -> dict[str, str]:
    """The variables that give Ansible the vault secret for the site's `!vault` values: from the
    options, else none (ANSIBLE_VAULT_* already set reach it as they are). SecretError when the site
    has a vault value and nothing opens it."""
    env: dict[str, str] = {}
    ids = [*vault_ids, *(f"default@{f}" for f in password_files)]
    for spec in ids:
        label, _, path = spec.rpartition("@")
        if not label or not path:
            raise SecretError(f"--vault-id {spec!r}: give it as ID@FILE (e.g. prod@~/.vault-pass)")
        if not Path(path).expanduser().is_file():
            raise SecretError(
                f"--vault-id/--vault-password-file: {path} is not a file (podctl runs Ansible without a "
                "terminal: it cannot prompt for the vault password)"
            )
    if ids:
        env["ANSIBLE_VAULT_IDENTITY_LIST"] = ",".join(ids)
    vaulted = [where for where, s in site_secrets(site) if s.vault is not None]
    if vaulted and not ids and not any(environ.get(k) for k in VAULT_ENV):
        raise SecretError(
            f"{', '.join(vaulted)} is an ansible-vault value and nothing opens it: give "
            "--vault-password-file FILE or --vault-id ID@FILE (or set ANSIBLE_VAULT_PASSWORD_FILE)"
        )
    return env
