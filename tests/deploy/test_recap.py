from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from podctl.deploy.recap import Recap, recap_from_events, recap_from_events_dir

pytestmark = pytest.mark.deploy

DATA = Path(__file__).resolve().parent / "data"
ROLES = "/repo/playbooks/roles"


def _task(counter: int, name: str, path: str, role: str | None = None) -> dict[str, Any]:
    return {
        "counter": counter,
        "event": "playbook_on_task_start",
        "event_data": {"task": name, "task_path": path, "role": role},
    }


def _result(
    counter: int, kind: str, host: str, name: str, path: str, res: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    data = {"host": host, "task": name, "task_path": path, "res": res or {}, **extra}
    return {"counter": counter, "event": kind, "event_data": data}


EVENTS: list[dict[str, Any]] = [
    {"counter": 1, "event": "playbook_on_play_start", "event_data": {"play": "Stage os | Base OS of every node"}},
    _task(2, "Gathering Facts", "/repo/playbooks/os.yml:2"),
    _result(3, "runner_on_ok", "node01", "Gathering Facts", "/repo/playbooks/os.yml:2"),
    _result(
        4,
        "runner_on_unreachable",
        "node02",
        "Gathering Facts",
        "/repo/playbooks/os.yml:2",
        {"msg": "Failed to connect to the host via ssh: timed out", "unreachable": True},
    ),
    _task(5, "Configure | sysctl file", f"{ROLES}/os/tasks/configure.yml:60", "os"),
    _result(
        6, "runner_on_ok", "node01", "Configure | sysctl file", f"{ROLES}/os/tasks/configure.yml:60", {"changed": True}
    ),
    _result(
        7,
        "runner_on_ok",
        "node01",
        "Hardware gate | sysctl (container)",
        f"{ROLES}/os/tasks/configure.yml:70",
        {"msg": "skipped: read-only /proc/sys (container)"},
    ),
    _result(8, "runner_on_skipped", "node01", "Configure | Apply", f"{ROLES}/os/tasks/configure.yml:80"),
    _task(9, "Install | OpenSM", f"{ROLES}/fabric/tasks/install.yml:10", "fabric"),
    _result(
        10,
        "runner_on_failed",
        "node01",
        "Install | OpenSM",
        f"{ROLES}/fabric/tasks/install.yml:10",
        {"msg": "No package matching 'opensm' is available"},
    ),
    _result(
        11,
        "runner_on_failed",
        "node03",
        "Install | OpenSM",
        f"{ROLES}/fabric/tasks/install.yml:10",
        {"msg": "tolerated"},
        ignore_errors=True,
    ),
    _result(
        12,
        "runner_on_ok",
        "node03",
        "Hardware gate | IPoIB (no HCA)",
        f"{ROLES}/fabric/tasks/service.yml:2",
        {"msg": "skipped: no HCA"},
    ),
]


def test_counts_per_host() -> None:
    recap = Recap(["node01", "node02", "node03", "head01"])
    for event in EVENTS:
        recap.feed(event)
    n1, n2, n3, head = (recap.hosts[h] for h in ("node01", "node02", "node03", "head01"))
    assert (n1.ok, n1.changed, n1.failed, n1.unreachable, n1.skipped, n1.skipped_by_hardware) == (2, 1, 1, 0, 1, 1)
    assert n1.failures[0].stage == "fabric" and n1.failures[0].task == "Install | OpenSM"
    assert "No package matching" in n1.failures[0].message
    assert n1.hardware_gates == ["os: sysctl (container)"]
    assert (n2.unreachable, n2.failed) == (1, 0) and n2.failures[0].unreachable
    assert n2.failures[0].stage == "os" and n2.failures[0].task == "Gathering Facts"
    assert (n3.ok, n3.failed, n3.skipped_by_hardware) == (1, 0, 1)  # ignore_errors counts as ok
    assert (head.ok, head.failed) == (0, 0)  # targeted but never reported
    assert recap.failed_hosts == ["node01", "node02"]
    assert recap.stages_seen == ["os", "fabric"]


def test_role_prefix_is_stripped_from_task_names() -> None:
    recap = Recap()
    recap.feed(_result(1, "runner_on_ok", "n", "os : Hardware gate | sysctl", f"{ROLES}/os/tasks/c.yml:1", role="os"))
    assert recap.hosts["n"].skipped_by_hardware == 1


def test_recap_from_recorded_events(tmp_path: Path) -> None:
    for event in reversed(EVENTS):  # file order must not matter; counters do
        (tmp_path / f"{event['counter']}-x.json").write_text(json.dumps(event))
    (tmp_path / "broken.json").write_text("{not json")
    recap = recap_from_events_dir(tmp_path)
    assert recap.hosts["node01"].failed == 1 and recap.hosts["node02"].unreachable == 1


def test_recap_of_a_recorded_sim_run() -> None:
    """Events recorded from `podctl deploy --only os,fabric,storage` on the simdeploy pod
    while node03 was killed (`podctl sim fault node03 --kill`) early in the os stage;
    trimmed to the fields the recap reads."""
    lines = (DATA / "recorded-kill-run.jsonl").read_text().splitlines()
    recap = recap_from_events([json.loads(line) for line in lines], ["head01", "node01", "node02", "node03"])
    got = {h: (r.ok, r.changed, r.failed, r.unreachable, r.skipped_by_hardware) for h, r in recap.hosts.items()}
    assert got == {
        "head01": (41, 0, 0, 0, 3),
        "node01": (40, 0, 0, 0, 3),
        "node02": (40, 0, 0, 0, 3),
        "node03": (6, 0, 0, 1, 0),
    }
    assert recap.failed_hosts == ["node03"]
    failure = recap.hosts["node03"].failures[0]
    assert (failure.stage, failure.task, failure.unreachable) == (
        "os",
        "Install | Service account groups with fixed ids",
        True,
    )
    assert "10.89.11.13" in failure.message  # the item's reason, not the loop's "All items completed"
    assert recap.stages_seen == ["os", "fabric", "storage"]
    assert sorted(recap.hosts["node01"].hardware_gates) == [
        "fabric: IPoIB and OpenSM services (no HCA)",
        "os: sysctl (container, read-only /proc/sys)",
        "storage: mount units not started (already mounted by a stand-in)",
    ]


@pytest.mark.parametrize(
    "message",
    [
        "Looking in indexes: https://s3cr3t-token@pypi.example.com/simple",
        "Looking in indexes: https://ci:s3cr3t-token@pypi.example.com/simple",
        # Past the 300 characters a message keeps: the token must not lose the `@` that marks it.
        "x" * 280 + " https://s3cr3t-token@pypi.example.com/simple",
    ],
)
def test_a_failure_message_keeps_no_url_secret(message: str) -> None:
    recap = Recap()
    recap.feed(_result(1, "runner_on_failed", "n", "Install | tools", f"{ROLES}/t/tasks/i.yml:1", {"msg": message}))
    shown = recap.hosts["n"].failures[0].message
    assert "s3cr" not in shown and "***@pypi" in shown
