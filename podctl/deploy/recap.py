"""Per-host results of a deploy, aggregated from ansible-runner's events.

Counts follow Ansible's own recap (ok includes changed), with one more
column: tasks named `Hardware gate | ...` (the roles' convention for work
skipped because the hardware is absent) count as skipped-by-hardware, not ok.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from podctl.core.redact import redact_urls
from podctl.deploy.stages import stage_of_task_path

HARDWARE_GATE_PREFIX = "Hardware gate |"


@dataclass
class Failure:
    stage: str | None
    task: str
    message: str
    unreachable: bool = False


@dataclass
class HostRecap:
    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    skipped_by_hardware: int = 0
    hardware_gates: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        return "ok"


def _task_name(data: dict[str, Any]) -> str:
    name = str(data.get("task") or "")
    role = data.get("role")
    # Ansible prefixes role tasks with "role : " in some event fields; show the bare name.
    if role and name.startswith(f"{role} : "):
        name = name[len(role) + 3 :]
    return name


def _message(res: dict[str, Any]) -> str:
    # A loop's own msg ("All items completed") says nothing; the failed item says why.
    results = res.get("results")
    if isinstance(results, list):
        for item in results:
            if isinstance(item, dict) and (item.get("failed") or item.get("unreachable")):
                return _message(item)
    for key in ("msg", "stderr", "reason"):
        value = res.get(key)
        if value:
            text = str(value).strip().splitlines()
            # Printed and kept in recap.json, which the artifacts' redaction never reaches; redacted
            # before it is cut, so that no token loses the `@` that marks it.
            return redact_urls(text[-1])[:300] if text else ""
    return ""


class Recap:
    """Feed it events in order (live, or read back from a run directory)."""

    def __init__(self, hosts: list[str] | None = None) -> None:
        self.hosts: dict[str, HostRecap] = {h: HostRecap(h) for h in hosts or []}
        self.stage: str | None = None
        self.task: str | None = None
        self.stages_seen: list[str] = []

    def host(self, name: str) -> HostRecap:
        if name not in self.hosts:
            self.hosts[name] = HostRecap(name)
        return self.hosts[name]

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        stage = stage_of_task_path(data.get("task_path"))
        if stage is None and kind == "playbook_on_play_start":
            play = str(data.get("play") or data.get("name") or "")
            words = play.split()
            if len(words) >= 2 and words[0] == "Stage":
                stage = words[1]
        if stage:
            self.stage = stage
            if stage not in self.stages_seen:
                self.stages_seen.append(stage)
        if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self.task = _task_name(data)
            return
        host = data.get("host")
        if not host or not kind.startswith("runner_on_"):
            return
        rec = self.host(str(host))
        name = _task_name(data)
        res = data.get("res") or {}
        if kind == "runner_on_ok":
            if name.startswith(HARDWARE_GATE_PREFIX):
                rec.skipped_by_hardware += 1
                rec.hardware_gates.append(f"{self.stage or '?'}: {name[len(HARDWARE_GATE_PREFIX) :].strip()}")
            else:
                rec.ok += 1
                if res.get("changed"):
                    rec.changed += 1
        elif kind == "runner_on_failed":
            if data.get("ignore_errors"):
                rec.ok += 1
            else:
                rec.failed += 1
                rec.failures.append(Failure(self.stage, name, _message(res)))
        elif kind == "runner_on_unreachable":
            rec.unreachable += 1
            rec.failures.append(Failure(self.stage, name, _message(res), unreachable=True))
        elif kind == "runner_on_skipped":
            rec.skipped += 1

    @property
    def failed_hosts(self) -> list[str]:
        return [h for h, r in self.hosts.items() if r.failed or r.unreachable]

    def as_dict(self) -> dict[str, Any]:
        return {"stages": self.stages_seen, "hosts": {h: asdict(r) for h, r in self.hosts.items()}}


def recap_from_events(events: Iterable[dict[str, Any]], hosts: list[str] | None = None) -> Recap:
    recap = Recap(hosts)
    for event in sorted(events, key=lambda e: e.get("counter", 0)):
        recap.feed(event)
    return recap


def recap_from_events_dir(job_events: Path, hosts: list[str] | None = None) -> Recap:
    """Rebuild the recap from a run's recorded job_events/*.json (ordered by counter)."""
    events = []
    for path in job_events.glob("*.json"):
        try:
            events.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError):
            continue
    return recap_from_events(events, hosts)
