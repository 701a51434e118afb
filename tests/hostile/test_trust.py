"""Trust on real pods: host keys verified as deploy verifies them, secrets kept out of artifacts,
non-finite figures never passing, and readers of tool output linear in their input."""

from __future__ import annotations

import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paramiko
import pytest
import yaml

from podctl.core.assets import roles_dir
from podctl.core.errors import PodctlError
from podctl.core.model import Reference
from podctl.core.redact import redact_tree, redact_urls
from podctl.derive.inventory import SITE_VARS, write_inventory
from podctl.derive.site import load_site
from podctl.runtime import remote
from podctl.validate.judge import CheckRun, judge
from tests.helpers.cli import podctl
from tests.helpers.repo import REPO


class _Server(paramiko.ServerInterface):
    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_FAILED

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"


@contextmanager
def _ssh_server(drops: int = 0) -> Iterator[tuple[int, paramiko.PKey, list[socket.socket]]]:
    """An SSH server on loopback with a host key of its own; it refuses every login. The first
    `drops` connections it closes at once, as sshd does to a handshake past MaxStartups."""
    host_key = paramiko.Ed25519Key.from_private_key_file(str(_keyfile()))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            accepted.append(conn)
            if len(accepted) <= drops:
                conn.close()
                continue
            transport = paramiko.Transport(conn)
            transport.add_server_key(host_key)
            try:
                transport.start_server(server=_Server())
            except (paramiko.SSHException, EOFError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], host_key, accepted
    finally:
        stop.set()
        sock.close()


@pytest.fixture
def ssh_server() -> Iterator[tuple[int, paramiko.PKey]]:
    with _ssh_server() as (port, host_key, _):
        yield port, host_key


def _keyfile() -> Path:
    path = Path("/tmp") / "podctl-test-hostkey-ed25519"
    return path if path.exists() else _new_key(path)


def _nodes(port: int, key: Path | None, known_hosts: tuple[Path, ...] = ()) -> remote.Nodes:
    target = remote.SshTarget("node01", "127.0.0.1", "root", key, known_hosts)
    nodes = remote.Nodes({"node01": target})
    original = nodes.connection

    def on_port(host: str):  # the test server listens on a free port, not 22
        conn = original(host)
        conn.port = port
        return conn

    nodes.connection = on_port  # type: ignore[method-assign]
    return nodes


def _new_key(path: Path) -> Path:
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def test_an_unknown_host_key_is_refused_on_a_real_pod(
    ssh_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, host_key = ssh_server
    client_key = _new_key(tmp_path / "client")
    known = tmp_path / "known_hosts"
    known.write_text("")
    monkeypatch.setattr(remote, "KNOWN_HOSTS_FILES", (known,))
    result = _nodes(port, client_key).run("node01", "true", timeout_s=10)
    assert result.error and "host key is unknown" in result.error, result
    # Known: the connection gets past the host key, to the login the server refuses.
    known.write_text(_known_line(port, host_key))
    result = _nodes(port, client_key).run("node01", "true", timeout_s=10)
    assert result.error and "authentication failed" in result.error, result
    # Another key under the same name: refused as a changed key.
    other = paramiko.Ed25519Key.from_private_key_file(str(_new_key(tmp_path / "other")))
    known.write_text(f"[127.0.0.1]:{port} {other.get_name()} {other.get_base64()}\n")
    result = _nodes(port, client_key).run("node01", "true", timeout_s=10)
    assert result.error and "differs from the one in known_hosts" in result.error, result


def _known_line(port: int, key: paramiko.PKey) -> str:
    return f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n"


def _pod_known_hosts(tmp_path: Path, port: int, key: paramiko.PKey) -> tuple[Path, ...]:
    """A sim pod's own known_hosts, as `podctl sim up` writes it, holding the server's key."""
    path = tmp_path / "pod-known_hosts"
    path.write_text(_known_line(port, key))
    return (path,)


def test_a_sim_pods_nodes_are_checked_against_its_own_known_hosts(
    ssh_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, host_key = ssh_server
    monkeypatch.setattr(remote, "KNOWN_HOSTS_FILES", (tmp_path / "none",))
    client_key = _new_key(tmp_path / "client")
    # Not in the pod's file either: refused, as on a real pod. No setting turns the check off.
    empty = tmp_path / "empty"
    empty.write_text("")
    result = _nodes(port, client_key, (empty,)).run("node01", "true", timeout_s=10)
    assert result.error and "host key is unknown" in result.error, result
    result = _nodes(port, client_key, _pod_known_hosts(tmp_path, port, host_key)).run("node01", "true", timeout_s=10)
    assert result.error and "authentication failed" in result.error, result


@pytest.mark.parametrize("drops", [1, remote.HANDSHAKE_TRIES - 1])
def test_a_handshake_the_server_drops_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drops) -> None:
    monkeypatch.setattr(remote, "KNOWN_HOSTS_FILES", (tmp_path / "none",))
    with _ssh_server(drops) as (port, key, accepted):
        nodes = _nodes(port, _new_key(tmp_path / "client"), _pod_known_hosts(tmp_path, port, key))
        result = nodes.run("node01", "true", timeout_s=10)
        # Past the dropped handshakes, to the login the server refuses (which is not tried again).
        assert result.error and "authentication failed" in result.error, result
        assert len(accepted) == drops + 1


def test_a_host_that_drops_every_handshake_is_unreachable_after_a_few_tries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "KNOWN_HOSTS_FILES", (tmp_path / "none",))
    with _ssh_server(drops=100) as (port, key, accepted):
        nodes = _nodes(port, _new_key(tmp_path / "client"), _pod_known_hosts(tmp_path, port, key))
        result = nodes.run("node01", "true", timeout_s=10)
        assert result.error and "cannot reach node01 over SSH" in result.error, result
        assert len(accepted) == remote.HANDSHAKE_TRIES


def test_only_the_sims_own_record_makes_a_pod_a_sim_never_the_site_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from podctl.core import state
    from podctl.runtime.remote import site_nodes as ssh_nodes

    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path / "state"))
    sim = load_site(REPO / "inventory" / "sim" / "site.yaml")
    # Every profile emulated, but no pod `podctl sim up` made: a real pod, as far as podctl knows.
    assert sim.emulated and not state.sim_pod(sim)
    assert all(t.known_hosts == () for t in ssh_nodes(sim, None).targets.values())
    with pytest.raises(PodctlError, match="no sim pod of this site is up"):
        state.private_key_for(sim, None, "podctl sim up")
    # The sim's record of pod `sim`, at other addresses: still not this site.
    state.write_pod_record("sim", {n.hostname: "10.99.0.9" for n in sim.nodes})
    state.known_hosts_path("sim").write_text("")
    assert not state.sim_pod(sim)
    # The record of the nodes sim up made for this site: their keys come from the pod's own file.
    state.write_pod_record("sim", {n.hostname: str(n.address) for n in sim.nodes})
    assert state.sim_pod(sim)
    assert all(t.known_hosts == (state.known_hosts_path("sim"),) for t in ssh_nodes(sim, None).targets.values())
    assert all(
        t.known_hosts == ()
        for t in ssh_nodes(load_site(REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"), None).targets.values()
    )


SECRET = "s3cr3t-token"


# A token where package indexes and object stores put them: the userinfo, or the query string.
SECRET_URLS = {
    "userinfo": (f"https://ci-user:{SECRET}@pypi.example.com/simple", "ci-user:***@pypi.example.com"),
    "bare-userinfo": (f"https://{SECRET}@pypi.example.com/simple", "https://***@pypi.example.com"),
    "query": (f"https://pypi.example.com/simple?token={SECRET}", "simple?token=***"),
    "signed": (f"https://store.example.com/w/simple?X-Amz-Credential=a&X-Amz-Signature={SECRET}", "Signature=***"),
    "bare": (f"https://pypi.example.com/simple?{SECRET}", "simple?***"),
}


def _site_with_secret(tmp_path: Path, url: str = SECRET_URLS["userinfo"][0]) -> Path:
    doc = yaml.safe_load((REPO / "inventory" / "sim" / "site.yaml").read_text())
    doc["validation"]["tools"] = {"index_url": url}
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("form", sorted(SECRET_URLS))
def test_a_secret_in_the_index_url_lives_only_in_a_0600_file(tmp_path: Path, form: str) -> None:
    site = load_site(_site_with_secret(tmp_path, SECRET_URLS[form][0]))
    write_inventory(site, tmp_path / "inv")
    holding = [p for p in (tmp_path / "inv").rglob("*") if p.is_file() and SECRET in p.read_text()]
    assert [str(p.relative_to(tmp_path / "inv")) for p in holding] == [SITE_VARS]
    assert stat.S_IMODE(holding[0].stat().st_mode) == 0o600


@pytest.mark.parametrize("form", sorted(SECRET_URLS))
def test_plan_does_not_print_the_secret(tmp_path: Path, form: str) -> None:
    url, shown = SECRET_URLS[form]
    for output in ("text", "json"):
        ran = podctl("plan", str(_site_with_secret(tmp_path, url)), "-o", output)
        assert ran.rc == 0, ran.err
        assert SECRET not in ran.out
    assert shown in ran.out  # the JSON plan: not cut to the terminal's width


@pytest.mark.parametrize("form", sorted(SECRET_URLS))
def test_check_does_not_print_the_secret_of_an_index_url_it_refuses(tmp_path: Path, form: str) -> None:
    # A space ends the URL the schema takes: `podctl check` quotes the value it refuses.
    site = _site_with_secret(tmp_path, SECRET_URLS[form][0] + " x")
    for output in ("text", "json"):
        ran = podctl("check", str(site), "-o", output)
        assert ran.rc == 2 and "validation.tools.index_url" in ran.out, ran.out + ran.err
        assert SECRET not in ran.out + ran.err


def test_run_artifacts_are_redacted(tmp_path: Path) -> None:
    events = tmp_path / "artifacts" / "deploy" / "job_events"
    events.mkdir(parents=True)
    (events / "1-x.json").write_text('{"res": {"cmd": "pip install --index-url https://u:' + SECRET + '@h/s x"}}')
    (tmp_path / "artifacts" / "deploy" / "stdout").write_text(f"Looking in indexes: https://u:{SECRET}@h/s\n")
    assert redact_tree(tmp_path / "artifacts") == 2
    for path in (tmp_path / "artifacts").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text() and "u:***@h" in path.read_text()


def test_the_pip_task_logs_nothing_when_the_index_holds_a_secret() -> None:
    tasks = yaml.safe_load((roles_dir() / "validation_tools/tasks/install.yml").read_text())
    pip = [t for t in tasks if "ansible.builtin.pip" in t]
    assert pip and all(t.get("no_log") == "{{ _podctl_validation_tools_index_secret }}" for t in pip)


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("https://u:p@h/x", "https://u:***@h/x"),
        ("x https://user:pw@host:8080/simple y", "x https://user:***@host:8080/simple y"),
        ('"http://a:b@c"', '"http://a:***@c"'),
        # A token as the whole userinfo, as a package index or a git host hands it out.
        ("https://TOKEN@host/simple/", "https://***@host/simple/"),
        ("--index-url https://TOKEN@host:8443/simple/ x", "--index-url https://***@host:8443/simple/ x"),
        ('{"url": "https://TOKEN@host/simple/"}', '{"url": "https://***@host/simple/"}'),
        ("https://TOKEN@host/simple/?token=T2", "https://***@host/simple/?token=***"),
        ("a https://TOKEN@h/s b https://u:p@h/s", "a https://***@h/s b https://u:***@h/s"),
        # No userinfo: an '@' past the authority, or none at all, is left as it is.
        ("https://host/simple/a@b", "https://host/simple/a@b"),
        ("https://@host/", "https://@host/"),
        ("user@host:/path", "user@host:/path"),
    ],
)
def test_redact_urls(text: str, redacted: str) -> None:
    assert redact_urls(text) == redacted


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_figures_never_pass(value: float) -> None:
    import json

    from podctl.validate.envelope import parse_envelope

    text = json.dumps(
        {
            "check": "burnin",
            "host": "n1",
            "status": "pass",
            "findings": [],
            "details": {},
            "measurements": [{"figure": "memory_bandwidth", "value": value, "unit": "GB/s"}],
        }
    )
    run = CheckRun("burnin", "node", "n1", parse_envelope(text, 0, "", "burnin", "n1"))
    cert = judge("pod", {"n1": [Reference("memory_bandwidth", 10.0, 0.1, "GB/s", "t")]}, [run])
    assert not cert.certified and cert.failures["n1"]


def test_a_check_the_launcher_refused_is_an_error_on_its_node_that_says_why() -> None:
    from podctl.validate.envelope import parse_envelope
    from podctl.validate.pod import target

    site = load_site(REPO / "inventory" / "sim" / "site.yaml")
    # validate's node suites and Slurm jobs run every check through the launcher, as the gate does.
    assert target(site).tools.argv("validation.health")[:2] == [
        "/usr/local/sbin/podctl-validation-exec",
        "/opt/podctl-validation/venv/bin/python",
    ]
    stderr = (
        "podctl-validation-exec: refused: /opt/podctl-validation/src/validation is writable by others (mode 0777)\n"
    )
    envelope = parse_envelope("", 77, stderr, "health", "node02")
    assert envelope["status"] == "error" and envelope["host"] == "node02"
    (message,) = [f["message"] for f in envelope["findings"]]
    assert "not run: refused: /opt/podctl-validation/src/validation is writable by others" in message
    assert "redeploy the validation tools" in message
    run = CheckRun("health", "node", "node02", envelope)
    cert = judge("pod", {"node02": []}, [run])
    assert not cert.certified and cert.failures["node02"]


# -- readers of tool output: linear in the input, a 300 KB hostile line refused in under a second --

HOSTILE_LINES = {
    "spaces": " " * 300_000 + "x",
    "digits": "1" * 300_000,
    "brackets": "[" * 150_000 + "]" * 150_000,
    "test-ids": "::test_a[ansible://" * 15_000,
    "xid": "NVRM: Xid (" * 25_000,
    "urls": "a://" * 75_000,
    "pid": "pid=" * 75_000,
}


def _readers():
    from podctl.validate.conformance.run import _TEST_LINE, parse_junit
    from podctl.validate.envelope import parse_envelope
    from podctl.validate.nccl import busbw
    from validation.health import parse_cpuinfo, parse_ib_rate, parse_meminfo, parse_xid_events
    from validation.units import parse_size

    def size(text: str) -> None:
        try:
            parse_size(text)
        except ValueError:
            pass

    return {
        "envelope": lambda t: parse_envelope(t, 0, t, "health", "n1"),
        "junit": lambda t: parse_junit(f"<testsuites><testcase name='{t[:1000]}'/></testsuites>", ["n1"]),
        "pytest-progress": lambda t: _TEST_LINE.search(t),
        "busbw-figure": lambda t: busbw({"measurements": [{"figure": t, "value": 1.0}]}, "all_reduce_busbw_16MiB"),
        "xid": parse_xid_events,
        "ib-rate": parse_ib_rate,
        "meminfo": parse_meminfo,
        "cpuinfo": parse_cpuinfo,
        "size": size,
        "redact": redact_urls,
    }


@pytest.mark.parametrize("reader", sorted(_readers()))
def test_readers_are_linear_on_hostile_lines(reader: str) -> None:
    read = _readers()[reader]
    for name, line in HOSTILE_LINES.items():
        started = time.monotonic()
        read(line)
        # Quadratic readers took 7 s and 112 s here on these lines; linear ones take milliseconds.
        assert time.monotonic() - started < 1.0, f"{reader} on {name}"


# -- SSH's control sockets and Mitogen's: a folder of this user's alone ---------------------------


@pytest.mark.parametrize("squat", ["another-users", "open-to-others", "a-link"])
@pytest.mark.parametrize(("name", "what"), [("podctl-ssh", "SSH's control sockets"), ("podctl-tmp", "Mitogen's")])
def test_a_squatted_control_path_folder_is_refused(
    tmp_path: Path, short_tmp: Path, squat: str, name: str, what: str
) -> None:
    import os

    from tests.helpers.cli import assert_user_error

    runtime = short_tmp / "run-user"
    runtime.mkdir(mode=0o700)
    folder = runtime / name
    if squat == "a-link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    else:
        folder.mkdir(mode=0o700)
        os.chmod(folder, 0o777)  # as another user's umask-less mkdir leaves it
        if squat == "another-users":
            os.chown(folder, 65534, 65534)
    site = REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"
    ran = podctl("deploy", str(site), "--runs-dir", str(tmp_path / "runs"), env={"XDG_RUNTIME_DIR": str(runtime)})
    assert_user_error(ran, str(folder), what)
    assert list(folder.iterdir()) == []  # no socket was made in it (through the link: in its target)


def test_the_control_path_is_private_and_never_under_tmp(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from podctl.runtime.ansible import ansible_settings, control_path_dir

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(short_tmp / "home"))
    folder = control_path_dir()
    assert folder == short_tmp / "home" / ".ansible" / "cp"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.geteuid()
    settings = ansible_settings(
        hosts=4, fast=True, fact_cache_dir=short_tmp / "f", roles_path=short_tmp, private_key=None
    )
    assert settings.envvars["ANSIBLE_SSH_CONTROL_PATH_DIR"] == str(folder)
    assert "/tmp/podctl-ssh" not in str(settings.envvars)


def _deep(base: Path, length: int) -> Path:
    """A folder under `base` whose path is `length` bytes long."""
    path = base / ("d" * (length - len(str(base)) - 1))
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@pytest.mark.parametrize(
    ("session", "home_name", "name_bytes", "socket_name"),
    [
        ("podctl-ssh", "cp", "CONTROL_SOCKET_NAME_BYTES", "ti-" + "c" * 40 + "." + "r" * 16),
        ("podctl-tmp", "podctl-tmp", "MITOGEN_SOCKET_NAME_BYTES", "mitogen_unix_" + "r" * 8 + ".sock"),
    ],
)
def test_a_control_folder_is_never_too_long_for_the_sockets_bound_in_it(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, session: str, home_name: str, name_bytes: str, socket_name: str
) -> None:
    """The kernel's limit, not a figure typed here: the longest name each folder gets bound (an
    SSH master's or testinfra's control socket while it sets up; Mitogen's listener) binds in the
    longest folder podctl accepts, and not one byte deeper. A runtime folder too deep gives way
    to the home folder's; both too deep are refused, saying what to set. (Too deep, Mitogen waited
    for ever on a socket it could not bind.)"""
    import re
    import socket

    from podctl.core.fsio import OutputError
    from podctl.runtime import ansible

    assert len(socket_name) + 1 == getattr(ansible, name_bytes)
    folder_of = {"podctl-ssh": ansible.control_path_dir, "podctl-tmp": ansible.temp_dir}[session]
    longest = ansible.UNIX_SOCKET_PATH_BYTES - getattr(ansible, name_bytes)
    for length, binds in ((longest, True), (longest + 1, False)):
        folder = _deep(short_tmp, length)
        with socket.socket(socket.AF_UNIX) as sock:
            try:
                sock.bind(str(folder / socket_name))
                bound = True
            except OSError:
                bound = False
        assert bound == binds, (length, binds)
    home = short_tmp / "h"
    monkeypatch.setenv("HOME", str(home))
    # <runtime>/<session> one byte longer than the sockets allow: the home folder's instead.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(_deep(short_tmp, longest - len(session))))
    assert folder_of() == home / ".ansible" / home_name
    monkeypatch.setenv("HOME", str(_deep(short_tmp, longest)))  # and ~/.ansible/<name> deeper still
    with pytest.raises(OutputError, match=re.escape("set XDG_RUNTIME_DIR to a folder of yours (mode 0700)")):
        folder_of()
    fits = _deep(short_tmp, longest - len(session) - 1)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(fits))
    assert folder_of() == fits / session  # exactly as long as the sockets allow: kept


def _control_folders(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, Callable[[], Path]]]:
    """podctl's two control folders under an XDG_RUNTIME_DIR of this user's, each with the function
    that makes it or refuses it. fsio.private_folder's checks are called directly: through a deploy,
    a folder wrongly let pass would fail only once the example's nodes were found unreachable."""
    from podctl.runtime.ansible import control_path_dir, temp_dir

    runtime = short_tmp / "run-user"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    return [(runtime / "podctl-ssh", control_path_dir), (runtime / "podctl-tmp", temp_dir)]


@pytest.mark.parametrize("mode", [0o750, 0o701, 0o770], ids=lambda mode: f"{mode:04o}")
def test_a_control_folder_of_ones_own_open_to_group_or_others_is_refused(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    import os
    import re

    from podctl.core.fsio import OutputError

    for folder, folder_of in _control_folders(short_tmp, monkeypatch):
        folder.mkdir()
        os.chmod(folder, mode)
        message = f"{folder} is open to group or others (mode {mode:04o})"
        with pytest.raises(OutputError, match=re.escape(message)):
            folder_of()
        assert stat.S_IMODE(folder.stat().st_mode) == mode  # refused as it was, never quietly chmod-ed


def test_a_control_folder_of_another_user_is_refused_even_when_private_to_them(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mode 0700, so the owner check alone refuses it: its owner could connect to a socket podctl
    # made there, or put one of their own in its place.
    import os
    import re

    from podctl.core.fsio import OutputError

    for folder, folder_of in _control_folders(short_tmp, monkeypatch):
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534)
        message = f"{folder} belongs to uid 65534, not to you (uid {os.geteuid()})"
        with pytest.raises(OutputError, match=re.escape(message)):
            folder_of()


def _play_on_this_machine(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch, tasks: list[dict[str, Any]], mitogen: bool = True
) -> list[dict[str, Any]]:
    """The results of `tasks`, run by real ansible-runner and ansible-playbook through
    podctl.runtime.ansible.run_playbook with podctl's fast settings, against this machine (connection
    local); the run must succeed. `tmp_path/shared` stands for /tmp, the TMPDIR podctl itself was
    started with; `runtime` (a short path: sockets are bound there) is XDG_RUNTIME_DIR. Modules in `tmp_path/run/library` are
    found beside the playbook."""
    from podctl.runtime.ansible import ansible_settings, run_playbook

    shared = tmp_path / "shared"
    shared.mkdir()
    runtime.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    settings = ansible_settings(
        hosts=1, fast=True, fact_cache_dir=tmp_path / "facts", roles_path=tmp_path, private_key=None, mitogen=mitogen
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    localhost = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {"all": {"hosts": {"localhost": localhost}}}
    (run_dir / "hosts.yml").write_text(yaml.safe_dump(hosts))
    play = [{"name": "Look", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    (run_dir / "play.yml").write_text(yaml.safe_dump(play))
    results: list[dict[str, Any]] = []

    def on_event(event: dict[str, Any]) -> None:
        if event.get("event") == "runner_on_ok":
            results.append(event["event_data"]["res"])

    run = run_playbook(
        private_data_dir=run_dir,
        ident="look",
        playbook=run_dir / "play.yml",
        inventory=run_dir / "hosts.yml",
        settings=settings,
        on_event=on_event,
    )
    assert run.status == "successful", (run_dir / "artifacts" / "look" / "stdout").read_text()
    return results


@pytest.mark.ansible
def test_mitogen_binds_its_control_socket_in_a_private_folder_not_in_the_shared_tmp(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The task looks while the run, and so Mitogen's listener, is up.
    find = ["find", str(tmp_path / "shared"), str(short_tmp), "-name", "mitogen_unix_*"]
    task = {"name": "Sockets", "ansible.builtin.command": {"argv": find}, "changed_when": False}
    (result,) = _play_on_this_machine(tmp_path, short_tmp, monkeypatch, [task])
    found = result["stdout_lines"]
    private = short_tmp / "podctl-tmp"
    assert found and [Path(f).parent for f in found] == [private] * len(found), found
    assert stat.S_IMODE(private.stat().st_mode) == 0o700


# A module that says which of Mitogen's packages the process running it has loaded: Ansible runs a
# module in a Python of its own (AnsiballZ), Mitogen inside its interpreter that stays up for the run.
MITOGEN_PROBE = """from __future__ import annotations

import sys

from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={})
loaded = sorted({name.split(".")[0] for name in sys.modules} & {"mitogen", "ansible_mitogen"})
module.exit_json(changed=False, mitogen_loaded=loaded)
"""


@pytest.mark.ansible
@pytest.mark.parametrize(("mitogen", "loaded"), [(True, ["ansible_mitogen", "mitogen"]), (False, [])])
def test_with_mitogen_on_modules_run_inside_mitogens_interpreter(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch, mitogen: bool, loaded: list[str]
) -> None:
    library = tmp_path / "run" / "library"
    library.mkdir(parents=True)
    (library / "podctl_mitogen_probe.py").write_text(MITOGEN_PROBE)
    task = {"name": "Probe", "podctl_mitogen_probe": {}}
    (result,) = _play_on_this_machine(tmp_path, short_tmp, monkeypatch, [task], mitogen=mitogen)
    assert result["mitogen_loaded"] == loaded, result


# -- what a node prints is kept to a bound ---------------------------------------------------------


def test_the_fan_out_keeps_the_end_of_a_nodes_output_and_says_how_much_went() -> None:
    from invoke.runners import Result

    from podctl.runtime.remote import KEEP_STDERR, KEEP_STDOUT, _CappedRemote, _result

    runner = object.__new__(_CappedRemote)  # only its stream handling, no connection
    envelope = '{"check": "health", "status": "pass"}\n'
    chunks = ["x" * 1000 + "\n"] * 3000 + [envelope]  # 3 MB of noise, then the result line

    def read(_reader):
        yield from chunks

    runner.read_proc_output = read  # type: ignore[method-assign]
    out: list[str] = []
    runner.handle_stdout(out, True, None)
    err: list[str] = []
    runner.handle_stderr(err, True, None)
    value = Result(stdout="".join(out), stderr="".join(err), exited=0)
    result = _result("node07", value, 60)
    assert len(result.stdout) == KEEP_STDOUT and result.stdout.endswith(envelope)
    assert len(result.stderr) == KEEP_STDERR
    total = sum(map(len, chunks))
    assert result.dropped == (total - KEEP_STDOUT) + (total - KEEP_STDERR)
    assert "node07 printed" in result.dropped_note and "512 KiB of stdout" in result.dropped_note
    small = _result("node08", Result(stdout=envelope, stderr="", exited=0), 60)
    assert (small.stdout, small.dropped, small.dropped_note) == (envelope, 0, "")
