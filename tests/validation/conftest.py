"""Shared helpers for the node-side validation tests.

`validation/` ships to nodes as a plain folder and is not part of the
installed podctl package, so the repository root goes on sys.path here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture(autouse=True)
def _builtin_sys_intern(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node-side tests run torch, as a node does: in a process without Ansible. In the unit
    part they share pytest's process with tests that import Ansible, and ansible-core (2.19)
    replaces `sys.intern` with a callable object on import; torch's dynamo then refuses to import
    ("substitute_in_graph expects a function"). The builtin is put back for these tests."""
    builtin = getattr(type(sys.intern), "unpatched_implementation", None)
    if builtin is not None:
        monkeypatch.setattr(sys, "intern", builtin)


def _run_module(
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


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def run_module():
    """`run_module("health", "--expect-cores", "2")` -> (exit code, envelope, stderr)."""
    return _run_module
