"""Which ibsim to run, and how big a fabric it must be told to expect.

ibsim and its preload library libumad2sim.so come as a pair: they speak a wire protocol of
their own over the simulator's sockets, so the library is always taken from the same release
as the simulator. Two installations are known:

- podctl's build of Debian 13's ibsim 0.12 (`.ci/ibsim-setup.sh`), under /opt/podctl-ibsim
  (`bin/ibsim`, `lib/umad2sim/libumad2sim.so`), or where `PODCTL_IBSIM_PREFIX` says: it knows
  NDR links;
- Debian 12's `ibsim-utils` 0.10 and `libumad2sim0`: it brings NDR links up as 4xSDR.

The first found wins. OpenSM and infiniband-diags are Debian's, on PATH.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from podctl.core.errors import PodctlError

PODCTL_PREFIX = "/opt/podctl-ibsim"
PREFIX_ENV = "PODCTL_IBSIM_PREFIX"
DEBIAN_IBSIM = "/usr/bin/ibsim"
DEBIAN_UMAD2SIM = "/usr/lib/*/umad2sim/libumad2sim.so"
# The first release podctl saw bring NDR links up as 4xNDR (0.10 parses no NDR and falls back to SDR).
NDR_SINCE = (0, 12)
SETUP_HINT = "run `bash .ci/ibsim-setup.sh` (make fabric-setup) as root"


class IbsimError(PodctlError):
    """The simulated fabric cannot be started, driven or read as asked; the message says what to do."""


@dataclass(frozen=True)
class Install:
    ibsim: str  # the simulator
    umad2sim: str  # its preload library, of the same release
    version: tuple[int, ...]

    @property
    def knows_ndr(self) -> bool:
        return self.version >= NDR_SINCE

    def describe(self) -> str:
        return f"ibsim {'.'.join(map(str, self.version))} ({self.ibsim})"


def ibsim_version(binary: str) -> tuple[int, ...]:
    """What `ibsim -h` says of itself on its last line: `ibsim 0.12`."""
    try:
        proc = subprocess.run([binary, "-h"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IbsimError(f"{binary}: cannot run it ({exc}); {SETUP_HINT}") from None
    match = re.search(r"^\S*ibsim (\d{1,4}(?:\.\d{1,4}){0,3})\s*$", proc.stdout + proc.stderr, re.MULTILINE)
    if match is None:
        raise IbsimError(f"{binary}: `ibsim -h` names no version; is it ibsim? {SETUP_HINT}")
    return tuple(int(part) for part in match[1].split("."))


def _pair(prefix: str) -> tuple[str, str] | None:
    ibsim, lib = os.path.join(prefix, "bin", "ibsim"), os.path.join(prefix, "lib", "umad2sim", "libumad2sim.so")
    return (ibsim, lib) if os.access(ibsim, os.X_OK) and os.path.isfile(lib) else None


def find_install(need_ndr: bool = False) -> Install:
    """The ibsim to run: podctl's build (PODCTL_IBSIM_PREFIX, else /opt/podctl-ibsim), else Debian's.

    `need_ndr`: the fabric has NDR links; an ibsim that would bring them up at SDR is refused."""
    tried: list[str] = []
    prefixes = [os.environ[PREFIX_ENV]] if os.environ.get(PREFIX_ENV) else []
    for prefix in [*prefixes, PODCTL_PREFIX]:
        found = _pair(prefix)
        tried.append(f"{prefix}/bin/ibsim")
        if found:
            install = Install(*found, ibsim_version(found[0]))
            if install.knows_ndr or not need_ndr:
                return install
    libs = sorted(glob.glob(DEBIAN_UMAD2SIM))
    tried.append(DEBIAN_IBSIM)
    if os.access(DEBIAN_IBSIM, os.X_OK) and libs:
        install = Install(DEBIAN_IBSIM, libs[0], ibsim_version(DEBIAN_IBSIM))
        if install.knows_ndr or not need_ndr:
            return install
        raise IbsimError(
            f"{install.describe()} brings NDR links up as 4xSDR (NDR since ibsim "
            f"{'.'.join(map(str, NDR_SINCE))}); {SETUP_HINT} to build Debian 13's ibsim"
        )
    raise IbsimError(f"no ibsim found (looked for {', '.join(tried)}); {SETUP_HINT}")


def need_tools(*names: str) -> None:
    """OpenSM and infiniband-diags on PATH, or an error that says how to get them."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        raise IbsimError(
            f"{', '.join(missing)} not found on PATH; install Debian's opensm and infiniband-diags ({SETUP_HINT})"
        )


# -- how big a fabric ---------------------------------------------------------------------------

# ibsim's built-in limits (ibsim/sim.h): 2048 nodes, 256 switches, 36 ports per switch and 2 per node.
DEFAULT_NODES = 2048
DEFAULT_SWITCHES = 256
DEFAULT_PORTS = DEFAULT_SWITCHES * 36 + DEFAULT_NODES * 2
_NODE_LINE = re.compile(r"(Switch|Ca|Rt)\s++(\d{1,3}+)\s++\"", re.ASCII)


@dataclass(frozen=True)
class Limits:
    nodes: int  # ibsim -N: switches, CAs and routers
    switches: int  # -S
    ports: int  # -P: every switch's ports and its port 0, every CA's ports

    def argv(self) -> list[str]:
        return ["-N", str(self.nodes), "-S", str(self.switches), "-P", str(self.ports)]


def network_limits(network: str) -> Limits:
    """The limits a network file needs, counted from its node lines, and never below ibsim's own:
    ibsim allocates its tables once, at these sizes, and stops at the first node past them."""
    nodes = switches = ports = 0
    for line in network.splitlines():
        match = _NODE_LINE.match(line)
        if match is None:
            continue
        nodes += 1
        count = int(match[2])
        if match[1] == "Switch":
            switches += 1
            ports += count + 1  # port 0, the switch's own management port
        else:
            ports += count
    return Limits(max(nodes, DEFAULT_NODES), max(switches, DEFAULT_SWITCHES), max(ports, DEFAULT_PORTS))
