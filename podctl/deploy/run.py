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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from podctl.core import assets
from podctl.core.fsio import atomic_write
from podctl.core.model import Site
from podctl.deploy.errors import DeployError
from podctl.deploy.recap import Recap
from podctl.deploy.stages import stage_playbooks, wrapper_playbook
from podctl.derive.inventory import controller_inputs, write_inventory
from podctl.runtime import converged
from podctl.runtime.ansible import AnsibleSettings, run_playbook, scrub_env

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


def sealed_note_path(runs_dir: Path, pod: str) -> Path:
    """What this controller last left in each node's record (podctl.runtime.converged): host -> the
    fingerprint sealed there, or "" once a run forgot it. Only ever used to skip asking nodes
    whose answer is certain to be no; a missing note means: ask."""
    return runs_dir / "cache" / pod / "converged.json"


def _read_note(path: Path) -> dict[str, str]:
    try:
        note = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(h): str(f) for h, f in note.items()} if isinstance(note, dict) else {}


def _write_note(path: Path, changes: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(_read_note(path) | changes, indent=1, sort_keys=True) + "\n")


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
    sim: bool = False  # the nodes are containers `podctl sim up` made (podctl.core.state.sim_pod)
    full: bool = False  # run every task even when every host's record says nothing would change


@dataclass
class Seal:
    """The records a successful run left: hosts that could not keep one, and why."""

    failed: dict[str, str]
    seconds: float


@dataclass
class DeployResult:
    run_dir: Path
    recap: Recap
    rc: int
    status: str
    aborted: str | None
    seconds: float
    # The records' answer before the run: all converged means no playbook ran (podctl.runtime.converged).
    verdicts: converged.Verdicts | None = None
    seal: Seal | None = None

    @property
    def skipped(self) -> bool:
        """Every host was as its record says: nothing was run but the look."""
        return self.verdicts is not None and self.verdicts.converged

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
    playbook.write_text(wrapper_playbook(playbooks, forget=not request.check), encoding="utf-8")
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


def run_fingerprint(request: DeployRequest, inventory_dir: Path) -> str:
    return converged.fingerprint(
        inventory_dir,
        controller_inputs(request.site),
        request.stages,
        request.hosts,
        playbooks_dir=None if request.playbooks_dir == assets.playbooks_dir().resolve() else request.playbooks_dir,
    )


def _write_recap(run_dir: Path, body: dict[str, Any]) -> None:
    (run_dir / "recap.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def execute(
    request: DeployRequest,
    on_event: Callable[[dict[str, Any], Recap], None] | None = None,
    on_verdicts: Callable[[converged.Verdicts], None] | None = None,
) -> DeployResult:
    run_dir, playbook = prepare(request)
    verdicts = None
    note_path = sealed_note_path(request.runs_dir, request.site.name)
    records = converged.Target(run_dir, run_dir / "inventory", request.settings, request.hosts, request.limited)
    hosts, limited = request.hosts, request.limited  # where the run goes
    ask = not request.check and not request.full
    fingerprint = run_fingerprint(request, run_dir / "inventory") if ask else ""
    note = _read_note(note_path) if ask else {}
    # A host whose record this controller knows to hold other inputs cannot answer yes, and no run
    # on fewer hosts can follow: the look is skipped. One whose record a run that stopped forgot
    # cannot answer yes either, but the others may: they are asked.
    certain_no = [h for h in request.hosts if h in note and note[h] not in ("", fingerprint)]
    if ask and not certain_no:
        look = Recap(request.hosts)

        def look_handler(event: dict[str, Any]) -> None:
            look.feed(event)
            if on_event is not None:
                on_event(event, look)

        verdicts = converged.verify(records, fingerprint, on_event=look_handler)
        if verdicts.converged:
            _write_recap(
                run_dir,
                {"status": "successful", "rc": 0, "aborted": None, "seconds": round(verdicts.seconds, 2),
                 **look.as_dict(), **converged.record_json(verdicts)},
            )  # fmt: skip
            return DeployResult(run_dir, look, 0, "successful", None, verdicts.seconds, verdicts=verdicts)
        # The inputs are those the holding hosts were converged with: the run goes to the others alone.
        if alone := verdicts.drifted_alone():
            hosts, limited = alone, True
            records = replace(records, hosts=alone, limited=True)
    elif ask:
        verdicts = converged.Verdicts(
            {
                h: converged.HostVerdict(
                    False,
                    [
                        "its record was forgotten by a run that did not finish"
                        if note[h] == ""
                        else "the inputs changed since this controller's last deploy that converged it"
                    ],
                    inputs_same=None if note[h] == "" else False,
                )
                for h in request.hosts
                if h in note and note[h] != fingerprint
            },
            0.0,
            run_dir,
        )
    if verdicts is not None and on_verdicts is not None:
        on_verdicts(verdicts)
    recap = Recap(hosts)
    tools = request.site.validation.tools.path if "validation-tools" in request.stages else None
    collector = converged.ResourceCollector(tools_path=tools)
    threshold = FailureThreshold(request.max_fail_percent, len(hosts))

    def event_handler(event: dict[str, Any]) -> None:
        recap.feed(event)
        collector.feed(event)
        if on_event is not None:
            on_event(event, recap)

    if not request.check:
        _write_note(note_path, dict.fromkeys(hosts, ""))  # the run's first play forgets them
    started = time.monotonic()
    run = run_playbook(
        private_data_dir=run_dir,
        ident=RUNNER_IDENT,
        playbook=playbook,
        inventory=run_dir / "inventory",
        settings=request.settings,
        limit=hosts if limited else None,
        options=[flag for flag, on in (("--check", request.check), ("--diff", request.diff)) if on],
        on_event=event_handler,
        cancel=lambda: threshold.exceeded(len(recap.failed_hosts)),
    )
    seconds = time.monotonic() - started
    result = DeployResult(
        run_dir=run_dir,
        recap=recap,
        rc=run.rc,
        status=run.status,
        aborted=threshold.reason,
        seconds=seconds,
        verdicts=verdicts,
    )
    if result.ok and not request.check:
        # Fingerprinted after the run: a controller file the run itself made (the monitoring
        # password) is one the next run finds.
        sealed = time.monotonic()
        sealed_print = run_fingerprint(request, run_dir / "inventory")
        failed = converged.seal(records, sealed_print, collector.resources(), collector.unrecorded)
        result.seal = Seal(failed, time.monotonic() - sealed)
        _write_note(note_path, {h: sealed_print for h in hosts if h not in failed})
    body: dict[str, Any] = {
        "status": run.status,
        "rc": run.rc,
        "aborted": threshold.reason,
        "seconds": round(seconds, 2),
        **recap.as_dict(),
    }
    if verdicts is not None:
        body |= converged.record_json(verdicts)
    if result.seal is not None:
        body["sealed"] = {"seconds": round(result.seal.seconds, 2), "failed": result.seal.failed}
    _write_recap(run_dir, body)
    return result
