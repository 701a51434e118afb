"""Print a short table of the figures in validation JSON envelopes.

python3 bench/gpu/summarize.py results/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Per-size sweep figures are many; these are the ones worth a glance.
SHOWN = (
    "gemm_",
    "hbm_",
    "memory_",
    "sm_clock",
    "gpu_power",
    "gpu_temperature",
    "smoke_",
    "checkpoint_",
    "all_reduce_busbw_1GiB",
    "all_reduce_busbw_8GiB",
    "all_gather_busbw_8GiB",
    "reduce_scatter_busbw_8GiB",
    "all_to_all_busbw_8GiB",
    "nccl_",
    "gpu_count",
    "nvlink_",
    "cpu_",
    "memory_gib",
)


def main(paths: list[str]) -> int:
    for path in paths:
        try:
            envelope = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            print(f"{path}: unreadable ({exc})")
            continue
        print(f"## {envelope['check']} on {envelope['host']}: {envelope['status']} in {envelope['duration_s']:.1f} s")
        for m in envelope["measurements"]:
            if m["figure"].startswith(SHOWN):
                spread = m.get("spread") or {}
                extra = f" (p10 {spread['p10']:.4g}, p90 {spread['p90']:.4g}, n={m['samples']})" if spread else ""
                print(f"  {m['figure']:<28} {m['device'] or '':<14} {m['value']:>10.4g} {m['unit']}{extra}")
        for f in envelope["findings"]:
            if f["severity"] != "info":
                print(f"  {f['severity'].upper()}: {f['device'] or ''} {f['message'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
