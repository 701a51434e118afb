"""Commands on the pod's nodes over SSH, in parallel (fabric).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Connection, ThreadingGroup
from fabric.exceptions import GroupException
from invoke.exceptions import CommandTimedOut, UnexpectedExit

CONNECT_TIMEOUT_S = 20
# Hosts per fan-out: each is a socket and a few threads; a thousand at once
# would run into the open-file limit and fail healthy nodes.
FANOUT = 64

# paramiko logs a traceback for every host that drops a handshake; the result
# already says "cannot reach HOST", so keep its log out of the terminal.
_paramiko_log = logging.getLogger("paramiko")
_paramiko_log.addHandler(logging.NullHandler())
_paramiko_log.propagate = False


@dataclass(frozen=True)
class SshTarget:
    host: str
    address: str
    user: str
    key: Path | None


@dataclass(frozen=True)
class RemoteResult:
    host: str
    returncode: int | None
    stdout: str
    stderr: str
    error: str | None = None  # could not connect, or timed out


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    line = " ".join(shlex.quote(a) for a in argv)
    return f"env {prefix} {line}" if prefix else line


class Nodes:
    def __init__(self, targets: Mapping[str, SshTarget]) -> None:
        self.targets = dict(targets)

    def connection(self, host: str) -> Connection:
        t = self.targets[host]
        kwargs: dict[str, object] = {"banner_timeout": CONNECT_TIMEOUT_S, "auth_timeout": CONNECT_TIMEOUT_S}
        if t.key is not None:
            kwargs.update(key_filename=str(t.key), look_for_keys=False, allow_agent=False)
        return Connection(t.address, user=t.user, connect_timeout=CONNECT_TIMEOUT_S, connect_kwargs=kwargs)

    def run_each(self, commands: Mapping[str, str], timeout_s: float) -> dict[str, RemoteResult]:
        """Run commands[host] on every host at once; one result per host."""
        by_command: dict[str, list[str]] = {}
        for host, command in commands.items():
            by_command.setdefault(command, []).append(host)
        results: dict[str, RemoteResult] = {}
        chunks = [(c, hosts[i:i + FANOUT]) for c, hosts in by_command.items() for i in range(0, len(hosts), FANOUT)]
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
        conn = self.connection(host)
        try:
            value: object = conn.run(command, hide=True, warn=True, timeout=timeout_s, in_stream=False)
        except Exception as exc:  # noqa: BLE001 - every failure is a result; see _result
            value = exc
        finally:
            conn.close()
        return _result(host, value, timeout_s)


def _result(host: str, value: object, timeout_s: float) -> RemoteResult:
    if isinstance(value, UnexpectedExit):
        value = value.result
    if isinstance(value, CommandTimedOut):
        r = value.result
        return RemoteResult(host, None, r.stdout, r.stderr, f"timed out after {timeout_s:.0f} s")
    if isinstance(value, Exception):
        return RemoteResult(host, None, "", "", f"cannot reach {host} over SSH: {_why(value)}")
    return RemoteResult(host, value.exited, value.stdout, value.stderr)  # type: ignore[attr-defined]


def _why(exc: Exception) -> str:
    if isinstance(exc, paramiko.AuthenticationException):
        return "authentication failed (is the key right? see --private-key)"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "connection timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"
