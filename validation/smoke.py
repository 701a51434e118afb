"""Training smoke test: a small GPT trained with DDP across every rank of the job.

    python3 -m validation.smoke --local-procs 8 --peak-tflops 989 --checkpoint-dir /shared/scratch
    srun -N2 --ntasks-per-node=8 python3 -m validation.smoke --expect-world-size 16 \
        --peak-tflops 989 --checkpoint-dir /lustre/scratch/podctl
    python3 -m validation.smoke --cpu --local-procs 2            # tiny model, gloo

Checks: every rank reports; the world size is as expected; the loss stays
finite, falls (mean of the first window of steps against the last) and does
not spike on the way (see loss_spikes);
rank 0 writes a checkpoint (model and optimizer) to --checkpoint-dir; every
rank reads it back (the same bytes as rank 0 wrote: the directory is shared),
restores it bit-exactly into a fresh model and optimizer, and compares it with
its own replica (they must agree; a rounding-level difference is a warning,
see REPLICA_RTOL).
Throughput: TFLOP/s per GPU from 6N + 12·L·d·seq FLOPs per token over the
median step time after warm-up, and MFU against --peak-tflops. On CPUs the
figure is TFLOP/s per node (all ranks of a host added).

GPU defaults: the 944 M-parameter preset, seq 2048, micro-batch 8, bf16
autocast, fused AdamW, flash attention through SDPA, torch.compile.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validation.checkpoint import checkpoint_findings, checkpoint_round_trip
from validation.launch import (
    DistEnv,
    add_launch_arguments,
    end_process,
    init_process_group,
    launch_and_emit,
    use_cuda,
)
from validation.result import CheckArgumentParser, Report, hostname, parse_args, progress, summarize


def loss_spikes(losses: list[float], rise: float = 0.5, floor: float = 0.1) -> list[dict[str, float]]:
    """Steps whose loss climbs back up: more than `rise` of the fall achieved so far
    (from the first step to the lowest loss before it) and more than `floor` of the
    first loss. A healthy run wobbles by a few hundredths; a spike is an optimizer
    overshoot (or bad arithmetic) that a falling last window alone would hide."""
    spikes = []
    if not losses:
        return spikes
    start, low = losses[0], losses[0]
    for step, value in enumerate(losses[1:], start=1):
        if math.isfinite(value) and value - low > max(rise * (start - low), floor * abs(start)):
            spikes.append({"step": step, "loss": value, "low": low})
        if math.isfinite(value):
            low = min(low, value)
    return spikes


def _build(cls: Any, cfg: Any, device: Any) -> Any:
    with device:
        return cls(cfg)


@dataclass
class _Run:
    """The model, its optimizer and its DDP wrapper on one rank, and the settings every step reads."""

    env: DistEnv
    args: argparse.Namespace
    cuda: bool
    backend: str
    device: Any
    preset: str
    cfg: Any
    compile_model: bool
    steps: int
    warmup: int
    model: Any
    n_params: int
    optimizer: Any
    make_optimizer: Callable[[Any], Any]
    ddp_kwargs: dict[str, Any]
    net: Any


@dataclass
class _Trained:
    """What the training loop left: per step, the loss, the gradient norm and the time."""

    loss_values: list[float]
    norm_values: list[float]
    step_times: list[float]
    wall_s: float
    compile_fallback: str | None


def _setup(env: DistEnv, args: argparse.Namespace) -> _Run:
    """The process group, and the same initial model on every rank, wrapped in DDP (compiled on GPUs)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from validation.gpt import GPT, PRESETS, parameter_count

    cuda = use_cuda(args)
    backend = args.backend or ("nccl" if cuda else "gloo")
    device = torch.device("cuda", env.local_rank) if cuda else torch.device("cpu")
    preset = args.model or ("gpt-944m" if cuda else "tiny")
    cfg = PRESETS[preset].with_overrides(
        seq_len=args.seq_len,
        micro_batch=args.micro_batch,
        d_model=args.d_model,
        n_layer=args.layers,
        n_head=args.heads,
        vocab_size=args.vocab,
        lr=args.lr,
    )
    compile_model = args.compile if args.compile is not None else cuda
    steps = args.steps or (40 if cuda else 10)
    warmup = args.warmup_steps if args.warmup_steps is not None else (10 if cuda else 2)
    if steps <= warmup + 1:
        raise ValueError(f"--steps {steps} leaves no timed steps after --warmup-steps {warmup}")
    init_process_group(env, backend, args.timeout)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    else:
        # Ranks share the host's cores: one intra-op pool each would oversubscribe.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        torch.set_num_threads(max(1, cores // max(1, env.local_world_size)))
    torch.manual_seed(args.seed)  # identical initial weights on every rank
    with device:  # built in place: initialising 944 M parameters on the host takes seconds
        model = GPT(cfg)

    def make_optimizer(m: Any) -> Any:
        return torch.optim.AdamW(
            m.parameters(),
            lr=cfg.lr,
            betas=(0.9, 0.95),
            weight_decay=0.1,
            **({"fused": True} if cuda else {"foreach": True}),
        )

    optimizer = make_optimizer(model)
    # Large buckets: under torch.compile every bucket boundary splits the graph,
    # and 25 MB buckets would mean ~150 compiled pieces for 944 M parameters.
    ddp_kwargs: dict[str, Any] = {"bucket_cap_mb": args.bucket_mb, "gradient_as_bucket_view": True}
    if cuda:
        ddp_kwargs["device_ids"] = [env.local_rank]
    net: Any = DDP(model, **ddp_kwargs)
    if compile_model:
        net = torch.compile(net)
    return _Run(
        env,
        args,
        cuda,
        backend,
        device,
        preset,
        cfg,
        compile_model,
        steps,
        warmup,
        model,
        parameter_count(model),
        optimizer,
        make_optimizer,
        ddp_kwargs,
        net,
    )


def _train(run: _Run) -> _Trained:
    """The training loop over a pool of synthetic batches, with warm-up, clipping and a fall back to
    eager when torch.compile fails on the first step."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from validation.gpt import synthetic_batch

    env, args, cfg, device, cuda = run.env, run.args, run.cfg, run.device, run.cuda
    gen = torch.Generator(device=device).manual_seed(args.seed * 1000 + env.rank)
    pool = [synthetic_batch(cfg, gen, device) for _ in range(args.batch_pool)]
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
    losses: list[Any] = []
    grad_norms: list[Any] = []
    max_norm = args.clip_grad if args.clip_grad > 0 else math.inf
    step_times: list[float] = []
    events = []
    compile_fallback = None
    if env.rank == 0:
        progress(
            f"{run.preset}: {run.n_params / 1e6:.1f} M parameters, {env.world_size} ranks, "
            f"seq {cfg.seq_len}, micro-batch {cfg.micro_batch}, compile={run.compile_model}"
        )
    net, optimizer = run.net, run.optimizer
    wall0 = time.perf_counter()
    for step in range(run.steps):
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * min(1.0, (step + 1) / max(1, run.warmup))
        x, y = pool[step % len(pool)]
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        t0 = time.perf_counter()
        try:
            with autocast:
                loss = net(x, y)
            loss.backward()
        except Exception as exc:  # noqa: BLE001 - compile problems fall back to eager
            if not (run.compile_model and step == 0):
                raise
            compile_fallback = f"{type(exc).__name__}: {str(exc)[:300]}"
            progress(f"torch.compile failed, continuing eager: {compile_fallback}")
            optimizer.zero_grad(set_to_none=True)
            net = DDP(run.model, **run.ddp_kwargs)
            with autocast:
                loss = net(x, y)
            loss.backward()
        # The norm before clipping, kept for the report: a spike in it explains a spike in the loss.
        grad_norms.append(torch.nn.utils.clip_grad_norm_(run.model.parameters(), max_norm).detach())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        if cuda:
            end.record()
            events.append((begin, end))
        else:
            step_times.append(time.perf_counter() - t0)
        if step == 0 and env.rank == 0:
            if cuda:
                torch.cuda.synchronize(device)
            progress(f"first step (with compilation) took {time.perf_counter() - wall0:.1f} s")
    run.net = net
    if cuda:
        torch.cuda.synchronize(device)
        step_times = [b.elapsed_time(e) / 1e3 for b, e in events]
    return _Trained(
        [float(v) for v in torch.stack(losses).float().cpu().tolist()],
        [float(v) for v in torch.stack(grad_norms).float().cpu().tolist()],
        step_times,
        time.perf_counter() - wall0,
        compile_fallback,
    )


def _checkpoint(run: _Run) -> tuple[dict[str, Any], Path]:
    """The checkpoint round trip (checkpoint_round_trip) in a run folder every rank agrees on, under
    --checkpoint-dir or the node's temporary folder; returns what it found and that folder's parent."""
    import torch.distributed as dist

    from validation.gpt import GPT

    env, args = run.env, run.args
    names = [uuid.uuid4().hex[:12] if env.rank == 0 else None]
    dist.broadcast_object_list(names, src=0)
    base = Path(args.checkpoint_dir) if args.checkpoint_dir else Path(tempfile.gettempdir())
    run_dir = base / f"podctl-smoke-{names[0]}"
    if env.rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)

    def barrier() -> None:
        dist.barrier()

    checkpoint = checkpoint_round_trip(
        run.model,
        run.optimizer,
        lambda: _build(GPT, run.cfg, run.device),
        run.make_optimizer,
        run_dir / "checkpoint.pt",
        env.rank == 0,
        barrier,
        run.device,
    )
    dist.barrier()
    if env.rank == 0 and not args.keep_checkpoint:
        shutil.rmtree(run_dir, ignore_errors=True)
    return checkpoint, base


def _rank_summary(run: _Run, trained: _Trained, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """What this rank sends rank 0: its loss windows and spikes, its speed, its checkpoint's findings."""
    import torch

    from validation.gpt import flops_per_token

    loss_values, steps = trained.loss_values, run.steps
    timed = trained.step_times[run.warmup :]
    median_step, step_spread = summarize(timed)
    tokens_per_step = run.cfg.micro_batch * run.cfg.seq_len
    fpt = flops_per_token(run.n_params, run.cfg)
    window = max(1, min(5, steps // 4))
    first, last = loss_values[:window], loss_values[-window:]
    return {
        "rank": run.env.rank,
        "local_rank": run.env.local_rank,
        "host": hostname(),
        "device": torch.cuda.get_device_name(run.device) if run.cuda else "cpu",
        "loss_first_window": sum(first) / len(first),
        "loss_last_window": sum(last) / len(last),
        "loss_finite": all(math.isfinite(v) for v in loss_values),
        "loss_spikes": loss_spikes(loss_values),
        "median_step_s": median_step,
        "step_spread": step_spread,
        "tflops": fpt * tokens_per_step / median_step / 1e12,
        "tflops_samples": [fpt * tokens_per_step / t / 1e12 for t in timed],
        "checkpoint": checkpoint,
        "compile_fallback": trained.compile_fallback,
    }


def _judge(report: Report, run: _Run, everyone: list[dict[str, Any]], base: Path) -> None:
    """Rank 0's findings over every rank: who reported, the loss, the checkpoint."""
    args, world_size = run.args, run.env.world_size
    reported = sorted(r["rank"] for r in everyone)
    if reported != list(range(world_size)):
        report.error(f"ranks reporting: {reported}, expected 0..{world_size - 1}")
    if args.expect_world_size is not None and world_size != args.expect_world_size:
        report.error(f"world size {world_size}, expected {args.expect_world_size}")
    for r in everyone:
        label = f"{r['host']}/rank{r['rank']}"
        if not r["loss_finite"]:
            report.error("loss became NaN or infinite", label)
        elif r["loss_last_window"] >= r["loss_first_window"]:
            report.error(f"loss did not fall: {r['loss_first_window']:.3f} -> {r['loss_last_window']:.3f}", label)
        for spike in r["loss_spikes"][:3]:
            report.error(
                f"loss spiked at step {spike['step']}: {spike['loss']:.3f} after falling to {spike['low']:.3f}",
                label,
            )
        if r["compile_fallback"]:
            report.warning(f"torch.compile failed, ran eager: {r['compile_fallback']}", label)
    checkpoint_findings(report, everyone, lambda r: f"{r['host']}/rank{r['rank']}")
    if not args.checkpoint_dir:
        report.info(f"checkpoint went to local {base}; pass --checkpoint-dir on shared storage to test it")
    writer = everyone[0]["checkpoint"]
    if writer.get("write_s"):
        report.measure("checkpoint_write_gbps", writer["bytes"] / writer["write_s"] / 1e9, "GB/s", None)


def _measure_speed(report: Report, run: _Run, everyone: list[dict[str, Any]]) -> None:
    """TFLOP/s per GPU and MFU on GPUs; on CPUs, TFLOP/s per node."""
    args = run.args
    if run.cuda:
        for r in everyone:
            label = f"{r['host']}/gpu{r['local_rank']}"
            m = report.measure_samples("smoke_tflops_per_gpu", r["tflops_samples"], "TFLOP/s", label)
            if m is None:
                continue
            if args.peak_tflops:
                samples = [t / args.peak_tflops for t in r["tflops_samples"]]
                mfu = report.measure_samples("smoke_mfu", samples, "fraction", label)
                if mfu is not None and args.min_mfu is not None and mfu.value < args.min_mfu:
                    report.error(f"MFU {mfu.value:.1%} is below {args.min_mfu:.1%}", label)
            progress(
                f"{label}: {m.value:.1f} TFLOP/s per GPU"
                + (f" = {m.value / args.peak_tflops:.1%} MFU" if args.peak_tflops else "")
            )
        return
    # Steps are in lockstep under DDP, so step i of every rank of a host adds up.
    per_node: dict[str, list[float]] = {}
    for r in everyone:
        totals = per_node.setdefault(r["host"], [0.0] * len(r["tflops_samples"]))
        for i, value in enumerate(r["tflops_samples"]):
            totals[i] += value
    for host, totals in per_node.items():
        report.measure_samples("smoke_tflops_per_node", totals, "TFLOP/s", host)


def worker(env: DistEnv, args: argparse.Namespace) -> dict[str, Any] | None:
    """One rank: set up, train, round-trip a checkpoint, and send rank 0 what it found; rank 0
    judges every rank's and returns the report."""
    import torch.distributed as dist

    from validation.gpt import flops_per_token

    report = Report("smoke")
    run = _setup(env, args)
    trained = _train(run)
    checkpoint, base = _checkpoint(run)
    mine = _rank_summary(run, trained, checkpoint)
    everyone: list[Any] = [None] * env.world_size
    dist.all_gather_object(everyone, mine)
    if env.rank != 0:
        return None
    report.details.update(
        {
            "model": {"preset": run.preset, **run.cfg.to_dict(), "parameters": run.n_params},
            "flops_per_token": flops_per_token(run.n_params, run.cfg),
            "flops_formula": "6N + 12*L*d*seq",
            "steps": run.steps,
            "warmup_steps": run.warmup,
            "compile": run.compile_model,
            "backend": run.backend,
            "world_size": env.world_size,
            "train_wall_s": trained.wall_s,
            "loss_rank0": trained.loss_values,
            "grad_norm_rank0": trained.norm_values,
            "clip_grad": args.clip_grad,
            "step_time_s": {"median": mine["median_step_s"], **mine["step_spread"]},
            "ranks": [{k: v for k, v in r.items() if k not in ("tflops_samples", "step_spread")} for r in everyone],
        }
    )
    _judge(report, run, everyone, base)
    _measure_speed(report, run, everyone)
    loss0 = everyone[0]
    progress(
        f"loss {loss0['loss_first_window']:.3f} -> {loss0['loss_last_window']:.3f}; "
        f"checkpoint exact on {sum(bool(r['checkpoint'].get('exact')) for r in everyone)}/{env.world_size} ranks"
    )
    return report.to_dict()


def build_parser() -> argparse.ArgumentParser:
    p = CheckArgumentParser(prog="python3 -m validation.smoke", description=__doc__.split("\n\n")[0])
    add_launch_arguments(p)
    p.add_argument("--model", choices=("gpt-944m", "gpt-125m", "tiny"), help="default gpt-944m on GPU, tiny on CPU")
    p.add_argument("--steps", type=int, help="training steps (default 40 on GPU, 10 on CPU)")
    p.add_argument("--warmup-steps", type=int, help="steps left out of the timing (default 10 GPU, 2 CPU)")
    p.add_argument("--seq-len", type=int)
    p.add_argument("--micro-batch", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--vocab", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch-pool", type=int, default=8, help="distinct synthetic batches cycled through")
    p.add_argument(
        "--clip-grad",
        type=float,
        default=1.0,
        help="clip the gradient's global norm to this (default 1.0, as GPT training does; 0: off)",
    )
    p.add_argument("--bucket-mb", type=int, default=256, help="DDP gradient bucket size")
    p.add_argument("--compile", dest="compile", action="store_true", default=None, help="default on GPU")
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--checkpoint-dir", help="shared directory for the checkpoint (default: local temp dir)")
    p.add_argument("--keep-checkpoint", action="store_true")
    p.add_argument("--peak-tflops", type=float, help="dense bf16 peak per GPU, for MFU (989 for H100/H200 SXM)")
    p.add_argument("--min-mfu", type=float, help="fraction; lower MFU is an error finding")
    p.add_argument("--expect-world-size", type=int)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv, "smoke")
    if isinstance(args, int):
        return args
    from validation import smoke as this  # workers pickle by module name, not __main__

    return launch_and_emit("smoke", this.worker, args)


if __name__ == "__main__":
    end_process(main())
