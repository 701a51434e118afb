"""The daemons a test run started that outlive it: the run's last check (tests/conftest.py).

A process is the run's when it is in the run's session (a daemon started in the foreground of a
sandbox keeps it: `slurmctld -D`, prometheus) or carries the run's mark in its environment (one
that made a session of its own, like munged, from a command the run started), and it was not
there when the run began. Processes of containers are none of its business: those in a PID
namespace other than the run's, and those in a container's network namespace (the ibsim that
`podctl sim up` keeps beside a sim pod, in its SM host's; PODCTL_KEEP_POD keeps the pod and it).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

# The run's mark, set in its environment at the start: every command a test starts inherits it.
MARK = "PODCTL_TEST_RUN"
# What tests start on this machine (tests/deploy/test_real_consumers.py, tests/ibfabric): Slurm's
# daemons, munge, Prometheus and Alertmanager, the simulated fabric.
DAEMONS = frozenset(
    {
        "slurmctld",
        "slurmd",
        "slurmdbd",
        "slurmscriptd",
        "slurmstepd",
        "munged",
        "prometheus",
        "alertmanager",
        "prometheus-alertmanager",
        "ibsim",
        "opensm",
    }
)
_PROC = Path("/proc")
_COMM_LEN = 15  # the kernel keeps a process's name to its first 15 characters


@dataclass(frozen=True)
class Process:
    pid: int
    name: str
    started: int  # clock ticks after boot: with the pid, one process (pids are reused)
    session: int
    command: str


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # ended meanwhile, or not ours to read
        return None


def _namespace(pid: int | str, kind: str) -> str | None:
    try:
        return os.readlink(_PROC / str(pid) / "ns" / kind)
    except OSError:
        return None


def _process(pid: int) -> Process | None:
    stat = _read(_PROC / str(pid) / "stat")
    if stat is None:
        return None
    head, _, tail = stat.decode(errors="replace").rpartition(")")
    fields = tail.split()
    if fields[0] == "Z":  # ended, not yet reaped: it serves nothing
        return None
    argv = _read(_PROC / str(pid) / "cmdline") or b""
    command = argv.replace(b"\0", b" ").decode(errors="replace").strip()
    return Process(pid, head.partition("(")[2], int(fields[19]), int(fields[3]), command)


def running(names: Collection[str] = DAEMONS) -> list[Process]:
    """Every live process of one of `names`."""
    wanted = {name[:_COMM_LEN] for name in names}
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        comm = _read(entry / "comm")
        if comm is None or comm.decode(errors="replace").strip() not in wanted:
            continue
        process = _process(int(entry.name))
        if process is not None:
            found.append(process)
    return found


def _container_networks(own_pid_namespace: str | None) -> set[str]:
    """The network namespaces of the processes in other PID namespaces (containers), but the run's
    own (a container, or a sandbox, may share the host's network)."""
    networks = set()
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and _namespace(entry.name, "pid") not in (own_pid_namespace, None):
            network = _namespace(entry.name, "net")
            if network is not None:
                networks.add(network)
    networks.discard(_namespace("self", "net"))
    return networks


def _marked(pid: int, mark: str) -> bool:
    environ = _read(_PROC / str(pid) / "environ") or b""
    return f"{MARK}={mark}".encode() in environ.split(b"\0")


def left_running(before: Iterable[Process], session: int, mark: str, names: Collection[str] = DAEMONS) -> list[Process]:
    """The processes of `names` the run started (in `session`, or with `mark`) that were not
    running `before` it and still are, leaving out those of containers."""
    own = _namespace("self", "pid")
    old = {(p.pid, p.started) for p in before}
    new = [p for p in running(names) if (p.pid, p.started) not in old and _namespace(p.pid, "pid") == own]
    ours = [p for p in new if p.session == session or _marked(p.pid, mark)]
    if not ours:
        return []
    containers = _container_networks(own)
    return [p for p in ours if _namespace(p.pid, "net") not in containers]
