"""The fixtures every test folder shares (the sim pod of the run) and the run's hooks: the order
of the tests on the sim pod, and the daemons a run leaves running. Helpers live in tests/helpers/."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import processes
from tests.helpers.repo import REPO, SIM_SITE, cannot_run_here


@pytest.fixture
def sim_site_path() -> Path:
    return SIM_SITE


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder of this test's alone with a short path, for a runtime folder where SSH and Mitogen
    bind Unix sockets (107 bytes at most: podctl.runtime.ansible). tmp_path is too deep for one
    under pytest's default base (/tmp/pytest-of-USER/pytest-N/<test name>)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="pt", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def sim_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The one sim pod of a test run (pod `simcert`, 10.89.12.0/24, 1 head + 3 compute systemd
    containers), brought up by `podctl sim up` and not yet deployed: tests/sim judge the sim
    itself on it (they may replace a container) before anything is deployed. Removed at the end
    of the run unless PODCTL_KEEP_POD=1."""
    from tests.helpers.simpod import SIM_IPOIB_SUPERNET, SIM_POD, SIM_SUBNET_PREFIX, Nodes, podctl, sim_site_copy

    if os.geteuid() != 0:
        cannot_run_here("the sim needs root")
    if os.environ.get("PODCTL_TEST_ALL") and not os.environ.get("PODCTL_TEST_PODCTL"):
        pytest.fail(
            "the Makefile's tiers deploy the sim pod with podctl installed from its wheel: PODCTL_TEST_PODCTL is unset"
        )
    base = tmp_path_factory.mktemp("simpod")
    site = base / "site.yaml"
    text = sim_site_copy(SIM_POD, SIM_SUBNET_PREFIX, SIM_IPOIB_SUPERNET)
    # PODCTL_TEST_SIM_RELEASE=12: the whole matrix on that release instead of the newest.
    release = os.environ.get("PODCTL_TEST_SIM_RELEASE")
    if release:
        text = text.replace("\nnodes:\n", f'\nos: {{distribution: debian, release: "{release}"}}\n\nnodes:\n', 1)
    site.write_text(text)
    podctl("sim", "up", str(site), timeout=600)
    try:
        yield Nodes(site, base)
    finally:
        if not os.environ.get("PODCTL_KEEP_POD"):
            podctl("sim", "down", "--pod", SIM_POD, timeout=300, check=False)


@pytest.fixture(scope="session")
def sim_pod(sim_nodes: object) -> object:
    """The run's sim pod, deployed once with every stage (validation-tools included: torch's CPU
    build from the wheel folder `make sim-wheels` fills) by podctl (CI: installed from its wheel).
    Every test that changes the pod undoes it and leaves every node idle; a test that injects a
    fault runs only the suite that must catch it. The deploy tests (tests/deploy/test_deploy_sim.py)
    judge this first deploy and its no-change re-run before any other test changes the pod (see
    pytest_collection_modifyitems)."""
    from tests.helpers.simpod import Nodes, Pod, podctl, sim_up

    assert isinstance(sim_nodes, Nodes)
    if not list((REPO / ".cache" / "validation-wheels").glob("torch-*.whl")):
        pytest.fail("no torch wheel in .cache/validation-wheels: run `make sim-wheels` (make test does)")
    # Containers the sim tests replaced come back as they were declared (a no-op otherwise).
    sim_up(sim_nodes.site)
    runs = sim_nodes.base / "runs"
    first = podctl("deploy", str(sim_nodes.site), "--runs-dir", str(runs), timeout=1800)
    pod = Pod(sim_nodes.site, sim_nodes.base, first_deploy_stdout=first.stdout)
    pod.snapshot_daemon_logs()
    return pod


# The order the tests that share the sim pod run in: first the previous release's pod of its own
# (make test-long),
# then the sim itself on the bare containers,
# then the deploy tests (its first deploy and a no-change re-run, judged before anything else
# changes the pod), then certification and its faults, then day 2, then the rest in collection
# order. make test runs them in one process (.ci/test-parts).
SIM_ORDER = (
    # A pod of its own (Debian 12), up and down before the shared pod comes up.
    "tests/platforms/test_previous_release_sim.py",
    "tests/sim/test_sim_pod.py",
    "tests/deploy/test_deploy_sim.py",
    "tests/validate/test_validate_sim.py",
    "tests/day2/test_day2_sim.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> tuple[int, int]:
        if item.get_closest_marker("sim") is None:
            return (1, 0)
        first = [i for i, module in enumerate(SIM_ORDER) if item.nodeid.startswith(module)]
        return (0, first[0] if first else len(SIM_ORDER))

    unmarked = [
        i.nodeid for i in items if "sim_nodes" in getattr(i, "fixturenames", ()) and not i.get_closest_marker("sim")
    ]
    if unmarked:  # make test runs `-m 'not sim'` and `-m sim` apart: such a test would bring up a pod of its own
        raise pytest.UsageError(f"tests on the sim pod without the sim mark: {', '.join(unmarked)}")
    items.sort(key=rank)  # stable: collection order within each rank


# A test's processes end with it: the daemons running when the run began, and the run's mark
# (tests/helpers/processes.py). Under pytest-xdist the controller checks once, after every worker is done.
_DAEMONS_BEFORE = pytest.StashKey[list[processes.Process]]()


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    os.environ[processes.MARK] = f"{os.getpid()}-{time.time_ns()}"
    config.stash[_DAEMONS_BEFORE] = processes.running()


@pytest.hookimpl(trylast=True)  # after the runner's own, which tears down what is left (the sim pod)
def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.config.stash.get(_DAEMONS_BEFORE, None)
    if before is None:
        return
    left = processes.left_running(before, os.getsid(0), os.environ[processes.MARK])
    if not left:
        return
    named = "\n".join(f"  pid {p.pid} {p.name}: {p.command}" for p in left)
    report = pytest.TestReport(
        "tests/conftest.py::daemons-left-running",
        ("tests/conftest.py", None, "daemons left running"),
        {},
        "failed",
        "the tests started these and left them running (a test stops and waits for every daemon "
        f"it starts in its teardown, also when it fails):\n{named}",
        "teardown",
    )
    session.config.hook.pytest_runtest_logreport(report=report)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
