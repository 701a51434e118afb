"""Fixtures for the deploy integration tests.

Starts: the test pod `simdeploy` (inventory/sim/site.yaml renamed, on its own
bridge 10.89.11.0/24 so it never collides with the default sim pod): four
systemd containers via `podctl sim up`, once per session, removed at its end
unless PODCTL_KEEP_POD=1. Then `podctl deploy` runs real Ansible against them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.simpod import podctl, sim_site_copy

REPO = Path(__file__).resolve().parents[2]
POD = "simdeploy"
SUBNET_PREFIX = "10.89.11."


def deploy_site_text() -> str:
    return sim_site_copy(POD, SUBNET_PREFIX, "172.31.0.0/16")


@dataclass
class DeployPod:
    site: Path
    runs_dir: Path

    def ssh(self, host: str, command: str) -> str:
        proc = podctl("sim", "exec", "--pod", POD, host, "--", "sh", "-c", command, timeout=60, check=False)
        return proc.stdout


@pytest.fixture(scope="session")
def deploy_pod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployPod]:
    if os.geteuid() != 0:
        pytest.skip("the sim needs root")
    base = tmp_path_factory.mktemp("deploy")
    site = base / "site.yaml"
    site.write_text(deploy_site_text())
    podctl("sim", "up", str(site), timeout=600)
    yield DeployPod(site=site, runs_dir=base / "runs")
    if not os.environ.get("PODCTL_KEEP_POD"):
        podctl("sim", "down", "--pod", POD, timeout=300, check=False)
