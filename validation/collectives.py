"""podctl's own collective benchmark on torch.distributed (NCCL on GPUs, gloo on CPUs).

    python3 -m validation.collectives --local-procs 8            # one node, one rank per GPU
    srun -N4 --ntasks-per-node=8 python3 -m validation.collectives   # across nodes
    torchrun --nproc-per-node 8 -m validation.collectives

For all_reduce, all_gather, reduce_scatter and all_to_all over a size sweep:
check the result against known inputs, then time repeated chunks of
operations after warm-up and report the median with its spread.

Sizes and bandwidths follow nccl-tests (PERFORMANCE.md):
- size is the whole buffer: the all_reduce buffer; all_gather's output
  (= n x each rank's chunk); reduce_scatter's input (= n x each rank's
  output); all_to_all's per-rank send buffer (= n x the chunk per peer);
- algbw = size / time, GB = 1e9 bytes;
- busbw = algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather,
  reduce_scatter and all_to_all, x 1 for broadcast, reduce and sendrecv.
Time per operation is the median over timed chunks of the slowest rank's
chunk time divided by the chunk's operation count.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from validation.launch import (
    DistEnv,
    add_launch_arguments,
    end_process,
    init_process_group,
    launch_and_emit,
    use_cuda,
)
from validation.result import CheckArgumentParser, Report, hostname, parse_args, progress, summarize
from validation.timing import timed
from validation.units import human_size, parse_size, parse_threshold

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' busbw/algbw ratio: what each rank's busiest link carries per byte of size."""
    n = world_size
    if n < 1:
        raise ValueError(f"world size must be at least 1, got {n}")
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def bandwidths(collective: str, size_bytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes) for one operation on `size_bytes` taking `seconds`."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * bus_factor(collective, world_size)


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int, align: int) -> list[int]:
    """Sizes from min to max, multiplying by factor, each rounded down to a multiple of align."""
    if factor < 2:
        raise ValueError("factor must be at least 2")
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        rounded = max(align, size // align * align)
        if rounded not in sizes:
            sizes.append(rounded)
        size *= factor
    return sizes


# Largest integer each dtype holds exactly: reductions of known integers are
# checked bit-for-bit while every partial sum stays below it.
_EXACT_INTEGER_LIMIT = {"bfloat16": 256, "float16": 2048, "float32": 2**24, "float64": 2**53}
_PERIOD = 4  # known-value patterns repeat every 4 elements, so any misplaced block shows


class Case:
    """Buffers, operation and check for one collective at one size on one rank."""

    def __init__(self, collective: str, size_bytes: int, dtype: Any, device: Any, rank: int, n: int) -> None:
        import torch
        import torch.distributed as dist

        self.collective = collective
        self.rank, self.n = rank, n
        self.dtype, self.device = dtype, device
        elem = torch.empty((), dtype=dtype).element_size()
        # Every rank's chunk holds whole periods of the pattern.
        chunk = size_bytes // elem // n // _PERIOD * _PERIOD
        if chunk == 0:
            raise ValueError(f"{size_bytes} bytes is too small for {n} ranks")
        total = chunk * n
        self.count = total
        empty = lambda numel: torch.empty(numel, dtype=dtype, device=device)  # noqa: E731
        k = torch.arange(1, _PERIOD + 1, dtype=torch.float32)
        self.triangle = n * (n + 1) // 2  # sum over ranks of (rank + 1)
        if collective == "all_reduce":
            self.buf = empty(total)
            self.op: Callable[[], Any] = lambda: dist.all_reduce(self.buf)
        elif collective == "all_gather":
            self.inp, self.out = empty(chunk), empty(total)
            # torch 2.13 renamed the *_into_tensor/_tensor forms to *_single.
            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            self.op = lambda: gather(self.out, self.inp)
        elif collective == "reduce_scatter":
            self.inp, self.out = empty(total), empty(chunk)
            scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            self.op = lambda: scatter(self.out, self.inp)
        elif collective == "all_to_all":
            self.inp, self.out = empty(total), empty(total)
            self.op = lambda: dist.all_to_all_single(self.out, self.inp)
        else:
            raise ValueError(f"unknown collective {collective!r}")
        self._k = k

    def _pattern(self, values: Any) -> Any:
        return values.to(self.dtype).to(self.device)

    def fill(self) -> None:
        """Known inputs: rank-dependent values with a period of 4 elements."""
        import torch

        r, n, k = self.rank, self.n, self._k
        if self.collective == "all_reduce":
            self.buf.view(-1, _PERIOD).copy_(self._pattern((r + 1) * k).expand(self.buf.numel() // _PERIOD, -1))
        elif self.collective == "reduce_scatter":
            self.inp.view(-1, _PERIOD).copy_(self._pattern((r + 1) * k).expand(self.inp.numel() // _PERIOD, -1))
        elif self.collective == "all_gather":
            self.inp.view(-1, _PERIOD).copy_(self._pattern(self._gather_row(r)).expand(self.inp.numel() // _PERIOD, -1))
        else:
            rows = torch.stack([self._a2a_row(r, dst) for dst in range(n)])  # one row per destination
            per_peer = self.inp.numel() // n // _PERIOD
            self.inp.view(n, -1, _PERIOD).copy_(self._pattern(rows)[:, None, :].expand(n, per_peer, -1))

    def _gather_row(self, src: int) -> Any:
        return (src % 61) + 1 + 0.25 * (self._k - 1)

    def _a2a_row(self, src: int, dst: int) -> Any:
        return ((src * self.n + dst) % 61) + 1 + 0.25 * (self._k - 1)

    def verify(self) -> bool:
        """Did the last operation (run once on filled inputs) give the known answer everywhere?"""
        import torch

        n, k = self.n, self._k
        if self.collective in ("all_reduce", "reduce_scatter"):
            out = self.buf if self.collective == "all_reduce" else self.out
            expected = self._pattern(self.triangle * k).view(1, _PERIOD)
            got = out.view(-1, _PERIOD)
            limit = _EXACT_INTEGER_LIMIT.get(str(self.dtype).removeprefix("torch."), 0)
            if self.triangle * _PERIOD <= limit:
                return bool((got == expected).all())
            return bool(torch.isclose(got.float(), expected.float(), rtol=2e-2, atol=0).all())
        if self.collective == "all_gather":
            rows = torch.stack([self._gather_row(src) for src in range(n)])
        else:
            rows = torch.stack([self._a2a_row(src, self.rank) for src in range(n)])
        expected = self._pattern(rows).view(n, 1, _PERIOD)
        return bool((self.out.view(n, -1, _PERIOD) == expected).all())

    def free(self) -> None:
        for name in ("buf", "inp", "out"):
            if hasattr(self, name):
                delattr(self, name)


def _align_ranks(device: Any, cuda: bool) -> None:
    """Start every timed chunk together: a tiny all_reduce, then wait for the device."""
    import torch
    import torch.distributed as dist

    flag = torch.ones(1, device=device)
    dist.all_reduce(flag)
    if cuda:
        torch.cuda.synchronize(device)


def _agree(value: float, op: str, device: Any) -> float:
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.MIN)
    return float(t.item())


def measure_case(
    case: Case, cuda: bool, warmup: int, repeats: int, chunk_s: float, max_iters: int
) -> tuple[bool, list[float], int]:
    """(correct on every rank, per-operation seconds of each timed chunk, operations per chunk)."""
    import torch
    import torch.distributed as dist

    case.fill()
    case.op()
    if cuda:
        torch.cuda.synchronize(case.device)
    correct = _agree(1.0 if case.verify() else 0.0, "min", case.device) == 1.0
    for _ in range(warmup):
        case.op()
    _align_ranks(case.device, cuda)
    estimate = timed(case.op, 2, cuda) / 2
    # Enough operations per chunk that launch and timer overheads vanish;
    # every rank must run the same count, so take the largest.
    iterations = int(_agree(min(max_iters, max(1, math.ceil(chunk_s / max(estimate, 1e-9)))), "max", case.device))
    times = []
    for _ in range(repeats):
        _align_ranks(case.device, cuda)
        times.append(timed(case.op, iterations, cuda))
    slowest = torch.tensor(times, dtype=torch.float64, device=case.device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return correct, [t / iterations for t in slowest.tolist()], iterations


def _nccl_version() -> str:
    import torch

    version = torch.cuda.nccl.version()
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def worker(env: DistEnv, args: argparse.Namespace) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist

    cuda = use_cuda(args)
    backend = args.backend or ("nccl" if cuda else "gloo")
    dtype_name = args.dtype or ("bfloat16" if cuda else "float32")
    dtype = getattr(torch, dtype_name)
    device = torch.device("cuda", env.local_rank) if cuda else torch.device("cpu")
    report = Report("collectives")
    init_process_group(env, backend, args.timeout)
    n = env.world_size
    elem = torch.empty((), dtype=dtype).element_size()
    min_bytes = parse_size(args.min_bytes) if args.min_bytes else (1 << 20 if cuda else 64 << 10)
    max_bytes = parse_size(args.max_bytes) if args.max_bytes else (8 << 30 if cuda else 16 << 20)
    sizes = sweep_sizes(min_bytes, max_bytes, args.factor, n * elem * _PERIOD)
    collectives = [c.strip() for c in args.collectives.split(",") if c.strip()]
    for c in collectives:
        bus_factor(c, n)  # rejects unknown names before any work
    chunk_s = args.chunk_ms / 1e3
    repeats = args.repeats

    ranks = [None] * n
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    dist.all_gather_object(ranks, {"rank": env.rank, "host": hostname(), "local_rank": env.local_rank, "device": name})
    # Warm the communicator (NCCL sets up its channels on first use).
    _align_ranks(device, cuda)

    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in collectives}
    failures = []
    for collective in collectives:
        for size in sizes:
            if cuda:
                free, _ = torch.cuda.mem_get_info(device)
                fits = _agree(1.0 if free > 3.5 * size + (1 << 30) else 0.0, "min", device) == 1.0
                if not fits:
                    if env.rank == 0:
                        report.warning(f"{collective} at {human_size(size)} skipped: not enough free GPU memory")
                    continue
            case = Case(collective, size, dtype, device, env.rank, n)
            correct, per_op, iterations = measure_case(case, cuda, args.warmup_iters, repeats, chunk_s, args.max_iters)
            count = case.count
            case.free()
            del case
            if cuda:
                torch.cuda.empty_cache()
            median_s, time_spread = summarize(per_op)
            algbw, busbw = bandwidths(collective, size, median_s, n)
            busbw_samples = [bandwidths(collective, size, t, n)[1] for t in per_op]
            _, busbw_spread = summarize(busbw_samples)
            row = {
                "size_bytes": size,
                "count": count,
                "time_us": median_s * 1e6,
                "time_us_spread": {k: v * 1e6 for k, v in time_spread.items()},
                "algbw_gbps": algbw,
                "busbw_gbps": busbw,
                "busbw_spread": busbw_spread,
                "iterations_per_chunk": iterations,
                "chunks": repeats,
                "correct": correct,
            }
            rows[collective].append(row)
            if not correct:
                failures.append((collective, size))
            if env.rank == 0:
                report.measure(
                    f"{collective}_busbw_{human_size(size)}", busbw, "GB/s", None, len(busbw_samples), busbw_spread
                )
                progress(
                    f"{collective:>14} {human_size(size):>7} {median_s * 1e6:11.1f} us "
                    f"algbw {algbw:8.2f} busbw {busbw:8.2f} GB/s x{iterations} "
                    f"{'ok' if correct else 'WRONG'}"
                )
    if env.rank != 0:
        return None

    report.details.update(
        {
            "world_size": n,
            "backend": backend,
            "dtype": dtype_name,
            "ranks": ranks,
            "nccl_version": _nccl_version() if cuda else None,
            "torch": torch.__version__,
            "sweep": rows,
            "method": f"median of {repeats} timed chunks after {args.warmup_iters} warm-up ops; "
            f"each chunk >= {args.chunk_ms:g} ms; slowest rank per chunk",
        }
    )
    report.details["correct"] = not failures
    for collective, size in failures:
        report.error(f"{collective} at {human_size(size)} gave wrong results on at least one rank")
    if args.expect_world_size is not None and n != args.expect_world_size:
        report.error(f"world size {n}, expected {args.expect_world_size}")
    for spec in args.min_busbw or []:
        key, bound = parse_threshold(spec)
        collective, _, size_text = key.rpartition(":")
        collective = collective or "all_reduce"
        size = parse_size(size_text)
        row = next((r for r in rows.get(collective, []) if r["size_bytes"] == size), None)
        if row is None:
            report.error(f"{collective} busbw at {human_size(size)} was not measured (expected >= {bound:g} GB/s)")
        elif row["busbw_gbps"] < bound:
            report.error(
                f"{collective} busbw at {human_size(size)} is {row['busbw_gbps']:.1f} GB/s, expected >= {bound:g}"
            )
    return report.to_dict()


def build_parser() -> argparse.ArgumentParser:
    p = CheckArgumentParser(prog="python3 -m validation.collectives", description=__doc__.split("\n\n")[0])
    add_launch_arguments(p)
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--min-bytes", help="smallest size (default 1M on GPU, 64K on CPU)")
    p.add_argument("--max-bytes", help="largest size (default 8G on GPU, 16M on CPU)")
    p.add_argument("--factor", type=int, default=2)
    p.add_argument(
        "--dtype", choices=("bfloat16", "float16", "float32"), help="default bfloat16 on GPU, float32 on CPU"
    )
    p.add_argument("--warmup-iters", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10, help="timed chunks per size (median over them)")
    p.add_argument("--chunk-ms", type=float, default=25.0, help="least duration of one timed chunk")
    p.add_argument("--max-iters", type=int, default=2000, help="most operations in one chunk")
    p.add_argument("--expect-world-size", type=int)
    p.add_argument(
        "--min-busbw",
        action="append",
        metavar="[COLLECTIVE:]SIZE=GBPS",
        help="e.g. all_reduce:1GiB=314 (repeatable; collective defaults to all_reduce)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv, "collectives")
    if isinstance(args, int):
        return args
    from validation import collectives as this  # workers pickle by module name, not __main__

    return launch_and_emit("collectives", this.worker, args)


if __name__ == "__main__":
    end_process(main())
