"""NVIDIA's nccl-tests beside podctl's own collectives, through Slurm, on the same node sets.

Delivery acceptance specifications are written in nccl-tests numbers. When
the site names an nccl-tests build (`validation.nccl_tests_path`, built with
MPI=1), the collectives suite runs each binary it lists (`validation.nccl_tests`,
all_reduce_perf by default) as an MPI job (`srun --mpi=pmix`, one rank per GPU,
`-g 1`) on the node sets podctl's collectives ran on: all nodes at once, and
each pair of the pairwise rounds. srun's output is read on the controller by
the node-side reader (validation.nccl_log) and judged by the same code as
`validate --local` (validation.nccl_tests), so every release's output and
every failure line reads the same.

Every job's result is evidence (scope "pair" or "group"); each node then gets
one verdict run (scope "pod", check "nccl_tests") with the all_reduce busbw of
its own pair (of all nodes, on a pod of one pair), which the judge holds to
the same reference row as podctl's multi-node figure.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from podctl.core.model import program_argv
from podctl.validate.envelope import envelope, finding
from podctl.validate.figures import NCCL_TESTS_CHECK
from podctl.validate.judge import CheckRun
from podctl.validate.slurm import Job, SlurmJobs
from validation.nccl_rows import collective_of_program
from validation.nccl_tests import judge_text
from validation.result import Report
from validation.units import parse_size

# The size podctl's multi-node figure is judged at, as nccl-tests takes it.
JUDGED_SIZE = "8G"
MEASUREMENT = "nccl_all_reduce_busbw_8GiB"
JUDGED = "all_reduce_perf"


@dataclass(frozen=True)
class PerfSpec:
    path: str  # the folder with the binaries, on the nodes
    binaries: tuple[str, ...]
    tasks_per_node: int  # one rank per GPU
    gpus_per_node: int
    dtype: str = "bfloat16"
    iters: int = 20
    warmup: int = 5
    timeout_s: float = 900.0


def perf_job(spec: PerfSpec, binary: str, nodes: Sequence[str], label: str, env: dict[str, str]) -> Job:
    # Through VALIDATION_EXEC: root runs the binary only if root alone could have written it.
    argv = tuple(program_argv(
        posixpath.join(spec.path, binary),
        "-b", JUDGED_SIZE, "-e", JUDGED_SIZE, "-g", "1", "-d", spec.dtype,
        "-n", str(spec.iters), "-w", str(spec.warmup), "-c", "1",
    ))  # fmt: skip
    return Job(label, NCCL_TESTS_CHECK, tuple(nodes), spec.tasks_per_node, spec.gpus_per_node, argv, env,
               spec.timeout_s, mpi="pmix")  # fmt: skip


def run_perf(
    slurm: SlurmJobs,
    spec: PerfSpec,
    node_sets: Sequence[tuple[str, tuple[str, ...]]],
    progress: Callable[[str], None],
) -> list[CheckRun]:
    """One job per (node set, binary); each result judged as nccl-tests output."""
    runs = []
    for label, nodes in node_sets:
        env = {"NCCL_ALGO": "Ring"} if len(nodes) == 2 else {}
        for binary in spec.binaries:
            job = perf_job(spec, binary, nodes, f"{label} {binary} {','.join(nodes)}", env)
            started = time.monotonic()
            result = slurm.run_output(job)
            report = Report(NCCL_TESTS_CHECK, host=nodes[0])
            if result.error:
                report.error(f"srun on {slurm.controller}: {result.error}")
            else:
                judge_text(report, result.stdout, collective_of_program(binary), f"the binary {binary}",
                           [parse_size(JUDGED_SIZE)], {})  # fmt: skip
                if result.returncode != 0:
                    report.error(f"srun exited {result.returncode}: {result.stderr.strip()[-300:]}")
            data = report.to_dict()
            data["hosts"] = list(nodes)
            data["details"]["slurm"] = {"label": job.label, "wall_s": round(time.monotonic() - started, 1)}
            data["details"]["binary"] = binary
            progress(f"nccl-tests: {job.label}: {data['status']}")
            runs.append(CheckRun(NCCL_TESTS_CHECK, "pair" if len(nodes) == 2 else "group", nodes[0], data))
    return runs


def busbw(run: CheckRun) -> float | None:
    return next((float(m["value"]) for m in run.measurements(MEASUREMENT)), None)


def perf_verdicts(hosts: Sequence[str], records: list[CheckRun]) -> list[CheckRun]:
    """One verdict run per node: the judged test of its own pair (of all nodes when it was in none)."""
    judged = [r for r in records if r.envelope["details"].get("binary") == JUDGED]
    out = []
    for host in hosts:
        mine = [r for r in judged if host in r.envelope.get("hosts", [])]
        own = next((r for r in mine if r.scope == "pair"), None) or next(iter(mine), None)
        if own is None:
            continue
        value = busbw(own)
        problems = [f["message"] for f in own.envelope.get("findings", []) if f.get("severity") == "error"]
        details: dict[str, Any] = {"tests": [{"label": r.envelope["details"]["slurm"]["label"], "busbw_gbps": busbw(r),
                                              "status": r.status} for r in mine]}  # fmt: skip
        measured = [] if value is None else [{"figure": MEASUREMENT, "value": value, "unit": "GB/s", "device": None}]
        data = envelope(NCCL_TESTS_CHECK, host, "fail" if problems else "pass", [finding(p) for p in problems],
                        measurements=measured, details=details)  # fmt: skip
        out.append(CheckRun(NCCL_TESTS_CHECK, "pod", host, {**data, "hosts": [host]}))
    return out
