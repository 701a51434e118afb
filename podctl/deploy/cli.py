"""`podctl deploy SITE`: configure the pod stage by stage with Ansible.

Exit codes: 0 every host succeeded; 1 a host failed or was unreachable, or
the run stopped at --max-fail-percent (the recap names hosts and tasks);
2 a usage or configuration error (unknown stage or host, missing playbook).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from podctl.cliopts import mitogen_option, private_key_option, site_argument, vault_options
from podctl.core import assets, state
from podctl.core.console import make_console, piped_width, styled
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.state import private_key_for
from podctl.deploy.errors import DeployError
from podctl.deploy.limit import expand_limit
from podctl.deploy.recap import Recap
from podctl.deploy.run import RUNNER_IDENT, DeployRequest, DeployResult, execute, fact_cache_dir
from podctl.deploy.stages import STAGES, check_validation_tools, select_stages
from podctl.derive.secrets import resolve_files, vault_env
from podctl.runtime.ansible import ansible_settings, refuse_templates, stdout_tail
from podctl.runtime.converged import Verdicts

EXIT_HOST_FAILURES = 1

err_console = make_console(stderr=True)
# The recap needs its failed-task column.
out_console = make_console(width=piped_width())


class LiveProgress:
    """What the run is doing now: one row per stage, the current task, hosts done and failed."""

    def __init__(self, stages: list[str], hosts: list[str]) -> None:
        self.stages = stages
        self.hosts = hosts
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.stage: str | None = None
        self.task: str = ""
        self.task_hosts: set[str] = set()
        self.stage_hosts: dict[str, set[str]] = {s: set() for s in stages}
        self.done_stages: list[str] = []
        self.failed: dict[str, str] = {}
        self.printed_failures: set[tuple[str, str]] = set()
        self.unchanged = False  # every host was as its record says: no stage ran

    def on_event(self, event: dict[str, Any], recap: Recap, console: Console) -> None:
        with self.lock:
            if recap.stage and recap.stage != self.stage:
                if self.stage and self.stage not in self.done_stages:
                    self.done_stages.append(self.stage)
                self.stage = recap.stage
            kind = event.get("event", "")
            if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
                self.task = recap.task or ""
                self.task_hosts = set()
            host = (event.get("event_data") or {}).get("host")
            if host and kind.startswith("runner_on_") and kind != "runner_on_start":
                self.task_hosts.add(host)
                if self.stage in self.stage_hosts:
                    self.stage_hosts[self.stage].add(host)
            for name in recap.failed_hosts:
                rec = recap.hosts[name]
                if rec.failures:
                    last = rec.failures[-1]
                    key = (name, last.task)
                    if key not in self.printed_failures:
                        self.printed_failures.add(key)
                        what = "unreachable" if last.unreachable else "failed"
                        console.print(
                            styled(
                                (f"{name}: {what} at {last.stage} / {last.task}", "red"),
                                f": {last.message}" if last.message else "",
                            )
                        )
            self.failed = {h: recap.hosts[h].status for h in recap.failed_hosts}

    def finish(self, unchanged: bool = False) -> None:
        with self.lock:
            self.unchanged = unchanged
            if self.stage and self.stage not in self.done_stages:
                self.done_stages.append(self.stage)
            self.stage = None
            self.task = ""

    def __rich__(self) -> Group:
        with self.lock:
            table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
            for column in ("stage", "state", "hosts done", "failed", "current task"):
                table.add_column(column)
            active = [h for h in self.hosts if h not in self.failed]
            for stage in self.stages:
                seen = self.stage_hosts.get(stage, set())
                failed = len([h for h in seen if h in self.failed])
                if self.unchanged:
                    state, done, task = styled(("unchanged", "green")), f"{len(self.hosts)}/{len(self.hosts)}", ""
                elif stage in self.done_stages:
                    state, done, task = styled(("done", "green")), f"{len(seen) - failed}/{len(self.hosts)}", ""
                elif stage == self.stage:
                    state = styled(("running", "yellow"))
                    done = f"{len(self.task_hosts)}/{len(active)} on task"
                    task = self.task
                else:
                    state, done, task = styled(("pending", "dim")), "", ""
                table.add_row(stage, state, done, str(failed) if failed else "", task)
            elapsed = time.monotonic() - self.started
            footer = Text(f"{elapsed:5.0f} s  {len(self.hosts)} host(s), {len(self.failed)} failed", style="dim")
            return Group(table, footer)


def recap_table(recap: Recap) -> Table:
    table = Table(title="deploy recap", title_justify="left")
    for column, justify in (
        ("host", "left"),
        ("ok", "right"),
        ("changed", "right"),
        ("failed", "right"),
        ("unreachable", "right"),
        ("skipped-by-hardware", "right"),
        ("failed task", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for name in sorted(recap.hosts):
        r = recap.hosts[name]
        failure = ""
        if r.failures:
            f = r.failures[0]
            failure = f"{f.stage}: {f.task}" + (" (unreachable)" if f.unreachable else "")
            if f.message:
                failure += f" - {f.message}"
        style = "red" if (r.failed or r.unreachable) else None
        table.add_row(
            name,
            str(r.ok),
            str(r.changed),
            str(r.failed),
            str(r.unreachable),
            str(r.skipped_by_hardware),
            failure,
            style=style,
        )
    return table


def print_result(result: DeployResult, console: Console) -> None:
    console.print(recap_table(result.recap))
    if result.skipped:
        verdicts = result.verdicts
        assert verdicts is not None
        console.print(
            f"nothing to change: every host is as the last deploy left it ({verdicts.resources} resources "
            f"checked on {len(verdicts.hosts)} host(s) against their records in {verdicts.seconds:.1f} s); "
            "`--full` runs every task anyway",
            style="green",
            soft_wrap=True,
        )
    looked = result.verdicts
    alone = looked.drifted_alone() if looked is not None else None
    if looked is not None and alone:
        held = sorted(set(looked.hosts) - set(alone))
        console.print(
            f"ran on {fold_hostlist(alone)} alone: {fold_hostlist(held)} left as their records say",
            style="dim",
            soft_wrap=True,
        )
    if result.seal is not None and result.seal.failed:
        for host, why in sorted(result.seal.failed.items()):
            console.print(
                f"{host}: no record of this run was kept ({why}): its next deploy runs every task", style="yellow"
            )
    gates = sorted({g for r in result.recap.hosts.values() for g in r.hardware_gates})
    if gates:
        console.print("skipped by hardware: " + "; ".join(gates), style="dim")
    if result.aborted:
        console.print(result.aborted, style="red")
    elif result.status not in ("successful", "failed"):
        console.print(f"ansible-runner status: {result.status} (rc {result.rc})", style="red")
    failed = result.recap.failed_hosts
    ran = any(r.ok or r.changed or r.failed or r.unreachable for r in result.recap.hosts.values())
    verdict = (
        (f"{len(failed)} host(s) failed: {', '.join(failed)}", "red")
        if failed
        else ("all hosts ok", "green")
        if ran and result.rc == 0
        else ("no host completed a task", "red")
        if not ran
        else ("the run did not finish", "red")
    )
    console.print(styled(verdict, f" in {result.seconds:.1f} s; run directory: {result.run_dir}"), soft_wrap=True)


@click.command("deploy")
@site_argument
@click.option("--only", "only", metavar="STAGES", help=f"Run only these stages (comma-separated: {','.join(STAGES)}).")
@click.option("--skip", "skip", metavar="STAGES", help="Run every stage but these.")
@click.option(
    "--limit", "limit", metavar="HOSTLIST", help="Only these hosts (ClusterShell syntax: node[01-03],head01)."
)
@click.option("--check", is_flag=True, help="Report what would change without changing it.")
@click.option("--diff", is_flag=True, help="Show the changes made (or, with --check, that would be made) to files.")
@click.option(
    "--runs-dir",
    "runs_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where each run's directory (events, stdout, inventory) is created.",
)
@click.option(
    "--max-fail-percent",
    "max_fail_percent",
    type=click.FloatRange(0, 100),
    default=100.0,
    show_default=True,
    help="Stop the run once more than this percentage of hosts failed (100: never).",
)
@click.option(
    "--ansible-defaults",
    "ansible_defaults",
    is_flag=True,
    help="Run with Ansible's defaults (5 forks, no pipelining, no SSH multiplexing, no fact cache).",
)
@private_key_option
@click.option(
    "--playbooks-dir",
    "playbooks_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Folder with site.yml and the stage playbooks (default: podctl's own).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Run every task even when every host is as the last deploy left it (its record says so).",
)
@vault_options
@mitogen_option
def deploy(
    site_file: Path,
    only: str | None,
    skip: str | None,
    limit: str | None,
    check: bool,
    diff: bool,
    runs_dir: Path,
    max_fail_percent: float,
    ansible_defaults: bool,
    private_key: Path | None,
    playbooks_dir: Path | None,
    vault_password_files: tuple[str, ...],
    vault_ids: tuple[str, ...],
    no_mitogen: bool,
    full: bool,
) -> None:
    """Configure the pod in SITE with Ansible: os, fabric, storage, slurm, monitoring, validation-tools."""
    from podctl.derive.site import load_site

    stages = select_stages(only, skip)
    playbooks = (playbooks_dir or assets.playbooks_dir()).resolve()
    runs_dir = runs_dir.resolve()
    refuse_templates({"--playbooks-dir": playbooks, "--runs-dir": runs_dir, "--private-key": private_key or ""})
    site = load_site(site_file)
    if "validation-tools" in stages:
        check_validation_tools(site)
    all_hosts = [n.hostname for n in site.nodes]
    hosts = expand_limit(limit, all_hosts) if limit else all_hosts
    private_key = private_key_for(site, private_key, f"podctl sim up {site_file}")
    refuse_templates({"the sim's SSH key": private_key or ""})
    resolve_files(site)  # a secret file that cannot be used stops the deploy before anything runs
    settings = ansible_settings(
        hosts=len(hosts),
        fast=not ansible_defaults,
        fact_cache_dir=fact_cache_dir(runs_dir, site.name),
        roles_path=assets.roles_dir() if playbooks_dir is None else playbooks / "roles",
        private_key=private_key,
        known_hosts=state.pod_known_hosts(site),
        emulated_nodes=len(site.nodes) if state.sim_pod(site) else 0,
        vault_env=vault_env(site, vault_password_files, vault_ids, os.environ),
        mitogen=not no_mitogen,
    )
    request = DeployRequest(
        site=site,
        playbooks_dir=playbooks,
        stages=stages,
        hosts=hosts,
        limited=bool(limit),
        settings=settings,
        runs_dir=runs_dir,
        check=check,
        diff=diff,
        max_fail_percent=max_fail_percent,
        sim=state.sim_pod(site),
        # Ansible's defaults stand for plain Ansible, which has no record to consult.
        full=full or ansible_defaults,
    )
    mode = (
        "Ansible defaults"
        if ansible_defaults
        else "fast settings, " + ("Ansible's ssh strategy" if no_mitogen else "Mitogen")
    )
    err_console.print(
        f"deploy {site.name}: stages {', '.join(stages)} on {len(hosts)} host(s), "
        f"{settings.forks} forks, {mode}{', check mode' if check else ''}"
    )
    progress = LiveProgress(stages, hosts)
    with Live(progress, console=err_console, refresh_per_second=4, transient=False) as live:

        def on_event(event: dict[str, Any], recap: Recap) -> None:
            progress.on_event(event, recap, live.console)
            _print_warnings(event, live.console)
            if diff:
                _print_diff(event, live.console)

        def on_verdicts(verdicts: Verdicts) -> None:
            if not verdicts.converged:
                asked = f"records checked in {verdicts.seconds:.1f} s" if verdicts.seconds else "records not asked"
                where = ""
                if alone := verdicts.drifted_alone():
                    progress.hosts = alone
                    held = len(verdicts.hosts) - len(alone)
                    where = f" on {fold_hostlist(alone)} alone ({held} host(s) as their records say, left be)"
                live.console.print(f"{asked}; running every task{where}, because:", style="dim")
                for line in verdicts.summary():
                    live.console.print("  " + line, style="dim", soft_wrap=True)

        result = execute(request, on_event=on_event, on_verdicts=on_verdicts)
        progress.finish(unchanged=result.skipped)
    if not err_console.is_terminal:
        err_console.print()  # a piped log would run the last progress line into the recap
    print_result(result, out_console)
    if result.recap.failed_hosts or result.aborted:
        sys.exit(EXIT_HOST_FAILURES)
    if result.status != "successful":
        tail = stdout_tail(result.run_dir / "artifacts" / RUNNER_IDENT)
        raise DeployError(
            f"ansible-playbook ended with {result.status} (rc {result.rc}) before any host failed:\n"
            f"{tail}\nsee {result.run_dir}"
        )


def _print_warnings(event: dict[str, Any], console: Console) -> None:
    """What a task warned of (a module's warnings: a policy user Slurm cannot know yet), named by host."""
    if event.get("event") not in ("runner_on_ok", "runner_on_failed"):
        return
    data = event.get("event_data") or {}
    for warning in (data.get("res") or {}).get("warnings") or []:
        console.print(f"{data.get('host', '?')}: warning: {warning}", style="yellow", soft_wrap=True, markup=False)


def _print_diff(event: dict[str, Any], console: Console) -> None:
    """With --diff, show each task's changes (a file's lines, the sacctmgr commands of the Slurm
    policy) as Ansible renders them: the runner's event of their own, after the task's result."""
    if event.get("event") == "runner_on_file_diff" and event.get("stdout"):
        console.print(Text.from_ansi(str(event["stdout"]).replace("\r\n", "\n")))
