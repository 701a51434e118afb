"""Waiting for nodes: systemd booted, sshd answering with the pod key and a host key of the pod's.

Every wait is a loop on a condition with a deadline; the short pause between
tries only spaces out polls of something that has no event to wait on.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from podctl.sim.podman import Podman
from podctl.sim.spec import host_key_options

GOOD_SYSTEMD_STATES = ("running", "degraded")
# States a booted systemd does not leave by itself.
BAD_SYSTEMD_STATES = ("maintenance", "stopping")
# systemctl's answer while it cannot reach the manager: a container whose systemd has not opened
# its socket yet says so for a moment (head01, in a make demo's sim up, 2026-12-06), as does one
# whose PID 1 is not systemd at all. Asked again until the deadline, then reported.
NOT_YET_SYSTEMD_STATES = ("starting", "initializing", "offline")
POLL_S = 0.15


@dataclass(frozen=True)
class Deadline:
    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at


def ssh_base(key: Path, known_hosts: Path, connect_timeout: float = 3) -> list[str]:
    """ssh to a node with the pod key, its host key checked against the pod's `known_hosts`."""
    options = {
        "BatchMode": "yes",
        "IdentitiesOnly": "yes",
        **host_key_options(known_hosts),
        "LogLevel": "ERROR",
        "ConnectTimeout": str(max(1, int(connect_timeout))),
    }
    argv = ["ssh", "-F", "/dev/null", "-i", str(key)]
    for name, value in options.items():
        argv += ["-o", f"{name}={value}"]
    return argv


def ssh_answers(
    key: Path, known_hosts: Path, address: str, connect_timeout: float = 3, port: int = 22
) -> tuple[bool, str]:
    """Whether sshd at `address` (`port`: 22 on a node) let root in with `key`, having shown a
    host key that `known_hosts` holds for it; and why not."""
    try:
        proc = subprocess.run(
            [*ssh_base(key, known_hosts, connect_timeout), "-p", str(int(port)), f"root@{address}", "true"],
            capture_output=True,
            text=True,
            timeout=connect_timeout + 5,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, "ssh timed out"
    return proc.returncode == 0, proc.stderr.strip()


def systemd_state(podman: Podman, container: str, wait_s: float | None = None) -> str:
    """`systemctl is-system-running` inside the node ('starting', 'running',
    ...), or 'unreachable' when systemd does not answer yet, or 'stopped'
    when the container is not running.  With `wait_s`, blocks until boot
    finishes or `wait_s` passes."""
    cmd = ["exec", container, "systemctl", "is-system-running"]
    if wait_s is not None:
        cmd = ["exec", container, "timeout", f"{max(1, int(wait_s))}", "systemctl", "is-system-running", "--wait"]
    proc = podman.run(cmd, check=False, timeout=(wait_s or 10) + 10)
    out = proc.stdout.strip().splitlines()
    if out and out[-1] in (*GOOD_SYSTEMD_STATES, *BAD_SYSTEMD_STATES, *NOT_YET_SYSTEMD_STATES):
        return out[-1]
    err = proc.stderr.lower()
    if "can only create exec sessions on running containers" in err or "no such container" in err:
        return "stopped"
    return "unreachable"


def wait_systemd(podman: Podman, container: str, deadline: Deadline) -> str:
    last = "unreachable"
    while True:
        left = deadline.left()
        if left <= 0:
            return last
        last = systemd_state(podman, container, wait_s=left)
        if last in GOOD_SYSTEMD_STATES or last in BAD_SYSTEMD_STATES or last == "stopped":
            return last
        # systemd's bus is not up yet (or --wait ran out): try again shortly.
        time.sleep(min(POLL_S, deadline.left()))


def wait_ssh(key: Path, known_hosts: Path, address: str, deadline: Deadline) -> tuple[bool, str]:
    last = "no attempt made"
    while True:
        left = deadline.left()
        if left <= 0:
            return False, last
        ok, last = ssh_answers(key, known_hosts, address, connect_timeout=min(3.0, max(1.0, left)))
        if ok:
            return True, ""
        time.sleep(min(POLL_S, deadline.left()))


def forget_neighbor(address: str) -> None:
    """Drop the host's ARP entry for a node whose container was just
    (re)started, in case it was cached with another MAC (a container from
    before stable MACs, or anything else that held the address)."""
    subprocess.run(["ip", "neigh", "flush", "to", address], capture_output=True, check=False, timeout=10)


def failed_units(podman: Podman, container: str) -> list[str]:
    proc = podman.run(
        ["exec", container, "systemctl", "list-units", "--state=failed", "--plain", "--no-legend"],
        check=False,
    )
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
