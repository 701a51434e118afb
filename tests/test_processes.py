"""The run's last check (tests/helpers/processes.py, tests/conftest.py): a daemon the tests started and
left running fails the run, named; what ran before, what another session started and what runs
in a PID namespace of its own (a container's, a sandbox's) are none of its business."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import processes
from tests.helpers.repo import REPO

LEAK = """
import pathlib
import subprocess
import time

def test_leaves_a_daemon_running():
    # A daemon that outlives the command that started it, as slurmctld outlived its sandbox.
    subprocess.run(["sh", "-c", '"$0" 300 > /dev/null 2>&1 & echo $! > "$1"', {daemon!r}, {pid_file!r}], check=True)
    # Ended only once the daemon is one: until the shell's fork has exec'd it, the process is
    # still called sh (on a loaded machine past the run's end: CI #35 saw no daemon to name).
    comm = pathlib.Path("/proc", pathlib.Path({pid_file!r}).read_text().strip(), "comm")
    deadline = time.monotonic() + 30
    while comm.read_text().strip() != "slurmctld" and time.monotonic() < deadline:
        time.sleep(0.05)
"""


@pytest.fixture
def started() -> Iterator[list[int]]:
    """The pids a test starts, killed at its end."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _detached(argv: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> int:
    """The pid of `argv` started in the background by a shell that then ends: an orphan."""
    pid_file = tmp_path / "pid"
    script = '"$@" > /dev/null 2>&1 & echo $! > "$PID_FILE"'
    subprocess.run(
        ["sh", "-c", script, "sh", *argv], env={**os.environ, "PID_FILE": str(pid_file), **(env or {})}, check=True
    )
    return int(pid_file.read_text())


def test_a_daemon_a_run_leaves_running_fails_the_run_and_is_named(tmp_path: Path, started: list[int]) -> None:
    daemon = tmp_path / "slurmctld"  # the process's name is its program's
    shutil.copy("/bin/sleep", daemon)
    pid_file = tmp_path / "leaked.pid"
    test = tmp_path / "test_leak.py"
    test.write_text(LEAK.format(daemon=str(daemon), pid_file=str(pid_file)))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", str(test)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if pid_file.exists():
        started.append(int(pid_file.read_text()))
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert "1 passed, 1 error" in run.stdout, run.stdout
    assert f"pid {started[0]} slurmctld: {daemon} 300" in run.stdout, run.stdout


def test_only_what_the_run_started_on_this_machine_is_named(tmp_path: Path, started: list[int]) -> None:
    names = {"sleep"}
    before = processes.running(names)
    mark = "run-of-this-test"
    ours = _detached(["sleep", "300"], tmp_path)
    started.append(ours)
    marked = _detached(["setsid", "sleep", "300"], tmp_path, env={processes.MARK: mark})
    started.append(marked)
    elsewhere = _detached(["setsid", "sleep", "300"], tmp_path)  # another session, unmarked
    started.append(elsewhere)
    sandbox = _detached(["unshare", "--pid", "--fork", "--kill-child", "sleep", "300"], tmp_path)
    started.append(sandbox)
    named = {p.pid for p in processes.left_running(before, os.getsid(0), mark, names)}
    assert ours in named and marked in named
    assert elsewhere not in named
    # The sandbox's sleep, unshare's child, is in a PID namespace of its own: not named.
    children = Path(f"/proc/{sandbox}/task/{sandbox}/children")
    deadline = time.monotonic() + 10
    while not children.read_text().split() and time.monotonic() < deadline:
        time.sleep(0.05)
    (inside,) = map(int, children.read_text().split())
    assert inside in {p.pid for p in processes.running(names)} and inside not in named
    # What ran before the run is not named.
    assert not processes.left_running(processes.running(names), os.getsid(0), mark, names)
