from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SIM_SITE = REPO / "inventory" / "sim" / "site.yaml"


@pytest.fixture
def sim_site_path() -> Path:
    return SIM_SITE


@pytest.fixture(scope="session")
def sim_pod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One sim pod for the session (pod `simcert`, 10.89.12.0/24): 1 head + 3 compute systemd
    containers via `podctl sim up`, deployed once with every stage (validation-tools included:
    torch's CPU build from the wheel folder `make sim-wheels` fills), removed at the end unless
    PODCTL_KEEP_POD=1. Tests that inject a fault undo it and wait until the pod is healthy.
    The deploy tests (tests/deploy/test_deploy_sim.py) judge this first deploy and run first
    (see pytest_collection_modifyitems), so that their no-change re-run sees the pod as deployed."""
    from tests.simpod import SIM_POD, SIM_SUBNET_PREFIX, Pod, podctl, sim_site_copy

    if os.geteuid() != 0:
        pytest.skip("the sim needs root")
    if not list((REPO / ".cache" / "validation-wheels").glob("torch-*.whl")):
        pytest.fail("no torch wheel in .cache/validation-wheels: run `make sim-wheels` (make test does)")
    base = tmp_path_factory.mktemp("simpod")
    site = base / "site.yaml"
    site.write_text(sim_site_copy(SIM_POD, SIM_SUBNET_PREFIX, "172.24.0.0/16"))
    podctl("sim", "up", str(site), timeout=600)
    try:
        first = podctl("deploy", str(site), "--runs-dir", str(base / "runs"), timeout=1800)
        pod = Pod(site, base, first_deploy_stdout=first.stdout)
        pod.snapshot_daemon_logs()
        yield pod
    finally:
        if not os.environ.get("PODCTL_KEEP_POD"):
            podctl("sim", "down", "--pod", SIM_POD, timeout=300, check=False)


# Modules that must see the shared sim pod before any other test changes it: the deploy tests
# judge its first deploy and a no-change re-run. Every other test keeps its collection order.
RUN_FIRST = ("tests/deploy/test_deploy_sim.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def first(item: pytest.Item) -> bool:
        return any(item.nodeid.startswith(module) for module in RUN_FIRST)

    items.sort(key=lambda item: not first(item))
