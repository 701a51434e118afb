"""Which bf16 GEMM shape and layout runs fastest on this GPU (one GPU, random data).

    python3 bench/gpu/gemm_variants.py [--sizes 8192,16384] [--iters 30]

For each size and layout (NN: a @ b; NT: a @ b.T), the median TFLOP/s of
`iters` timed products after 5 warm-ups, timed with CUDA events. Informs the
default of validation.burnin's --gemm-size.
"""

from __future__ import annotations

import argparse
import statistics

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="8192,16384")
    p.add_argument("--iters", type=int, default=30)
    args = p.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"{'size':>6} {'layout':>6} {'median TFLOP/s':>15} {'min':>8} {'max':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        for layout, rhs in (("NN", b), ("NT", b.t())):
            c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
            for _ in range(5):
                torch.matmul(a, rhs, out=c)
            rates = []
            for _ in range(args.iters):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                torch.matmul(a, rhs, out=c)
                e.record()
                e.synchronize()
                rates.append(2 * n**3 / (s.elapsed_time(e) / 1e3) / 1e12)
            print(f"{n:>6} {layout:>6} {statistics.median(rates):>15.1f} {min(rates):>8.1f} {max(rates):>8.1f}")


if __name__ == "__main__":
    main()
