"""One deploy run: its directory, the rendered inventory, and the ansible-runner call.

Run directory (named in the output):
    <runs-dir>/<UTC timestamp>-deploy/
        inventory/            the inventory this run used (rendered from the site)
        playbook.yml          the stages it ran
        settings.json         the Ansible settings and options (no secrets)
        artifacts/deploy/     ansible-runner's job_events/*.json, stdout, rc, status, command
        recap.json            per-host results
    <runs-dir>/cache/<pod>/facts/   the fact cache shared by runs of the same pod
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..ansible import AnsibleSettings, run_playbook, scrub_env
from ..inventory import write_inventory
from ..model import Site
from .errors import DeployError
from .recap import Recap
from .stages import stage_playbooks, wrapper_playbook

RUNNER_IDENT = "deploy"


def new_run_dir(runs_dir: Path, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    runs_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        path = runs_dir / (f"{stamp}-deploy" if n == 0 else f"{stamp}-{n}-deploy")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise DeployError(f"{runs_dir}: cannot create a run directory for {stamp}")


def fact_cache_dir(runs_dir: Path, pod: str) -> Path:
    return runs_dir / "cache" / pod / "facts"


@dataclass
class DeployRequest:
    site: Site
    playbooks_dir: Path
    stages: list[str]
    hosts: list[str]  # after --limit
    limited: bool
    settings: AnsibleSettings
    runs_dir: Path
    check: bool
    diff: bool
    max_fail_percent: float
    sim: bool = False  # the nodes are containers `podctl sim up` made (podctl.state.sim_pod)


@dataclass
class DeployResult:
    run_dir: Path
    recap: Recap
    rc: int
    status: str
    aborted: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.recap.failed_hosts and self.status == "successful" and self.aborted is None


class FailureThreshold:
    """Cancel the run when more than `percent` of the targeted hosts have failed."""

    def __init__(self, percent: float, hosts: int) -> None:
        self.percent = percent
        self.hosts = max(hosts, 1)
        self.reason: str | None = None

    def exceeded(self, failed: int) -> bool:
        if self.reason is None and failed * 100.0 / self.hosts > self.percent:
            self.reason = (
                f"{failed} of {self.hosts} host(s) failed, more than --max-fail-percent "
                f"{self.percent:g}: the run was stopped"
            )
        return self.reason is not None


def prepare(request: DeployRequest) -> tuple[Path, Path]:
    """Create the run directory with its inventory and playbook; nothing secret goes there."""
    playbooks = stage_playbooks(request.playbooks_dir, request.stages)
    run_dir = new_run_dir(request.runs_dir)
    write_inventory(request.site, run_dir / "inventory", sim=request.sim)
    playbook = run_dir / "playbook.yml"
    playbook.write_text(wrapper_playbook(playbooks), encoding="utf-8")
    (run_dir / "settings.json").write_text(
        json.dumps(
            {
                "site": str(request.site.source),
                "stages": request.stages,
                "hosts": request.hosts,
                "check": request.check,
                "diff": request.diff,
                "max_fail_percent": request.max_fail_percent,
                "forks": request.settings.forks,
                "envvars": scrub_env(request.settings.envvars),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return run_dir, playbook


def execute(request: DeployRequest, on_event: Callable[[dict[str, Any], Recap], None] | None = None) -> DeployResult:
    run_dir, playbook = prepare(request)
    recap = Recap(request.hosts)
    threshold = FailureThreshold(request.max_fail_percent, len(request.hosts))

    def event_handler(event: dict[str, Any]) -> None:
        recap.feed(event)
        if on_event is not None:
            on_event(event, recap)

    started = time.monotonic()
    run = run_playbook(
        private_data_dir=run_dir,
        ident=RUNNER_IDENT,
        playbook=playbook,
        inventory=run_dir / "inventory",
        settings=request.settings,
        limit=request.hosts if request.limited else None,
        options=[flag for flag, on in (("--check", request.check), ("--diff", request.diff)) if on],
        on_event=event_handler,
        cancel=lambda: threshold.exceeded(len(recap.failed_hosts)),
    )
    seconds = time.monotonic() - started
    (run_dir / "recap.json").write_text(
        json.dumps(
            {
                "status": run.status,
                "rc": run.rc,
                "aborted": threshold.reason,
                "seconds": round(seconds, 2),
                **recap.as_dict(),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return DeployResult(
        run_dir=run_dir, recap=recap, rc=run.rc, status=run.status, aborted=threshold.reason, seconds=seconds
    )
