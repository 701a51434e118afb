"""A validation-tools folder as the validation-tools stage leaves it on a node, for the tests of
what root runs (the launcher, the health gate): root's, writable by root alone, on a local disk.

`tools_tree(top)` builds under `top`: venv/ (made by Debian's python3, without pip), src/validation/
(a copy of the checkout's validation package) and the .pth file that puts src/ on the venv's path.
Its folder lies under /var/lib (root's, 0755), never under /tmp: a folder anyone may write is what
the launcher refuses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.repo import REPO, cannot_run_here

SYSTEM_PYTHON = Path("/usr/bin/python3")
LAUNCHER = REPO / "validation" / "trusted_exec.py"
NOBODY = 65534


@dataclass(frozen=True)
class Tools:
    top: Path

    @property
    def python(self) -> Path:
        return self.top / "venv" / "bin" / "python"

    @property
    def package(self) -> Path:
        return self.top / "src" / "validation"

    @property
    def site_packages(self) -> Path:
        return next((self.top / "venv" / "lib").glob("python3*/site-packages"))

    @property
    def launcher(self) -> Path:
        """The launcher as the stage installs it: a root-owned copy beside the tree."""
        return self.top / "podctl-validation-exec"


@contextmanager
def tools_tree() -> Iterator[Tools]:
    if os.geteuid() != 0:
        cannot_run_here("root-owned validation tools need root")
    if not SYSTEM_PYTHON.exists():
        cannot_run_here(f"{SYSTEM_PYTHON} (Debian's python3) is missing")
    top = Path(tempfile.mkdtemp(prefix="podctl-test-tools-", dir="/var/lib"))
    try:
        os.chmod(top, 0o755)
        subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(top / "venv")], check=True, timeout=120)
        shutil.copytree(REPO / "validation", top / "src" / "validation", ignore=shutil.ignore_patterns("__pycache__"))
        tools = Tools(top)
        (tools.site_packages / "podctl-validation.pth").write_text(f"{top / 'src'}\n")
        shutil.copy(LAUNCHER, tools.launcher)
        for root, dirs, files in os.walk(top):
            for name in dirs:
                os.chmod(Path(root) / name, 0o755)
            for name in files:
                path = Path(root) / name
                if not path.is_symlink():
                    os.chmod(path, 0o755 if os.access(path, os.X_OK) else 0o644)
        os.chmod(tools.launcher, 0o755)
        yield tools
    finally:
        shutil.rmtree(top, ignore_errors=True)
