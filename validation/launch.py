"""How the multi-process checks (collectives, smoke) find their peers.

Two launch modes:

(a) `--local-procs N`: this process spawns N workers on this host (one per
    GPU), collects each one's result through a queue and prints rank 0's
    envelope. A worker that dies or hangs becomes status "error", never a
    traceback or a hung shell.
(b) environment: torchrun sets RANK, WORLD_SIZE, LOCAL_RANK (and
    MASTER_ADDR/MASTER_PORT); Slurm's srun sets SLURM_PROCID, SLURM_NTASKS,
    SLURM_LOCALID and the node list, from which the first host becomes the
    rendezvous address. This process is one rank; rank 0 prints the envelope.
"""

from __future__ import annotations

import argparse
import os
import queue as queue_module
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from validation.result import dumps, emit, error_envelope

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    source: str  # "local-procs", "torchrun" or "slurm"


def first_host(nodelist: str) -> str:
    """First host of a Slurm node list: 'dgx[007-010,12],login1' -> 'dgx007'."""
    depth = 0
    end = len(nodelist)
    for i, ch in enumerate(nodelist):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            end = i
            break
    head = nodelist[:end].strip()
    match = re.match(r"^(?P<prefix>[^\[]*)\[(?P<ranges>[^\]]*)\](?P<suffix>.*)$", head)
    if not match:
        return head
    first_range = match.group("ranges").split(",")[0]
    return match.group("prefix") + first_range.split("-")[0] + match.group("suffix")


def _slurm_master(environ: Mapping[str, str]) -> str:
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or ""
    if not nodelist:
        return "127.0.0.1"
    if shutil.which("scontrol"):
        try:
            done = subprocess.run(
                ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30
            )
            if done.returncode == 0 and done.stdout.split():
                return done.stdout.split()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return first_host(nodelist)


def env_from_environ(environ: Mapping[str, str]) -> DistEnv | None:
    """The rank layout set by torchrun or srun; None when neither set one."""
    if "RANK" in environ and "WORLD_SIZE" in environ:
        world = int(environ["WORLD_SIZE"])
        return DistEnv(
            rank=int(environ["RANK"]),
            world_size=world,
            local_rank=int(environ.get("LOCAL_RANK", "0")),
            local_world_size=int(environ.get("LOCAL_WORLD_SIZE", str(world))),
            master_addr=environ.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(environ.get("MASTER_PORT", str(DEFAULT_PORT))),
            source="torchrun",
        )
    if "SLURM_PROCID" in environ and "SLURM_NTASKS" in environ:
        per_node = environ.get("SLURM_NTASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE", "1")
        match = re.match(r"\d+", per_node)
        job = environ.get("SLURM_JOB_ID", "")
        # One port per job, so two jobs sharing a first node do not collide.
        port = (
            int(environ["MASTER_PORT"])
            if "MASTER_PORT" in environ
            else (DEFAULT_PORT + int(job) % 10000 if job.isdigit() else DEFAULT_PORT)
        )
        return DistEnv(
            rank=int(environ["SLURM_PROCID"]),
            world_size=int(environ["SLURM_NTASKS"]),
            local_rank=int(environ.get("SLURM_LOCALID", "0")),
            local_world_size=int(match.group(0)) if match else 1,
            master_addr=environ.get("MASTER_ADDR") or _slurm_master(environ),
            master_port=port,
            source="slurm",
        )
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _store_options(dist: Any) -> str:
    """The rendezvous URL's options for this torch: from 2.4 on its TCPStore runs on libuv unless
    told otherwise, and a build without libuv (Debian 13's python3-torch 2.6) then refuses to make
    one ("use_libuv was requested but PyTorch was build without libuv support"). A store on
    loopback, on a port the kernel picks, tells which; every rank asks the same of the same build."""
    try:
        probe = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True, wait_for_workers=False)
    except RuntimeError as exc:
        if "libuv" in str(exc):
            return "?use_libuv=0"
        raise
    except TypeError:  # a torch older than the option: no libuv to ask for
        return ""
    del probe
    return ""


def init_process_group(env: DistEnv, backend: str, timeout_s: float) -> None:
    import torch
    import torch.distributed as dist

    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(env.local_rank)
        # Naming the device makes NCCL set up its communicator now, on the right GPU.
        kwargs["device_id"] = torch.device("cuda", env.local_rank)
    dist.init_process_group(
        backend=backend,
        init_method=f"tcp://{env.master_addr}:{env.master_port}{_store_options(dist)}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )


Worker = Callable[[DistEnv, argparse.Namespace], "dict[str, Any] | None"]


# Seconds the other local ranks get to answer once rank 0 has (spawn_local).
STRAGGLER_GRACE_S = 30.0


def _child(local_rank: int, nprocs: int, port: int, worker: Worker, args: argparse.Namespace, results: Any) -> None:
    env = DistEnv(local_rank, nprocs, local_rank, nprocs, "127.0.0.1", port, "local-procs")
    for name, value in (
        ("RANK", local_rank),
        ("WORLD_SIZE", nprocs),
        ("LOCAL_RANK", local_rank),
        ("LOCAL_WORLD_SIZE", nprocs),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", port),
    ):
        os.environ[name] = str(value)
    code = 0
    try:
        results.put((local_rank, worker(env, args)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent instead
        results.put((local_rank, {"__crash__": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}))
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        code = 1
    # The answer is flushed to the parent, then the process ends as the srun ranks do
    # (end_process): no process group teardown. torch 2.6's gloo (Debian 13) could hang in
    # destroy_process_group on the last rank to get there, after its peer had left: seen on a sim
    # node, rank 0 on a futex in it with its envelope not yet sent, holding the check to its timeout.
    results.close()
    results.join_thread()
    end_process(code)


def spawn_local(check: str, nprocs: int, worker: Worker, args: argparse.Namespace, timeout_s: float) -> dict[str, Any]:
    """Run `worker` in N fresh local processes; rank 0's envelope, or an error envelope."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=_child, args=(r, nprocs, port, worker, args, results), daemon=False) for r in range(nprocs)
    ]
    for p in procs:
        p.start()
    collected: dict[int, Any] = {}
    deadline = time.monotonic() + timeout_s
    rank0_at: float | None = None
    # Wait for every rank's answer, or for a rank to die without one. Rank 0's envelope holds the
    # whole result (every rank's figures, checked across ranks); a rank that has not answered
    # STRAGGLER_GRACE_S after it is stuck (the ranks no longer tear the process group down, where
    # Debian 13's torch 2.6 was seen to hang; this bound stays for whatever else may) and is
    # stopped below rather than holding the check until its timeout.
    while len(collected) < nprocs and time.monotonic() < deadline:
        if rank0_at is not None and time.monotonic() - rank0_at > STRAGGLER_GRACE_S:
            break
        try:
            rank, payload = results.get(timeout=1.0)
            collected[rank] = payload
            if rank == 0:
                rank0_at = time.monotonic()
        except queue_module.Empty:
            dead = [r for r, p in enumerate(procs) if p.exitcode is not None and r not in collected]
            if dead:
                # Give the queue a moment in case the result is still in flight.
                try:
                    rank, payload = results.get(timeout=2.0)
                    collected[rank] = payload
                    continue
                except queue_module.Empty:
                    break
    for p in procs:
        p.join(timeout=max(1.0, deadline - time.monotonic()) if len(collected) == nprocs else 5.0)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(timeout=10)
    exit_codes = [p.exitcode for p in procs]

    crashes = {r: v for r, v in collected.items() if isinstance(v, dict) and "__crash__" in v}
    if crashes:
        rank, crash = sorted(crashes.items())[0]
        return error_envelope(
            check,
            f"rank {rank} raised {crash['__crash__']}",
            {"traceback": crash["traceback"], "exit_codes": exit_codes},
        )
    envelope = collected.get(0)
    if envelope is None:
        missing = sorted(set(range(nprocs)) - set(collected))
        return error_envelope(
            check, f"ranks {missing} reported nothing within {timeout_s:g} s", {"exit_codes": exit_codes}
        )
    launch = {"mode": "local-procs", "exit_codes": exit_codes}
    stragglers = sorted(set(range(nprocs)) - set(collected))
    if stragglers:
        launch["stopped_after_rank_0"] = stragglers
    envelope.setdefault("details", {})["launch"] = launch
    return envelope


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--local-procs",
        type=int,
        help="spawn N local ranks (default: one per GPU, "
        "or 1 without GPUs) unless RANK/WORLD_SIZE or SLURM_PROCID/SLURM_NTASKS are set",
    )
    parser.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl with GPUs, else gloo")
    parser.add_argument("--cpu", action="store_true", help="use the CPU (gloo) even where GPUs exist")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before a stuck run is an error")


def use_cuda(args: argparse.Namespace) -> bool:
    if args.cpu or args.backend == "gloo":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def launch_and_emit(check: str, worker: Worker, args: argparse.Namespace) -> int:
    """Run the check in whichever mode applies; print rank 0's envelope; return the exit code.

    Ranks other than 0 print nothing on stdout (srun merges every rank's
    stdout, and the contract is one JSON object); a rank that crashes writes
    its error envelope to stderr and exits 2.
    """
    try:
        import torch  # noqa: F401 - every multi-process check needs it
    except ImportError:
        return emit(error_envelope(check, "torch is not installed: this check needs PyTorch"))
    env = None if args.local_procs else env_from_environ(os.environ)
    if env is None:
        try:
            nprocs = args.local_procs or (torch.cuda.device_count() if use_cuda(args) else 1)
            envelope = spawn_local(check, nprocs, worker, args, args.timeout)
        except Exception as exc:  # noqa: BLE001 - the envelope is the error channel
            envelope = error_envelope(
                check,
                f"could not start local ranks: {type(exc).__name__}: {exc}",
                {"traceback": traceback.format_exc()},
            )
        return emit(envelope)
    try:
        envelope = worker(env, args)
    except Exception as exc:  # noqa: BLE001 - the envelope is the error channel
        print(traceback.format_exc(), file=sys.stderr)
        envelope = error_envelope(
            check, f"rank {env.rank} raised {type(exc).__name__}: {exc}", {"traceback": traceback.format_exc()}
        )
        if env.rank != 0:
            print(dumps(envelope), file=sys.stderr)
            return 2
    if env.rank != 0:
        return 0
    if envelope is None:
        envelope = error_envelope(check, "rank 0 produced no result")
    return emit(envelope)


def end_process(code: int) -> None:
    """End a multi-process check's process once its result is out: flush stdout and stderr,
    then leave without the interpreter's finalization.

    Finalization has nothing left to do (the envelope is printed; the process group is left to
    the kernel, which closes its connections: its own teardown could hang, see _child), yet it
    tears down torch's C++ objects: on a sim pod, 5 of 60 smoke runs had a
    rank that had already reported die there with "terminate called without an active
    exception" (SIGABRT) while rank 0 was still writing its report; srun's
    --kill-on-bad-exit then killed the rest, and a passing run became exit 143
    (docs/validation.md)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
