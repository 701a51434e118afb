"""The health gate (validation/healthgate.py) as Slurm runs it: a subprocess with no arguments but
its expectations file, here with stand-ins for the node's commands (stat, systemctl, munge,
scontrol) on PATH so that each fault and each failure of the gate itself can be made to order.
The sim pod's day-2 tests run it for real, under slurmd."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.repo import REPO, cannot_run_here
from tests.helpers.rootowned import NOBODY, Tools, tools_tree

GATE = REPO / "validation" / "healthgate.py"


class Node:
    """A fake node: a bin folder of stand-ins, an expectations file, a state and textfile folder."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.state = tmp / "state"
        self.textfile = tmp / "textfile"
        self.scontrol_log = tmp / "scontrol.log"
        self.expect: dict = {
            "node": "node02",
            "timeout_s": 6,
            "mount_timeout_s": 1,
            "mounts": [],
            "free_space": [{"path": str(tmp), "min_free_gib": 0}],
            "min_free_memory_gib": 0,
            "services": ["munge", "slurmd"],
            "drain": True,
            "textfile_dir": str(self.textfile),
        }
        self.services = {"munge": "active", "slurmd": "active"}
        self.node_state = "State=IDLE"
        self.tool("munge", "echo CRED")
        self.tool("unmunge", "cat >/dev/null; echo STATUS: Success")
        # A stand-in for podctl-validation-exec that vets nothing (the real one: tests below and
        # tests/validation/test_trusted_exec.py).
        self.tool("launcher", 'exec "$@"')
        self.launcher = str(self.bin / "launcher")
        # Started by this Python, or executed as Slurm does: from an executable copy, by the
        # interpreter and flags its first line names.
        self.by_its_shebang = False
        self.env: dict[str, str] = {}  # added to the test's environment

    def tool(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def start(self, *args: str, name: str = "podctl-healthcheck", cwd: Path | None = None) -> subprocess.Popen:
        # Each unit's states, one per `systemctl is-active` call; the last one stays.
        units = self.tmp / "units"
        units.mkdir(exist_ok=True)
        for unit, states in self.services.items():
            (units / unit).write_text("\n".join([states] if isinstance(states, str) else states) + "\n")
        self.tool(
            "systemctl",
            f'shift; echo "$@" >> {self.tmp / "systemctl.log"}\n'
            f'for n in "$@"; do f={units}/$n; if [ -f "$f" ]; then head -n1 "$f"; '
            'if [ "$(wc -l < "$f")" -gt 1 ]; then sed -i 1d "$f"; fi; else echo inactive; fi; done',
        )
        self.tool(
            "scontrol",
            f'echo "$@" >> {self.scontrol_log}\n'
            f'if [ "$1" = show ]; then echo "NodeName=node02 Arch=x86_64 {self.node_state}"; fi',
        )
        (self.tmp / "health.json").write_text(json.dumps(self.expect))
        if self.by_its_shebang:
            (self.tmp / "sbin").mkdir(exist_ok=True)
            program, interpreter = self.tmp / "sbin" / name, []
            shutil.copy(GATE, program)
            program.chmod(0o755)
        else:
            program, interpreter = self.tmp / name, [sys.executable]
            if not program.exists():
                program.symlink_to(GATE)
        return subprocess.Popen(
            [
                *interpreter,
                str(program),
                "--expect",
                str(self.tmp / "health.json"),
                "--state",
                str(self.state),
                *args,
            ],
            env={**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}", **self.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )

    def run(self, *args: str, name: str = "podctl-healthcheck", cwd: Path | None = None) -> tuple[int, dict, str]:
        proc = self.start(*args, name=name, cwd=cwd)
        out, err = proc.communicate(timeout=60)
        record = json.loads((self.state / "last.json").read_text())
        return proc.returncode, record, out + err

    def drains(self) -> list[str]:
        if not self.scontrol_log.exists():
            return []
        return [line for line in self.scontrol_log.read_text().splitlines() if line.startswith("update")]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_a_healthy_node_passes_and_exports_it(node: Node) -> None:
    code, record, _ = node.run()
    assert code == 0 and record["status"] == "pass", record
    assert record["parts"]["services"] == {"munge": "active", "slurmd": "active"}
    assert node.drains() == []
    prom = (node.textfile / "podctl_health.prom").read_text()
    assert "podctl_health_ok 1\n" in prom and "podctl_health_check_error 0\n" in prom


def test_a_stopped_service_drains_with_the_reason(node: Node) -> None:
    node.services["slurmd"] = "failed"
    code, record, _ = node.run()
    assert code == 0 and record["status"] == "fail"
    assert record["findings"] == ["service slurmd is failed"]
    assert node.drains() == ["update NodeName=node02 State=DRAIN Reason=podctl: service slurmd is failed"]
    assert record["drain"] == "drained"


def test_a_missing_mount_drains_and_a_full_disk_beside_it_is_a_warning(node: Node, tmp_path: Path) -> None:
    node.expect["mounts"] = [{"path": "/podctl/not/mounted", "name": "scratch"}]
    node.expect["free_space"] = [{"path": str(tmp_path), "min_free_gib": 10**9}]
    _, record, _ = node.run()
    assert record["findings"] == ["mount /podctl/not/mounted is missing"]
    assert record["warnings"][0].startswith(f"{tmp_path} has ") and "below 1e+09 GiB" in record["warnings"][0]
    assert node.drains() == ["update NodeName=node02 State=DRAIN Reason=podctl: mount /podctl/not/mounted is missing"]


def test_a_hung_mount_is_a_finding_within_its_timeout(node: Node) -> None:
    # / is always mounted; a stat that never answers stands in for a hung NFS server.
    node.expect["mounts"] = [{"path": "/", "name": "root"}]
    node.tool("stat", "sleep 30")
    started = time.monotonic()
    _, record, _ = node.run()
    assert time.monotonic() - started < 10
    assert record["findings"] == ["mount / does not answer within 1 s"]
    assert record["parts"]["mounts"] == [{"path": "/", "state": "hung"}]


def test_munge_that_cannot_round_trip_is_a_finding(node: Node) -> None:
    node.tool("unmunge", "cat >/dev/null; echo 'unmunge: Error: Invalid credential' >&2; exit 1")
    _, record, _ = node.run()
    assert record["findings"] == ["munge credential does not round-trip: unmunge: Error: Invalid credential"]


def test_a_node_a_person_drained_keeps_the_persons_reason(node: Node) -> None:
    node.services["slurmd"] = "inactive"
    node.node_state = "State=IDLE+DRAIN Reason=replacing DIMM B3 [root@2026-12-01T10:00:00]"
    _, record, _ = node.run()
    assert record["status"] == "fail" and node.drains() == []
    assert record["drain"] == "left alone: drained by a person (replacing DIMM B3)"


def test_a_node_that_cannot_drain_itself_says_so(node: Node) -> None:
    # munge down: scontrol cannot sign its request, so the node cannot drain itself.
    node.services["munge"] = "inactive"
    node.tool("scontrol", "echo 'scontrol: error: Munge encode failed' >&2; exit 1")
    node.scontrol_log.write_text("")
    (node.tmp / "health.json").write_text(json.dumps(node.expect))
    env = {**os.environ, "PATH": f"{node.bin}:{os.environ['PATH']}"}
    states = "inactive\nactive"
    node.tool("systemctl", f"printf '{states}\\n'")
    subprocess.run(
        [sys.executable, str(GATE), "--expect", str(node.tmp / "health.json"), "--state", str(node.state)],
        env=env,
        check=True,
        timeout=60,
    )
    record = json.loads((node.state / "last.json").read_text())
    assert record["findings"] == ["service munge is inactive"]
    assert record["drain"] is None and "scontrol cannot read the node's state" in record["drain_error"]
    assert "podctl_health_drain_failed 1\n" in (node.textfile / "podctl_health.prom").read_text()


@pytest.mark.parametrize(
    ("check_body", "why"),
    [
        ("sleep 30", "did not finish before the gate's time limit"),
        ("echo 'Traceback (most recent call last):' >&2; exit 1", "without a readable result"),
        ('echo \'{"status": "error", "findings": [{"message": "NVML broke"}]}\'; exit 2', "broke: NVML broke"),
    ],
    ids=["timeout", "crash", "error-envelope"],
)
def test_the_node_checks_own_failure_never_drains(node: Node, check_body: str, why: str) -> None:
    node.tool("fake-python", check_body)
    node.expect["node_check"] = {
        "launcher": node.launcher,
        "python": str(node.bin / "fake-python"),
        "argv": ["-m", "validation.health"],
    }
    node.expect["timeout_s"] = 3
    code, record, _ = node.run("--prolog")
    assert code == 0 and record["status"] == "error" and node.drains() == []
    assert any(why in e for e in record["errors"]), record["errors"]
    prom = (node.textfile / "podctl_health.prom").read_text()
    samples = [line.split()[0] for line in prom.splitlines() if not line.startswith("#")]
    assert "podctl_health_check_error 1\n" in prom and "podctl_health_ok" not in samples


def test_a_slow_run_that_started_first_never_replaces_a_newer_runs_record(node: Node) -> None:
    # slurmd's interval, a prolog and a person can run the gate at once: the run that started
    # first and ends last (its node check slow) must leave the newer run's verdict on record.
    slow, started = node.tmp / "slow", node.tmp / "started"
    stale = {"status": "fail", "findings": [{"severity": "error", "device": "gpu0", "message": "stale"}]}
    node.tool(
        "fake-python",
        f"if [ -e {slow} ]; then touch {started}; sleep 3; echo '{json.dumps(stale)}'; exit 1; fi\n"
        'echo \'{"status": "pass", "findings": []}\'',
    )
    node.expect["node_check"] = {"launcher": node.launcher, "python": str(node.bin / "fake-python"), "argv": []}
    slow.touch()
    first = node.start("--no-drain")
    deadline = time.monotonic() + 20
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "the first run never reached its node check"
    slow.unlink()
    code, record, _ = node.run("--no-drain")
    assert code == 0 and record["status"] == "pass"
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0 and "a run that started later is on record already" in err
    assert json.loads((node.state / "last.json").read_text()) == record
    assert "podctl_health_ok 1\n" in (node.textfile / "podctl_health.prom").read_text()


def test_gpu_findings_of_the_node_check_drain(node: Node) -> None:
    envelope = {
        "status": "fail",
        "findings": [
            {"severity": "error", "device": "gpu3", "message": "row remapping pending: the GPU needs a reset"},
            {"severity": "warning", "device": "gpu1", "message": "ECC is disabled"},
        ],
    }
    node.tool("fake-python", f"echo '{json.dumps(envelope)}'; exit 1")
    node.expect["node_check"] = {"launcher": node.launcher, "python": str(node.bin / "fake-python"), "argv": []}
    _, record, _ = node.run()
    assert record["findings"] == ["gpu3: row remapping pending: the GPU needs a reset"]
    assert node.drains() == [
        "update NodeName=node02 State=DRAIN Reason=podctl: gpu3: row remapping pending: the GPU needs a reset"
    ]


def test_prolog_mode_exits_1_on_a_fault_so_the_job_is_requeued(node: Node) -> None:
    node.services["munge"] = "failed"
    code, record, _ = node.run(name="podctl-healthcheck-prolog")
    assert code == 1 and record["mode"] == "prolog"
    code, _, _ = node.run()  # the same program under its own name: interval mode
    assert code == 0


def test_an_unreadable_expectations_file_is_an_error_never_a_drain(node: Node) -> None:
    (node.tmp / "health.json").write_text("{not json")
    env = {**os.environ, "PATH": f"{node.bin}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, str(GATE), "--expect", str(node.tmp / "health.json"), "--state", str(node.state), "--prolog"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    record = json.loads((node.state / "last.json").read_text())
    assert proc.returncode == 0 and record["status"] == "error" and "JSONDecodeError" in record["errors"][0]
    assert not node.scontrol_log.exists()


def test_the_exported_metrics_are_what_prometheus_reads(node: Node) -> None:
    if not shutil.which("promtool"):
        pytest.fail("promtool not installed: make test installs it (.ci/consumers-setup.sh)")
    node.expect["mounts"] = [{"path": '/mnt/"quoted"\\path', "name": "odd"}]
    node.run()
    prom = (node.textfile / "podctl_health.prom").read_text()
    proc = subprocess.run(["promtool", "check", "metrics"], input=prom, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'podctl_health_finding{finding="mount /mnt/\\"quoted\\"\\\\path is missing"} 1' in prom


# -- a unit on its way somewhere, and podctl's maintenance mark ---------------------------


def _asked(node: Node) -> list[str]:
    return (node.tmp / "systemctl.log").read_text().splitlines()


def test_a_restarting_service_is_asked_again_and_passes(node: Node) -> None:
    # What `systemctl restart slurmd` looks like from outside: stopping, starting, up.
    node.services["slurmd"] = ["deactivating", "activating", "active"]
    _, record, _ = node.run()
    assert record["status"] == "pass" and node.drains() == [], record
    assert _asked(node) == ["munge slurmd", "slurmd", "slurmd"]
    assert record["parts"]["services"] == {"munge": "active", "slurmd": "active"}
    assert 0.5 <= record["parts"]["services_waited_s"] < 3


def test_a_service_that_stops_for_good_is_a_fault_after_the_wait(node: Node) -> None:
    node.services["slurmd"] = ["deactivating", "inactive"]
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is inactive"]
    assert node.drains() == ["update NodeName=node02 State=DRAIN Reason=podctl: service slurmd is inactive"]


def test_a_service_stuck_stopping_is_a_fault_once_the_wait_is_over(node: Node) -> None:
    node.expect["transient_wait_s"] = 1
    node.services["slurmd"] = "deactivating"
    started = time.monotonic()
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is still deactivating after 1 s"]
    assert len(_asked(node)) >= 3 and time.monotonic() - started < 5
    assert node.drains() and record["drain"] == "drained"


def _mark(node: Node, services: list[str], until: float, by: str = "podctl deploy: test") -> Path:
    path = node.tmp / "maintenance.json"
    node.expect["maintenance"] = str(path)
    path.write_text(json.dumps({"services": services, "until": until, "by": by}))
    return path


def test_a_mark_pauses_the_gate_for_its_services_and_nothing_else(node: Node) -> None:
    _mark(node, ["slurmd"], time.time() + 300)
    node.services["slurmd"] = "inactive"
    _, record, _ = node.run()
    assert record["status"] == "pass" and node.drains() == [], record
    assert record["parts"]["maintenance"]["state"] == "honoured"
    assert record["parts"]["maintenance"]["services"] == ["slurmd"]
    # A real fault during the restart still drains: the mark names slurmd, not munge.
    node.services["munge"] = "failed"
    _, record, _ = node.run()
    assert record["findings"] == ["service munge is failed"]
    assert node.drains() == ["update NodeName=node02 State=DRAIN Reason=podctl: service munge is failed"]


def test_an_expired_mark_pauses_nothing(node: Node) -> None:
    _mark(node, ["slurmd"], time.time() - 1)
    node.services["slurmd"] = "inactive"
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is inactive"] and node.drains()
    assert record["parts"]["maintenance"]["state"] == "expired, ignored"


def test_a_mark_lasts_an_hour_at_most_whatever_it_says(node: Node) -> None:
    path = _mark(node, ["slurmd"], time.time() + 10 * 86400, by="a deploy that crashed two hours ago")
    written = time.time() - 2 * 3600
    os.utime(path, (written, written))
    node.services["slurmd"] = "inactive"
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is inactive"] and node.drains()
    assert record["parts"]["maintenance"]["state"] == "expired, ignored"


def test_an_unreadable_mark_pauses_nothing_and_says_so(node: Node) -> None:
    path = _mark(node, ["slurmd"], time.time() + 300)
    path.write_text('{"services": "slurmd"')  # cut short
    node.services["slurmd"] = "inactive"
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is inactive"] and node.drains()
    assert any("maintenance mark" in e and "unreadable" in e for e in record["errors"]), record["errors"]


@pytest.mark.parametrize("until", ["NaN", "Infinity", '"soon"', "null"])
def test_a_mark_whose_end_is_not_a_time_pauses_nothing(node: Node, until: str) -> None:
    # NaN compares false with every time, so a mark until NaN would never expire.
    path = _mark(node, ["slurmd"], 0)
    path.write_text('{"services": ["slurmd"], "until": ' + until + ', "by": "hand-written"}')
    node.services["slurmd"] = "inactive"
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is inactive"] and node.drains()
    assert any("maintenance mark" in e and "unreadable" in e for e in record["errors"]), record["errors"]


def test_mark_and_unmark_write_what_the_gate_reads(node: Node) -> None:
    path = node.tmp / "run" / "maintenance.json"
    node.expect["maintenance"] = str(path)
    node.services["slurmd"] = "inactive"
    node.run()  # writes health.json
    expect = str(node.tmp / "health.json")

    def gate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(GATE), "--expect", expect, *args], capture_output=True, text=True)

    before = time.time()
    assert gate("--mark", "slurmd,munge", "--for", "99999", "--by", "podctl deploy").returncode == 0
    mark = json.loads(path.read_text())
    assert mark["services"] == ["slurmd", "munge"] and mark["by"] == "podctl deploy"
    assert before + 3500 < mark["until"] <= time.time() + 3600.1  # capped at an hour
    _, record, _ = node.run()
    assert record["status"] == "pass" and record["parts"]["maintenance"]["by"] == "podctl deploy"
    assert gate("--unmark").returncode == 0 and not path.exists()
    refused = gate("--mark", "slurmd", "--for", "nan")
    assert refused.returncode == 2 and "--for nan" in refused.stderr and not path.exists()
    assert gate("--unmark").returncode == 0  # nothing to remove is fine
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is inactive"]
    # Expectations without a mark file: --mark says so and fails, so a deploy does not restart blind.
    node.expect.pop("maintenance")
    node.run()
    proc = gate("--mark", "slurmd")
    assert proc.returncode == 2 and "names no maintenance mark file" in proc.stderr


def test_the_unit_that_runs_the_gate_may_be_starting_but_no_other_may_stay_so(node: Node) -> None:
    # slurmd of Slurm 23.02 and later (Type=notify) runs the gate before it tells systemd it is up:
    # waiting for it would wait for ourselves. Here the gate's parent process is named slurmd.
    node.expect["transient_wait_s"] = 1
    node.services["slurmd"] = "activating"
    node.services["munge"] = "activating"
    node.run()  # writes health.json and the stand-ins
    (node.bin / "slurmd").symlink_to(sys.executable)
    launcher = (
        "import subprocess, sys; sys.exit(subprocess.call([sys.argv[1], sys.argv[2], '--expect', sys.argv[3], "
        "'--state', sys.argv[4]]))"
    )
    env = {**os.environ, "PATH": f"{node.bin}:{os.environ['PATH']}"}
    args = [sys.executable, str(GATE), str(node.tmp / "health.json"), str(node.state)]
    subprocess.run([str(node.bin / "slurmd"), "-c", launcher, *args], env=env, check=True, timeout=60)
    record = json.loads((node.state / "last.json").read_text())
    assert record["findings"] == ["service munge is still activating after 1 s"], record
    # Run by anything else, a slurmd that stays starting is a fault like any other unit.
    node.services["munge"] = "active"
    _, record, _ = node.run()
    assert record["findings"] == ["service slurmd is still activating after 1 s"], record


# -- root runs only root's code: the node check through the real launcher ----------------------

# A check in the tools' package that reports where it ran from; a module of the same name planted
# in the gate's working folder writes a canary instead.
GATE_PROBE = (
    "import json, os\n"
    "print(json.dumps({'status': 'pass', 'findings': [], 'details': {'file': __file__, 'cwd': os.getcwd()}}))\n"
)


@pytest.fixture
def tools() -> Iterator[Tools]:
    with tools_tree() as t:
        (t.package / "gateprobe.py").write_text(GATE_PROBE)
        os.chmod(t.package / "gateprobe.py", 0o644)
        yield t


def _through_the_launcher(node: Node, tools: Tools) -> None:
    node.expect["node_check"] = {
        "launcher": str(tools.launcher),
        "python": str(tools.python),
        "argv": ["-m", "validation.gateprobe"],
    }


def test_a_module_planted_in_the_gates_working_folder_never_runs(node: Node, tools: Tools) -> None:
    # slurmd starts the gate in its log folder, which the slurm account owns.
    slurm_log = node.tmp / "var-log-slurm"
    (slurm_log / "validation").mkdir(parents=True)
    canary = node.tmp / "ran-as-root"
    (slurm_log / "validation" / "__init__.py").write_text("")
    (slurm_log / "validation" / "gateprobe.py").write_text(f"open({str(canary)!r}, 'w')\n")
    _through_the_launcher(node, tools)
    code, record, _ = node.run(cwd=slurm_log)
    assert code == 0 and record["status"] == "pass", record
    assert record["parts"]["node_check"] == {"status": "pass", "exit": 0}
    assert not canary.exists()


# Planted where PYTHONPATH points, under the name of a module the gate imports (json) or one that
# Python's startup imports (sitecustomize): it leaves a canary, then hands over to the standard
# library's own module, so that the gate runs on either way.
PLANTED = """import importlib, os, sys
open(os.path.join({canaries!r}, __name__), "w").close()
here, path = os.path.dirname(os.path.abspath(__file__)), list(sys.path)
sys.path[:] = [p for p in path if os.path.abspath(p or os.curdir) != here]
del sys.modules[__name__]
try:
    sys.modules[__name__] = importlib.import_module(__name__)
finally:
    sys.path[:] = path
"""


def test_the_gate_run_by_its_own_first_line_never_imports_from_pythonpath(node: Node) -> None:
    # slurmd executes the gate as root, in an environment the gate does not choose; what keeps a
    # PYTHONPATH out is the -I on its first line, which starting it as `python program` skips.
    interpreter = GATE.read_text().splitlines()[0].removeprefix("#!").split()[0]
    if not os.access(interpreter, os.X_OK):
        cannot_run_here(f"the gate's interpreter {interpreter} is not installed")
    planted, canaries = node.tmp / "planted", node.tmp / "canaries"
    planted.mkdir()
    canaries.mkdir()
    for module in ("json", "sitecustomize"):
        (planted / f"{module}.py").write_text(PLANTED.format(canaries=str(canaries)))
    node.by_its_shebang, node.env = True, {"PYTHONPATH": str(planted)}
    code, record, _ = node.run()
    assert code == 0 and record["status"] == "pass", record
    assert sorted(p.name for p in canaries.iterdir()) == []  # without -I: ["json", "sitecustomize"]


def test_a_tools_folder_another_user_can_write_is_refused_alerted_and_never_drained(node: Node, tools: Tools) -> None:
    canary = node.tmp / "ran-as-root"
    planted = tools.package / "gateprobe.py"
    planted.write_text(f"open({str(canary)!r}, 'w')\n")
    os.chown(planted, NOBODY, NOBODY)  # what a user on a writable share, or NFS squashing, leaves
    _through_the_launcher(node, tools)
    for mode in ("podctl-healthcheck", "podctl-healthcheck-prolog"):
        code, record, _ = node.run(name=mode)
        assert code == 0 and record["status"] == "error", record  # a prolog that refuses requeues nothing
        assert "owned by uid 65534, not root" in record["refused"]
        assert record["parts"]["node_check"]["status"] == "refused"
        assert node.drains() == [] and not canary.exists()
    prom = (node.textfile / "podctl_health.prom").read_text()
    assert "podctl_health_refused 1\n" in prom and "podctl_health_check_error 1\n" in prom


# -- memory and disk pressure: what jobs do ---------------------------------------------------


@pytest.mark.parametrize("state", ["State=MIXED", "State=ALLOCATED+DRAIN", "State=IDLE", "State=IDLE+COMPLETING"])
def test_pressure_is_a_warning_and_never_a_drain_idle_or_not(node: Node, state: str) -> None:
    """A user's job can fill /tmp, /var/tmp or /dev/shm, or leave a process holding memory, and then
    end: the node it leaves idle is not drained for that (what drains is what is wrong with the
    node), and the alert tells a person."""
    node.expect["min_free_memory_gib"] = 10**6
    node.expect["free_space"] = [{"path": str(node.tmp), "min_free_gib": 10**9}]
    node.node_state = state
    for mode in ((), ("--prolog",)):
        code, record, _ = node.run(*mode)
        assert code == 0 and record["status"] == "pass" and node.drains() == [], record
        assert [w.split()[-1] for w in record["warnings"]] == ["GiB", "GiB"] and record["findings"] == []
        prom = (node.textfile / "podctl_health.prom").read_text()
        assert "podctl_health_warnings 2\n" in prom and "podctl_health_ok 1\n" in prom
