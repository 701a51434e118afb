"""Timing a chunk of back-to-back device operations, the one way every check does it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def timed(op: Callable[[], Any], iterations: int, cuda: bool) -> float:
    """Seconds for `iterations` back-to-back calls of `op`, measured on the device when there is one."""
    import torch

    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            op()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    for _ in range(iterations):
        op()
    return time.perf_counter() - t0
