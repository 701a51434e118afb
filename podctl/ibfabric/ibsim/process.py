"""The processes of a simulated fabric: started so that none outlives its caller (or, asked to,
in a session of its own), waited on with a deadline, and found where Debian installs the tools."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from podctl.ibfabric.ibsim.install import IbsimError, need_tools

_POLL_S = 0.02
_TOOL_DIRS = ("/usr/sbin", "/sbin", "/usr/bin")


def _die_with(parent: int) -> Callable[[], None]:
    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before the signal was armed
            os._exit(1)

    return arm


def spawn(argv: Sequence[str], env: Mapping[str, str], keep_running: bool, **kwargs: object) -> subprocess.Popen:
    """A child process that ends with this one, or (`keep_running`) one in a session of its own."""
    if keep_running:
        return subprocess.Popen(argv, env=dict(env), start_new_session=True, **kwargs)  # type: ignore[call-overload]
    return subprocess.Popen(argv, env=dict(env), preexec_fn=_die_with(os.getpid()), **kwargs)  # type: ignore[call-overload]


def wait_for(condition: Callable[[], bool], timeout: float, what: str, alive: Callable[[], str | None]) -> None:
    """Return once `condition()` holds; IbsimError when `alive()` says why the process it waits on
    ended, or when `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while not condition():
        gone = alive()
        if gone is not None:
            raise IbsimError(f"{what}: {gone}")
        if time.monotonic() > deadline:
            raise IbsimError(f"{what}: not within {timeout:g} s")
        time.sleep(_POLL_S)


def tool_path(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_TOOL_DIRS))
    if found is None:
        need_tools(name)
    return found or name


def tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (ended, not yet reaped by its parent) no longer serves anyone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
