"""The monitoring role's builtin Slurm exporter (files/podctl-slurm-exporter), run as a process.

Starts: the exporter itself on a loopback address, with `sinfo` and `squeue` stand-ins first on
its PATH that print what the real ones printed on the sim pod (`sinfo --noheader --Node --format
'%N %t'`, `squeue --noheader --all --format %T`) and count their runs. What is judged is how often
the exporter runs them, how many requests it serves at once, and which address it binds.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from podctl.core.assets import roles_dir

EXPORTER = roles_dir() / "monitoring" / "files" / "podctl-slurm-exporter"
SINFO = "node01 idle\nnode02 drain*\nnode03 alloc\n"
SQUEUE = "RUNNING\nPENDING\nPENDING\n"


@pytest.fixture
def slurm(tmp_path: Path) -> tuple[Path, Path]:
    """(folder of the stand-ins, the file each run appends its name to)."""
    bin_dir, runs = tmp_path / "bin", tmp_path / "runs"
    bin_dir.mkdir()
    runs.write_text("")
    for name, out in (("sinfo", SINFO), ("squeue", SQUEUE)):
        script = bin_dir / name
        printed = out.replace("\n", "\\n")
        script.write_text(f"#!/bin/sh\necho {name} >> {runs}\nprintf '{printed}'\n")
        script.chmod(0o755)
    return bin_dir, runs


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@pytest.fixture
def start(slurm: tuple[Path, Path]) -> Iterator:  # type: ignore[type-arg]
    procs: list[subprocess.Popen[bytes]] = []

    def run(*args: str, address: str = "127.0.0.1") -> str:
        port = _free_port(address)
        env = {"PATH": f"{slurm[0]}:/usr/bin:/bin"}
        argv = [sys.executable, str(EXPORTER), "--listen-address", address, "--listen-port", str(port), *args]
        procs.append(subprocess.Popen(argv, env=env))
        base = f"http://{address}:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((address, port), timeout=1):
                    return base
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"the exporter did not listen on {base}")

    yield run
    for proc in procs:
        proc.kill()
        proc.wait()


def _get(url: str) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url + "/metrics", timeout=10) as response:
        return response.read().decode()


def _runs(slurm: tuple[Path, Path]) -> list[str]:
    return slurm[1].read_text().split()


def test_within_one_scrape_interval_every_request_gets_one_sinfo_and_squeue_run(start, slurm) -> None:  # type: ignore[no-untyped-def]
    # Room for all 8 at once: what is judged is the cache, not the cap on connections (the default
    # 4 closed some of them unanswered when the 8 overlapped on a loaded host).
    base = start("--cache-seconds", "3600", "--max-connections", "9")
    bodies: list[str] = []
    threads = [threading.Thread(target=lambda: bodies.append(_get(base))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bodies.append(_get(base))
    assert len(bodies) == 9 and len(set(bodies)) == 1
    metrics = dict(line.split() for line in bodies[0].splitlines() if not line.startswith("#"))
    assert metrics["slurm_nodes_idle"] == "1" and metrics["slurm_nodes_drain"] == "1"
    assert metrics["slurm_queue_pending"] == "2" and metrics["podctl_slurm_exporter_up"] == "1"
    assert _runs(slurm) == ["sinfo", "squeue"]


def test_past_the_interval_a_request_runs_them_again(start, slurm) -> None:  # type: ignore[no-untyped-def]
    base = start("--cache-seconds", "0")
    for _ in range(3):
        _get(base)
    assert _runs(slurm) == ["sinfo", "squeue"] * 3


def _still_open(s: socket.socket) -> bool:
    s.settimeout(0.5)
    try:
        return s.recv(1) != b""  # the server says nothing to a request it has not been sent
    except TimeoutError:
        return True
    except ConnectionError:
        return False
    finally:
        s.settimeout(5)


def test_past_its_connections_a_request_is_closed_unanswered(start) -> None:  # type: ignore[no-untyped-def]
    base = start("--max-connections", "2")
    host, port = base.removeprefix("http://").split(":")
    # Two connections that send nothing, each proven to hold its slot (still open half a second
    # on): on a loaded host the fixture's readiness probe may not have given its slot back yet,
    # and then the second was the one closed; such an attempt is made again.
    for _ in range(5):
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(2)]
        if all(_still_open(s) for s in idle):
            break
        for s in idle:
            s.close()
    else:
        raise AssertionError("two idle connections never both held a slot")
    try:
        with socket.create_connection((host, int(port)), timeout=5) as third:
            assert third.recv(1024) == b""  # closed at once, unanswered, while the two hold their slots
    finally:
        for s in idle:
            s.close()
    # Their slots come back once the server sees them closed.
    deadline = time.monotonic() + 10
    while True:
        try:
            assert "podctl_slurm_exporter_up 1" in _get(base)
            break
        except (OSError, AssertionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_it_binds_the_address_it_is_given_and_no_other(start) -> None:  # type: ignore[no-untyped-def]
    base = start(address="127.0.0.2")
    port = int(base.rsplit(":", 1)[1])
    assert "slurm_nodes_idle 1" in _get(base)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
