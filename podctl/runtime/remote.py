"""Commands on the pod's nodes over SSH, in parallel (fabric), and the key that opens them.

Hosts that run the same command line are one `ThreadingGroup` call, so a
hundred nodes of one profile cost one fan-out, not a hundred sequential
sessions. A node that cannot be reached, or a command that overruns its
time, is a result with `error` set, never an exception: the caller turns it
into a finding against that node and carries on with the others.
"""

from __future__ import annotations

import logging
import shlex
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Config, Connection, ThreadingGroup
from fabric.exceptions import GroupException
from fabric.runners import Remote
from invoke.exceptions import CommandTimedOut, UnexpectedExit

from podctl.core import state
from podctl.core.model import Site

CONNECT_TIMEOUT_S = 20
# Hosts per fan-out: each is a socket and a few threads; a thousand at once
# would run into the open-file limit and fail healthy nodes.
FANOUT = 64
# SSH handshakes to one host in flight at once. sshd's MaxStartups (10:30:100 by default)
# drops connections, at random, once more than 10 are unauthenticated; an established
# connection does not count. So many commands may run on one host (the controller's srun
# jobs, see podctl.validate.nccl) as long as their connections are opened a few at a time:
# 6 leaves room for other clients, and a handshake sshd dropped anyway is tried again.
HANDSHAKES_PER_HOST = 6
HANDSHAKE_TRIES = 3
# What podctl keeps of one command's output on one node: its end (a check's JSON result is its last
# line). A node's output is not trusted: at 1,344 nodes an unbounded one would be the controller's
# memory. The result says how much went (RemoteResult.dropped).
KEEP_STDOUT = 512 * 1024
KEEP_STDERR = 64 * 1024
_DROPPED = "\x00podctl-dropped:"


class _CappedRemote(Remote):
    """fabric's runner, keeping only the last KEEP_STDOUT / KEEP_STDERR characters of each stream;
    the number dropped travels at the head of the kept text (see _split_dropped)."""

    def handle_stdout(self, buffer_: list[str], hide: bool, output: object) -> None:
        self._keep_tail(buffer_, self.read_proc_stdout, KEEP_STDOUT)

    def handle_stderr(self, buffer_: list[str], hide: bool, output: object) -> None:
        self._keep_tail(buffer_, self.read_proc_stderr, KEEP_STDERR)

    def _keep_tail(self, buffer_: list[str], reader: object, keep: int) -> None:
        kept, size, dropped = [], 0, 0
        for data in self.read_proc_output(reader):  # type: ignore[arg-type]
            kept.append(data)
            size += len(data)
            while size - len(kept[0]) >= keep:  # drop whole chunks first, then trim the oldest
                size -= len(kept[0])
                dropped += len(kept.pop(0))
            if size > keep:
                cut = size - keep
                kept[0], size, dropped = kept[0][cut:], size - cut, dropped + cut
        buffer_[:] = ([f"{_DROPPED}{dropped}\x00"] if dropped else []) + kept


def _split_dropped(text: str) -> tuple[str, int]:
    """(the kept text, how many characters were dropped before it)."""
    if not text.startswith(_DROPPED):
        return text, 0
    count, _, rest = text[len(_DROPPED) :].partition("\x00")
    return rest, int(count)


# paramiko logs a traceback for every host that drops a handshake; the result
# already says "cannot reach HOST", so keep its log out of the terminal.
_paramiko_log = logging.getLogger("paramiko")
_paramiko_log.addHandler(logging.NullHandler())
_paramiko_log.propagate = False


# Where OpenSSH, and so Ansible under `podctl deploy`, looks for the hosts' keys.
KNOWN_HOSTS_FILES = (
    Path("~/.ssh/known_hosts").expanduser(),
    Path("~/.ssh/known_hosts2").expanduser(),
    Path("/etc/ssh/ssh_known_hosts"),
    Path("/etc/ssh/ssh_known_hosts2"),
)


@dataclass(frozen=True)
class SshTarget:
    """A node as podctl reaches it. A host whose key is not known is refused, as ssh and podctl
    deploy do: known from `known_hosts` (a sim pod's own file) when given, else KNOWN_HOSTS_FILES."""

    host: str
    address: str
    user: str
    key: Path | None
    known_hosts: tuple[Path, ...] = ()


@dataclass(frozen=True)
class RemoteResult:
    host: str
    returncode: int | None
    stdout: str
    stderr: str
    error: str | None = None  # could not connect, or timed out
    dropped: int = 0  # characters of output (both streams) past what podctl keeps (KEEP_STDOUT/KEEP_STDERR)

    @property
    def dropped_note(self) -> str:
        """What a finding says when output was dropped; empty when none was."""
        if not self.dropped:
            return ""
        return (
            f"{self.host} printed {self.dropped:,} characters more than podctl keeps "
            f"({KEEP_STDOUT // 1024} KiB of stdout, {KEEP_STDERR // 1024} KiB of stderr: their ends)"
        )


def site_nodes(site: Site, private_key: Path | None) -> Nodes:
    """Every node of the site, reached as root at its management address; host keys are
    verified (a sim pod's against the keys `podctl sim up` read from its containers)."""
    known = state.pod_known_hosts(site)
    return Nodes({n.hostname: SshTarget(n.hostname, str(n.address), "root", private_key, known) for n in site.nodes})


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    line = " ".join(shlex.quote(a) for a in argv)
    return f"env {prefix} {line}" if prefix else line


class Nodes:
    def __init__(self, targets: Mapping[str, SshTarget]) -> None:
        self.targets = dict(targets)
        self._lock = threading.Lock()
        self._handshakes: dict[str, threading.BoundedSemaphore] = {}

    def _handshake(self, host: str) -> threading.BoundedSemaphore:
        with self._lock:
            return self._handshakes.setdefault(host, threading.BoundedSemaphore(HANDSHAKES_PER_HOST))

    def connection(self, host: str) -> Connection:
        t = self.targets[host]
        kwargs: dict[str, object] = {"banner_timeout": CONNECT_TIMEOUT_S, "auth_timeout": CONNECT_TIMEOUT_S}
        if t.key is not None:
            kwargs.update(key_filename=str(t.key), look_for_keys=False, allow_agent=False)
        config = Config(overrides={"runners": {"remote": _CappedRemote}})
        conn = Connection(
            t.address, user=t.user, config=config, connect_timeout=CONNECT_TIMEOUT_S, connect_kwargs=kwargs
        )
        # fabric accepts any host key it has not seen; podctl does not.
        known = conn.client.get_host_keys()
        # A sim pod's own file, when it has one, is the whole truth about its nodes, as for ssh
        # (UserKnownHostsFile): an older pod's keys at the same addresses in the user's file do not count.
        for path in t.known_hosts or KNOWN_HOSTS_FILES:
            if path.is_file():
                try:
                    known.load(str(path))
                except (OSError, paramiko.SSHException):
                    continue
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        return conn

    def run_each(self, commands: Mapping[str, str], timeout_s: float) -> dict[str, RemoteResult]:
        """Run commands[host] on every host at once; one result per host."""
        by_command: dict[str, list[str]] = {}
        for host, command in commands.items():
            by_command.setdefault(command, []).append(host)
        results: dict[str, RemoteResult] = {}
        chunks = [(c, hosts[i : i + FANOUT]) for c, hosts in by_command.items() for i in range(0, len(hosts), FANOUT)]
        for command, hosts in chunks:
            conns = {id(c): (h, c) for h, c in ((h, self.connection(h)) for h in hosts)}
            group = ThreadingGroup.from_connections([c for _, c in conns.values()])
            try:
                outcome = group.run(command, hide=True, warn=True, timeout=timeout_s, in_stream=False)
            except GroupException as exc:
                outcome = exc.result
            for conn, value in outcome.items():
                host = conns[id(conn)][0]
                results[host] = _result(host, value, timeout_s)
            group.close()
        return results

    def run(self, host: str, command: str, timeout_s: float) -> RemoteResult:
        """Run one command on host; from many threads at once, the connections are opened
        HANDSHAKES_PER_HOST at a time and the commands then run side by side."""
        conn = self.connection(host)
        try:
            self._open(host, conn)
            value: object = conn.run(command, hide=True, warn=True, timeout=timeout_s, in_stream=False)
        except Exception as exc:  # noqa: BLE001 - every failure is a result; see _result
            value = exc
        finally:
            conn.close()
        return _result(host, value, timeout_s)

    def _open(self, host: str, conn: Connection) -> None:
        for attempt in range(1, HANDSHAKE_TRIES + 1):
            try:
                with self._handshake(host):
                    conn.open()
                return
            except Exception as exc:
                if attempt == HANDSHAKE_TRIES or not _dropped(exc):
                    raise
                conn.close()
                time.sleep(0.5 * attempt)


def _result(host: str, value: object, timeout_s: float) -> RemoteResult:
    if isinstance(value, UnexpectedExit):
        value = value.result
    if isinstance(value, CommandTimedOut):
        r = value.result
        (out, lost_out), (err, lost_err) = _split_dropped(r.stdout), _split_dropped(r.stderr)
        return RemoteResult(host, None, out, err, f"timed out after {timeout_s:.0f} s", lost_out + lost_err)
    if isinstance(value, Exception):
        return RemoteResult(host, None, "", "", f"cannot reach {host} over SSH: {_why(value)}")
    (out, lost_out), (err, lost_err) = _split_dropped(value.stdout), _split_dropped(value.stderr)  # type: ignore[attr-defined]
    return RemoteResult(host, value.exited, out, err, dropped=lost_out + lost_err)  # type: ignore[attr-defined]


def _dropped(exc: Exception) -> bool:
    """A connection closed before the SSH banner or key exchange: what sshd does to a
    handshake past MaxStartups. Worth one more try; a refused key or login is not."""
    if isinstance(exc, (paramiko.AuthenticationException, paramiko.BadHostKeyException)):
        return False
    if isinstance(exc, (EOFError, ConnectionResetError)):
        return True
    return isinstance(exc, paramiko.SSHException) and "banner" in str(exc).lower()


def _why(exc: Exception) -> str:
    if isinstance(exc, paramiko.BadHostKeyException):
        return (
            "its host key differs from the one in known_hosts: the node was reinstalled, or this is not the "
            "node; check, then update known_hosts (ssh-keygen -R ADDRESS)"
        )
    if isinstance(exc, paramiko.SSHException) and "known_hosts" in str(exc):
        return (
            "its host key is unknown (not in ~/.ssh/known_hosts or /etc/ssh/ssh_known_hosts); add it after "
            "checking its fingerprint, as for podctl deploy (ssh-keyscan ADDRESS >> ~/.ssh/known_hosts)"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return "authentication failed (is the key right? see --private-key)"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "connection timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"
