"""Multi-node checks as Slurm job steps, launched with `srun` on the controller.

podctl does not reach around the scheduler: every job that spans nodes goes
through the pod's own Slurm, so what is validated is also how users will run.
`--immediate` makes a job whose nodes are busy, drained or down fail at once
with Slurm's reason instead of waiting in the queue.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .envelope import broken_envelope, parse_envelope
from .remote import Nodes, command_line

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


def srun_argv(job: Job, partition: str | None, name: str | None = None) -> list[str]:
    minutes = max(1, math.ceil(job.timeout_s / 60) + 1)
    argv = ["srun", f"--job-name={name or 'podctl-' + job.check}", f"--nodes={len(job.nodes)}",
            f"--nodelist={','.join(job.nodes)}", f"--ntasks-per-node={job.tasks_per_node}",
            f"--immediate={IMMEDIATE_S}", f"--time={minutes}", "--kill-on-bad-exit=1", "--quiet"]
    if partition:
        argv.append(f"--partition={partition}")
    if job.gpus_per_node:
        argv.append(f"--gpus-per-node={job.gpus_per_node}")
    if job.env:
        argv.append("--export=ALL," + ",".join(f"{k}={v}" for k, v in sorted(job.env.items())))
    return argv + list(job.argv)


class Slurm:
    def __init__(self, nodes: Nodes, controller: str, partition: str | None) -> None:
        self.nodes = nodes
        self.controller = controller
        self.partition = partition

    def run(self, job: Job) -> dict[str, Any]:
        """Run the job to the end; its rank-0 envelope, with the job's hosts added."""
        started = time.monotonic()
        name = f"podctl-{job.check}-{uuid.uuid4().hex[:8]}"
        result = self.nodes.run(self.controller, command_line(srun_argv(job, self.partition, name)),
                                timeout_s=job.timeout_s + IMMEDIATE_S + 30)
        if result.error and result.returncode is None:
            # Closing the SSH channel leaves the job running (and its nodes allocated): cancel it.
            self.nodes.run(self.controller, command_line(["scancel", f"--name={name}"]), timeout_s=60)
        if result.error:
            envelope = broken_envelope(job.check, job.nodes[0], f"srun on {self.controller}: {result.error}")
        else:
            envelope = parse_envelope(result.stdout, result.returncode, _srun_reason(result.stderr), job.check,
                                      job.nodes[0])
        envelope["hosts"] = list(job.nodes)
        envelope.setdefault("details", {})["slurm"] = {"label": job.label, "wall_s": round(time.monotonic() - started, 1)}
        return envelope

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


def _srun_reason(stderr: str) -> str:
    """srun's own complaint (e.g. 'Unable to allocate resources: Requested node configuration is
    not available') ahead of the tasks' noise, so the finding says why the job did not run."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("srun: error")]
    return "\n".join(lines[-3:] + [""] + stderr.splitlines()[-5:]) if lines else stderr
