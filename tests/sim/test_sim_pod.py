"""The simulated pod, for real: podman containers with systemd and sshd.

Runs on the test run's one sim pod (tests/conftest.py: `sim_nodes`, pod `simcert`) before
anything is deployed on it: a test here may kill or replace a container, and the deploy that
follows (tests/conftest.py: `sim_pod`) brings every node back first. Starts: ansible (through
ansible-runner) against the nodes; and, in one test, a second small pod beside the first.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from pathlib import Path

import ansible_runner
import pytest
from click.testing import CliRunner

from podctl.core import state
from podctl.derive.inventory import write_inventory
from podctl.ibfabric.ibsim import guard
from podctl.sim import fabric, pod
from podctl.sim.cli import sim
from podctl.sim.errors import SimError
from podctl.sim.podman import network_name, pod_filter
from tests.helpers.repo import SIM_SITE
from tests.helpers.simpod import SIM_POD, SIM_SUBNET_PREFIX, SimPod
from tests.helpers.timing import timed, transfer_mbit

pytestmark = pytest.mark.sim


def run_cli(command: str, *args: str):
    # --pod: other pods (other sessions' or other tests') may be up on this machine.
    result = CliRunner().invoke(sim, [command, "--pod", SIM_POD, *args], catch_exceptions=True)
    if isinstance(result.exception, SimError):
        raise result.exception
    return result


# -- reachability with the ordinary inventory ---------------------------------------


def test_every_node_answers_ansible_ping_with_the_rendered_inventory(bare_pod: SimPod, tmp_path: Path):
    inventory = tmp_path / "inventory"
    write_inventory(bare_pod.site, inventory)
    (tmp_path / "runner").mkdir()
    run = ansible_runner.run(
        private_data_dir=str(tmp_path / "runner"),
        inventory=str(inventory),
        host_pattern="all",
        module="ping",
        envvars={
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_PRIVATE_KEY_FILE": str(bare_pod.key),
            "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        },
        quiet=True,
    )
    assert run.status == "successful", run.stdout.read()
    assert set(run.stats["ok"]) == {n.hostname for n in bare_pod.site.nodes}
    assert not run.stats["failures"] and not run.stats["dark"]


def test_hostnames_and_addresses_match_the_site(bare_pod: SimPod):
    domain = bare_pod.site.management.domain
    cidr = bare_pod.site.management.cidr
    for node in bare_pod.site.nodes:
        out = bare_pod.ssh(node.hostname, "hostname; hostname -f; ip -o -4 addr show scope global").stdout.decode()
        short, fqdn, *addrs = out.splitlines()
        assert short == node.hostname
        assert fqdn == f"{node.hostname}.{domain}"
        assert [a.split()[3] for a in addrs] == [f"{node.address}/{cidr.prefixlen}"]
    # Every node resolves every other by name, as on the real management network.
    lines = bare_pod.ssh("node03", "getent hosts head01 node01." + domain).stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == [
        str(bare_pod.site.node("head01").address),
        str(bare_pod.site.node("node01").address),
    ]


def test_systemd_runs_as_pid_1_and_the_nodes_have_their_own_machine_ids(bare_pod: SimPod):
    ids = set()
    for node in bare_pod.site.nodes:
        out = (
            bare_pod.ssh(
                node.hostname, "ps -o comm= -p 1; systemctl is-system-running; cat /etc/machine-id", check=False
            )
            .stdout.decode()
            .split()
        )
        assert out[0] == "systemd"
        assert out[1] in ("running", "degraded")
        ids.add(out[2])
    assert len(ids) == len(bare_pod.site.nodes)


def test_shared_mounts_are_one_folder_seen_by_every_client(bare_pod: SimPod):
    for mount in bare_pod.site.storage:
        marker = f"{mount.mountpoint}/written-on-head01"
        bare_pod.ssh("head01", f"echo {mount.name} > {marker}")
        assert bare_pod.ssh("node03", f"cat {marker}").stdout.decode().strip() == mount.name
        assert (state.mount_dir(bare_pod.name, mount.name) / "written-on-head01").read_text().strip() == mount.name


def test_nodes_reach_the_debian_mirror_config(bare_pod: SimPod):
    sources = bare_pod.ssh("node01", "cat /etc/apt/sources.list").stdout.decode()
    codename = bare_pod.site.node("node01").platform.codename  # the release the site names
    assert f"http://deb.debian.org/debian {codename} main" in sources
    assert (
        bare_pod.ssh(
            "node01", "test -s /etc/ssl/certs/ca-certificates.crt && grep -c BEGIN /etc/ssl/certs/ca-certificates.crt"
        ).returncode
        == 0
    )


# -- idempotency ------------------------------------------------------------------------


def test_up_again_keeps_every_healthy_container(bare_pod: SimPod):
    before = bare_pod.container_ids()
    again = pod.up(bare_pod.podman, bare_pod.site, bare_pod.site_path, None, timeout_s=120, reporter=pod.Reporter())
    assert [r.action for r in again.nodes] == ["kept"] * len(bare_pod.site.nodes)
    assert bare_pod.container_ids() == before


def test_the_fabric_is_served_in_the_sm_hosts_namespace_and_up_keeps_or_restarts_it(bare_pod: SimPod):
    served = fabric.running(bare_pod.name)
    assert served is not None, "sim up started no ibsim"
    head = bare_pod.podman.container_pid(f"podctl-{SIM_POD}-head01")
    netns = os.readlink(f"/proc/{head}/ns/net")
    assert os.readlink(f"/proc/{served.pid}/ns/net") == netns != os.readlink("/proc/self/ns/net")
    # As its own account, on UDP in head01's namespace only (no TCP), and for root there alone.
    assert served.root_only and Path(f"/proc/{served.pid}").stat().st_uid == guard.account()[0]
    udp = subprocess.run(["nsenter", "-t", str(head), "-n", "ss", "-ulnp"], capture_output=True, text=True).stdout
    assert f":{guard.SERVER_PORT} " in udp and "ibsim" in udp
    tcp = subprocess.run(["nsenter", "-t", str(head), "-n", "ss", "-tlnp"], capture_output=True, text=True).stdout
    assert "ibsim" not in tcp
    send = f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'', ('127.0.0.1', {guard.SERVER_PORT}))"
    container = f"podctl-{SIM_POD}-head01"
    as_nobody = bare_pod.podman.run(["exec", "--user", "nobody", container, "python3", "-c", send], check=False)
    assert as_nobody.returncode != 0 and "PermissionError" in as_nobody.stderr, as_nobody.stderr
    assert bare_pod.podman.run(["exec", container, "python3", "-c", send], check=False).returncode == 0
    again = pod.up(bare_pod.podman, bare_pod.site, bare_pod.site_path, None, timeout_s=120, reporter=pod.Reporter())
    assert again.fabric is not None and again.fabric.action == "kept"
    assert fabric.running(bare_pod.name).pid == served.pid  # type: ignore[union-attr]
    assert fabric.down(bare_pod.name) and fabric.running(bare_pod.name) is None
    restarted = pod.up(bare_pod.podman, bare_pod.site, bare_pod.site_path, None, timeout_s=120, reporter=pod.Reporter())
    assert restarted.fabric is not None and restarted.fabric.action == "started"
    assert "Network simulator ready" in fabric.running(bare_pod.name).console_text()  # type: ignore[union-attr]


def test_up_a_subset_touches_only_those_nodes(bare_pod: SimPod):
    before = bare_pod.container_ids()
    result = pod.up(
        bare_pod.podman, bare_pod.site, bare_pod.site_path, "node[01-02]", timeout_s=120, reporter=pod.Reporter()
    )
    assert [(r.hostname, r.action) for r in result.nodes] == [("node01", "kept"), ("node02", "kept")]
    assert bare_pod.container_ids() == before


def test_up_with_unknown_nodes_is_a_clear_error(bare_pod: SimPod):
    with pytest.raises(SimError, match=rf"not in site '{SIM_POD}': node\[07-08\]"):
        pod.up(
            bare_pod.podman, bare_pod.site, bare_pod.site_path, "node[01,07-08]", timeout_s=30, reporter=pod.Reporter()
        )


def test_up_replaces_a_stopped_and_a_broken_container(bare_pod: SimPod):
    before = bare_pod.container_ids()
    bare_pod.podman.run(["kill", "--signal", "KILL", f"podctl-{SIM_POD}-node02"])
    # Running, but sshd gone: systemd is fine, the node is not reachable.
    bare_pod.podman.run(["exec", f"podctl-{SIM_POD}-node03", "systemctl", "stop", "ssh.service"])
    result = pod.up(bare_pod.podman, bare_pod.site, bare_pod.site_path, None, timeout_s=120, reporter=pod.Reporter())
    actions = {r.hostname: r.action for r in result.nodes}
    assert actions == {"head01": "kept", "node01": "kept", "node02": "replaced", "node03": "replaced"}
    after = bare_pod.container_ids()
    assert after["head01"] == before["head01"] and after["node02"] != before["node02"]
    for host in ("node02", "node03"):
        assert bare_pod.ssh(host, "hostname").stdout.decode().strip() == host


# -- faults -------------------------------------------------------------------------------


def test_fault_kill_and_clear(bare_pod: SimPod):
    result = run_cli("fault", "node01", "--kill")
    assert result.exit_code == 0, result.output
    try:
        [info] = [c for c in bare_pod.podman.containers(pod_filter(SIM_POD)) if c.node == "node01"]
        assert not info.running
        assert bare_pod.ssh("node01", "true", check=False, timeout=20).returncode != 0
        status = run_cli("status")
        assert "killed" in status.output
    finally:
        result = run_cli("fault", "node01", "--clear")
    assert result.exit_code == 0, result.output
    assert bare_pod.ssh("node01", "systemctl is-system-running", check=False).stdout.decode().strip() in (
        "running",
        "degraded",
    )
    assert "killed" not in run_cli("status").output


def test_fault_rate_throttles_both_directions_and_clear_restores(bare_pod: SimPod):
    # 20 Mbit/s: far below what ssh moves here even on a busy 2-core VM (>140 Mbit/s).
    small, large = 2 * 2**20, 32 * 2**20
    result = run_cli("fault", "node02", "--rate", "20mbit")
    assert result.exit_code == 0, result.output
    try:
        pid = bare_pod.podman.container_pid(f"podctl-{SIM_POD}-node02")
        qdisc = subprocess.run(
            ["nsenter", "-t", str(pid), "-n", "tc", "qdisc", "show", "dev", "eth0"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "tbf" in qdisc and "rate 20Mbit" in qdisc
        out_s = timed(lambda: bare_pod.ssh("node02", f"head -c {small} /dev/zero"))
        in_s = timed(lambda: bare_pod.ssh("node02", "cat > /dev/null", stdin=bytes(small)))
        assert transfer_mbit(out_s, small) < 30, f"node02 sent at {transfer_mbit(out_s, small):.0f} Mbit/s"
        assert transfer_mbit(in_s, small) < 30, f"node02 received at {transfer_mbit(in_s, small):.0f} Mbit/s"
        assert "rate 20mbit" in run_cli("status").output
    finally:
        result = run_cli("fault", "node02", "--clear")
    assert result.exit_code == 0, result.output
    pid = bare_pod.podman.container_pid(f"podctl-{SIM_POD}-node02")
    qdisc = subprocess.run(
        ["nsenter", "-t", str(pid), "-n", "tc", "qdisc", "show", "dev", "eth0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "tbf" not in qdisc
    out_s = timed(lambda: bare_pod.ssh("node02", f"head -c {large} /dev/zero"))
    assert transfer_mbit(out_s, large) > 60, (
        f"after --clear node02 sends at only {transfer_mbit(out_s, large):.0f} Mbit/s"
    )


def test_fault_stop_service_and_clear(bare_pod: SimPod):
    result = run_cli("fault", "head01", "--stop-service", "ssh")
    assert result.exit_code == 0, result.output
    try:
        state_now = bare_pod.podman.run(
            ["exec", f"podctl-{SIM_POD}-head01", "systemctl", "is-active", "ssh"], check=False
        )
        assert state_now.stdout.strip() == "inactive"
        assert bare_pod.ssh("head01", "true", check=False, timeout=20).returncode == 255
        assert "stopped ssh" in run_cli("status").output
    finally:
        result = run_cli("fault", "head01", "--clear")
    assert result.exit_code == 0, result.output
    assert bare_pod.ssh("head01", "systemctl is-active ssh").stdout.decode().strip() == "active"


def test_fault_on_unknown_service_or_node_is_a_clear_error(bare_pod: SimPod):
    with pytest.raises(SimError, match="no systemd unit 'no-such-thing'"):
        run_cli("fault", "node01", "--stop-service", "no-such-thing")
    with pytest.raises(SimError, match="has no node 'node09'"):
        run_cli("fault", "node09", "--kill")


def test_exec_runs_in_the_node_and_returns_its_exit_code(bare_pod: SimPod, capfd):
    result = run_cli("exec", "node03", "--", "sh", "-c", "hostname; exit 7")
    assert result.exit_code == 7
    assert capfd.readouterr().out.strip() == "node03"


# -- two pods side by side ---------------------------------------------------------------


def test_a_second_pod_coexists_and_foreign_containers_are_left_alone(bare_pod: SimPod, tmp_path: Path):
    from podctl.derive.site import load_site

    text = SIM_SITE.read_text().replace("name: sim\n", "name: simtwo\n").replace("10.89.0.", "10.77.0.")
    site_file = tmp_path / "simtwo.yaml"
    site_file.write_text(text.replace("../../podctl/schema", str(Path(SIM_SITE).parents[2] / "podctl/schema")))
    two = load_site(site_file)
    assert two.name == "simtwo" and two.management.cidr == ipaddress.IPv4Network("10.77.0.0/24")
    first_before = bare_pod.container_ids()
    podman = bare_pod.podman

    # A container that merely has podctl's name, without the label, is not ours.
    podman.run(
        ["create", "--name", "podctl-simtwo-node01", bare_pod.up.images[two.node("node01").platform.key], "true"]
    )
    try:
        with pytest.raises(SimError, match="not labelled io.podctl.pod=simtwo"):
            pod.up(podman, two, site_file, "node01", timeout_s=60, reporter=pod.Reporter())
        assert podman.container_by_name("podctl-simtwo-node01") is not None
    finally:
        podman.run(["rm", "--force", "podctl-simtwo-node01"])

    try:
        result = pod.up(podman, two, site_file, "head01,node01", timeout_s=120, reporter=pod.Reporter())
        assert [r.hostname for r in result.nodes] == ["head01", "node01"]
        assert {SIM_POD, "simtwo"} <= set(pod.pods_present(podman))
        ssh = SimPod(podman, two, site_file, result)
        assert ssh.ssh("node01", "hostname -I").stdout.decode().split() == ["10.77.0.11"]
        assert bare_pod.ssh("node01", "hostname -I").stdout.decode().split() == [f"{SIM_SUBNET_PREFIX}11"]
        with pytest.raises(
            SimError, match=rf"simulated pods are up \(.*{SIM_POD}, .*simtwo.*\): choose one with --pod"
        ):
            pod.resolve_pod(podman, None)
    finally:
        removed, network_removed = pod.down(podman, "simtwo", purge=False)
    assert sorted(removed) == ["podctl-simtwo-head01", "podctl-simtwo-node01"] and network_removed
    # Down keeps the pod's key and the image for the next `up`; --purge then deletes the state.
    assert state.ssh_key_path("simtwo").exists()
    assert podman.images(["--filter", "label=io.podctl.image=sim-node"])
    assert pod.down(podman, "simtwo", purge=True) == ([], False)
    assert podman.network(network_name("simtwo")) is None
    assert not state.pod_dir("simtwo").exists()
    # The first pod did not notice.
    assert bare_pod.container_ids() == first_before
    assert podman.network(network_name(SIM_POD)) is not None
    assert bare_pod.ssh("head01", "true").returncode == 0
