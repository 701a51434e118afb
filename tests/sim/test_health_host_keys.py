"""The sim's readiness probe checks a node's host key against the pod's known_hosts (issue 41,
finding 6): a host whose key the pod does not hold is refused before any login.

Components started: the real OpenSSH client (`ssh`, as the probe runs it) against an SSH server on
loopback (paramiko, in this process: tests/hostile's) that has a host key of its own and refuses
every login.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko

from podctl.sim import health
from tests.hostile.test_trust import _ssh_server


def _key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def _line(port: int, key: paramiko.PKey) -> str:
    return f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n"


def test_the_readiness_probe_refuses_a_host_whose_key_is_not_the_pods(tmp_path: Path):
    client = _key(tmp_path / "pod-key")
    known_hosts = tmp_path / "known_hosts"
    with _ssh_server() as (port, host_key, _):
        # The pod holds no key for it: refused at the host key, never tried with the pod key.
        known_hosts.write_text("")
        ok, why = health.ssh_answers(client, known_hosts, "127.0.0.1", port=port)
        assert not ok and "Host key verification failed" in why, why

        # Another key under its name (a container impersonating the node): refused as well.
        other = paramiko.Ed25519Key.from_private_key_file(str(_key(tmp_path / "other")))
        known_hosts.write_text(_line(port, other))
        ok, why = health.ssh_answers(client, known_hosts, "127.0.0.1", port=port)
        assert not ok and "Host key verification failed" in why, why

        # The pod's key: past the host key, to the login this server refuses.
        known_hosts.write_text(_line(port, host_key))
        ok, why = health.ssh_answers(client, known_hosts, "127.0.0.1", port=port)
        assert not ok and "Permission denied" in why and "Host key verification failed" not in why, why
