"""Benchmark: `podctl check`, `plan` and `inventory` on reference pods of growing size.

Prints wall time (median of --repeat runs) and peak RSS of each command run as
its own process, as a user would, so interpreter start-up is included.
Target: under 2 s and 300 MB each at Eos scale (1,344 DGX H100 nodes).

    .venv/bin/python bench/site_bench.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PODCTL = [sys.executable, "-m", "podctl.cli"]
SIZES = [(4, 128), (16, 512), (42, 1344)]  # (scalable units of 32, DGX H100 nodes)


def measure(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of `cmd`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for units, nodes in SIZES:
            site = Path(tmp) / f"pod-{nodes}.yaml"
            subprocess.run(
                PODCTL
                + [
                    "init",
                    "--profile",
                    "dgx-h100",
                    "--scalable-units",
                    str(units),
                    "--name",
                    f"pod{nodes}",
                    "-o",
                    str(site),
                ],
                check=True,
                stderr=subprocess.DEVNULL,
            )
            for name, extra in (
                ("check", []),
                ("plan", ["-o", "json"]),
                ("inventory", ["-o", str(Path(tmp) / f"inv-{nodes}")]),
            ):
                runs = [measure(PODCTL + [name, str(site)] + extra) for _ in range(args.repeat)]
                walls = [w for w, _ in runs]
                rows.append((nodes, name, statistics.median(walls), min(walls), max(walls), max(r for _, r in runs)))
        print(f"{'nodes':>6} {'command':<10} {'median s':>9} {'min s':>7} {'max s':>7} {'peak RSS MB':>12}")
        for nodes, name, med, lo, hi, rss in rows:
            print(f"{nodes:>6} {name:<10} {med:>9.3f} {lo:>7.3f} {hi:>7.3f} {rss:>12.1f}")


if __name__ == "__main__":
    main()
