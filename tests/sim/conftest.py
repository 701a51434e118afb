"""Fixtures for the sim integration tests.

They use the test run's one sim pod (tests/conftest.py: `sim_nodes`): a podman container per
node (runc, systemd as PID 1, sshd) on the pod's own bridge, before anything is deployed on it.
The node image is built with debootstrap the first time (about 80 s) and reused from then on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from podctl.sim import pod
from podctl.sim.errors import SimError
from podctl.sim.podman import Podman
from podctl.sim.preflight import preflight
from tests.helpers.repo import cannot_run_here
from tests.helpers.simpod import SimPod


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
