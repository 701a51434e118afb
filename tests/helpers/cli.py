"""The podctl CLI run as a user runs it, in a process of its own, for the hostile-input tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.repo import REPO


@dataclass
class Ran:
    rc: int
    out: str
    err: str
    seconds: float
    max_rss_mb: float


def podctl(*args: str, cwd: Path | None = None, timeout: float = 120, env: dict[str, str] | None = None) -> Ran:
    """Run the podctl CLI in a process of its own: exit code, output, wall time, peak memory."""
    # VmHWM, not getrusage: ru_maxrss survives exec, so a child of a large pytest would report the parent's.
    code = (
        "import re, runpy, sys; sys.argv = ['podctl'] + sys.argv[1:];\n"
        "try:\n    runpy.run_module('podctl.cli', run_name='__main__')\n"
        "finally:\n    hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
        "    sys.stderr.write(f'\\nPEAK_RSS_KB={hwm}\\n')"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    seconds = time.monotonic() - started
    err, _, peak = proc.stderr.rpartition("\nPEAK_RSS_KB=")
    return Ran(proc.returncode, proc.stdout, err, seconds, int(peak.strip() or 0) / 1024)


def assert_user_error(ran: Ran, *needles: str) -> None:
    """Exit 2 with a message naming what is wrong; never a traceback or an internal error."""
    text = ran.out + ran.err
    assert ran.rc == 2, f"exit {ran.rc}, expected 2:\n{text[-2000:]}"
    assert "Traceback" not in text and "internal error" not in text, text[-2000:]
    for needle in needles:
        assert needle in text, f"{needle!r} not in:\n{text[-2000:]}"
