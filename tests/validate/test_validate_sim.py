"""`podctl validate SITE` on a deployed sim pod: certification, and faults named on the right node.

Uses the session's deployed sim pod (tests/conftest.py: `sim_pod`, pod
`simcert` on 10.89.12.0/24, 1 head + 3 compute, every stage deployed). Every test then runs the real `podctl validate`: testinfra
over SSH, the node checks over SSH (fabric), nccl and smoke as Slurm jobs.

Each fault test runs only the suite that must catch its fault, undoes the fault and waits
until the pod is healthy again, so that the tests do not depend on their order. Certifying
three times in a row is in the long tier (make test-long).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from podctl.core.state import private_key_for
from podctl.derive.site import load_site
from podctl.runtime.remote import HANDSHAKES_PER_HOST, KEEP_STDOUT, site_nodes
from tests.helpers.simpod import SIM_POD, SIM_SUBNET_PREFIX, Pod, certify, podctl

pytestmark = [pytest.mark.sim, pytest.mark.deploy]

POD = SIM_POD
SUBNET_PREFIX = SIM_SUBNET_PREFIX


@pytest.fixture(scope="module")
def pod(sim_pod: Pod) -> Pod:
    return sim_pod


def failing(data: dict) -> set[str]:
    return set(data["failures"])


def test_a_healthy_pod_is_certified(pod: Pod) -> None:
    certify(pod, 1)


@pytest.mark.long  # three full validates (about 11 min on the 4-node sim pod): make test-long
def test_a_healthy_pod_is_certified_three_times_in_a_row(pod: Pod) -> None:
    certify(pod, 3)


def test_many_commands_at_once_on_one_host_all_run_under_sshds_default_limits(pod: Pod) -> None:
    # What a pairwise round does on a large pod: up to MAX_CONCURRENT_JOBS sruns at once, each over
    # an SSH connection of its own to the controller. head01's sshd keeps Debian's MaxStartups
    # (10:30:100): 48 handshakes at once would see some dropped; opened HANDSHAKES_PER_HOST at a
    # time, every command runs, side by side.
    site = load_site(pod.site)
    nodes = site_nodes(site, private_key_for(site, None, "podctl sim up"))
    many, hold_s = 48, 5
    assert many > 3 * HANDSHAKES_PER_HOST
    started = time.monotonic()
    with ThreadPoolExecutor(many) as pool:
        results = list(pool.map(lambda i: nodes.run("head01", f"sleep {hold_s}; echo {i}", timeout_s=120), range(many)))
    wall = time.monotonic() - started
    bad = [r for r in results if r.error or r.returncode != 0]
    assert not bad, f"{len(bad)} of {many} failed: {bad[:3]}"
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(many)]
    assert wall < many * hold_s / 4, f"{many} commands of {hold_s} s took {wall:.0f} s: not side by side"


def test_a_node_that_floods_its_output_costs_the_controller_a_bounded_amount(pod: Pod) -> None:
    # What a hostile or broken node prints is not trusted: podctl keeps its end (where a check's
    # result is) and says how much more there was.
    site = load_site(pod.site)
    nodes = site_nodes(site, private_key_for(site, None, "podctl sim up"))
    flood = 8 * 1024 * 1024
    results = nodes.run_each({"node01": f"head -c {flood} /dev/zero | tr '\\0' x; echo; echo END"}, timeout_s=120)
    r = results["node01"]
    assert r.returncode == 0 and r.error is None, r.error
    assert len(r.stdout) == KEEP_STDOUT and r.stdout.endswith("\nEND\n")
    assert r.dropped == flood + len("\nEND\n") - KEEP_STDOUT and "node01 printed" in r.dropped_note


@contextlib.contextmanager
def _two_node_faults(pod: Pod) -> Iterator[None]:
    """slurmd stopped on node01 and slurm.conf edited by hand on node03; both cleared after, and
    proven cleared: what was wrong is right again on both nodes."""
    podctl("sim", "fault", "--pod", POD, "node01", "--stop-service", "slurmd")
    try:
        assert pod.sh("node03", "echo '# edited by hand' >> /etc/slurm/slurm.conf").returncode == 0
        yield
    finally:
        pod.sh("node03", "sed -i '/^# edited by hand$/d' /etc/slurm/slurm.conf")
        podctl("sim", "fault", "--pod", POD, "node01", "--clear")
        pod.sh("node01", "systemctl start slurmd")
        pod.resume("node01")
    assert pod.sh("node01", "systemctl is-active slurmd").stdout.strip() == "active"
    assert "# edited by hand" not in pod.sh("node03", "cat /etc/slurm/slurm.conf").stdout


def test_a_stopped_daemon_and_a_hand_edited_config_fail_conformance_each_on_its_node(pod: Pod) -> None:
    # Two node faults, one conformance run: each named on its own node, with its own reason.
    with _two_node_faults(pod):
        rc, data, out = pod.validate("node-faults", "--suite", "conformance")
        assert rc == 1 and failing(data) == {"node01", "node03"}, data["failures"]
        # head01 and node02 are as their records say: the roles run in check mode on the two others alone.
        assert "2 of 4 host(s) as their records say" in out, out[-3000:]
        assert "checking node[01,03] against the roles in check mode" in out, out[-3000:]
        assert any("slurmd" in reason for reason in data["failures"]["node01"])
        assert not any("slurm.conf" in reason for reason in data["failures"]["node01"])
        assert any("/etc/slurm/slurm.conf" in reason for reason in data["failures"]["node03"])
        assert not any("service slurmd" in reason for reason in data["failures"]["node03"])


@pytest.mark.long  # two more conformance runs under the faults (about 3 min): make test-long
def test_plain_ansible_over_openssh_finds_the_same_drift_as_mitogen(pod: Pod) -> None:
    with _two_node_faults(pod):
        rc, data, _ = pod.validate("node-faults-mitogen", "--suite", "conformance")
        rc_plain, plain, _ = pod.validate("node-faults-openssh", "--suite", "conformance", "--no-mitogen")

        # Slurm's view of node01 is not the strategy's finding and moves on between the two runs,
        # by the clock alone (none yet, then idle* "not responding", then down* once slurmctld
        # gives up on it: each seen on 24.11), so those lines are left out of the comparison.
        def drift(failures: dict) -> dict:
            return {n: [r for r in rs if "in Slurm (state" not in r] for n, rs in failures.items()}

        assert rc == rc_plain == 1 and failing(data) == {"node01", "node03"}, data["failures"]
        assert drift(plain["failures"]) == drift(data["failures"]), (plain["failures"], data["failures"])


def test_a_profile_claiming_more_cores_than_the_node_has_fails_health_on_that_node(pod: Pod) -> None:
    # node03 declared with a profile of 64 cores: the node really has this machine's cores.
    text = pod.site.read_text()
    profile = (
        "profiles:\n  sim-64:\n    description: the sim profile, claiming 64 cores\n    gpus: null\n"
        "    compute_hcas: { count: 2, rate: HDR }\n    storage_hcas: { count: 0 }\n"
        "    cpu_cores: 64\n    memory_gib: 2\n    emulated: true\n    reference: []\n\nnodes:\n"
    )
    text = text.replace("\nnodes:\n", "\n" + profile, 1)
    text = text.replace(
        "    hosts: node[01-03]\n    profile: sim\n    roles: [compute, storage-client]\n"
        f"    address: {SUBNET_PREFIX}11\n",
        "    hosts: node[01-02]\n    profile: sim\n    roles: [compute, storage-client]\n"
        f"    address: {SUBNET_PREFIX}11\n"
        "  - group: compute64\n    hosts: node03\n    profile: sim-64\n"
        f"    roles: [compute, storage-client]\n    address: {SUBNET_PREFIX}13\n",
    )
    assert "sim-64" in text and "node[01-02]" in text
    claimed = pod.base / "site-64-cores.yaml"
    claimed.write_text(text)
    rc, data, _ = pod.validate("more-cores", "--suite", "health", site=claimed)
    assert rc == 1 and failing(data) == {"node03"}
    assert any("CPUs online, expected 64" in reason for reason in data["failures"]["node03"])


def test_a_throttled_node_is_named_by_fault_localization_and_drained(pod: Pod) -> None:
    # 200 Mb/s: a NIC that negotiated down. The nccl rounds, not a per-node check, must find it.
    # (Its pairs measure about 0.02 GB/s against the bound 0.05 and healthy pairs 0.18 to 0.7; at
    # 100 Mb/s each slow round took twice as long, for no more evidence.)
    podctl("sim", "fault", "--pod", POD, "node02", "--rate", "200mbit")
    try:
        assert " tbf " in pod.sh("node02", "tc qdisc show").stdout  # the probe below sees a rate limit
        rc, data, _ = pod.validate("throttled", "--suite", "nccl", "--drain")
        assert rc == 1 and failing(data) == {"node02"}, data["failures"]
        assert any("named by fault localization" in r for r in data["failures"]["node02"])
        nccl = data["meta"]["nccl"]
        assert nccl["bad_nodes"] == ["node02"] and nccl["suspects"] == []
        # Localization rounds beyond the first stay within k * ceil(log2 N) + 2 (k = 1, N = 3).
        assert 1 < nccl["localization_rounds"] <= 1 + 2 + 2
        state = pod.sh("head01", "sinfo -h -n node02 -o '%T|%E'").stdout.strip()
        assert state.startswith("drain") and "podctl validate" in state
    finally:
        podctl("sim", "fault", "--pod", POD, "node02", "--clear")
        pod.resume("node02")
    # Cleared, and proven cleared: no rate limit left on node02 (and wait_idle: it is back in service).
    assert " tbf " not in pod.sh("node02", "tc qdisc show").stdout


def test_cabling_findings_join_the_pod_certification(pod: Pod) -> None:
    from podctl.derive.facts import Facts, hca_names
    from podctl.derive.site import load_site
    from podctl.ibfabric import corrupt
    from podctl.ibfabric.formats import End, topology_from_plan, write_ibnetdiscover

    site = load_site(pod.site)
    planned = topology_from_plan(Facts(site).plans["compute"], site.fabrics["compute"].rate, hca_names(site, "compute"))
    # node02's rail-2 cable trained at 2x: what a half-seated cable looks like.
    damaged = corrupt.set_rate(planned, End("node02 mlx5_1", 1), width="2x")
    topology = pod.base / "ibnetdiscover.txt"
    topology.write_text(write_ibnetdiscover(damaged))
    rc, data, _ = pod.validate("cabling", "--suite", "health", "--ibnetdiscover", str(topology))
    assert rc == 1 and failing(data) == {"node02"}, data["failures"]
    assert any("node02 mlx5_1" in r and "2x" in r for r in data["failures"]["node02"])
    assert "Cabling" in (pod.base / "cabling" / "report.html").read_text()
