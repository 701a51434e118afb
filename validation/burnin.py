"""Active burn-in: sustained matrix products and memory traffic, watched by NVML.

    python3 -m validation.burnin                       # quick: about 20 s of GEMM, then HBM
    python3 -m validation.burnin --profile long        # 2 hours
    python3 -m validation.burnin --cpu --duration 10   # the CPU equivalent

GPU: every GPU multiplies the same two bf16 matrices (drawn on the host
from one seed, so the inputs are identical everywhere) for --duration
seconds, all GPUs at once. Two throughput figures: `gemm_bf16_tflops`, the
median of 50 single products from a cool start (how the reference tables
measure a GEMM), and `gemm_bf16_tflops_sustained`, the median over timed
chunks of the whole stress after warm-up, which a GPU at its power limit
runs at lower clocks (the NVML samples show by how much).

After each chunk the output is compared bit-for-bit with that GPU's first
output, and at the end the SHA-256 of every GPU's output bytes is
compared across GPUs: identical hardware running the same cuBLAS kernel
must agree exactly, so a GPU that disagrees is computing wrongly (silent
data corruption). A few rows are also checked against a float64 reference
on the host, which catches a node whose GPUs are all wrong the same way.
Then device-to-device copies measure HBM bandwidth (bytes read + written).
An NVML thread samples SM clock, temperature, power and clock-throttle
reasons throughout, and ECC counters are compared before and after.

CPU: the same in fp32 across all cores (torch, or numpy without torch), and
memory bandwidth from large array copies; determinism is checked across the
repeated products.

Why one module of this size: the GPU and the CPU burn-in share their phases,
telemetry sampling and the determinism check; split, each half would repeat
the other's structure.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import threading
import time
from collections import Counter
from typing import Any

from validation import nvml as nvml_util
from validation.result import CheckArgumentParser, Report, emit, parse_args, progress, run_check, summarize
from validation.timing import timed

PROFILES = {"quick": 20.0, "long": 7200.0}


def odd_ones_out(hashes: dict[str, str]) -> list[str]:
    """Devices whose output hash differs from the majority's (all of them when there is no majority)."""
    if len(hashes) < 2:
        return []
    counts = Counter(hashes.values())
    (top, top_count), *rest = counts.most_common()
    if rest and rest[0][1] == top_count:
        return sorted(hashes)  # a tie: nobody can be trusted
    return sorted(device for device, h in hashes.items() if h != top)


def _sha256_of(tensor: Any) -> str:
    import torch

    as_bytes = tensor.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes()
    return hashlib.sha256(as_bytes).hexdigest()


def _relative_error(got: Any, want: Any) -> float:
    import torch

    return float(torch.linalg.vector_norm(got.double() - want) / torch.linalg.vector_norm(want))


def _seconds_per_call(call: Any, sync: Any, budget_s: float = 0.05) -> float:
    """Rough time of one call, averaged over as many as fit in `budget_s` (at least 2)."""
    calls = 0
    t0 = time.perf_counter()
    while calls < 2 or time.perf_counter() - t0 < budget_s:
        call()
        sync()
        calls += 1
    return max((time.perf_counter() - t0) / calls, 1e-7)


def _resize(per_chunk: int, seconds: float, chunk_s: float) -> int:
    """Next chunk's call count, so chunks stay near `chunk_s` when the host is busier than
    the first estimate saw (a shared CPU node) without jumping on one noisy chunk."""
    target = per_chunk * chunk_s / max(seconds, 1e-9)
    return max(1, round(min(max(target, per_chunk / 2), per_chunk * 2)))


class _DeviceWorker(threading.Thread):
    """A thread that drives one device; an exception ends it and is kept for the report."""

    error: str | None = None
    start_barrier: threading.Barrier

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # noqa: BLE001 - reported in the envelope by the caller
            self.error = f"{type(exc).__name__}: {exc}"
            try:
                self.start_barrier.abort()  # release the other devices' threads waiting at the start
            except threading.BrokenBarrierError:
                pass

    def _run(self) -> None:
        raise NotImplementedError


class GemmWorker(_DeviceWorker):
    """One device's GEMM loop; timed chunks of back-to-back products, each checked afterwards."""

    def __init__(
        self,
        label: str,
        device: Any,
        a_host: Any,
        b_host: Any,
        duration_s: float,
        warmup_s: float,
        chunk_s: float,
        start_barrier: threading.Barrier,
        burst: int = 0,
        burst_lock: threading.Lock | None = None,
    ) -> None:
        super().__init__(name=f"gemm-{label}", daemon=True)
        self.burst = burst
        self.burst_lock = burst_lock or threading.Lock()
        self.burst_rates: list[float] = []  # FLOP/s of each product of the opening burst
        self.label, self.device = label, device
        self.a_host, self.b_host = a_host, b_host
        self.duration_s, self.warmup_s, self.chunk_s = duration_s, warmup_s, chunk_s
        self.start_barrier = start_barrier
        self.rates: list[float] = []  # FLOP/s of each timed chunk
        self.chunks_checked = 0
        self.mismatches = 0
        self.output_hash: str | None = None
        self.reference_rows_error: float | None = None
        self.products = 0
        self.error: str | None = None
        self.reference: Any = None

    def _run(self) -> None:
        import torch

        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.set_device(self.device)
        a = self.a_host.to(self.device)
        b = self.b_host.to(self.device)
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=self.device)
        flops = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        sync = (lambda: torch.cuda.synchronize(self.device)) if cuda else (lambda: None)

        torch.matmul(a, b, out=c)
        sync()
        self.reference = c.clone()

        if cuda and self.burst:
            # First, while the GPU is still cool: within a fraction of a second at full
            # load the power limit lowers the clocks, and the burst figure is gone. One GPU
            # at a time, the others idle, as the reference figure was measured (one H200
            # alone); on the lent 2 x H200 host, bursts run side by side read up to 10%
            # lower on one of the two GPUs.
            with self.burst_lock:
                self._measure_burst(a, b, c, flops)
        self.start_barrier.wait()
        per_chunk = max(1, math.ceil(self.chunk_s / _seconds_per_call(lambda: torch.matmul(a, b, out=c), sync)))
        start = time.monotonic()
        warm_until = start + self.warmup_s
        deadline = start + self.duration_s
        while True:
            now = time.monotonic()
            if now >= deadline and self.rates:
                break
            seconds = timed(lambda: torch.matmul(a, b, out=c), per_chunk, cuda)
            self.products += per_chunk
            rate = flops * per_chunk / seconds
            per_chunk = _resize(per_chunk, seconds, self.chunk_s)
            # The check sits outside the timed region: it must not bend the throughput.
            self.chunks_checked += 1
            if not torch.equal(c, self.reference):
                self.mismatches += 1
            if now >= warm_until:
                self.rates.append(rate)
        self.output_hash = _sha256_of(self.reference)
        rows = min(16, a.shape[0])
        want = self.a_host[:rows].double() @ self.b_host.double()
        self.reference_rows_error = _relative_error(self.reference[:rows].cpu(), want)

    def _measure_burst(self, a: Any, b: Any, c: Any, flops: float) -> None:
        """Products timed one by one from a cool start, before the power cap pulls the clocks
        down: 5 warm-ups, then `burst` products, the method of the reference figure."""
        import torch

        for _ in range(5):
            torch.matmul(a, b, out=c)
        pairs = []
        for _ in range(self.burst):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            torch.matmul(a, b, out=c)
            end.record()
            pairs.append((begin, end))
        pairs[-1][1].synchronize()
        self.burst_rates = [flops / (begin.elapsed_time(end) / 1e3) for begin, end in pairs]
        self.chunks_checked += 1
        if not torch.equal(c, self.reference):
            self.mismatches += 1


class CopyWorker(_DeviceWorker):
    """One device's copy loop: dst.copy_(src), counting bytes read plus bytes written."""

    def __init__(
        self, label: str, device: Any, nbytes: int, duration_s: float, chunk_s: float, start_barrier: threading.Barrier
    ) -> None:
        super().__init__(name=f"copy-{label}", daemon=True)
        self.label, self.device, self.nbytes = label, device, nbytes
        self.duration_s, self.chunk_s = duration_s, chunk_s
        self.start_barrier = start_barrier
        self.rates: list[float] = []  # bytes/s of each timed chunk
        self.copy_correct: bool | None = None
        self.error: str | None = None

    def _run(self) -> None:
        import torch

        cuda = self.device.type == "cuda"
        if cuda:
            # A new thread starts on GPU 0: without this, events would time GPU 0's stream.
            torch.cuda.set_device(self.device)
        numel = self.nbytes // 4
        gen = torch.Generator(device=self.device).manual_seed(1234)
        src = torch.empty(numel, dtype=torch.float32, device=self.device).uniform_(generator=gen)
        dst = torch.empty_like(src)
        dst.copy_(src)
        if cuda:
            torch.cuda.synchronize(self.device)
        sync = (lambda: torch.cuda.synchronize(self.device)) if cuda else (lambda: None)
        per_chunk = max(1, math.ceil(self.chunk_s / _seconds_per_call(lambda: dst.copy_(src), sync)))
        moved = 2.0 * numel * 4  # every copy reads src and writes dst

        self.start_barrier.wait()
        deadline = time.monotonic() + self.duration_s
        while time.monotonic() < deadline or not self.rates:
            seconds = timed(lambda: dst.copy_(src), per_chunk, cuda)
            self.rates.append(moved * per_chunk / seconds)
            per_chunk = _resize(per_chunk, seconds, self.chunk_s)
        self.copy_correct = bool(torch.equal(dst, src))


def _run_workers(workers: list[threading.Thread], report: Report, timeout_s: float) -> None:
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout_s
    for w in workers:
        w.join(timeout=max(1.0, deadline - time.monotonic()))
        if w.is_alive():
            report.error(f"{w.name} did not finish within {timeout_s:g} s (hung device?)")
        elif getattr(w, "error", None):
            report.error(f"{w.name} failed: {w.error}", getattr(w, "label", None))


def _report_determinism(report: Report, gemms: list[GemmWorker], across: str) -> None:
    hashes = {w.label: w.output_hash for w in gemms if w.output_hash}
    report.details["gemm_output_sha256"] = hashes
    for w in gemms:
        if w.mismatches:
            report.error(
                f"GEMM output changed between repetitions in {w.mismatches} of "
                f"{w.chunks_checked} checks (silent data corruption?)",
                w.label,
            )
        # bf16 outputs round at about 4e-3; a wrong product is off by orders more.
        if w.reference_rows_error is not None and w.reference_rows_error > 2e-2:
            report.error(
                f"GEMM rows differ from a float64 host reference (relative error {w.reference_rows_error:.2e})", w.label
            )
    for label in odd_ones_out(hashes):
        report.error(f"GEMM output differs from the other {across}' bit-for-bit (silent data corruption?)", label)
    report.details["determinism"] = {
        "checks_per_device": {w.label: w.chunks_checked for w in gemms},
        "mismatches": {w.label: w.mismatches for w in gemms},
        "reference_rows_relative_error": {w.label: w.reference_rows_error for w in gemms},
        "identical_across_devices": len(set(hashes.values())) <= 1,
    }


def gpu_burnin(report: Report, args: argparse.Namespace, duration: float) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    indices = [int(i) for i in args.gpus.split(",")] if args.gpus else list(range(torch.cuda.device_count()))
    devices = {f"gpu{i}": torch.device("cuda", i) for i in indices}
    nvml, why = nvml_util.load()
    handles: dict[str, Any] = {}
    if nvml is not None:
        for i in indices:
            handle, nvml_index = nvml_util.handle_for_torch_device(nvml, i)
            if handle is not None:
                handles[f"gpu{i}"] = handle
    else:
        report.warning(f"no NVML sampling: {why}")

    n = args.gemm_size or 8192
    progress(f"drawing two {n}x{n} matrices from seed {args.seed}")
    gen = torch.Generator().manual_seed(args.seed)
    a_host = torch.randn(n, n, generator=gen).to(torch.bfloat16)
    b_host = torch.randn(n, n, generator=gen).to(torch.bfloat16)
    ecc_before = {label: nvml_util.ecc_counts(nvml, h) for label, h in handles.items()}
    sampler = nvml_util.Sampler(nvml, handles, args.sample_interval) if handles else None
    if sampler:
        sampler.start()

    warmup = min(args.warmup, duration / 4)
    barrier = threading.Barrier(len(devices))
    burst_lock = threading.Lock()
    gemms = [
        GemmWorker(label, dev, a_host, b_host, duration, warmup, args.chunk, barrier, args.burst, burst_lock)
        for label, dev in devices.items()
    ]
    progress(f"bf16 GEMM {n}^3 on {len(gemms)} GPUs for {duration:g} s ({warmup:g} s warm-up excluded)")
    _run_workers(gemms, report, duration + 300)
    hbm_s = args.hbm_duration if args.hbm_duration is not None else max(3.0, 0.1 * duration)
    nbytes = int(args.hbm_gib * 1024**3)
    barrier = threading.Barrier(len(devices))
    copies = [CopyWorker(label, dev, nbytes, hbm_s, 0.05, barrier) for label, dev in devices.items()]
    progress(f"HBM copy of {args.hbm_gib:g} GiB on {len(copies)} GPUs for {hbm_s:g} s")
    _run_workers(copies, report, hbm_s + 300)
    if sampler:
        sampler.stop()

    for w in gemms:
        # Two figures, because a GPU at its power limit clocks down within a second:
        # the burst (median of single products from a cool start, how the reference
        # tables measure GEMM) and the sustained rate over the whole stress.
        if w.burst_rates:
            m = report.measure_samples("gemm_bf16_tflops", [r / 1e12 for r in w.burst_rates], "TFLOP/s", w.label)
            if m is not None:
                progress(
                    f"{w.label}: burst {m.value:.1f} TFLOP/s (p10 {m.spread['p10']:.1f}, p90 {m.spread['p90']:.1f})"
                )
        if w.rates:
            m = report.measure_samples("gemm_bf16_tflops_sustained", [r / 1e12 for r in w.rates], "TFLOP/s", w.label)
            if m is None:
                continue
            progress(
                f"{w.label}: sustained {m.value:.1f} TFLOP/s (p10 {m.spread['p10']:.1f}, p90 {m.spread['p90']:.1f})"
            )
            if w.burst_rates:
                ratio = m.value / summarize([r / 1e12 for r in w.burst_rates])[0]
                if ratio < 0.9:
                    report.info(
                        f"sustained GEMM runs at {ratio:.0%} of the burst rate "
                        "(clocks lowered at the power limit; see telemetry)",
                        w.label,
                    )
    for w in copies:
        if w.rates:
            m = report.measure_samples("hbm_bandwidth", [r / 1e12 for r in w.rates], "TB/s", w.label)
            if m is not None:
                progress(f"{w.label}: HBM copy {m.value:.2f} TB/s")
        if w.copy_correct is False:
            report.error("device-to-device copy produced different bytes", w.label)
    _report_determinism(report, gemms, "GPUs")
    report.details.update(
        {
            "device": "gpu",
            "gemm": {
                "size": n,
                "dtype": "bfloat16",
                "seed": args.seed,
                "burst": f"median of {args.burst} single products after 5 warm-ups, one GPU at a time",
                "sustained": f"median of {args.chunk:g} s chunks over {duration:g} s after {warmup:g} s warm-up",
                "products": {w.label: w.products for w in gemms},
                # In order, to show clock ramp-up or a power-cap drop within the burst.
                "burst_series_tflops": {w.label: [round(r / 1e12, 1) for r in w.burst_rates] for w in gemms},
            },
            "hbm": {"buffer_gib": args.hbm_gib, "duration_s": hbm_s, "counts": "bytes read + bytes written"},
            "device_names": {label: torch.cuda.get_device_name(dev) for label, dev in devices.items()},
            "duration_s": duration,
            "warmup_s": warmup,
        }
    )
    if sampler:
        _report_sampling(report, nvml, handles, sampler, ecc_before)


def _report_sampling(
    report: Report,
    nvml: Any,
    handles: dict[str, Any],
    sampler: nvml_util.Sampler,
    ecc_before: dict[str, dict[str, int | None]],
) -> None:
    telemetry: dict[str, Any] = {}
    for label, handle in handles.items():
        series = sampler.samples[label]
        for figure, unit in (("sm_clock_mhz", "MHz"), ("gpu_temperature_c", "C"), ("gpu_power_w", "W")):
            key = {"sm_clock_mhz": "sm_clock_mhz", "gpu_temperature_c": "temperature_c", "gpu_power_w": "power_w"}[
                figure
            ]
            if series[key]:
                report.measure_samples(figure, series[key], unit, label)
        counts = sampler.throttle_counts[label]
        total = max(1, sampler.sample_count)
        for reason, seen in sorted(counts.items()):
            share = f"{reason} in {seen} of {total} samples"
            if reason in nvml_util.HARDWARE_THROTTLES:
                report.error(f"clocks throttled by hardware: {share}", label)
            elif reason == "sw_thermal_slowdown":
                report.warning(f"clocks throttled for temperature: {share}", label)
        ecc_after = nvml_util.ecc_counts(nvml, handle)
        delta = {
            k: (ecc_after[k] - ecc_before[label][k])
            if ecc_after.get(k) is not None and ecc_before[label].get(k) is not None
            else None
            for k in ecc_after
        }
        if delta.get("volatile_uncorrected"):
            report.error(f"{delta['volatile_uncorrected']} uncorrected ECC errors during burn-in", label)
        if delta.get("volatile_corrected"):
            report.warning(f"{delta['volatile_corrected']} corrected ECC errors during burn-in", label)
        telemetry[label] = {
            "throttle_reason_samples": counts,
            "ecc_delta": delta,
            "max_sm_clock_mhz": nvml_util.query(nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_SM),
            "max_temperature_c": max(series["temperature_c"], default=None),
            "power_limit_w": (nvml_util.query(nvml.nvmlDeviceGetEnforcedPowerLimit, handle) or 0) / 1000 or None,
        }
    report.details["telemetry"] = telemetry
    report.details["telemetry_samples"] = sampler.sample_count


def cpu_burnin(report: Report, args: argparse.Namespace, duration: float) -> None:
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None:
        _numpy_burnin(report, args, duration)
        return
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(usable)
    n = args.gemm_size or 2048
    gen = torch.Generator().manual_seed(args.seed)
    a = torch.randn(n, n, generator=gen)
    b = torch.randn(n, n, generator=gen)
    device = torch.device("cpu")
    warmup = min(args.warmup, duration / 4)
    progress(f"fp32 GEMM {n}^3 on {usable} CPU threads for {duration:g} s")
    gemm = GemmWorker("cpu", device, a, b, duration, warmup, args.chunk, threading.Barrier(1))
    _run_workers([gemm], report, duration + 300)
    mem_s = args.hbm_duration if args.hbm_duration is not None else max(2.0, 0.1 * duration)
    nbytes = int(args.mem_mib * 1024**2)
    copy = CopyWorker("cpu", device, nbytes, mem_s, 0.1, threading.Barrier(1))
    progress(f"memory copy of {args.mem_mib:g} MiB for {mem_s:g} s")
    _run_workers([copy], report, mem_s + 300)
    if gemm.rates:
        report.measure_samples("gemm_fp32_gflops", [r / 1e9 for r in gemm.rates], "GFLOP/s", "cpu")
    if copy.rates:
        report.measure_samples("memory_bandwidth", [r / 1e9 for r in copy.rates], "GB/s", "cpu")
    if copy.copy_correct is False:
        report.error("memory copy produced different bytes", "cpu")
    _report_determinism(report, [gemm], "runs")
    report.details.update(
        {
            "device": "cpu",
            "threads": usable,
            "backend": "torch",
            "gemm": {"size": n, "dtype": "float32", "seed": args.seed, "products": gemm.products},
            "memory": {"buffer_mib": args.mem_mib, "duration_s": mem_s, "counts": "bytes read + bytes written"},
            "duration_s": duration,
            "warmup_s": warmup,
        }
    )


def _numpy_burnin(report: Report, args: argparse.Namespace, duration: float) -> None:
    """Without torch: the same measurements through numpy's BLAS and memcpy."""
    try:
        import numpy as np
    except ImportError:
        report.skip("neither torch nor numpy is installed")
        return
    n = args.gemm_size or 2048
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=c)
    reference = c.copy()
    rates, mismatches, checks = [], 0, 0
    start = time.monotonic()
    while time.monotonic() - start < duration or not rates:
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        seconds = time.perf_counter() - t0
        checks += 1
        mismatches += not np.array_equal(c, reference)
        if time.monotonic() - start >= min(args.warmup, duration / 4):
            rates.append(2.0 * n**3 / seconds)
    report.measure_samples("gemm_fp32_gflops", [r / 1e9 for r in rates], "GFLOP/s", "cpu")
    src = rng.random(int(args.mem_mib * 1024**2) // 8)
    dst = np.empty_like(src)
    copy_rates = []
    start = time.monotonic()
    while time.monotonic() - start < max(2.0, 0.1 * duration) or not copy_rates:
        t0 = time.perf_counter()
        np.copyto(dst, src)
        copy_rates.append(2.0 * src.nbytes / (time.perf_counter() - t0))
    report.measure_samples("memory_bandwidth", [r / 1e9 for r in copy_rates], "GB/s", "cpu")
    if mismatches:
        report.error(f"GEMM output changed between repetitions in {mismatches} of {checks} checks", "cpu")
    report.details.update(
        {
            "device": "cpu",
            "backend": "numpy",
            "gemm": {"size": n, "dtype": "float32"},
            "determinism": {"checks_per_device": {"cpu": checks}, "mismatches": {"cpu": mismatches}},
            "gemm_output_sha256": {"cpu": hashlib.sha256(reference.tobytes()).hexdigest()},
        }
    )


def run(report: Report, args: argparse.Namespace) -> None:
    duration = args.duration if args.duration is not None else PROFILES[args.profile]
    report.details["profile"] = args.profile
    try:
        import torch

        cuda = torch.cuda.is_available() and not args.cpu
    except ImportError:
        cuda = False
    if cuda:
        gpu_burnin(report, args, duration)
    else:
        cpu_burnin(report, args, duration)


def build_parser() -> argparse.ArgumentParser:
    p = CheckArgumentParser(prog="python3 -m validation.burnin", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick", help="quick: 20 s of GEMM; long: 7200 s")
    p.add_argument("--duration", type=float, help="seconds of GEMM stress (overrides the profile)")
    p.add_argument("--cpu", action="store_true", help="measure the CPU even where GPUs exist")
    p.add_argument("--gpus", help="comma-separated CUDA indices (default: all)")
    p.add_argument("--gemm-size", type=int, help="matrix side (default 8192 on GPU, 2048 on CPU)")
    p.add_argument("--seed", type=int, default=20240229)
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of GEMM excluded from the statistics")
    p.add_argument("--chunk", type=float, default=0.25, help="seconds per timed chunk of products")
    # 20: on the lent H200s the power cap pulled the clock from 1980 MHz down within 14 to 60
    # single 8192^3 products (burst_series_tflops in details shows where); the burst figure is
    # the rate before that, the sustained figure the rate after it.
    p.add_argument("--burst", type=int, default=20, help="GPU products timed singly at the start (0: none)")
    p.add_argument("--hbm-gib", type=float, default=4.0, help="GPU copy buffer size")
    p.add_argument("--mem-mib", type=float, default=1024.0, help="CPU copy buffer size")
    p.add_argument("--hbm-duration", type=float, help="seconds of copies (default max(3, duration/10))")
    p.add_argument("--sample-interval", type=float, default=0.5, help="NVML sampling period in seconds")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv, "burnin")
    if isinstance(args, int):
        return args
    return emit(run_check("burnin", lambda report: run(report, args)))


if __name__ == "__main__":
    sys.exit(main())
