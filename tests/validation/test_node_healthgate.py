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
from pathlib import Path

import pytest

from tests.conftest import REPO

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

    def tool(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def run(self, *args: str, name: str = "podctl-healthcheck") -> tuple[int, dict, str]:
        states = " ".join(self.services.get(n, "inactive") for n in self.expect["services"])
        self.tool("systemctl", f'echo "{states}" | tr " " "\\n"')
        self.tool(
            "scontrol",
            f'echo "$@" >> {self.scontrol_log}\n'
            f'if [ "$1" = show ]; then echo "NodeName=node02 Arch=x86_64 {self.node_state}"; fi',
        )
        (self.tmp / "health.json").write_text(json.dumps(self.expect))
        program = self.tmp / name
        if not program.exists():
            program.symlink_to(GATE)
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}"}
        proc = subprocess.run(
            [
                sys.executable,
                str(program),
                "--expect",
                str(self.tmp / "health.json"),
                "--state",
                str(self.state),
                *args,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        record = json.loads((self.state / "last.json").read_text())
        return proc.returncode, record, proc.stdout + proc.stderr

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


def test_a_missing_mount_and_a_full_disk_are_both_named(node: Node, tmp_path: Path) -> None:
    node.expect["mounts"] = [{"path": "/podctl/not/mounted", "name": "scratch"}]
    node.expect["free_space"] = [{"path": str(tmp_path), "min_free_gib": 10**9}]
    _, record, _ = node.run()
    assert record["findings"][0] == "mount /podctl/not/mounted is missing"
    assert record["findings"][1].startswith(f"{tmp_path} has ") and "below 1e+09 GiB" in record["findings"][1]
    assert node.drains()[0].endswith("Reason=podctl: mount /podctl/not/mounted is missing (+1 more)")


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
    node.expect["node_check"] = {"python": str(node.bin / "fake-python"), "argv": ["-m", "validation.health"]}
    node.expect["timeout_s"] = 3
    code, record, _ = node.run("--prolog")
    assert code == 0 and record["status"] == "error" and node.drains() == []
    assert any(why in e for e in record["errors"]), record["errors"]
    prom = (node.textfile / "podctl_health.prom").read_text()
    samples = [line.split()[0] for line in prom.splitlines() if not line.startswith("#")]
    assert "podctl_health_check_error 1\n" in prom and "podctl_health_ok" not in samples


def test_gpu_findings_of_the_node_check_drain(node: Node) -> None:
    envelope = {
        "status": "fail",
        "findings": [
            {"severity": "error", "device": "gpu3", "message": "row remapping pending: the GPU needs a reset"},
            {"severity": "warning", "device": "gpu1", "message": "ECC is disabled"},
        ],
    }
    node.tool("fake-python", f"echo '{json.dumps(envelope)}'; exit 1")
    node.expect["node_check"] = {"python": str(node.bin / "fake-python"), "argv": []}
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
