"""Fixtures for the sim integration tests.

They use the test run's one sim pod (tests/conftest.py: `sim_nodes`): a podman container per
node (runc, systemd as PID 1, sshd) on the pod's own bridge, before anything is deployed on it.
The node image is built with debootstrap the first time (about 80 s) and reused from then on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from podctl.core import state
from podctl.core.model import Site
from podctl.sim import pod
from podctl.sim.errors import SimError
from podctl.sim.health import ssh_base
from podctl.sim.podman import Podman, pod_filter
from podctl.sim.preflight import preflight
from tests.conftest import cannot_run_here

REPO = Path(__file__).resolve().parents[2]
SIM_SITE = REPO / "inventory" / "sim" / "site.yaml"


@dataclass
class SimPod:
    podman: Podman
    site: Site
    site_path: Path
    up: pod.UpResult

    @property
    def name(self) -> str:
        return self.site.name

    @property
    def key(self) -> Path:
        return self.up.key

    def address(self, host: str) -> str:
        return str(self.site.node(host).address)

    def ssh(
        self, host: str, command: str, *, check: bool = True, timeout: float = 60, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            [
                *ssh_base(self.key, state.known_hosts_path(self.name), connect_timeout=3),
                f"root@{self.address(host)}",
                command,
            ],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"ssh {host} {command!r} failed ({proc.returncode}): {proc.stderr.decode()}")
        return proc

    def container_ids(self) -> dict[str, str]:
        return {c.node: c.id for c in self.podman.containers(pod_filter(self.name))}


@pytest.fixture(scope="session")
def sim_podman() -> Podman:
    try:
        tools = preflight("up")
        preflight("fault")
    except SimError as exc:
        cannot_run_here(f"the sim cannot run here: {exc}")
    return Podman(tools.podman, tools.runc)


@pytest.fixture(scope="module")
def bare_pod(sim_podman: Podman, sim_nodes) -> SimPod:  # type: ignore[no-untyped-def]
    """The run's sim pod before its deploy, through podctl's own sim API (`up` again keeps every
    running node and hands back its key and image)."""
    from podctl.derive.site import load_site

    # ansible-runner starts `ansible` from PATH; make it this venv's.
    venv_bin = str(Path(sys.executable).parent)
    os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")
    site = load_site(sim_nodes.site)
    result = pod.up(sim_podman, site, sim_nodes.site, None, timeout_s=300, reporter=pod.Reporter())
    return SimPod(sim_podman, site, sim_nodes.site, result)


def transfer_mbit(seconds: float, nbytes: int) -> float:
    return nbytes * 8 / seconds / 1e6


def timed(fn) -> float:
    started = time.monotonic()
    fn()
    return time.monotonic() - started
