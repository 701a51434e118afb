"""Multi-node checks as Slurm job steps, launched with `srun` on the controller.

podctl does not reach around the scheduler: every job that spans nodes goes
through the pod's own Slurm, so what is validated is also how users will run.
`--immediate` makes a job whose nodes are busy, drained or down fail at once
with Slurm's reason instead of waiting in the queue.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podctl.runtime.remote import Nodes, RemoteResult, command_line
from podctl.validate.envelope import (
    QUOTE_CHARS,
    STDERR_TAIL_CHARS,
    broken_envelope,
    finding,
    note_dropped,
    parse_envelope,
)

IMMEDIATE_S = 60


@dataclass(frozen=True)
class Job:
    label: str  # what it is, for progress and the report: "pairs-1 node01,node02"
    check: str  # the node-side check, for its error envelope
    nodes: tuple[str, ...]
    tasks_per_node: int
    gpus_per_node: int  # 0: ask Slurm for no GPUs
    argv: tuple[str, ...]  # the program and its arguments, run once per task
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 600.0
    mpi: str | None = None  # srun --mpi: pmix for programs that are MPI programs (nccl-tests built with MPI=1)


def srun_argv(job: Job, partition: str | None, name: str | None = None, reservation: str | None = None) -> list[str]:
    minutes = max(1, math.ceil(job.timeout_s / 60) + 1)
    argv = [
        "srun",
        f"--job-name={name or 'podctl-' + job.check}",
        f"--nodes={len(job.nodes)}",
        f"--nodelist={','.join(job.nodes)}",
        f"--ntasks-per-node={job.tasks_per_node}",
        f"--immediate={IMMEDIATE_S}",
        f"--time={minutes}",
        "--kill-on-bad-exit=1",
        "--quiet",
    ]
    if partition:
        argv.append(f"--partition={partition}")
    if reservation:
        argv.append(f"--reservation={reservation}")
    if job.gpus_per_node:
        argv.append(f"--gpus-per-node={job.gpus_per_node}")
    if job.mpi:
        argv.append(f"--mpi={job.mpi}")
    if job.env:
        argv.append("--export=ALL," + ",".join(f"{k}={v}" for k, v in sorted(job.env.items())))
    return argv + list(job.argv)


class SlurmJobs:
    def __init__(self, nodes: Nodes, controller: str, partition: str | None, reservation: str | None = None) -> None:
        self.nodes = nodes
        self.controller = controller
        self.partition = partition
        self.reservation = reservation  # run inside this reservation (podctl nodes recheck's maintenance one)

    def run_output(self, job: Job) -> RemoteResult:
        """Run the job to the end: what srun printed (every task's stdout, srun's stderr)."""
        name = f"podctl-{job.check}-{uuid.uuid4().hex[:8]}"
        result = self.nodes.run(
            self.controller,
            command_line(srun_argv(job, self.partition, name, self.reservation)),
            timeout_s=job.timeout_s + IMMEDIATE_S + 30,
        )
        if result.error and result.returncode is None:
            # Closing the SSH channel leaves the job running (and its nodes allocated): cancel it.
            self.nodes.run(self.controller, command_line(["scancel", f"--name={name}"]), timeout_s=60)
        return result

    def run(self, job: Job) -> dict[str, Any]:
        """Run the job to the end; its rank-0 envelope, with the job's hosts added."""
        started = time.monotonic()
        result = self.run_output(job)
        if result.error:
            envelope = broken_envelope(job.check, job.nodes[0], f"srun on {self.controller}: {result.error}")
        else:
            envelope = parse_envelope(
                result.stdout, result.returncode, _srun_reason(result.stderr), job.check, job.nodes[0]
            )
            note_dropped(envelope, result.dropped_note)
        envelope["hosts"] = list(job.nodes)
        envelope.setdefault("details", {})["slurm"] = {
            "label": job.label,
            "wall_s": round(time.monotonic() - started, 1),
        }
        if not result.error:
            _agree_with_srun(envelope, result.returncode, result.stderr, job.nodes)
        return envelope

    def scontrol(self, *args: str) -> str | None:
        """Run scontrol on the controller; None, or why it failed."""
        result = self.nodes.run(self.controller, command_line(["scontrol", *args]), timeout_s=60)
        if result.error or result.returncode != 0:
            return result.error or (result.stderr.strip() or f"scontrol exited {result.returncode}")
        return None

    def states(self, hosts: Sequence[str]) -> dict[str, NodeState]:
        """Each host's Slurm state and reason (sinfo); a host Slurm does not know is absent."""
        if not hosts:
            return {}
        argv = ["sinfo", "--noheader", "--Node", "--format=%N|%T|%E", f"--nodes={','.join(hosts)}"]
        result = self.nodes.run(self.controller, command_line(argv), timeout_s=60)
        if result.error or result.returncode != 0:
            raise SlurmError(f"sinfo on {self.controller}: {result.error or result.stderr.strip()[:300]}")
        return parse_sinfo(result.stdout)

    def drain(self, reasons: Mapping[str, str]) -> dict[str, str | None]:
        """Drain each node with its reason; host -> None, or why it could not be drained."""
        out: dict[str, str | None] = {}
        for host, reason in sorted(reasons.items()):
            text = reason if len(reason) <= 200 else reason[:197] + "..."
            command = command_line(["scontrol", "update", f"NodeName={host}", "State=DRAIN", f"Reason={text}"])
            result = self.nodes.run(self.controller, command, timeout_s=60)
            if result.error or result.returncode != 0:
                out[host] = result.error or (result.stderr.strip() or f"scontrol exited {result.returncode}")
            else:
                out[host] = None
        return out


class SlurmError(Exception):
    """Slurm could not be asked (sinfo or scontrol failed on the controller)."""


@dataclass(frozen=True)
class NodeState:
    state: str  # sinfo's long state: idle, mixed, allocated, drained, draining, down, ... (+ flags like *)
    reason: str  # "none" when there is none

    @property
    def drained(self) -> bool:
        return self.state.startswith(("drain", "down")) or "drain" in self.state

    @property
    def idle(self) -> bool:
        return self.state.rstrip("*~#!%$@^-") == "idle" and not self.state.endswith("*")

    @property
    def by_podctl(self) -> bool:
        """Drained by podctl (its health gate, validate --drain, a recheck), not by a person."""
        return self.reason.startswith("podctl")


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """`sinfo -N -h -o '%N|%T|%E'` lines; a node in several partitions appears once."""
    out: dict[str, NodeState] = {}
    for line in text.splitlines():
        parts = line.split("|", 2)
        if len(parts) == 3 and parts[0].strip():
            out.setdefault(parts[0].strip(), NodeState(parts[1].strip().lower(), parts[2].strip()))
    return out


# srun's line for tasks that did not end well, as Slurm prints it: "srun: error: node30: tasks 0-1:
# Exited with exit code 1", "srun: error: sn30-r1-h1: tasks 2,6-7: Killed" (tests/data/slurm).
_TASKS_FAILED = re.compile(r"^srun: error: (?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,62}): tasks? [0-9][0-9,-]*: .+$")


def _task_line(line: str) -> re.Match[str] | None:
    """srun's line on tasks that did not end well, or None."""
    return _TASKS_FAILED.match(line.strip()[:400])


def failed_tasks(stderr: str) -> dict[str, list[str]]:
    """Hosts srun named for tasks that exited non-zero or on a signal -> what it said of them."""
    out: dict[str, list[str]] = {}
    for line in stderr.splitlines()[-2000:]:
        m = _task_line(line)
        if m:
            out.setdefault(m.group("host"), []).append(m.group(0).removeprefix("srun: error: "))
    return out


def _agree_with_srun(envelope: dict[str, Any], returncode: int | None, stderr: str, nodes: Sequence[str]) -> None:
    """Rank 0 prints the envelope; srun's exit status is every task's. A job whose rank 0 says
    pass while srun exited non-zero had a task fail (a rank that crashed after the last
    collective, say), and Slurm's accounting says FAILED: it fails here too, on the hosts srun
    named (each its finding's device; all of the job's when it named none)."""
    status = envelope.get("status")
    if returncode in (None, 0) or status not in ("pass", "skip"):
        return
    named = {h: whats for h, whats in failed_tasks(stderr).items() if h in nodes}
    head = f"rank 0 reported {status}, but srun exited {returncode}"
    found = envelope.setdefault("findings", [])
    for host, whats in sorted(named.items()):
        # A finding whose device is a host is that host's alone (podctl.validate.judge).
        found.append(finding(f"{head}: {'; '.join(whats[:2])[:QUOTE_CHARS]}", device=host))
    if not named:
        found.append(finding(f"{head}, and named no task that failed"))
    envelope["status"] = "fail"


def _srun_reason(stderr: str) -> str:
    """srun's own complaint (e.g. 'Unable to allocate resources: Requested node configuration is
    not available') and the first task it reported ended, ahead of the tasks' noise, so the finding
    says why the job did not run or why it ended. Under --kill-on-bad-exit srun ends every other
    task once one fails: at pod scale the cause is one line ahead of tens of 'Terminated' ones, and
    a job whose every task was Terminated was ended from outside its tasks."""
    lines = stderr.splitlines()
    errors = [ln for ln in lines if ln.startswith("srun: error")]
    if not errors:
        return stderr
    tasks, own = [], []
    for ln in errors:
        (tasks if _task_line(ln) else own).append(ln)
    lead = own[-3:] + tasks[:1]
    if len(tasks) > 1:
        lead.append(f"(then {len(tasks) - 1} more srun line(s) on tasks)")
    if tasks and all(ln.rstrip().endswith(": Terminated") for ln in tasks):
        lead.append("every task srun named was Terminated: none failed on its own")
    # The finding keeps the reason's end (envelope.parse_envelope): the lead first, then as much
    # of the end of stderr as leaves the lead whole.
    head = "\n".join(ln[:300] for ln in lead)
    room = STDERR_TAIL_CHARS - len(head) - 2
    return head + "\n\n" + ("\n".join(lines[-5:])[-room:] if room > 0 else "")
