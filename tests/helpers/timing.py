"""Timing a call, and the rate a timed transfer reached, for the sim tests' measurements."""

from __future__ import annotations

import time


def transfer_mbit(seconds: float, nbytes: int) -> float:
    return nbytes * 8 / seconds / 1e6


def timed(fn) -> float:
    started = time.monotonic()
    fn()
    return time.monotonic() - started
