"""Helpers of the tests that bring up a sim pod: run podctl, copy the sim site, the shared pod.

Each pod gets its own name and bridge, so pods never share addresses, and the
default `sim` pod of `make demo` is left alone. Most sim tests share one
deployed pod (`Pod`, made once per session by tests/conftest.py's `sim_pod`);
a test that breaks a pod beyond repair brings up its own.

PODCTL_TEST_PODCTL names a podctl executable to run instead of this
checkout's (CI sets it to a wheel installed in a virtualenv outside the
checkout, so that the sim pod is deployed and validated by an installed podctl).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from podctl.core import state
from podctl.core.model import Site
from podctl.core.platforms import SlurmVersion
from podctl.derive.nodehealth import GATE_PROGRAM
from podctl.sim import pod as sim_pod_api
from podctl.sim.health import ssh_base
from podctl.sim.podman import Podman, container_name, pod_filter
from podctl.sim.preflight import preflight
from tests.helpers.repo import REPO, SIM_SITE

# The shared pod's name and /24: PODCTL_TEST_SIM_POD and PODCTL_TEST_SIM_SUBNET (e.g. "10.89.40.")
# let a second checkout run its own pod on the same machine beside this one.
SIM_POD = os.environ.get("PODCTL_TEST_SIM_POD", "simcert")
SIM_SUBNET_PREFIX = os.environ.get("PODCTL_TEST_SIM_SUBNET", "10.89.12.")
# The IPoIB supernet the shared pod gets (tests/conftest.py: `sim_nodes`), and its first octets.
SIM_IPOIB_SUPERNET = "172.24.0.0/16"
SIM_IPOIB_SUPERNET_PREFIX = "172.24."

# systemd's D-Bus services that start when a tool asks them something and exit after about 30 s
# idle (`hostnamectl`, which Ansible's hostname module runs on every deploy, starts
# systemd-hostnamed): not daemons a deploy restarts, and present or not by timing alone.
ON_DEMAND_SERVICES = frozenset({"systemd-hostnamed.service", "systemd-timedated.service", "systemd-localed.service"})


# The units Slurm 23.11 and later restart in place on `scontrol reconfigure`: a new process under
# the same unit (a new MainPID; the unit neither restarts nor leaves `active`: checked on 24.11).
RECONFIGURED_IN_PLACE = frozenset({"slurmctld.service", "slurmd.service"})


# A user of the sim site's policy (inventory/sim/site.yaml) who runs the MPI jobs, with the same uid
# on every node; and the job each rank runs: its rank, the size, the all-reduced sum of rank + 1,
# and its node.
MPI_USER = "podctl-mpi"
MPI_USER_UID = 2050
ALLREDUCE = (
    "from mpi4py import MPI; c = MPI.COMM_WORLD; "
    "print(c.Get_rank(), c.Get_size(), c.allreduce(c.Get_rank() + 1), MPI.Get_processor_name(), flush=True)"
)


def daemons_changed(
    before: dict[str, dict[str, dict[str, str]]],
    after: dict[str, dict[str, dict[str, str]]],
    new_process_ok: frozenset[str] = frozenset(),
) -> list[str]:
    """One line per service that restarted, stopped or started between two `Pod.daemons()` snapshots.
    A unit in `new_process_ok` may have a new MainPID, as long as systemd did not restart it."""
    lines = []
    for host in sorted(before.keys() | after.keys()):
        was, now = before.get(host, {}), after.get(host, {})
        for unit in sorted(was.keys() | now.keys()):
            if unit in new_process_ok and unit in was and unit in now:
                if {k: v for k, v in was[unit].items() if k != "MainPID"} != {
                    k: v for k, v in now[unit].items() if k != "MainPID"
                }:
                    lines.append(f"{host} {unit}: {was[unit]} -> {now[unit]}")
            elif was.get(unit) != now.get(unit):
                lines.append(f"{host} {unit}: {was.get(unit, 'not running')} -> {now.get(unit, 'not running')}")
    return lines


@functools.cache
def _podman() -> Podman:
    """podman as `podctl sim` runs it (the tools its preflight found, the runtime named)."""
    tools = preflight("exec")
    return Podman(tools.podman, tools.runc)


def podctl_command() -> list[str]:
    installed = os.environ.get("PODCTL_TEST_PODCTL")
    return [installed] if installed else [sys.executable, "-m", "podctl.cli"]


def podctl(*args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
    # An installed podctl runs away from the checkout, so that nothing of it can be found from there.
    cwd = Path(os.environ.get("TMPDIR", "/tmp")) if os.environ.get("PODCTL_TEST_PODCTL") else REPO
    proc = subprocess.run(
        [*podctl_command(), *args], capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"podctl {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def sim_site_copy(pod: str, subnet_prefix: str, ipoib_supernet: str, compute: int = 3) -> str:
    """inventory/sim/site.yaml as pod `pod` on `subnet_prefix`0/24 with `compute` compute nodes
    (the site's node[01-03]), for a temporary folder."""
    text = SIM_SITE.read_text().replace("node[01-03]", f"node[01-{compute:02d}]")
    text = re.sub(r"(?m)^  name: sim$", f"  name: {pod}", text)
    text = text.replace("10.89.0.", subnet_prefix).replace("172.30.0.0/16", ipoib_supernet)
    # The copy lives elsewhere: the wheel folder `make sim-wheels` fills, by its absolute path.
    text = text.replace("../../.cache/validation-wheels", str(REPO / ".cache" / "validation-wheels"))
    return re.sub(r"(?m)^# yaml-language-server.*\n", "", text)


def grown_sim_site(folder: Path, pod: str, compute: int) -> Path:
    """A copy of the sim site as pod `pod` with `compute` compute nodes, written to folder/site.yaml."""
    site_file = folder / "site.yaml"
    site_file.write_text(sim_site_copy(pod, "10.89.9.", "172.31.0.0/16", compute))
    return site_file


# The logs of Slurm's daemons the consumer test reads: name -> the command that prints it.
# slurmctld and slurmdbd (the slurm account) log to files; slurmd (root) to the journal.
DAEMON_LOGS = {
    "head01": {
        "slurmctld.log": "cat /var/log/slurm/slurmctld.log",
        "slurmdbd.log": "cat /var/log/slurm/slurmdbd.log",
    },
    "node01": {"slurmd.journal": "journalctl --no-pager -o cat -u slurmd"},
}


def sim_up(site: Path) -> None:
    """`podctl sim up`: every declared node running (a node that is already is kept)."""
    podctl("sim", "up", str(site), timeout=600)


@dataclass
class Nodes:
    """The run's sim pod before its deploy (tests/conftest.py: `sim_nodes`); tests/sim/conftest.py's
    `bare_pod` hands it out as a `SimPod`."""

    site: Path
    base: Path
    name: str = SIM_POD


@dataclass
class SimPod:
    """The run's sim pod before its deploy, through podctl's own sim API (tests/sim/conftest.py:
    `bare_pod`): its podman, its site and what `up` handed back (the key, the image)."""

    podman: Podman
    site: Site
    site_path: Path
    up: sim_pod_api.UpResult

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


@dataclass
class Pod:
    """The session's deployed sim pod: its site file and a folder for reports and runs."""

    site: Path
    base: Path
    name: str = SIM_POD
    first_deploy_stdout: str = ""

    @property
    def runs_dir(self) -> Path:
        """Where the fixture's deploy and the deploy tests' re-runs write their run folders."""
        return self.base / "runs"

    def ssh(self, host: str, command: str) -> str:
        """`command`'s stdout on `host` (its exit status is not checked)."""
        return self.sh(host, command).stdout

    def sh(self, host: str, command: str) -> subprocess.CompletedProcess[str]:
        # The `podman exec` that `podctl sim exec` runs once it has found the node's container
        # (tests/sim/test_sim_pod.py tests that command), without starting the CLI: 0.14 s a call
        # against 0.45 s, and a CI run makes about 700 of them.
        return _podman().run(["exec", container_name(self.name, host), "sh", "-c", command], check=False)

    def validate(self, name: str, *args: str, site: Path | None = None) -> tuple[int, dict, str]:
        report = self.base / name
        proc = podctl("validate", str(site or self.site), "--report", str(report), *args, check=False)
        assert proc.returncode in (0, 1), f"validate -> {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        data = json.loads((report / "report.json").read_text())
        return proc.returncode, data, proc.stdout + proc.stderr

    def snapshot_daemon_logs(self) -> None:
        """The daemons' logs as the session's deploy left them, before any test injects a fault
        (a stopped munge or a removed node makes Slurm log errors on purpose)."""
        for host, logs in DAEMON_LOGS.items():
            for name, command in logs.items():
                saved = self.base / "daemon-logs" / host / name
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(self.sh(host, command).stdout)

    def daemon_logs_after_deploy(self) -> dict[str, str]:
        """`host:name` -> the log's text when the deploy had finished."""
        return {
            f"{host}:{name}": (self.base / "daemon-logs" / host / name).read_text()
            for host, logs in DAEMON_LOGS.items()
            for name in logs
        }

    def daemons(self) -> dict[str, dict[str, dict[str, str]]]:
        """host -> service -> (NRestarts, ActiveEnterTimestamp, its monotonic form, MainPID) of every
        service systemd keeps running on every node: what a restart of anything would change.
        systemd's on-demand services (ON_DEMAND_SERVICES) are left out: they come and go by themselves."""
        listing = (
            "systemctl list-units --type=service --state=running --no-legend --plain | awk '{print $1}'"
            " | xargs -r systemctl show -p Id -p NRestarts -p ActiveEnterTimestamp"
            " -p ActiveEnterTimestampMonotonic -p MainPID"
        )
        out: dict[str, dict[str, dict[str, str]]] = {}
        for host in self.hosts():
            units: dict[str, dict[str, str]] = {}
            for block in self.ssh(host, listing).strip().split("\n\n"):
                fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
                if "Id" in fields and fields["Id"] not in ON_DEMAND_SERVICES:
                    units[fields.pop("Id")] = fields
            assert "sshd.service" in units or "ssh.service" in units, (host, units)
            out[host] = units
        return out

    def slurm_release(self) -> SlurmVersion:
        """The Slurm installed on the pod (its controller's slurm-client)."""
        return SlurmVersion.parse(self.ssh("head01", "dpkg-query -W -f='${Version}' slurm-client"))

    def reconfigures_in_place(self) -> bool:
        """Slurm 23.11 and later: `scontrol reconfigure` restarts slurmctld and slurmd in place."""
        return self.slurm_release() >= SlurmVersion(23, 11)

    def reconfigures_node_table(self) -> bool:
        """Slurm 24.11 and later take nodes added or removed with `scontrol reconfigure` (Slurm's FAQ)."""
        return self.slurm_release() >= SlurmVersion(24, 11)

    def hosts(self) -> list[str]:
        from podctl.derive.site import load_site

        return [n.hostname for n in load_site(self.site).nodes]

    def resume(self, *hosts: str, timeout_s: float = 120) -> None:
        """Put drained nodes back in service once each is fit again, then wait for every node to
        be idle. A node is fit when the health gate, asked now, passes, and no gate run that
        began before the repair is still on its way: slurmd starts one when it starts, and on a
        loaded machine it can drain the node seconds after a resume with a reason already gone."""
        running = f"pgrep -f '^/usr/bin/python3 -I {GATE_PROGRAM}' >/dev/null && echo running"
        for host in hosts:
            deadline = time.monotonic() + timeout_s
            while True:
                out = self.sh(host, f"{GATE_PROGRAM} --no-drain --print; {running}").stdout
                record = json.loads(out.removesuffix("running\n") or "{}")
                if record.get("status") == "pass" and not out.endswith("running\n"):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{host} not fit to resume after {timeout_s:.0f} s:\n{out[-2000:]}")
                time.sleep(2)
            self.sh("head01", f"scontrol update NodeName={host} State=RESUME")
        self.wait_idle()

    def add_logins(self, users: dict[str, int]) -> None:
        """Users with these uids on every node, as a site's directory gives them. One a policy
        named before it had a login has no uid in slurmctld's associations, which reads the
        missing ones hourly or when reconfigured (docs/slurm.md): so after adding any, slurmctld
        is reconfigured and the nodes waited for."""
        added = False
        for host in self.hosts():
            for name, uid in users.items():
                made = self.sh(
                    host,
                    f"id -u {name} >/dev/null 2>&1 && echo had || "
                    f"useradd --no-create-home --home-dir /nonexistent --uid {uid} {name}",
                )
                assert made.returncode == 0, made.stderr
                added = added or "had" not in made.stdout
        if added:
            self.ssh("head01", "scontrol reconfigure")
            deadline = time.monotonic() + 60
            while self.sh("head01", "scontrol ping | grep -q UP").returncode != 0:
                assert time.monotonic() < deadline, "slurmctld not back within 60 s of its reconfigure"
                time.sleep(1)
            self.wait_idle()

    def wait_idle(self, timeout_s: float = 240) -> None:
        """Every compute node idle in Slurm again (after a fault was undone)."""
        deadline = time.monotonic() + timeout_s
        states = ""
        while time.monotonic() < deadline:
            states = self.sh("head01", "sinfo -h -N -o '%N %T' | sort -u").stdout
            if states.split() and all(line.split()[1] == "idle" for line in states.strip().splitlines()):
                return
            time.sleep(3)
        raise AssertionError(f"nodes not idle after {timeout_s:.0f} s:\n{states}")


def certify(pod: Pod, runs: int) -> None:
    """`runs` full validates in a row, each CERTIFIED with every suite run and every compute node
    judged on its figures, and every job podctl ran COMPLETED 0:0 in Slurm's accounting."""
    from podctl.core.model import Role
    from podctl.derive.site import load_site

    compute = [n.hostname for n in load_site(pod.site).nodes if Role.COMPUTE in n.roles]
    assert compute, pod.site
    since = pod.sh("head01", "date +%Y-%m-%dT%H:%M:%S").stdout.strip()
    for attempt in range(1, runs + 1):
        rc, data, out = pod.validate(f"healthy-{attempt}")
        assert rc == 0 and data["verdict"] == "CERTIFIED", f"run {attempt}: {data['failures']}\n{out[-3000:]}"
        assert "CERTIFIED" in out and "report.html" in out
        # Every suite ran and every node was judged on its figures.
        checks = {(r["check"], r["scope"]) for r in data["runs"]}
        assert {
            ("conformance", "node"),
            ("health", "node"),
            ("burnin", "node"),
            ("collectives", "node"),
            ("collectives", "pair"),
            ("collectives", "pod"),
            ("smoke", "pod"),
        } <= checks
        judged = {(v["node"], v["figure"]) for v in data["verdicts"]}
        for node in compute:
            for figure in (
                "gemm_fp32_gflops",
                "memory_bandwidth",
                "allreduce_busbw_cpu",
                "allreduce_busbw_multinode_cpu",
                "smoke_tflops_per_node",
            ):
                assert (node, figure) in judged
    html = (pod.base / f"healthy-{runs}" / "report.html").read_text()
    assert "Pairwise bus bandwidth" in html and "<svg" in html
    assert (pod.base / f"healthy-{runs}" / "junit.xml").is_file()
    # podctl's own jobs end clean in Slurm's accounting too: an operator reads sacct, not the report.
    fields = "JobID,JobName,State,ExitCode,DerivedExitCode,NodeList"
    lines = pod.sh("head01", f"sacct -a -X -n -P -S {since} -o {fields}").stdout.splitlines()
    ours = [line.split("|") for line in lines if line.split("|")[1:2] and line.split("|")[1].startswith("podctl-")]
    assert {job[1].split("-")[1] for job in ours} >= {"collectives", "smoke"}, lines
    unclean = [job for job in ours if job[2] != "COMPLETED" or job[3] != "0:0"]
    assert not unclean, f"{len(unclean)} of {len(ours)} podctl jobs did not end clean ({fields}): {unclean}"
