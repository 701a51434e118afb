"""Configuration drift, as Ansible itself sees it.

The roles podctl deploys with are the one statement of what a node's
configuration files hold. Conformance runs them again, in check mode with
diffs, limited to the steps tagged `config` in each role (preflight and
configure: the facts they need and every file they write), against the pod.
A task Ansible would change on a host is drift on that host: for a file, the
finding names it, both hashes and the first differing line; a task that hides
its arguments (it handles a secret) says only that it would change.

Handlers are consequences, not findings (a drifted slurm.conf notifies a
restart), and are not reported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podctl.core import assets
from podctl.core.errors import PodctlError
from podctl.runtime.ansible import AnsibleSettings, run_playbook, stdout_tail

DRIFT_IDENT = "drift"
CONFIG_TAG = "config"
# A diff's text shown in a finding: enough to recognise the line.
SHOW_CHARS = 100


class DriftError(PodctlError):
    pass


@dataclass
class HostDrift:
    findings: list[str] = field(default_factory=list)
    problem: str | None = None  # the check could not be made on this host
    tasks: int = 0  # tasks Ansible ran on the host


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _show(line: str, limit: int = SHOW_CHARS) -> str:
    line = line.rstrip("\n")
    return repr(line if len(line) <= limit else line[:limit] + "...")


def describe_difference(path: str, node_data: bytes, rendered_data: bytes) -> str:
    """One line: the file, both hashes and the first difference, node first."""
    node_lines = node_data.decode("utf-8", "replace").splitlines()
    rendered_lines = rendered_data.decode("utf-8", "replace").splitlines()
    head = (
        f"{path} differs from what podctl renders (sha256 {_sha(node_data)[:12]} on the node vs "
        f"{_sha(rendered_data)[:12]} rendered; "
    )
    for number, (a, b) in enumerate(zip(node_lines, rendered_lines), start=1):
        if a != b:
            return head + f"first differing line {number}: node has {_show(a)}, podctl renders {_show(b)})"
    if len(node_lines) > len(rendered_lines):
        number = len(rendered_lines) + 1
        return head + (
            f"the node has {len(node_lines) - len(rendered_lines)} extra line(s) from line {number}: "
            f"{_show(node_lines[number - 1])})"
        )
    if len(node_lines) < len(rendered_lines):
        number = len(node_lines) + 1
        return head + (
            f"the node lacks {len(rendered_lines) - len(node_lines)} line(s) from line {number}: "
            f"{_show(rendered_lines[number - 1])})"
        )
    return head + "same lines, different line endings or final newline)"


def _diffs(result: dict[str, Any]) -> list[dict[str, Any]]:
    diff = result.get("diff")
    if isinstance(diff, dict):
        return [diff]
    if isinstance(diff, list):
        return [d for d in diff if isinstance(d, dict)]
    return []


def describe_change(task: str, result: dict[str, Any]) -> list[str]:
    """Findings for one task Ansible would change on a host."""
    if "censored" in result:
        return [
            f"{task}: not as podctl deploys it (Ansible would change it; the task handles a secret, so "
            "the difference is not shown)"
        ]
    # A task with a loop reports each item's result under "results": a file per item.
    items = result.get("results")
    parts = [r for r in items if isinstance(r, dict) and r.get("changed")] if isinstance(items, list) else [result]
    out = []
    for part in parts:
        for diff in _diffs(part):
            before, after = diff.get("before"), diff.get("after")
            path = str(diff.get("before_header") or part.get("dest") or part.get("path") or task)
            if not isinstance(before, str) or not isinstance(after, str):
                continue
            if before == "" and after != "":
                out.append(f"{path} is missing on the node (podctl deploys it)")
            else:
                out.append(describe_difference(path, before.encode(), after.encode()))
    return out or [f"{task}: not as podctl deploys it (Ansible would change it)"]


class DriftCollector:
    """ansible-runner events -> HostDrift per host."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = {h: HostDrift() for h in hosts}
        self.in_handler = False

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        if kind == "playbook_on_handler_task_start":
            self.in_handler = True
            return
        if kind in ("playbook_on_task_start", "playbook_on_play_start"):
            self.in_handler = False
            return
        data = event.get("event_data") or {}
        host = data.get("host")
        if host not in self.hosts or not kind.startswith("runner_on_") or kind == "runner_on_start":
            return
        drift = self.hosts[host]
        drift.tasks += 1
        result = data.get("res") or {}
        task = str(data.get("task") or "a task")
        if kind == "runner_on_unreachable":
            drift.problem = drift.problem or f"unreachable: {str(result.get('msg') or '').strip()[:300]}"
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            message = str(result.get("msg") or result.get("stderr") or "failed").strip().splitlines()
            drift.problem = drift.problem or f"{task} failed in check mode: {(message or ['failed'])[0][:300]}"
        elif kind == "runner_on_ok" and result.get("changed") and not self.in_handler:
            for finding in describe_change(task, result):
                if finding not in drift.findings:
                    drift.findings.append(finding)


def check_drift(
    inventory_dir: Path,
    workdir: Path,
    settings: AnsibleSettings,
    hosts: list[str],
    say: Callable[[str], None],
    limited: bool = False,
) -> dict[str, HostDrift]:
    """Run the roles' config steps in check mode against `hosts` (every host of the inventory, or
    with `limited` those alone); drift per host."""
    private = workdir / "drift"
    private.mkdir(parents=True, exist_ok=True)
    collector = DriftCollector(hosts)
    run = run_playbook(
        private_data_dir=private,
        ident=DRIFT_IDENT,
        playbook=assets.playbooks_dir() / "site.yml",
        inventory=inventory_dir,
        settings=settings,
        limit=hosts if limited else None,
        options=["--check", "--diff", "--tags", CONFIG_TAG],
        on_event=collector.feed,
    )
    if (
        run.status != "successful"
        and not any(d.problem for d in collector.hosts.values())
        and not any(d.findings for d in collector.hosts.values())
    ):
        raise DriftError(
            f"the check-mode run ended with {run.status} (rc {run.rc}) before any host:\n"
            f"{stdout_tail(run.artifact_dir)}\nsee {run.artifact_dir}"
        )
    for drift in collector.hosts.values():
        if not drift.tasks and drift.problem is None:
            drift.problem = "Ansible ran no task on this host (is it in the inventory's groups?)"
    drifted = sorted(h for h, d in collector.hosts.items() if d.findings)
    say("configuration as podctl deploys it: " + (f"drift on {', '.join(drifted)}" if drifted else "no drift"))
    return collector.hosts
