"""Fault injection: stop a node, throttle its network, stop a service, undo.

Throttling uses a token-bucket filter (tbf): the kernel here has no netem,
but tbf works.  `tc` runs from the host, never through the node:
inside the node's network namespace (`nsenter -t PID -n`) for what the node
sends, and on the host end of its veth pair for what it receives.  Every
fault is recorded under the pod's state dir so `status` can show it and
`--clear` can undo exactly what was done.
"""

from __future__ import annotations

import math
import re
import subprocess
from dataclasses import dataclass

from podctl.core import state
from podctl.sim import health
from podctl.sim.errors import SimError
from podctl.sim.health import Deadline
from podctl.sim.podman import LABEL_ADDRESS, ContainerInfo, Podman

# tc's rate units (see tc(8)): bits or bytes per second, SI or IEC prefixes.
_RATE_UNITS: dict[str, float] = {
    "bit": 1,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "tbit": 1e12,
    "kibit": 2**10,
    "mibit": 2**20,
    "gibit": 2**30,
    "tibit": 2**40,
    "bps": 8,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
    "tbps": 8e12,
    "kibps": 8 * 2**10,
    "mibps": 8 * 2**20,
    "gibps": 8 * 2**30,
    "tibps": 8 * 2**40,
}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")

TBF_LATENCY = "50ms"
# The kernel refills the bucket at least every timer tick; with HZ as low as
# 250 the bucket must hold 1/250 s of traffic or the rate is never reached.
_TICKS_PER_S = 250
_MIN_BURST_BYTES = 8 * 1024


def parse_rate(text: str) -> int:
    """'50mbit' -> 50_000_000 (bits per second).  A bare number is bits, as in tc."""
    match = _RATE.match(text)
    if not match:
        raise SimError(f"--rate {text!r} is not a rate: write a number and a tc unit, e.g. 50mbit, 1gbit, 10mbps")
    value, unit = float(match.group(1)), match.group(2).lower() or "bit"
    if unit not in _RATE_UNITS:
        raise SimError(f"--rate {text!r}: unknown unit {unit!r}; use one of {', '.join(_RATE_UNITS)}")
    bits = int(value * _RATE_UNITS[unit])
    if bits < 8000:
        raise SimError(f"--rate {text!r} is below 8kbit, too slow for tbf to shape sensibly")
    return bits


def burst_bytes(rate_bits: int) -> int:
    return max(_MIN_BURST_BYTES, math.ceil(rate_bits / 8 / _TICKS_PER_S))


def tbf_command(device: str, rate_bits: int) -> list[str]:
    return [
        "tc",
        "qdisc",
        "replace",
        "dev",
        device,
        "root",
        "tbf",
        "rate",
        f"{rate_bits}bit",
        "burst",
        f"{burst_bytes(rate_bits)}b",
        "latency",
        TBF_LATENCY,
    ]


def tc_clear_command(device: str) -> list[str]:
    return ["tc", "qdisc", "del", "dev", device, "root"]


def in_netns(pid: int, command: list[str]) -> list[str]:
    return ["nsenter", "-t", str(pid), "-n", *command]


_IP_LINK = re.compile(r"^(\d+):\s+([^:@\s]+)(?:@if(\d+))?:")


def parse_ip_link(output: str) -> list[tuple[int, str, int | None]]:
    """`ip -o link` lines -> (ifindex, name, peer ifindex or None)."""
    links = []
    for line in output.splitlines():
        m = _IP_LINK.match(line)
        if m:
            links.append((int(m.group(1)), m.group(2), int(m.group(3)) if m.group(3) else None))
    return links


def parse_ip_addr(output: str) -> dict[str, list[str]]:
    """`ip -o -4 addr` lines -> interface name -> its IPv4 addresses."""
    result: dict[str, list[str]] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet":
            result.setdefault(parts[1].split("@")[0], []).append(parts[3].split("/")[0])
    return result


def _run(cmd: list[str], what: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    if check and proc.returncode != 0:
        raise SimError(f"{what} failed: `{' '.join(cmd)}`: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


@dataclass(frozen=True)
class Interfaces:
    inside: str  # the node's interface on the pod network
    host_peer: str | None  # the host end of its veth pair


def node_interfaces(pid: int, address: str) -> Interfaces:
    addrs = parse_ip_addr(
        _run(in_netns(pid, ["ip", "-o", "-4", "addr", "show"]), "listing the node's addresses").stdout
    )
    inside = next((dev for dev, ips in addrs.items() if address in ips), None)
    if inside is None:
        raise SimError(f"no interface inside the node carries its management address {address}")
    links = parse_ip_link(
        _run(in_netns(pid, ["ip", "-o", "link", "show", "dev", inside]), "reading the node's link").stdout
    )
    peer_index = links[0][2] if links else None
    host_peer = None
    if peer_index is not None:
        for index, name, _ in parse_ip_link(_run(["ip", "-o", "link", "show"], "listing host links").stdout):
            if index == peer_index:
                host_peer = name
                break
    return Interfaces(inside, host_peer)


def _record(pod: str, node: str, update: dict[str, object]) -> None:
    faults = state.read_faults(pod)
    entry = dict(faults.get(node, {}))
    entry.update(update)
    faults[node] = entry
    state.write_faults(pod, faults)


def kill(podman: Podman, pod: str, container: ContainerInfo) -> None:
    if not container.running:
        raise SimError(f"{container.node} is already stopped ({container.state})")
    # SIGKILL to the whole container: a power cut, not a shutdown.
    podman.run(["kill", "--signal", "KILL", container.name])
    podman.run(["wait", "--condition", "exited", "--condition", "stopped", container.name], check=False, timeout=30)
    _record(pod, container.node, {"killed": True})


def throttle(podman: Podman, pod: str, container: ContainerInfo, rate: str) -> Interfaces:
    bits = parse_rate(rate)
    if not container.running:
        raise SimError(f"{container.node} is not running; cannot throttle its network")
    pid = podman.container_pid(container.name)
    ifaces = node_interfaces(pid, container.labels.get(LABEL_ADDRESS, ""))
    _run(in_netns(pid, tbf_command(ifaces.inside, bits)), f"throttling {container.node}'s egress")
    if ifaces.host_peer:
        _run(tbf_command(ifaces.host_peer, bits), f"throttling {container.node}'s ingress")
    _record(pod, container.node, {"rate": rate, "interfaces": [ifaces.inside, ifaces.host_peer]})
    return ifaces


def stop_service(podman: Podman, pod: str, container: ContainerInfo, service: str) -> None:
    if not container.running:
        raise SimError(f"{container.node} is not running; cannot stop {service}")
    load = podman.run(
        ["exec", container.name, "systemctl", "show", "--property=LoadState", "--value", service], check=False
    )
    if load.stdout.strip() in ("not-found", ""):
        raise SimError(f"{container.node} has no systemd unit {service!r}")
    proc = podman.run(["exec", container.name, "systemctl", "stop", service], check=False)
    if proc.returncode != 0:
        raise SimError(f"could not stop {service} on {container.node}: {proc.stderr.strip()}")
    faults = state.read_faults(pod).get(container.node, {})
    stopped = list(faults.get("stopped_services", []))  # type: ignore[call-overload]
    if service not in stopped:
        stopped.append(service)
    _record(pod, container.node, {"stopped_services": stopped})


# Where an unmounted shared mount is kept inside the node (its own mount namespace), so that
# clearing the fault can put it back: the host folder behind it is not visible from in there.
_PARKED = "/run/podctl-fault/parked"
# A filled disk: a small tmpfs over the path, filled to the last block.
FILL_SIZE_MB = 16


def in_mountns(pid: int, command: list[str]) -> list[str]:
    """A command in the node's mount namespace, and in its PID namespace too: without that the
    node's /proc has no /proc/self for it, and umount, which reads /proc/self/mountinfo, fails."""
    return ["nsenter", "-t", str(pid), "-m", "-p", *command]


def _parked(path: str) -> str:
    return f"{_PARKED}{path}"


def unmount(podman: Podman, pod: str, container: ContainerInfo, path: str) -> None:
    """A shared mount gone: unmounted inside the node (kept aside for --clear)."""
    if not container.running:
        raise SimError(f"{container.node} is not running; cannot unmount {path}")
    pid = podman.container_pid(container.name)
    if _run(in_mountns(pid, ["mountpoint", "-q", path]), "", check=False).returncode != 0:
        raise SimError(f"{path} is not a mount point on {container.node}")
    _run(in_mountns(pid, ["mkdir", "-p", _parked(path)]), f"preparing to unmount {path}")
    _run(in_mountns(pid, ["mount", "--bind", path, _parked(path)]), f"keeping {path} aside")
    _run(in_mountns(pid, ["umount", "--lazy", path]), f"unmounting {path} on {container.node}")
    faults = state.read_faults(pod).get(container.node, {})
    gone = list(faults.get("unmounted", []))  # type: ignore[call-overload]
    _record(pod, container.node, {"unmounted": [*gone, path] if path not in gone else gone})


def fill(podman: Podman, pod: str, container: ContainerInfo, path: str) -> None:
    """A full disk at `path`: a small tmpfs over it inside the node, filled to the last block."""
    if not container.running:
        raise SimError(f"{container.node} is not running; cannot fill {path}")
    pid = podman.container_pid(container.name)
    _run(in_mountns(pid, ["mkdir", "-p", path]), f"preparing {path}")
    _run(
        in_mountns(pid, ["mount", "-t", "tmpfs", "-o", f"size={FILL_SIZE_MB}m", "podctl-fault-fill", path]),
        f"mounting a small file system over {path} on {container.node}",
    )
    # dd stops at "No space left on device": that is the point.
    _run(in_mountns(pid, ["dd", "if=/dev/zero", f"of={path}/podctl-fill", "bs=1M"]), "", check=False)
    faults = state.read_faults(pod).get(container.node, {})
    filled = list(faults.get("filled", []))  # type: ignore[call-overload]
    _record(pod, container.node, {"filled": [*filled, path] if path not in filled else filled})


def _undo_mounts(pid: int, node: str, recorded: dict[str, object]) -> list[str]:
    undone = []
    for path in recorded.get("filled", []) or []:  # type: ignore[union-attr]
        _run(in_mountns(pid, ["umount", str(path)]), f"removing the filled file system at {path} on {node}")
        undone.append(f"emptied {path}")
    for path in recorded.get("unmounted", []) or []:  # type: ignore[union-attr]
        _run(in_mountns(pid, ["mount", "--bind", _parked(str(path)), str(path)]), f"mounting {path} again on {node}")
        _run(in_mountns(pid, ["umount", _parked(str(path))]), "", check=False)
        undone.append(f"mounted {path} again")
    return undone


def _shaped(pid: int, ifaces: Interfaces) -> list[str]:
    """The node's interfaces (inside, and the host's end of its pair) that a tbf still shapes."""
    shows = [(ifaces.inside, in_netns(pid, ["tc", "qdisc", "show", "dev", ifaces.inside]))]
    if ifaces.host_peer:
        shows.append((ifaces.host_peer, ["tc", "qdisc", "show", "dev", ifaces.host_peer]))
    return [dev for dev, cmd in shows if " tbf " in _run(cmd, f"reading the qdisc of {dev}").stdout]


def clear(podman: Podman, pod: str, container: ContainerInfo, timeout_s: float = 60) -> list[str]:
    """Undo every recorded fault on the node; returns what was undone."""
    faults = state.read_faults(pod)
    recorded = dict(faults.get(container.node, {}))
    undone: list[str] = []
    if not container.running:
        # A restart also drops the qdisc and restarts every service.
        podman.run(["start", container.name])
        health.forget_neighbor(container.labels.get(LABEL_ADDRESS, ""))
        deadline = Deadline.after(timeout_s)
        systemd = health.wait_systemd(podman, container.name, deadline)
        if systemd not in health.GOOD_SYSTEMD_STATES:
            raise SimError(f"{container.node} restarted but systemd is {systemd!r}")
        key = state.ssh_key_path(pod)
        # The same container, started again: its host keys are those the pod's known_hosts holds.
        ok, why = health.wait_ssh(key, state.known_hosts_path(pod), container.labels.get(LABEL_ADDRESS, ""), deadline)
        if not ok:
            raise SimError(f"{container.node} restarted but sshd does not answer: {why}")
        undone.append("started the node")
    else:
        pid = podman.container_pid(container.name)
        ifaces = node_interfaces(pid, container.labels.get(LABEL_ADDRESS, ""))
        # Always removed, recorded or not: clearing means "no shaping". `tc qdisc del` fails on an
        # interface without a qdisc of ours, so what counts is what is left afterwards.
        inside = _run(in_netns(pid, tc_clear_command(ifaces.inside)), "", check=False)
        if ifaces.host_peer:
            _run(tc_clear_command(ifaces.host_peer), "", check=False)
        left = _shaped(pid, ifaces)
        if left:
            raise SimError(f"{container.node}: the rate limit is still on {', '.join(left)} after `tc qdisc del`")
        if inside.returncode == 0:
            undone.append("removed the rate limit")
        undone += _undo_mounts(pid, container.node, recorded)
        for service in recorded.get("stopped_services", []) or []:  # type: ignore[union-attr]
            proc = podman.run(["exec", container.name, "systemctl", "start", str(service)], check=False)
            if proc.returncode != 0:
                raise SimError(f"could not restart {service} on {container.node}: {proc.stderr.strip()}")
            undone.append(f"started {service}")
    faults.pop(container.node, None)
    state.write_faults(pod, faults)
    return undone
