#!/usr/bin/env python3
"""A local stand-in for `srun`: one "node" per GPU (or per CPU slot), so that the job command
lines podctl builds for a pod run for real on one host.

    srun_standin.py --job-name=X --nodes=2 --nodelist=a,b --ntasks-per-node=1 --gpus-per-node=1 \
        --immediate=60 --time=5 --kill-on-bad-exit=1 --quiet [--export=ALL,K=V] PROGRAM ARGS...

What srun gives each task, it gives: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
SLURM_NNODES, SLURM_NTASKS_PER_NODE, SLURM_JOB_NODELIST, SLURM_JOB_ID and SLURMD_NODENAME (the
"node" it runs on, from --nodelist); CUDA_VISIBLE_DEVICES holds the node's GPUs (node i of
--gpus-per-node g gets GPUs i*g .. i*g+g-1 of this host); MASTER_ADDR is this host, since every
"node" is. Output: every task's stdout, in task order (srun interleaves them; the checks print
their envelope on rank 0 only), then srun's own exit status: the first non-zero one, as with
--kill-on-bad-exit. --mpi and PMIx are not emulated (nccl-tests built with MPI=1 cannot run here).
A program podctl starts through its launcher on a node (`podctl-validation-exec PYTHON -m ...`,
which vets a deployed virtualenv) runs here with this Python and the checkout's validation package.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

from podctl.core.model import VALIDATION_EXEC


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(children: list[subprocess.Popen], limit_s: float, kill_on_bad_exit: bool) -> list[int]:
    """Every task's exit status; all are killed at --time, or when one fails under --kill-on-bad-exit."""
    deadline = time.monotonic() + limit_s
    while any(c.poll() is None for c in children):
        failed = any(c.returncode not in (None, 0) for c in children)
        if time.monotonic() > deadline or (kill_on_bad_exit and failed):
            for c in children:
                if c.poll() is None:
                    c.kill()
            break
        time.sleep(0.2)
    return [c.wait() for c in children]


def parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            return options, argv[i:]
        key, _, value = arg[2:].partition("=")
        options[key] = value
    return options, []


def main(argv: list[str]) -> int:
    options, program = parse(argv)
    if program[:1] == [VALIDATION_EXEC]:
        program = [sys.executable, *program[2:]]
    if not program:
        print("srun_standin: no program to run", file=sys.stderr)
        return 2
    nodes = options.get("nodelist", "node1").split(",")
    if len(nodes) != int(options.get("nodes", len(nodes))):
        print(f"srun_standin: --nodes {options.get('nodes')} but {len(nodes)} in --nodelist", file=sys.stderr)
        return 2
    per_node = int(options.get("ntasks-per-node", "1"))
    gpus = int(options.get("gpus-per-node", "0") or 0)
    env = dict(os.environ)
    export = options.get("export", "")
    for item in export.split(",")[1:] if export.startswith("ALL") else []:
        key, _, value = item.partition("=")
        env[key] = value
    world = len(nodes) * per_node
    common = {
        "SLURM_NTASKS": str(world),
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_NTASKS_PER_NODE": str(per_node),
        "SLURM_JOB_NODELIST": ",".join(nodes),
        "SLURM_JOB_ID": str(os.getpid()),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
    }
    children = []
    outputs = []
    for node_id, node in enumerate(nodes):
        for local in range(per_node):
            rank = node_id * per_node + local
            task_env = {**env, **common, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local),
                        "SLURM_NODEID": str(node_id), "SLURMD_NODENAME": node}  # fmt: skip
            if gpus:
                task_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(node_id * gpus + g) for g in range(gpus))
            out = tempfile.TemporaryFile()
            outputs.append(out)
            children.append(subprocess.Popen(program, env=task_env, stdout=out))
    codes = _wait(children, 60.0 * float(options.get("time", "30") or 30), options.get("kill-on-bad-exit") == "1")
    for out in outputs:
        out.seek(0)
        sys.stdout.buffer.write(out.read())
    sys.stdout.flush()
    return next((c for c in codes if c), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
