"""Every role's Molecule scenario (podman driver, the sim node image): create, converge,
idempotence, verify, destroy.

Starts: the containers each scenario declares (`podctl-mol-<role>-*`), with
systemd, from the image `podctl sim image` builds; Molecule removes them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from podctl.core.assets import roles_dir
from tests.helpers.repo import cannot_run_here

pytestmark = [pytest.mark.molecule, pytest.mark.sim]

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p.parents[2].name for p in roles_dir().glob("*/molecule/default/molecule.yml"))


@pytest.fixture(scope="module")
def sim_image() -> str:
    if os.geteuid() != 0 or shutil.which("podman") is None:
        cannot_run_here("Molecule's podman driver needs root and podman here")
    proc = subprocess.run(
        [sys.executable, "-m", "podctl.cli", "sim", "image", "--release", "13"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_every_role_has_a_scenario() -> None:
    assert ROLES == ["fabric", "monitoring", "os", "slurm", "storage", "validation_tools"]


# Every scenario is in the long tier (make test-long, about 3.5 min each here): `make test`
# deploys every role onto the run's sim pod and re-runs it for idempotence there instead.
@pytest.mark.long
@pytest.mark.parametrize("role", ROLES)
def test_molecule_scenario(role: str, sim_image: str) -> None:
    molecule = Path(sys.executable).parent / "molecule"
    env = {
        **os.environ,
        "PODCTL_SIM_IMAGE": sim_image,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    proc = subprocess.run(
        [str(molecule), "test"],
        cwd=roles_dir() / role,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, f"molecule test ({role}) failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    for step in ("converge", "idempotence", "verify"):
        assert f"{step}" in (proc.stdout + proc.stderr).lower(), step
