"""Helpers of the tests that bring up their own sim pod: run podctl, copy the sim site.

Each such test module gets its own pod name and bridge, so pods of different
modules never share addresses, and the default `sim` pod of `make demo` is
left alone.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO, SIM_SITE


def podctl(*args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "podctl.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=REPO)
    if check and proc.returncode != 0:
        raise AssertionError(f"podctl {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def sim_site_copy(pod: str, subnet_prefix: str, ipoib_supernet: str) -> str:
    """inventory/sim/site.yaml as pod `pod` on `subnet_prefix`0/24, for a temporary folder."""
    text = SIM_SITE.read_text()
    text = re.sub(r"(?m)^  name: sim$", f"  name: {pod}", text)
    text = text.replace("10.89.0.", subnet_prefix).replace("172.30.0.0/16", ipoib_supernet)
    # The copy lives elsewhere: the wheel folder `make sim-wheels` fills, by its absolute path.
    text = text.replace("../../.cache/validation-wheels", str(REPO / ".cache" / "validation-wheels"))
    return re.sub(r"(?m)^# yaml-language-server.*\n", "", text)
