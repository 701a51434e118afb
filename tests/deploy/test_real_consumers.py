"""The configuration podctl renders, handed to the programs that read it: Slurm's daemons, promtool, amtool.

For every example site, the slurm and monitoring roles' templates are
rendered for the site's controller and Prometheus host (tests/helpers/roles.py), then:

- for each Slurm generation podctl deploys (podctl.core.platforms: Debian 12's
  22.05, Debian 13's 24.11), the files rendered for it, and that generation's
  slurmctld starts on them in a sandbox of its own (its own hostname, network
  and mounts; the files bound over /etc/slurm, a munged of its own, the
  site's hosts resolving to the sandbox's address), and for the sim site a
  slurmd registers node01 with it. Debian 12's daemons run on this machine
  (`unshare`), Debian 13's in a trixie image (podman; .ci/consumers-image.sh
  builds it: they need a newer glibc than Debian 12's). Every process a
  sandbox starts ends with it, the test failed or not (`_run_sandbox`). Any error, warning
  or fatal line either logs fails the test. The one change to the rendered
  files: accounting is off, because the sandbox has no slurmdbd (the sim pod
  test below runs the real one), and with it the policy's lines that need it;
- `promtool check config` (with the rule files it names) and `amtool
  check-config` read the monitoring files at their real paths.

On the deployed sim pod, the daemons podctl deployed (slurmctld, slurmdbd,
slurmd) must have logged no error or warning since they started.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from podctl.core import platforms
from podctl.core.assets import roles_dir
from podctl.core.model import Role
from podctl.derive.nodehealth import GATE_PROGRAM, GATE_PROLOG
from podctl.derive.site import load_site
from tests.helpers import processes
from tests.helpers.repo import DATA, REPO
from tests.helpers.roles import bcrypt_filter, render_templates

pytestmark = pytest.mark.deploy

SITES = {
    "sim": REPO / "inventory" / "sim" / "site.yaml",
    "every-field": DATA / "valid-every-field.yaml",
    "custom-profile": DATA / "valid-custom-profile.yaml",
    "dgx-a100-140": REPO / "inventory" / "examples" / "dgx-a100-superpod-140.yaml",
    "dgx-h100-127": REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml",
}
SLURM_FILES = {n: f"{n}.j2" for n in ("slurm.conf", "topology.conf", "cgroup.conf", "gres.conf", "mpi.conf")}
MONITORING_FILES = {
    "prometheus.yml": "prometheus.yml.j2",
    "podctl.rules.yml": "podctl.rules.yml.j2",
    "alertmanager.yml": "alertmanager.yml.j2",
    "podctl-web.yml": "podctl-web.yml.j2",
    "prometheus.default": "prometheus.default.j2",
    "prometheus-alertmanager.default": "prometheus-alertmanager.default.j2",
    "podctl-monitoring-get": "podctl-monitoring-get.j2",
}
# The login's two users, with throwaway passwords (the role generates random ones).
LOGIN_PASSWORDS = {"podctl": "operator-password-for-the-sandbox", "prometheus": "prometheus-own-password-sandbox"}
SANDBOX_ADDRESS = "10.255.0.1"
# slurm.conf lines slurmctld refuses without slurmdbd (the policy's), left out in the sandbox.
NEEDS_SLURMDBD = (
    "AccountingStorageEnforce=",
    "AccountingStorageTRES=",
    "PriorityWeightAge=",
    "PriorityWeightFairshare=",
)
# The Slurm generations the daemons are tested at, and where each one's daemons run: this
# machine's own (CI's host is Debian 12: .ci/run) or the image of the platform's release.
HOST_PLATFORM = platforms.by_key("debian-12")
SLURM_GENERATIONS = {str(p.slurm): p for p in platforms.SUPPORTED}
PROMETHEUS_GENERATIONS = {p.prometheus: p for p in platforms.SUPPORTED}
SELECT_TYPES = yaml.safe_load((roles_dir() / "slurm" / "vars" / "main.yml").read_text())["_podctl_slurm_select_types"]
# What a log line that needs a look starts with, after its timestamp.
COMPLAINTS = ("error:", "fatal:", "warning:", "WARNING:")
# Lines that are no complaint about the configuration, each with why.
NOT_ABOUT_THE_CONFIG = (
    # A controller's first start: nothing was saved yet (Slurm says so once, even with -c).
    "state file /",
    "No fed_mgr state file (",
    "NOTE: Trying backup state save file",
    # The sandbox runs the primary controller alone: the backup it greets is not there.
    "_shutdown_bu_thread:send/recv",
    # The host's clock under load (slurmctld times gettimeofday at start), not the file's content.
    "High latency for 1000 calls to gettimeofday()",
    # Slurm 24.11's slurmdbd, whenever a cluster is added to accounting: seen both when sacctmgr
    # adds it (the role, before slurmctld's first start) and when slurmctld registers it itself
    # (the cluster deleted, slurmctld started), on a sim head node (2026-12-06). 22.05 says nothing.
    "We can't find assoc 1 on cluster ",
)


def _need(*tools: str) -> None:
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: make test installs them (.ci/consumers-setup.sh)")


def complaints(log: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if any(c in line for c in COMPLAINTS) and not any(n in line for n in NOT_ABOUT_THE_CONFIG)
    ]


SANDBOX = r"""
set -eu
hostname "$CONTROLLER"
ip link set lo up
ip link add v0 type veth peer name v1
ip addr add {address}/24 dev v0
ip link set v0 up
ip link set v1 up
mount --bind "$WORK/hosts" /etc/hosts
mount --bind "$WORK/etc-slurm" /etc/slurm
# The folders of the pid files first (the units' runtime directories, which systemd makes; /run
# itself for 22.05): each a tmpfs of the sandbox's own, so no daemon writes into the host's /run
# and two sandboxes at once never share a pid file.
for dir in $RUN_DIRS /var/lib/slurm /var/log/slurm /run/munge "$STATE_ROOT"; do
    mkdir -p "$dir" && mount -t tmpfs tmpfs "$dir"
done
mkdir -p "$STATE" /var/lib/slurm/slurmd && chown -R slurm "$STATE" /var/lib/slurm /var/log/slurm
chown munge /run/munge
install -o munge -m 0400 "$WORK/munge.key" /run/munge/munge.key
runuser -u munge -- munged --key-file=/run/munge/munge.key --force
# -c: a first start, on an empty state folder (a deployed controller's first start logs the missing
# state files once; they are no complaint about the configuration).
slurmctld -D -c > /var/log/slurm/slurmctld.out 2>&1 &
daemons=$!
# Waited for: slurmctld ready (its log says it runs as the primary controller; no RPC, which a
# controller still starting would log as a broken conversation), then the node registered. A site
# with a backup controller keeps slurmctld busy with it here (every host is this sandbox) and
# takes the whole 4 s. The node gets up to 30 s (it was 6): slurmd runs the health gate before it
# registers, which a loaded machine slows, and a wait that ends as soon as the node is idle costs
# nothing more when it is fast.
until_for() {
    deadline=$(($(date +%s) + $1))
    shift
    until "$@" || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.2; done
}
primary() { grep -qs "Running as primary controller" /var/log/slurm/slurmctld.log /var/log/slurm/slurmctld.out; }
registered() { scontrol show node "$NODE" 2>/dev/null | grep -q "State=IDLE"; }
until_for 4 primary
if [ -n "$NODE" ]; then
    slurmd -D -N "$NODE" > /var/log/slurm/slurmd.out 2>&1 &
    daemons="$daemons $!"
    until_for 30 registered
    scontrol show node "$NODE" > "$WORK/node.txt" 2>&1 || true
fi
# Up a little longer: what a daemon logs soon after it is ready (a node's first registration
# judged by slurmctld) is judged too.
sleep 2
# What the daemons logged while up is judged, not what they say on their way down (24.11's
# slurmctld: "agent_fini: left 6 agent threads active").
for log in slurmctld.log slurmctld.out slurmd.out; do
    cat "/var/log/slurm/$log" > "$WORK/$log" 2>/dev/null || true
done
# Their logs are kept: killed outright by their pids (a graceful stop of 24.11's slurmctld waits
# seconds on its agent threads, in every one of the many sandboxes), and waited for. dash's
# `$(jobs -p)` runs in a subshell, which has no jobs. munged forked away from the script's jobs;
# whatever is left dies with the sandbox (_run_sandbox).
kill -KILL $daemons "$(cat /run/munge/munged.pid)" 2>/dev/null || true
wait
""".replace("{address}", SANDBOX_ADDRESS)


def _consumers_image() -> str:
    """The image of Debian 13's consumers, built by .ci/consumers-image.sh (which names it)."""
    _need("podman")
    image = subprocess.run(
        ["bash", str(REPO / ".ci" / "consumers-image.sh"), "--tag"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
        pytest.fail(f"{image} not built: make test builds it (.ci/consumers-setup.sh)")
    return image


def _run_sandbox(
    platform: platforms.Platform,
    script: str,
    namespaces: list[str],
    env: dict[str, str],
    tmp_path: Path,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the shell `script` (in `env`, with `tmp_path`) with `platform`'s programs: this
    machine's own in the `unshare` `namespaces`, another release's in a container of its own
    namespaces, set up as unshare's (privileged: the script names the host, adds an address,
    mounts); the checkout is there too (the health gate runs from it).

    Every process the script starts ends with it, also when it fails or runs past `timeout`: on
    this machine the script is the first process of a PID namespace of its own, and when it ends
    the kernel kills the rest (a daemon that forked away included) before unshare returns; unshare,
    killed at the timeout, kills the script (--kill-child). A container is removed whatever
    happened (`--rm` when the script ends; by name when this test did not wait for it)."""
    if platform == HOST_PLATFORM:
        _need("unshare")
        command = ["unshare", "--pid", "--mount-proc", "--kill-child", *namespaces, "sh", "-c", script]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    name = f"podctl-consumers-{secrets.token_hex(6)}"
    command = [
        # A small CPU weight: under make test this runs beside the sim part's pod, whose nodes'
        # containers would otherwise weigh no more than this one (nice does not cross cgroups).
        "podman", "run", "--rm", f"--name={name}", "--privileged", "--network=none", "--cpu-shares=64",
        f"--volume={tmp_path}:{tmp_path}", f"--volume={REPO}:{REPO}:ro",
        *(f"--env={key}={value}" for key, value in env.items()),
        _consumers_image(), "sh", "-c", script,
    ]  # fmt: skip
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except BaseException:  # the timeout, an interrupt: podman's client is gone, its container is not
        subprocess.run(
            ["podman", "rm", "--force", "--ignore", "--time=0", name], capture_output=True, timeout=60, check=False
        )
        raise


def test_every_process_a_sandbox_starts_ends_with_it_when_its_script_fails_or_runs_too_long(tmp_path: Path) -> None:
    # A daemon that forks away (as munged does) and one left in the background, then the script
    # fails; then the same, and the script runs past its timeout.
    daemon = tmp_path / f"sbx{secrets.token_hex(5)}"  # a name of its own: the kernel keeps 15 characters
    shutil.copy("/bin/sleep", daemon)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DAEMON": str(daemon)}
    started = 'setsid "$DAEMON" 300 < /dev/null > /dev/null 2>&1 & "$DAEMON" 300 > /dev/null 2>&1 & '
    failed = _run_sandbox(HOST_PLATFORM, started + "sleep 1; false", ["-n"], env, tmp_path)
    assert failed.returncode == 1, failed.stderr
    assert processes.running({daemon.name}) == []  # unshare returns once its namespace is empty
    with pytest.raises(subprocess.TimeoutExpired):
        _run_sandbox(HOST_PLATFORM, started + "sleep 300", ["-n"], env, tmp_path, timeout=2)
    # unshare was killed: its namespace's processes go after it.
    deadline = time.monotonic() + 10
    while processes.running({daemon.name}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes.running({daemon.name}) == []


@pytest.mark.parametrize("generation", sorted(SLURM_GENERATIONS))
@pytest.mark.parametrize("name", sorted(SITES))
def test_slurm_daemons_start_on_the_rendered_config_without_a_complaint(
    name: str, generation: str, tmp_path: Path
) -> None:
    _start_slurm_daemons(name, generation, tmp_path)


# The role's other choices of SelectType (the sites above choose cons_tres): the lines each
# generation gets for them start its slurmctld too.
@pytest.mark.parametrize("generation", sorted(SLURM_GENERATIONS))
@pytest.mark.parametrize("select_type", [t for t in SELECT_TYPES if t != "select/cons_tres"])
def test_slurm_daemons_start_with_each_select_type(select_type: str, generation: str, tmp_path: Path) -> None:
    conf = _start_slurm_daemons("custom-profile", generation, tmp_path, {"podctl_slurm_select_type": select_type})
    lines = conf.splitlines()
    version = platforms.SlurmVersion.parse(generation)
    # Removed in 23.11: its successor. Since 24.05 linear refuses topology/tree: none.
    renamed = select_type == "select/cons_res" and version >= platforms.SlurmVersion(23, 11)
    assert f"SelectType={'select/cons_tres' if renamed else select_type}" in lines
    flat = select_type == "select/linear" and version >= platforms.SlurmVersion(24, 5)
    assert f"TopologyPlugin=topology/{'default' if flat else 'tree'}" in lines


# The site's own settings (docs/slurm.md), as the every-field site gives them, on the sim site's
# sandbox, where slurmd runs too: both daemons read slurm.conf and cgroup.conf, and an unknown key
# is fatal to either (seen: "Parsing error at unrecognized key").
@pytest.mark.parametrize("generation", sorted(SLURM_GENERATIONS))
def test_the_sites_own_settings_are_read_by_each_releases_daemons(generation: str, tmp_path: Path) -> None:
    own = load_site(SITES["every-field"]).slurm
    sim = load_site(SITES["sim"]).slurm
    assert own is not None and sim is not None and own.config and own.cgroup_config
    partitions = [
        {
            "name": p.name,
            "nodes": p.hostlist,
            "default": p.default,
            "max_time": p.max_time,
            "options": dict(own.partitions[0].options),
        }
        for p in sim.partitions
    ]
    overrides = {
        "podctl_slurm_config": dict(own.config),
        "podctl_slurm_cgroup_config": dict(own.cgroup_config),
        "podctl_slurm_partitions": partitions,
    }
    conf = _start_slurm_daemons("sim", generation, tmp_path, overrides)
    assert "KillWait=60" in conf.splitlines() and " OverSubscribe=EXCLUSIVE" in conf


def _start_slurm_daemons(name: str, generation: str, tmp_path: Path, overrides: dict[str, object] | None = None) -> str:
    """Start `generation`'s slurmctld (and the sim's slurmd) on the files rendered for the site
    `name` (with the role's inputs `overrides`), fail on any complaint they log; the slurm.conf."""
    platform = SLURM_GENERATIONS[generation]
    if platform == HOST_PLATFORM:
        _need("slurmctld", "slurmd", "munged", "scontrol")
    site = load_site(SITES[name])
    assert site.slurm is not None
    controller = site.slurm.controllers[0]
    files = render_templates(
        SITES[name], "slurm", controller, SLURM_FILES, tmp_path, overrides, slurm_version=generation
    )
    conf = files["slurm.conf"]
    for line in ("CredType=cred/munge", "MailProg=/bin/true"):
        assert line in conf.splitlines()
    assert "CryptoType" not in conf
    if len(site.slurm.controllers) > 1:
        # Failover: every controller reads and writes one state folder on shared storage.
        assert f"StateSaveLocation={site.slurm.state_save_location}" in conf
        assert not site.slurm.state_save_location.startswith("/var/lib")
    hc = site.slurm.health_check
    if hc is not None:
        # The health gate as slurmd runs it (the deployed program, here from the checkout), with
        # expectations the sandbox can meet: slurmd runs it at start, before it registers.
        for line in (f"HealthCheckProgram={GATE_PROGRAM}", f"HealthCheckInterval={hc.interval_s}"):
            assert line in conf.splitlines()
        assert ("Prolog=" in conf) == hc.prolog
        gate = tmp_path / "gate"
        gate.write_text(
            f"#!/bin/sh\nexec /usr/bin/python3 {REPO / 'validation' / 'healthgate.py'} --expect {tmp_path}/health.json "
            f"--state {tmp_path}/gate-state --no-drain\n"
        )
        gate.chmod(0o755)
        (tmp_path / "health.json").write_text(json.dumps({"node": "sandbox", "free_space": [], "services": []}))
        files["slurm.conf"] = conf.replace(GATE_PROGRAM, str(gate)).replace(GATE_PROLOG, str(gate))
    etc = tmp_path / "etc-slurm"
    etc.mkdir()
    for file_name, text in files.items():
        if file_name == "slurm.conf":  # the sandbox has no slurmdbd: the lines accounting-off sites get
            text = text.replace(
                "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageType=accounting_storage/none"
            )
            text = text.replace("JobAcctGatherType=jobacct_gather/linux", "JobAcctGatherType=jobacct_gather/none")
            # And a policy's lines that slurmctld takes only with slurmdbd (24.11: "You can not have
            # AccountingStorageEnforce set for AccountingStorageType='(null)'", "fatal: slurmdbd is
            # required to run with TRES gres/gpu", "PriorityWeightAge can only be used with SlurmDBD");
            # the sim pod's test below reads the policy's lines with its real slurmdbd.
            text = "".join(line for line in text.splitlines(True) if not line.startswith(NEEDS_SLURMDBD))
        (etc / file_name).write_text(text)
    hosts = " ".join(n.hostname for n in site.nodes)
    (tmp_path / "hosts").write_text(f"127.0.0.1 localhost\n{SANDBOX_ADDRESS} {hosts}\n")
    (tmp_path / "munge.key").write_bytes(bytes(range(256)) * 4)
    state = site.slurm.state_save_location
    emulated = site.emulated
    compute = next(n.hostname for n in site.nodes if Role.COMPUTE in n.roles)
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "WORK": str(tmp_path),
        "CONTROLLER": controller,
        "STATE": state,
        "STATE_ROOT": "/" + state.strip("/").split("/")[0]
        if not state.startswith("/var/lib/slurm")
        else "/var/lib/slurm",
        # Node registration where the sim's nodes are this machine: real hardware it is not.
        "NODE": compute if emulated else "",
        "RUN_DIRS": " ".join(
            sorted(
                {
                    str(Path(line.split("=", 1)[1]).parent)
                    for line in conf.splitlines()
                    if line.startswith(("SlurmctldPidFile=", "SlurmdPidFile="))
                }
            )
        ),
    }
    proc = _run_sandbox(platform, SANDBOX, ["-u", "-n", "-m"], env, tmp_path)
    ctld = (tmp_path / "slurmctld.log").read_text() if (tmp_path / "slurmctld.log").exists() else ""
    out = (tmp_path / "slurmctld.out").read_text() if (tmp_path / "slurmctld.out").exists() else ""
    # The generation asked for is the one that ran ("slurmctld version 24.11.5 started ...").
    assert f"slurmctld version {generation}." in ctld, (
        f"slurmctld {generation} did not start:\n{proc.stderr[-2000:]}\n{out[-3000:]}\n{ctld[-2000:]}"
    )
    problems = complaints(ctld) + complaints(out)
    if emulated:
        # slurmd logs to its standard error (the journal, on a node): no SlurmdLogFile.
        slurmd = (tmp_path / "slurmd.out").read_text()
        problems += complaints(slurmd)
        node = (tmp_path / "node.txt").read_text()
        assert "State=IDLE" in node, node
        if hc is not None:
            record = json.loads((tmp_path / "gate-state" / "last.json").read_text())
            assert record["status"] == "pass", record
    assert not problems, "\n".join(problems[:40])
    return conf


def _monitoring_etc(
    name: str, tmp_path: Path, overrides: dict[str, object] | None = None
) -> tuple[Path, dict[str, str]]:
    """/etc/prometheus as the monitoring role leaves it on the site's Prometheus host, in a folder:
    the rendered files, Prometheus's own password (LOGIN_PASSWORDS) and the site's certificate."""
    site = load_site(SITES[name])
    assert site.monitoring is not None
    users = {user: bcrypt_filter().bcrypt_hash(password) for user, password in LOGIN_PASSWORDS.items()}
    files = render_templates(
        SITES[name],
        "monitoring",
        site.monitoring.prometheus_host,
        MONITORING_FILES,
        tmp_path,
        {"__podctl_monitoring_web_users": users, **(overrides or {})},
    )
    etc = tmp_path / "etc-prometheus"
    etc.mkdir()
    for file_name, text in files.items():
        (etc / file_name).write_text(text)
    (etc / "podctl-prometheus.password").write_text(LOGIN_PASSWORDS["prometheus"] + "\n")
    if site.monitoring.tls is not None:
        shutil.copy(site.monitoring.tls.cert, etc / "podctl-web.crt")
        shutil.copy(site.monitoring.tls.key, etc / "podctl-web.key")
    return etc, files


@pytest.mark.parametrize("prometheus", sorted(PROMETHEUS_GENERATIONS))
@pytest.mark.parametrize("name", sorted(n for n, p in SITES.items() if load_site(p).monitoring))
def test_monitoring_config_passes_promtool_and_amtool(name: str, prometheus: str, tmp_path: Path) -> None:
    platform = PROMETHEUS_GENERATIONS[prometheus]
    if platform == HOST_PLATFORM:
        _need("promtool", "amtool")
    etc, _ = _monitoring_etc(name, tmp_path)
    script = (
        f"promtool --version && mount --bind {etc} /etc/prometheus && "
        "promtool check config /etc/prometheus/prometheus.yml && "
        "promtool check rules /etc/prometheus/podctl.rules.yml && "
        "promtool check web-config /etc/prometheus/podctl-web.yml && "
        "amtool check-config /etc/prometheus/alertmanager.yml"
    )
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    proc = _run_sandbox(platform, script, ["-m"], env, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"promtool, version {prometheus}." in proc.stdout, proc.stdout[:300]
    assert "SUCCESS" in proc.stdout + proc.stderr
    assert not [line for line in (proc.stdout + proc.stderr).splitlines() if "WARNING" in line.upper()]


# What the health gate exports for three nodes over 30 minutes (the sim site's gate runs every
# 300 s): node01 healthy throughout; node02 finds a fault at 10m and drains; node03 is unhealthy
# and cannot drain itself from 10m, and its gate last ran at 10m (slurmd gone).
# node03's gate stops at minute 10; the stale alert waits three of the site's intervals after that.
HEALTH_RULE_TESTS = """
rule_files: [podctl.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'podctl_health_ok{instance="node01:9100",job="node"}'
        values: '1x30'
      - series: 'podctl_health_ok{instance="node02:9100",job="node"}'
        values: '1x9 0x20'
      - series: 'podctl_health_drain_failed{instance="node03:9100",job="node"}'
        values: '0x9 1x20'
      - series: 'podctl_health_last_run_timestamp_seconds{instance="node01:9100",job="node"}'
        values: '0+60x30'
      - series: 'podctl_health_last_run_timestamp_seconds{instance="node03:9100",job="node"}'
        values: '0+60x10 600x20'
    alert_rule_test:
      - eval_time: 5m
        alertname: PodctlNodeUnhealthy
        exp_alerts: []
      - eval_time: 12m
        alertname: PodctlNodeUnhealthy
        exp_alerts:
          - exp_labels: {severity: warning, instance: "node02:9100", job: node}
            exp_annotations:
              summary: "podctl's health gate found a fault on node02:9100: the node is drained (podctl status shows why)"
      - eval_time: 12m
        alertname: PodctlNodeCannotDrain
        exp_alerts:
          - exp_labels: {severity: critical, instance: "node03:9100", job: node}
            exp_annotations:
              summary: "node03:9100 is unhealthy and could not drain itself (munge or slurmctld unreachable): drain it by hand"
      - eval_time: {quiet_m}m
        alertname: PodctlHealthCheckStale
        exp_alerts: []
      - eval_time: {loud_m}m
        alertname: PodctlHealthCheckStale
        exp_alerts:
          - exp_labels: {severity: warning, instance: "node03:9100", job: node}
            exp_annotations:
              summary: "podctl's health gate has not run on node03:9100 for three intervals (slurmd down?)"
"""


def test_the_health_alerts_fire_for_what_the_gate_exports(tmp_path: Path) -> None:
    _need("promtool")
    files = render_templates(
        SITES["sim"], "monitoring", "head01", {"podctl.rules.yml": "podctl.rules.yml.j2"}, tmp_path
    )
    (tmp_path / "podctl.rules.yml").write_text(files["podctl.rules.yml"])
    stale_after_s = 3 * load_site(SITES["sim"]).slurm.health_check.interval_s
    quiet_m = 10 + stale_after_s // 60  # a record that old is not stale yet
    (tmp_path / "tests.yml").write_text(
        HEALTH_RULE_TESTS.replace("{quiet_m}", str(quiet_m)).replace("{loud_m}", str(quiet_m + 1))
    )
    proc = subprocess.run(
        ["promtool", "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.sim
def test_the_deployed_daemons_have_logged_no_complaint(sim_pod) -> None:
    # As the session's deploy left them: the day-2 tests stop munge and remove a node on purpose.
    problems = []
    for where, text in sim_pod.daemon_logs_after_deploy().items():
        assert text.strip(), f"{where} is empty or missing"
        problems += [f"{where}: {line}" for line in complaints(text)]
    assert not problems, "\n".join(problems[:40])


@pytest.mark.parametrize("name", sorted(n for n, p in SITES.items() if load_site(p).monitoring))
def test_the_exporters_firewall_rules_load_in_nft_and_load_again(name: str, tmp_path: Path) -> None:
    # In a network namespace of its own: the rules the Prometheus host and a compute node get,
    # loaded twice (a reload replaces podctl's table), beside a table of someone else's that
    # they must leave alone.
    _need("nft", "unshare")
    site = load_site(SITES[name])
    assert site.monitoring is not None
    compute = next(n.hostname for n in site.nodes if Role.COMPUTE in n.roles)
    for host in sorted({site.monitoring.prometheus_host, compute}):
        rules = render_templates(
            SITES[name], "monitoring", host, {"podctl-monitoring.nft": "podctl-monitoring.nft.j2"}, tmp_path
        )["podctl-monitoring.nft"]
        path = tmp_path / f"{host}.nft"
        path.write_text(rules)
        script = (
            "nft add table inet someone_else && nft add chain inet someone_else c && "
            f"nft -c -f {path} && nft -f {path} && nft -f {path} && nft list ruleset"
        )
        proc = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("table inet podctl_monitoring {") == 1, proc.stdout
        assert "table inet someone_else {" in proc.stdout


# Prometheus and Alertmanager with the files the role renders for the every-field site: its
# certificate (a CA-signed leaf, pinned), basic auth, the Prometheus host's management address on
# an interface of the sandbox's own, the site's names in its /etc/hosts. Then the rendered query
# program asks them, and requests without the login are made.
LOGIN_SANDBOX = r"""
set -eu
ip link set lo up
ip link add v0 type veth peer name v1
ip addr add "$LISTEN/16" dev v0
ip link set v0 up
ip link set v1 up
mount --bind "$WORK/hosts" /etc/hosts
mount --bind "$WORK/etc-prometheus" /etc/prometheus
mkdir -p "$WORK/tsdb" "$WORK/am"
. /etc/prometheus/prometheus.default
prometheus --config.file=/etc/prometheus/prometheus.yml --storage.tsdb.path="$WORK/tsdb" $ARGS > "$WORK/prometheus.log" 2>&1 &
P=$!
. /etc/prometheus/prometheus-alertmanager.default
prometheus-alertmanager --config.file=/etc/prometheus/alertmanager.yml --storage.path="$WORK/am" $ARGS > "$WORK/am.log" 2>&1 &
A=$!
python3 "$WORK/probe.py" > "$WORK/probe.json"
kill $P $A
wait $P $A || true
"""
LOGIN_PROBE = r"""
import json, ssl, subprocess, sys, time, urllib.request
GET = ["python3", "/etc/prometheus/podctl-monitoring-get"]
OWN = ["--user", "prometheus", "--password-file", "/etc/prometheus/podctl-prometheus.password"]
def get(*args, stdin=""):
    p = subprocess.run([*GET, *args], input=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr.strip()
out = {}
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    rc, text, _ = get(*OWN, "prometheus", "/api/v1/targets")
    if rc == 0:
        targets = json.loads(text)["data"]["activeTargets"]
        health = {t["labels"]["job"]: t["health"] for t in targets if t["labels"]["job"] == "prometheus"}
        rc_am, am, _ = get(*OWN, "prometheus", "/api/v1/alertmanagers")
        if health.get("prometheus") == "up" and rc_am == 0 and json.loads(am)["data"]["activeAlertmanagers"]:
            out["self_scrape"] = health["prometheus"]
            out["alertmanagers"] = [a["url"] for a in json.loads(am)["data"]["activeAlertmanagers"]]
            break
    time.sleep(0.5)
out["operator"] = get("alertmanager", "/api/v2/status", stdin=sys.argv[1] + "\n")[0]
out["wrong_password"] = get("prometheus", "/api/v1/alerts", stdin="wrong\n")[2]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.load_verify_locations(cafile="/etc/prometheus/podctl-web.crt")
context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
silence = json.dumps({"matchers": [{"name": "alertname", "value": "PodctlNodeCannotDrain", "isRegex": False}],
    "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2099-01-01T00:00:00Z", "createdBy": "x", "comment": "x"}).encode()
try:
    opener.open(urllib.request.Request(sys.argv[2] + "/api/v2/silences", data=silence, method="POST",
        headers={"Content-Type": "application/json"}), timeout=10)
    out["silence"] = "accepted"
except urllib.error.HTTPError as exc:
    out["silence"] = exc.code
try:
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(sys.argv[3] + "/-/ready", timeout=10)
    out["plain_http"] = "answered"
except urllib.error.HTTPError as exc:
    out["plain_http"] = exc.code
except Exception as exc:
    out["plain_http"] = type(exc).__name__
print(json.dumps(out))
"""


def test_prometheus_and_alertmanager_serve_their_login_over_the_sites_certificate(tmp_path: Path) -> None:
    _need("prometheus", "prometheus-alertmanager", "unshare", "ip")
    site = load_site(SITES["every-field"])
    assert site.monitoring is not None and site.monitoring.tls is not None
    host = site.node(site.monitoring.prometheus_host)
    # Scrape every second: what is judged here is the login, not the site's interval.
    etc, files = _monitoring_etc("every-field", tmp_path, {"podctl_monitoring_scrape_interval": "1s"})
    name = site.monitoring.tls.server_name
    (tmp_path / "hosts").write_text(f"127.0.0.1 localhost\n{host.address} {name} {host.hostname}\n")
    (tmp_path / "probe.py").write_text(LOGIN_PROBE)
    am_url, plain_url = f"https://{name}:9093", f"http://{host.address}:9090"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "WORK": str(tmp_path), "LISTEN": str(host.address)}
    script = LOGIN_SANDBOX.replace(
        'python3 "$WORK/probe.py"',
        f'python3 "$WORK/probe.py" {shlex.quote(LOGIN_PASSWORDS["podctl"])} {am_url} {plain_url}',
    )
    proc = _run_sandbox(HOST_PLATFORM, script, ["-n", "-m"], env, tmp_path)
    logs = "".join((tmp_path / f).read_text()[-2000:] for f in ("prometheus.log", "am.log") if (tmp_path / f).exists())
    assert proc.returncode == 0, proc.stderr[-2000:] + logs
    probe = json.loads((tmp_path / "probe.json").read_text())
    # Prometheus reaches itself and Alertmanager over TLS with its own login; the site's name.
    assert probe.get("self_scrape") == "up", (probe, logs)
    assert probe["alertmanagers"] == [f"https://{name}:9093/api/v2/alerts"]
    assert probe["operator"] == 0  # the web user, its password on standard input
    assert probe["wrong_password"] == "prometheus: HTTP 401 Unauthorized"
    assert probe["silence"] == 401  # Alertmanager's API refuses a silence without the login
    assert probe["plain_http"] == 400  # Go's answer to plain HTTP on a TLS port: use HTTPS
    assert "--web.listen-address=10.20.0.5:9090" in files["prometheus.default"]
