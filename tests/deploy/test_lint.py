"""ansible-lint (production profile) and yamllint pass on the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from podctl.core.assets import collection_dir, collections_path
from tests.helpers.repo import cannot_run_here

pytestmark = [pytest.mark.deploy, pytest.mark.ansible]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if not found:
        cannot_run_here(f"{name} is not installed")
    return found


def test_yamllint() -> None:
    proc = subprocess.run([_tool("yamllint"), "-s", "."], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# One ansible-lint run over every linted role and its stage's playbook: each run loads Ansible and
# its rules anew (about 14 s of CPU), and its report names the file of every violation.
LINTED_ROLES = ("os", "fabric", "storage", "validation_tools", "_common")


def test_ansible_lint_production() -> None:
    collection = collection_dir().relative_to(REPO)
    targets = []
    for role in LINTED_ROLES:
        # _common is no stage: the roles import its task files, and it has no playbook of its own.
        if role != "_common":
            targets.append(f"{collection}/playbooks/{role}.yml")
        targets.append(f"{collection}/roles/{role}")
    # The stage playbooks name their roles podctl.pod.<role>: Ansible finds the collection where podctl does.
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections_path())}
    proc = subprocess.run(
        [_tool("ansible-lint"), "--nocolor", "--offline", *targets],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr
