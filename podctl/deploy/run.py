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
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..inventory import write_inventory
from ..model import Site
from .errors import DeployError
from .recap import Recap
from .settings import AnsibleSettings
from .stages import stage_playbooks, wrapper_playbook

RUNNER_IDENT = "deploy"
# The `command` artifact records the whole environment podctl ran with: keep
# what explains the run, drop the rest (it may hold tokens), mask anything
# that looks like a credential.
_KEEP_ENV = re.compile(r"^(ANSIBLE_|PATH$|HOME$|LANG$|LC_|VIRTUAL_ENV$|PYTHONPATH$|AWX_)")
_SECRET_ENV = re.compile(r"(PASS|TOKEN|SECRET|CREDENTIAL|AUTH)", re.IGNORECASE)


def new_run_dir(runs_dir: Path, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
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


def scrub_env(env: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in env.items():
        if not _KEEP_ENV.match(key):
            continue
        out[key] = "<redacted>" if _SECRET_ENV.search(key) and not key.endswith("_FILE") else value
    return out


def scrub_command_artifact(artifact_dir: Path) -> None:
    path = artifact_dir / "command"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return
    env = data.get("env")
    if isinstance(env, dict):
        data["env"] = scrub_env({str(k): str(v) for k, v in env.items()})
        data["env_note"] = "podctl kept only the Ansible-related variables"
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")


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
            self.reason = (f"{failed} of {self.hosts} host(s) failed, more than --max-fail-percent "
                           f"{self.percent:g}: the run was stopped")
        return self.reason is not None


def prepare(request: DeployRequest) -> tuple[Path, Path]:
    """Create the run directory with its inventory and playbook; nothing secret goes there."""
    playbooks = stage_playbooks(request.playbooks_dir, request.stages)
    run_dir = new_run_dir(request.runs_dir)
    write_inventory(request.site, run_dir / "inventory")
    playbook = run_dir / "playbook.yml"
    playbook.write_text(wrapper_playbook(playbooks), encoding="utf-8")
    (run_dir / "settings.json").write_text(json.dumps({
        "site": str(request.site.source),
        "stages": request.stages,
        "hosts": request.hosts,
        "check": request.check,
        "diff": request.diff,
        "max_fail_percent": request.max_fail_percent,
        "forks": request.settings.forks,
        "envvars": scrub_env(request.settings.envvars),
    }, indent=2) + "\n", encoding="utf-8")
    return run_dir, playbook


def execute(request: DeployRequest, on_event: Callable[[dict[str, Any], Recap], None] | None = None) -> DeployResult:
    try:
        import ansible_runner
    except ImportError as exc:
        raise DeployError("ansible-runner is not installed; pip install 'podctl[deploy]'") from exc

    run_dir, playbook = prepare(request)
    recap = Recap(request.hosts)
    threshold = FailureThreshold(request.max_fail_percent, len(request.hosts))
    artifact_dir = run_dir / "artifacts" / RUNNER_IDENT
    scrubbed = False

    def event_handler(event: dict[str, Any]) -> bool:
        nonlocal scrubbed
        if not scrubbed:
            scrub_command_artifact(artifact_dir)
            scrubbed = True
        recap.feed(event)
        if on_event is not None:
            on_event(event, recap)
        return True  # keep the event on disk (job_events/)

    def cancel_callback() -> bool:
        return threshold.exceeded(len(recap.failed_hosts))

    cmdline = " ".join(flag for flag, on in (("--check", request.check), ("--diff", request.diff)) if on)
    started = time.monotonic()
    envvars = dict(request.settings.envvars)
    # ansible-runner finds ansible-playbook on PATH; podctl run from a virtualenv without
    # activating it (.venv/bin/podctl) must still find the Ansible installed beside it.
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        envvars["PATH"] = bin_dir + os.pathsep + path
    runner = ansible_runner.run(
        private_data_dir=str(run_dir),
        ident=RUNNER_IDENT,
        playbook=str(playbook),
        inventory=str(run_dir / "inventory"),
        envvars=envvars,
        forks=request.settings.forks,
        limit=",".join(request.hosts) if request.limited else None,
        cmdline=cmdline or None,
        event_handler=event_handler,
        cancel_callback=cancel_callback,
        # podctl chooses the fact cache itself (settings.py); ansible-runner's
        # default would point it into this run's artifacts and lose it.
        fact_cache_type="podctl",
        quiet=True,
        rotate_artifacts=0,
    )
    seconds = time.monotonic() - started
    scrub_command_artifact(artifact_dir)
    (run_dir / "recap.json").write_text(json.dumps({
        "status": runner.status, "rc": runner.rc, "aborted": threshold.reason, "seconds": round(seconds, 2),
        **recap.as_dict()}, indent=2) + "\n", encoding="utf-8")
    return DeployResult(run_dir=run_dir, recap=recap, rc=int(runner.rc if runner.rc is not None else -1),
                        status=str(runner.status), aborted=threshold.reason, seconds=seconds)
