"""A secret in a URL never outlives a run in its artifacts, however the run ends: a task that uses
it logs nothing (no_log), SIGTERM stops the run and redacts, and the artifacts of a run killed
outright (SIGKILL) are redacted by the next run before it starts. Real ansible-runner and
ansible-playbook, against this machine (connection local), in a process of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from podctl.runtime.ansible import REDACTED_MARK
from tests.helpers.repo import REPO

pytestmark = pytest.mark.ansible

SECRET = "k1ll3d-t0ken"
URL = f"https://pypi.example.com/simple?token={SECRET}"

# Runs podctl.runtime.ansible.run_playbook on localhost as podctl does, in a process the test can kill.
RUNNER = """
import json, sys
from pathlib import Path
from podctl.runtime.ansible import ansible_settings, run_playbook
run_dir, playbook = Path(sys.argv[1]), Path(sys.argv[2])
settings = ansible_settings(hosts=1, fast=False, fact_cache_dir=run_dir / "facts", roles_path=run_dir,
                            private_key=None)
try:
    run = run_playbook(private_data_dir=run_dir, ident="deploy", playbook=playbook,
                       inventory=run_dir / "inventory", settings=settings)
    print(json.dumps({"status": run.status}))
except KeyboardInterrupt:
    print(json.dumps({"status": "interrupted"}))
"""


ROLE = REPO / "podctl" / "ansible_collections" / "podctl" / "pod" / "roles" / "validation_tools"


def _play(no_log: bool | str) -> list[dict]:
    # The validation-tools stage's pip task hands the index URL to pip through its environment, and
    # logs nothing by the role's own rule; this task does the same, then waits to be killed.
    return [
        {
            "name": "A task holding an index URL",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
            "vars": {"podctl_validation_tools": {"index_url": URL}},
            "tasks": [
                {
                    "name": "Use the index",
                    "ansible.builtin.command": {"argv": ["sh", "-c", 'echo "index $PIP_INDEX_URL"']},
                    "environment": {"PIP_INDEX_URL": "{{ podctl_validation_tools_index_url }}"},
                    "no_log": no_log,
                    "changed_when": False,
                },
                {"name": "Wait", "ansible.builtin.command": "sleep 60", "changed_when": False},
            ],
        }
    ]


def _start(runs: Path, name: str, no_log: bool | str) -> tuple[subprocess.Popen, Path]:
    run_dir = runs / name
    (run_dir / "inventory").mkdir(parents=True)
    hosts = {"all": {"hosts": {"localhost": {"ansible_python_interpreter": sys.executable}}}}
    (run_dir / "inventory" / "hosts.yml").write_text(yaml.safe_dump(hosts))
    playbook = run_dir / "play.yml"
    playbook.write_text(yaml.safe_dump(_play(no_log)))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(run_dir), str(playbook)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, run_dir


def _tasks_started(events: Path) -> list[str | None]:
    """The task of each event file written so far. ansible-runner writes an event as
    `<uuid>-partial.json` and renames it: one listed here may be gone by the time it is read (seen
    in CI), and its renamed file is read on the next look."""
    tasks = []
    for path in events.glob("*.json"):
        try:
            tasks.append(json.loads(path.read_text()).get("event_data", {}).get("task"))
        except FileNotFoundError:
            continue
    return tasks


def _wait_for_the_wait(proc: subprocess.Popen, run_dir: Path) -> None:
    """Until the first task has finished and the second started (the secret is in use by then)."""
    events = run_dir / "artifacts" / "deploy" / "job_events"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if "Wait" in _tasks_started(events):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("the run never reached its second task")


def _holding(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and SECRET in p.read_text())


def test_a_task_that_logs_nothing_leaves_no_secret_even_when_the_run_is_killed(tmp_path: Path) -> None:
    # The role's rule for its pip task: an index URL of any form is a secret (this one's token is in
    # its query string).
    proc, run_dir = _start(tmp_path / "runs", "a", no_log="{{ _podctl_validation_tools_index_secret }}")
    _wait_for_the_wait(proc, run_dir)
    proc.kill()
    proc.wait(timeout=30)
    assert _holding(run_dir) == ["play.yml"]  # the playbook itself; podctl's inventory: the 0600 file


def test_sigterm_stops_the_run_and_redacts_it(tmp_path: Path) -> None:
    proc, run_dir = _start(tmp_path / "runs", "a", no_log=False)
    _wait_for_the_wait(proc, run_dir)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert json.loads(out.strip().splitlines()[-1]) == {"status": "interrupted"}, err
    assert _holding(run_dir) == ["play.yml"]
    assert (run_dir / "artifacts" / "deploy" / REDACTED_MARK).exists()
    events = (run_dir / "artifacts" / "deploy" / "job_events").glob("*.json")
    assert any("token=***" in p.read_text() for p in events)  # it was there, and is masked


def test_the_artifacts_of_a_run_killed_outright_are_redacted_by_the_next_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc, killed = _start(runs, "a", no_log=False)
    _wait_for_the_wait(proc, killed)
    proc.kill()
    proc.wait(timeout=30)
    subprocess.run(["pkill", "-KILL", "-f", str(killed / "play.yml")], check=False)  # its ansible-playbook
    assert any(p.startswith("artifacts/deploy/job_events/") for p in _holding(killed))  # as SIGKILL left them
    proc, next_run = _start(runs, "b", no_log=True)
    _wait_for_the_wait(proc, next_run)
    proc.kill()
    proc.wait(timeout=30)
    assert _holding(killed) == ["play.yml"]
    assert (killed / "artifacts" / "deploy" / REDACTED_MARK).exists()
