"""The node-side checks (the `validation` package) run as a node runs them: `python -m validation.<module>`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.helpers.repo import REPO


def run_module(
    module: str, *args: str, timeout: float = 120.0, extra_env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    """Run `python -m validation.<module> ARGS` the way a node would; (exit code, JSON, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"):
        env.pop(name, None)
    env.update(extra_env or {})
    done = subprocess.run(
        [sys.executable, "-m", f"validation.{module}", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one JSON line on stdout, got {done.stdout!r}\nstderr:\n{done.stderr[-3000:]}"
    return done.returncode, json.loads(lines[0]), done.stderr
