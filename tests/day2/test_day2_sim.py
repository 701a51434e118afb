"""Day 2 on the run's deployed sim pod: the health gate under slurmd drains the node with a
fault and only it, a repaired node comes back through `podctl nodes recheck`, a node a person
drained stays drained, a node without munge says it cannot drain itself (and Prometheus says so
too), the gate's own failures never drain, the gate knows a restart from a fault (podctl's
maintenance mark, units on their way up or down), and a fourth node joins a running pod and
leaves it under a job that completes: on Slurm 24.11 by `scontrol reconfigure`, with no unit
restarted; before 24.11 with slurmctld restarted and then slurmd a node at a time.

The sim site runs the gate every 30 s; one test waits for slurmd to run it, the others run the
same program by hand, as slurmd would, rather than wait for the interval. Every test leaves the
pod as it found it: faults cleared, every node idle.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers.simpod import Pod, podctl

pytestmark = pytest.mark.sim

INTERVAL_S = 30
COMPUTE = ("node01", "node02", "node03")
GATE = "/usr/local/sbin/podctl-healthcheck"


def _wait(predicate: Callable[[], object], timeout_s: float, what: str, every_s: float = 3) -> object:
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s (last: {value!r})")


def _node(pod: Pod, host: str) -> tuple[str, str]:
    """(State, Reason) of a node as scontrol shows it."""
    out = pod.sh("head01", f"scontrol show node -o {host}").stdout
    state = re.search(r"\bState=(\S+)", out)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)", out)
    return (state.group(1) if state else "?", reason.group(1).strip() if reason else "")


def _last(pod: Pod, host: str) -> dict:
    return json.loads(pod.sh(host, "cat /var/lib/podctl/health/last.json").stdout or "{}")


def _fault(pod: Pod, host: str, *args: str) -> None:
    podctl("sim", "fault", "--pod", pod.name, host, *args, timeout=120)


def _gate(pod: Pod, host: str, *args: str) -> dict:
    """Run the gate on `host` as slurmd does (plus `args`); its record."""
    pod.sh(host, " ".join([GATE, *args]))
    return _last(pod, host)


def _drained_with(pod: Pod, host: str, text: str) -> Callable[[], bool]:
    def check() -> bool:
        state, reason = _node(pod, host)
        return "DRAIN" in state and reason.startswith("podctl: ") and text in reason

    return check


def test_slurmd_runs_the_gate_and_it_is_fast(sim_pod: Pod) -> None:
    config = sim_pod.sh("head01", "scontrol show config").stdout
    assert re.search(r"HealthCheckProgram\s*=\s*/usr/local/sbin/podctl-healthcheck", config)
    assert re.search(rf"HealthCheckInterval\s*=\s*{INTERVAL_S} sec", config)
    # Wait for one run under slurmd after this moment, and read what it recorded.
    since = time.time()
    records = {h: _wait(lambda h=h: (r := _last(sim_pod, h)).get("time", 0) > since and r, INTERVAL_S * 2 + 30,
                        f"a gate run on {h}") for h in COMPUTE}  # fmt: skip
    for host, record in records.items():
        assert record["status"] == "pass", record
        assert record["parts"]["services"] == {"munge": "active", "slurmd": "active", "chrony": "active"}
        assert {m["path"] for m in record["parts"]["mounts"]} == {"/home/shared", "/scratch"}
        assert record["parts"]["node_check"] == {"status": "pass", "exit": 0}
        # The bound for a sim node: under 3 s for the whole gate, validation.health included.
        print(f"health gate on {host}: {record['duration_s']:.2f} s")
        assert record["duration_s"] < 3, record["duration_s"]
    prom = sim_pod.sh("node01", "cat /var/lib/prometheus/node-exporter/podctl_health.prom").stdout
    assert "podctl_health_ok 1" in prom
    scraped = sim_pod.sh(
        "node01",
        # node exporter binds the management address: node01's own name reaches it (as root).
        "python3 -c \"import urllib.request as u; print(u.urlopen('http://node01:9100/metrics').read().decode())\"",
    )
    assert "podctl_health_ok 1" in scraped.stdout  # node exporter's textfile collector reads it


FAULTS = [
    (("--unmount", "/scratch"), "mount /scratch is missing"),
    (("--stop-service", "chrony"), "service chrony is inactive"),
]


def test_each_fault_drains_that_node_alone_and_recheck_brings_it_back(sim_pod: Pod) -> None:
    try:
        # A full /var/tmp is what any job may leave behind: a warning, and the idle node keeps working.
        _fault(sim_pod, "node02", "--fill", "/var/tmp")
        record = _gate(sim_pod, "node02")
        assert record["status"] == "pass" and "/var/tmp has 0.00 GiB free, below 0.1 GiB" in record["warnings"], record
        assert _node(sim_pod, "node02")[0] == "IDLE"
        podctl("sim", "fault", "--pod", sim_pod.name, "node02", "--clear", timeout=120)
        for n, (args, finding) in enumerate(FAULTS):
            _fault(sim_pod, "node02", *args)
            started = time.monotonic()
            if n == 0:  # slurmd's own run finds the first, within an interval
                _wait(_drained_with(sim_pod, "node02", finding), INTERVAL_S + 30, f"node02 drained for {finding!r}")
                print(f"{finding}: drained after {time.monotonic() - started:.0f} s")
            else:  # the others by the same program, run now
                _gate(sim_pod, "node02")
                assert _drained_with(sim_pod, "node02", finding)(), _node(sim_pod, "node02")
            # The others keep running jobs.
            assert _node(sim_pod, "node01")[0] == "IDLE" and _node(sim_pod, "node03")[0] == "IDLE"
            job = sim_pod.sh("head01", "srun -N2 -w node01,node03 --immediate=30 hostname")
            assert job.returncode == 0 and sorted(job.stdout.split()) == ["node01", "node03"], job.stderr
            podctl("sim", "fault", "--pod", sim_pod.name, "node02", "--clear", timeout=120)
        # Repaired: the gate alone does not resume (that is the recheck's proof to give).
        assert _gate(sim_pod, "node02")["status"] == "pass"
        assert "DRAIN" in _node(sim_pod, "node02")[0]
        proc = podctl(
            "nodes", "recheck", str(sim_pod.site), "node02", "--report", str(sim_pod.base / "recheck"), check=False
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "node02: resumed" in proc.stdout
        assert _node(sim_pod, "node02")[0] == "IDLE"
        report = json.loads((sim_pod.base / "recheck" / "report.json").read_text())
        assert report["meta"]["hosts"] == ["node02"] and report["meta"]["partners"]
        cert = json.loads(sim_pod.sh("node02", "cat /var/lib/podctl/certification.json").stdout)
        assert cert["certified"] is True and cert["suites"] == ["health", "burnin", "collectives"]
        reservations = sim_pod.sh("head01", "scontrol show reservation").stdout
        assert "podctl-recheck" not in reservations
    finally:
        podctl("sim", "fault", "--pod", sim_pod.name, "node02", "--clear", timeout=120, check=False)
        sim_pod.resume("node02")


def test_a_node_a_person_drained_stays_drained(sim_pod: Pod) -> None:
    try:
        sim_pod.sh("head01", "scontrol update NodeName=node03 State=DRAIN Reason='replacing DIMM B3'")
        proc = podctl("nodes", "recheck", str(sim_pod.site), "node03", check=False)
        assert proc.returncode == 0 and "drained by a person (replacing DIMM B3)" in proc.stdout, proc.stdout
        # The gate too leaves a person's reason alone, even when it finds a fault of its own.
        _fault(sim_pod, "node03", "--stop-service", "chrony")
        record = _gate(sim_pod, "node03")
        assert record["status"] == "fail" and record["drain"] == "left alone: drained by a person (replacing DIMM B3)"
        state, reason = _node(sim_pod, "node03")
        assert "DRAIN" in state and reason == "replacing DIMM B3"
    finally:
        podctl("sim", "fault", "--pod", sim_pod.name, "node03", "--clear", timeout=120, check=False)
        sim_pod.resume("node03")


def test_a_node_without_munge_cannot_drain_itself_and_says_so(sim_pod: Pod) -> None:
    try:
        _fault(sim_pod, "node03", "--stop-service", "munge")
        # What slurmd runs, run now rather than waiting for the interval.
        sim_pod.sh("node03", "/usr/local/sbin/podctl-healthcheck")
        record = _last(sim_pod, "node03")
        assert record["status"] == "fail" and "service munge is inactive" in record["findings"]
        assert record["drain"] is None and "munge" in record["drain_error"]
        prom = sim_pod.sh("node03", "cat /var/lib/prometheus/node-exporter/podctl_health.prom").stdout
        assert "podctl_health_drain_failed 1" in prom

        # Prometheus, which needs no munge, raises the alert; podctl status shows it.
        def alert() -> bool:
            status = json.loads(podctl("status", str(sim_pod.site), "--json").stdout)
            return any(a["alert"] == "PodctlNodeCannotDrain" and a["instance"].startswith("node03")
                       and a["state"] == "firing" for a in status["alerts"])  # fmt: skip

        _wait(alert, 120, "PodctlNodeCannotDrain firing for node03", every_s=10)
    finally:
        podctl("sim", "fault", "--pod", sim_pod.name, "node03", "--clear", timeout=120, check=False)
        sim_pod.sh("node03", "systemctl restart slurmd")
        sim_pod.resume("node03")


def test_status_shows_every_node_with_its_health_and_certification(sim_pod: Pod) -> None:
    status = json.loads(podctl("status", str(sim_pod.site), "--json").stdout)
    assert status["problems"] == []  # Prometheus's alerts included, read behind its login
    assert [n["host"] for n in status["nodes"]] == list(COMPUTE)
    for node in status["nodes"]:
        assert node["slurm"]["state"] == "idle" and node["health"]["status"] == "pass", node
    text = podctl("status", str(sim_pod.site)).stdout
    assert "alerts:" in text and "node01" in text and "pass" in text


@pytest.mark.parametrize(
    ("script", "why"),
    [("sleep 60", "did not finish before the gate's time limit"), ("exit 3", "without a readable result")],
    ids=["timeout", "crash"],
)
def test_the_gates_own_failure_never_drains(sim_pod: Pod, script: str, why: str) -> None:
    expect = "/etc/podctl/health.json"
    try:
        sim_pod.sh(
            "node01",
            f"cp {expect} /root/health.json.saved && printf '#!/bin/sh\\n{script}\\n' > /root/broken && chmod +x /root/broken",
        )
        # What breaks is the program the gate starts for its GPU/HCA checks (the launcher): a
        # broken interpreter behind it is refused by the launcher itself, another test's matter.
        edit = (
            "import json; p='/etc/podctl/health.json'; d=json.load(open(p)); "
            "d['node_check']['launcher']='/root/broken'; json.dump(d, open(p, 'w'))"
        )
        sim_pod.sh("node01", f'python3 -c "{edit}"')
        record = _gate(sim_pod, "node01")
        assert record["status"] == "error" and any(why in e for e in record["errors"]), record
        assert "DRAIN" not in _node(sim_pod, "node01")[0]
    finally:
        sim_pod.sh("node01", f"cp /root/health.json.saved {expect}")


# -- the gate and a restart: podctl's maintenance mark, units on their way up or down ---------


def test_the_gate_honours_a_mark_for_what_it_names_and_still_drains_a_real_fault(sim_pod: Pod) -> None:
    try:
        assert sim_pod.sh("node01", f"{GATE} --mark slurmd --for 120 --by 'test: a deploy'").returncode == 0
        sim_pod.sh("node01", "systemctl stop slurmd")
        record = _gate(sim_pod, "node01")
        assert record["status"] == "pass", record
        assert record["parts"]["services"]["slurmd"] == "inactive"
        assert record["parts"]["maintenance"]["state"] == "honoured"
        assert record["parts"]["maintenance"]["by"] == "test: a deploy"
        assert "DRAIN" not in _node(sim_pod, "node01")[0]
        # A real fault while slurmd restarts: the gate is paused for slurmd, not for everything.
        _fault(sim_pod, "node01", "--stop-service", "chrony")
        record = _gate(sim_pod, "node01")
        assert record["findings"] == ["service chrony is inactive"], record
        assert _drained_with(sim_pod, "node01", "service chrony is inactive")()
        # A mark that has run out pauses nothing.
        sim_pod.sh("node01", f"{GATE} --mark slurmd --for 0")
        record = _gate(sim_pod, "node01", "--no-drain")
        assert "service slurmd is inactive" in record["findings"]
        assert record["parts"]["maintenance"]["state"] == "expired, ignored"
    finally:
        sim_pod.sh("node01", f"{GATE} --unmark; systemctl start slurmd")
        podctl("sim", "fault", "--pod", sim_pod.name, "node01", "--clear", timeout=120, check=False)
        sim_pod.resume("node01")
    assert sim_pod.sh("node01", "test -e /run/podctl/maintenance.json").returncode == 1


SLOW_UNIT = """[Unit]
Description=podctl test: a service that takes 3 s to stop
[Service]
ExecStart=/bin/sleep infinity
ExecStop=/bin/sleep 3
"""


def test_a_unit_on_its_way_is_asked_again_before_it_counts(sim_pod: Pod) -> None:
    """Real systemd transitions on node02: a unit that takes 3 s to stop, which the gate expects.
    Restarting, it passes through deactivating and activating: the gate asks again and passes.
    Stopping for good, it ends inactive: a fault, drained."""
    expect = "/etc/podctl/health.json"
    add = (
        "import json; p='/etc/podctl/health.json'; d=json.load(open(p)); "
        "d['services'].append('podctl-test-slow'); json.dump(d, open(p, 'w'))"
    )
    try:
        setup = sim_pod.sh(
            "node02",
            f'cp {expect} /root/health.json.saved && python3 -c "{add}" && '
            f"printf '{SLOW_UNIT}' > /run/systemd/system/podctl-test-slow.service && "
            "systemctl daemon-reload && systemctl start podctl-test-slow",
        )
        assert setup.returncode == 0, setup.stderr

        def gate_right_after(action: str) -> tuple[str, dict]:
            out = sim_pod.sh(
                "node02",
                f"systemctl {action} --no-block podctl-test-slow; systemctl is-active podctl-test-slow; {GATE} --print",
            ).stdout
            seen, record = out.split("\n", 1)
            return seen, json.loads(record)

        seen, record = gate_right_after("restart")
        assert seen == "deactivating"
        assert record["status"] == "pass", record
        assert record["parts"]["services"]["podctl-test-slow"] == "active"
        assert record["parts"]["services_waited_s"] >= 1  # it was asked again, not passed at once
        seen, record = gate_right_after("stop")
        assert seen == "deactivating"
        assert record["findings"] == ["service podctl-test-slow is inactive"], record
        assert record["parts"]["services_waited_s"] >= 1
        assert _drained_with(sim_pod, "node02", "service podctl-test-slow is inactive")()
    finally:
        sim_pod.sh(
            "node02",
            f"cp /root/health.json.saved {expect}; systemctl stop podctl-test-slow; "
            "rm -f /run/systemd/system/podctl-test-slow.service; systemctl daemon-reload",
        )
        sim_pod.resume("node02")


def _site_with_four(base: Path, site: Path) -> Path:
    """The pod's site with node04, and slurmd restarted a node at a time (slurm.restart_batch 1) where
    Slurm needs restarts for it."""
    four = base / "site-4.yaml"
    text = site.read_text().replace("node[01-03]", "node[01-04]")
    assert text.count("\nslurm:\n") == 1
    four.write_text(text.replace("\nslurm:\n", "\nslurm:\n  restart_batch: 1\n"))
    return four


ROLL = "Restart slurmd, a batch of nodes at a time, each until slurmctld has it back"


def _restart_windows(run_dir: Path) -> dict[str, tuple[float, float]]:
    """host -> (restarted, back): each node's slurmd restart as the rolling task saw it on the node."""
    windows: dict[str, tuple[float, float]] = {}
    for path in (run_dir / "artifacts" / "deploy" / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event["event"] == "runner_on_ok" and data.get("task") == ROLL:
            found = re.search(r"slurmd restarted at ([\d.]+), back at ([\d.]+)", data["res"]["stdout"])
            assert found, data["res"]["stdout"]
            windows[data["host"]] = (float(found.group(1)), float(found.group(2)))
    return windows


def _tasks_that_changed(run_dir: Path) -> set[str]:
    names = set()
    for path in (run_dir / "artifacts" / "deploy" / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event["event"] == "runner_on_ok" and (data.get("res") or {}).get("changed"):
            names.add(str(data.get("task")))
    return names


def _active_since(pod: Pod, host: str, unit: str) -> float:
    """When systemd last saw `unit` become active on `host`, as a Unix time."""
    out = pod.sh(host, f"systemctl show --timestamp=us+utc -p ActiveEnterTimestamp --value {unit}").stdout.strip()
    return datetime.strptime(out, "%a %Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=UTC).timestamp()


def _slurmd_started(pod: Pod, hosts: tuple[str, ...]) -> dict[str, dict[str, str]]:
    prop = "systemctl show -p ActiveEnterTimestampMonotonic -p MainPID slurmd"
    return {h: dict(line.split("=", 1) for line in pod.sh(h, prop).stdout.splitlines() if "=" in line) for h in hosts}


def test_a_fourth_node_joins_a_running_pod_and_leaves_it(sim_pod: Pod) -> None:
    four = _site_with_four(sim_pod.base, sim_pod.site)
    done = "/home/shared/podctl-test-join-done"
    sim_pod.sh("head01", f"rm -f {done}")
    job = sim_pod.sh(
        "head01", f"sbatch --parsable -w node01 --wrap 'until [ -e {done} ]; do sleep 1; done'"
    ).stdout.strip()
    assert job.isdigit(), job
    _wait(lambda: sim_pod.sh("head01", f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING", 60, "the job to run")
    log = "/var/log/slurm/slurmctld.log"
    seen = int(sim_pod.sh("head01", f"wc -l < {log}").stdout.strip() or 0)
    slurmctld_before = sim_pod.sh("head01", "systemctl show -p ActiveEnterTimestampMonotonic slurmctld").stdout
    node_table_by_reconfigure = sim_pod.reconfigures_node_table()
    slurmd_before = _slurmd_started(sim_pod, COMPUTE)
    runs_add = sim_pod.base / "runs-add"
    try:
        podctl("sim", "up", str(four), timeout=600)
        podctl("deploy", str(four), "--runs-dir", str(runs_add), timeout=1800)
        # node04's slurmd started only once slurmctld knew it: no refused registration.
        during = sim_pod.sh("head01", f"tail -n +{seen + 1} {log}").stdout
        for refused in ("registered on unknown node", "different slurm.conf"):
            assert refused not in during, [ln for ln in during.splitlines() if refused in ln][:3]
        state, _ = _node(sim_pod, "node04")
        assert state == "IDLE", state
        assert "Nodes=node[01-04]" in sim_pod.sh("head01", "cat /etc/slurm/topology.conf").stdout
        for host in ("node01", "node02", "node03"):  # slurm.conf everywhere
            assert "node[01-04]" in sim_pod.sh(host, "grep ^NodeName /etc/slurm/slurm.conf").stdout
        (run_dir,) = [p for p in runs_add.iterdir() if p.name.endswith("-deploy")]
        windows = sorted(_restart_windows(run_dir).values())
        if node_table_by_reconfigure:
            # Slurm 24.11: the new node table by `scontrol reconfigure`, which starts slurmctld and
            # each slurmd anew in place: no unit restarted, no node marked, node04 started after it.
            assert sim_pod.sh("head01", "systemctl show -p ActiveEnterTimestampMonotonic slurmctld").stdout == (
                slurmctld_before
            )
            after = _slurmd_started(sim_pod, COMPUTE)
            entered = "ActiveEnterTimestampMonotonic"
            assert all(after[h][entered] == slurmd_before[h][entered] for h in COMPUTE), (slurmd_before, after)
            assert not windows, windows
            assert "Reconfigure slurm" in _tasks_that_changed(run_dir)
        else:
            # Before 24.11, a new node table: slurmctld restarted, then every slurmd, one node at a time
            # (restart_batch 1), each under the gate's mark, none of them drained.
            assert sim_pod.sh("head01", "systemctl show -p ActiveEnterTimestampMonotonic slurmctld").stdout != (
                slurmctld_before
            )
            after = _slurmd_started(sim_pod, COMPUTE)
            assert all(after[h] != slurmd_before[h] for h in COMPUTE), (slurmd_before, after)
            assert len(windows) == 4, windows
            overlapping = [(a, b) for a, b in zip(windows, windows[1:], strict=False) if b[0] < a[1]]
            assert not overlapping, f"slurmd restarts overlapped with restart_batch 1: {overlapping}"
            assert _active_since(sim_pod, "head01", "slurmctld") <= windows[0][0]  # slurmctld first
        # Either way: none drained, no mark left, and the job on node01 still running.
        assert "podctl" not in sim_pod.sh("head01", "sinfo -h -R -o '%E'").stdout
        for host in (*COMPUTE, "node04"):
            assert sim_pod.sh(host, "test -e /run/podctl/maintenance.json").returncode == 1, host
        assert sim_pod.sh("head01", f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING"
        code, report, out = sim_pod.validate(
            "validate-node04", "--nodes", "node04", "--suite", "health,collectives", site=four
        )
        assert code == 0, out[-3000:]
        assert report["meta"]["hosts"] == ["node04"] and len(report["meta"]["partners"]) == 1
    finally:
        # Removal: the site without node04; the deploy drains it first, then applies the node table
        # as it was added (restarts before 24.11, a reconfigure from 24.11 on).
        podctl(
            "deploy",
            str(sim_pod.site),
            "--only",
            "os,slurm,monitoring",
            "--runs-dir",
            str(sim_pod.base / "runs-rm"),
            timeout=1800,
        )
        podctl("sim", "up", str(sim_pod.site), timeout=600)
        sim_pod.sh("head01", f"touch {done}")
    assert "node04" not in sim_pod.sh("head01", "sinfo -h -N -o %N").stdout
    assert "Nodes=node[01-03]" in sim_pod.sh("head01", "cat /etc/slurm/topology.conf").stdout
    for host in ("head01", *COMPUTE):  # no node names the removed one any more
        assert "node04" not in sim_pod.sh(host, "cat /etc/hosts").stdout, host
    # The job that ran through both changes ends as it would have without them.
    _wait(
        lambda: sim_pod.sh("head01", f"sacct -n -X -P -j {job} -o State,ExitCode").stdout.strip() == "COMPLETED|0:0",
        60,
        f"job {job} COMPLETED 0:0 in sacct",
    )
    assert "podctl" not in sim_pod.sh("head01", "sinfo -h -R -o '%E'").stdout
    sim_pod.wait_idle()
