"""The house rules the tools can check: ruff (lint and format), import layers, module size.

The layers (pyproject.toml, [tool.importlinter]): commands over features over
the shared core, no library module importing a command module, and the
node-side `validation` package never importing podctl. A back-import fails
here instead of waiting for a review.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

BIN = Path(sys.executable).parent
# ~500 lines: a module beyond says at its top why it is one module.
MODULE_LINES = 520
REASON = "Why one module"


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    proc = subprocess.run([_tool("ruff"), *args], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_import_layers() -> None:
    proc = subprocess.run([_tool("lint-imports")], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_large_modules_say_why() -> None:
    unexplained = []
    for path in [*(REPO / "podctl").rglob("*.py"), *(REPO / "validation").rglob("*.py")]:
        lines = path.read_text().count("\n")
        if lines > MODULE_LINES:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            if REASON not in doc:
                unexplained.append(f"{path.relative_to(REPO)} ({lines} lines)")
    assert not unexplained, f"split these, or say at their top why they are one module: {unexplained}"
