"""Check, before doing anything, that this machine can run a simulated pod,
and say exactly what to install or set when it cannot."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from podctl.sim.errors import SimError

SETUP_HINT = "or run .ci/sim-setup.sh, which installs and configures everything the sim needs"

# binary -> (Debian package, why the sim needs it)
TOOLS: dict[str, tuple[str, str]] = {
    "podman": ("podman", "runs the node containers"),
    "runc": ("runc", "the OCI runtime that works here (crun fails on this host's hybrid cgroups)"),
    "debootstrap": ("debootstrap", "builds the node image (no registry can be reached)"),
    "tar": ("tar", "packs the node image"),
    "ssh": ("openssh-client", "checks that every node answers over SSH"),
    "ssh-keygen": ("openssh-client", "creates the pod's SSH key"),
    "tc": ("iproute2", "throttles a node's network (podctl sim fault --rate)"),
    "ip": ("iproute2", "finds a node's interfaces for fault injection"),
    "nsenter": ("util-linux", "enters a node's network namespace for fault injection"),
    "nft": ("nftables", "keeps the fabric's ibsim to root's processes on the SM host (from the host)"),
    "setpriv": ("util-linux", "starts ibsim with no authority"),
}

# What each command needs; `image` also runs inside `up` when the image is missing.
NEEDS: dict[str, tuple[str, ...]] = {
    "image": ("podman", "runc", "debootstrap", "tar"),
    "up": ("podman", "runc", "ssh", "ssh-keygen", "ip", "nsenter", "nft", "setpriv"),
    "status": ("podman", "runc", "ssh"),
    "down": ("podman", "runc"),
    "exec": ("podman", "runc"),
    "fault": ("podman", "runc", "tc", "ip", "nsenter", "ssh"),
}

DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")

# Every node is a systemd that holds inotify instances (6 on a booted sim node, measured; a
# deployed 16-node pod ran within 128), and rootful containers share the host's per-user limit. Debian's
# default of 128 stops a pod at about 20 nodes: the nodes past it hang in "initializing" with
# "Failed to create inotify object: Too many open files" in their journal.
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_PER_NODE = 6
INOTIFY_SETTING = 8192  # what .ci/sim-setup.sh sets


# The kernel keeps one neighbour (ARP) table for every network namespace on the host, and
# gc_thresh3 caps it as a whole. On a sim pod every node learns every other node's address (a
# multi-node job's ranks connect to each other: gloo and NCCL build a full mesh) and the bridge's:
# about N x N entries. Past the cap, a new connection fails with "No route to host" and the
# kernel logs "neighbor table overflow!": at 32 nodes (1,056 entries against Debian's 1,024), a
# 31-rank job lost one rank that way and srun ended the rest (docs/scale.md).
NEIGHBOUR_LIMIT = Path("/proc/sys/net/ipv4/neigh/default/gc_thresh3")
NEIGHBOUR_SETTING = 16384  # what .ci/sim-setup.sh sets (with gc_thresh2 at half of it)


# What a deployed node adds to podman's storage over its image: every stage's packages (Debian 13's
# python3-torch brings LLVM, ROCm's HIP runtime and Open MPI with it) and the validation tools. A
# deployed Debian 13 compute node held 1.69 GB of its own and a head node 1.11 GB (`podman ps
# --size`, 2026-12-06); a 32-node pod brought up on about 50 GB free ran out 23 minutes into its
# deploy, with "No space left on device" on the nodes and in ansible-playbook (docs/scale.md).
NODE_DISK_GIB = 2


def check_disk(new_nodes: int, store: Path, free: int | None = None) -> None:
    """SimError when `new_nodes` more nodes, once deployed, would not fit in podman's storage
    (`store`, its graph root; `free`: its free bytes, read from the file system when None)."""
    if new_nodes <= 0:
        return
    if free is None:
        try:
            free = shutil.disk_usage(store).free
        except OSError:
            return
    need = new_nodes * NODE_DISK_GIB
    if need * 2**30 > free:
        raise SimError(
            f"{new_nodes} more sim node(s) take about {need} GiB of disk once deployed ({NODE_DISK_GIB} GiB "
            f"each: every stage's packages and the validation tools), but {store} has {free / 2**30:.1f} GiB "
            "free: the deploy would stop part-way with 'No space left on device'. Free space there, or "
            "declare fewer nodes"
        )


def neighbours_needed(nodes: int) -> int:
    """Neighbour entries a pod of `nodes` sim nodes holds at most: each node's entry for every
    other node and for the bridge, and the host's for every node."""
    return nodes * nodes + nodes


@dataclass(frozen=True)
class Tools:
    paths: dict[str, str]

    def __getitem__(self, name: str) -> str:
        return self.paths[name]

    @property
    def podman(self) -> str:
        return self.paths["podman"]

    @property
    def runc(self) -> str:
        return self.paths["runc"]


def search_path(path: str | None = None) -> str:
    """PATH, plus the sbin directories that a non-login root shell may lack
    (runc and debootstrap live in /usr/sbin)."""
    base = path if path is not None else os.environ.get("PATH", "")
    extra = [d for d in ("/usr/local/sbin", "/usr/sbin", "/sbin") if d not in base.split(os.pathsep)]
    if path is not None:
        # An explicit PATH is taken as given (tests simulate missing tools).
        return base
    return os.pathsep.join([base, *extra]) if base else os.pathsep.join(extra)


def missing_tools_message(missing: list[str]) -> str:
    packages = sorted({TOOLS[name][0] for name in missing})
    lines = [f"podctl sim needs {', '.join(missing)}, not found on PATH:"]
    for name in missing:
        lines.append(f"  {name}: {TOOLS[name][1]} (Debian package {TOOLS[name][0]})")
    lines.append(f"install with: apt-get install -y {' '.join(packages)}")
    lines.append(SETUP_HINT)
    return "\n".join(lines)


def find_tools(command: str, path: str | None = None) -> Tools:
    """Resolve every binary `command` needs, or raise a SimError naming all the
    missing ones and the packages that provide them."""
    lookup = search_path(path)
    found: dict[str, str] = {}
    missing: list[str] = []
    for name in NEEDS[command]:
        where = shutil.which(name, path=lookup)
        if where:
            found[name] = where
        else:
            missing.append(name)
    if missing:
        raise SimError(missing_tools_message(missing))
    return Tools(found)


def require_root(euid: int | None = None) -> None:
    uid = os.geteuid() if euid is None else euid
    if uid != 0:
        raise SimError(
            "podctl sim must run as root: it runs rootful podman (static addresses on a "
            "bridge), debootstrap, and tc inside the nodes' network namespaces; run it with sudo"
        )


def check_podman(tools: Tools) -> None:
    """`podman info` fails fast when storage or the runtime is misconfigured;
    turn that into advice instead of a failure halfway through `up`."""
    try:
        proc = subprocess.run(
            [tools.podman, "--runtime", tools.runc, "info", "--format", "{{.Host.OCIRuntime.Name}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SimError(f"could not run `podman info`: {exc}\n{SETUP_HINT}") from exc
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        detail = "\n  ".join(err[-5:]) or "(no output)"
        raise SimError(
            f"podman is installed but `podman info` fails:\n  {detail}\n"
            'check /etc/containers/containers.conf: this host needs [engine] runtime = "runc" and '
            '[containers] default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n' + SETUP_HINT
        )


def check_debootstrap(keyring: Path = DEBIAN_KEYRING) -> None:
    if not keyring.exists():
        raise SimError(
            f"debootstrap cannot verify Debian's archive without {keyring}: "
            f"apt-get install -y debian-archive-keyring\n{SETUP_HINT}"
        )


def inotify_in_use(proc: Path = Path("/proc")) -> int:
    """inotify instances open on this host now (file descriptors that are inotify objects)."""
    count = 0
    for fd_dir in proc.glob("[0-9]*/fd"):
        try:
            for fd in fd_dir.iterdir():
                try:
                    if os.readlink(fd) == "anon_inode:inotify":
                        count += 1
                except OSError:
                    continue
        except OSError:  # the process ended, or is not ours to read
            continue
    return count


def _kernel_limit(limit_file: Path) -> int | None:
    """A kernel setting's value from procfs; None where there is none to read (not Linux's procfs:
    nothing to check against)."""
    try:
        return int(limit_file.read_text().strip())
    except (OSError, ValueError):
        return None


def check_inotify(new_nodes: int, limit_file: Path = INOTIFY_LIMIT, in_use: int | None = None) -> None:
    """SimError when `new_nodes` more nodes would exhaust the host's inotify instances."""
    if new_nodes <= 0:
        return
    limit = _kernel_limit(limit_file)
    if limit is None:
        return
    used = inotify_in_use() if in_use is None else in_use
    need = used + new_nodes * INOTIFY_PER_NODE
    if need > limit:
        raise SimError(
            f"{new_nodes} more sim node(s) need about {new_nodes * INOTIFY_PER_NODE} inotify instances "
            f"({INOTIFY_PER_NODE} each, for the node's systemd and services) and {used} are in use, but "
            f"fs.inotify.max_user_instances is {limit}: the nodes past it would hang while booting. Raise it: "
            f"sysctl -w fs.inotify.max_user_instances={max(INOTIFY_SETTING, need)} (and put the setting in "
            f"/etc/sysctl.d/ to keep it)\n{SETUP_HINT}"
        )


def check_neighbours(nodes: int, limit_file: Path = NEIGHBOUR_LIMIT) -> None:
    """SimError when a pod of `nodes` sim nodes would overflow the host's neighbour table."""
    limit = _kernel_limit(limit_file)
    if limit is None:
        return
    need = neighbours_needed(nodes)
    if need > limit:
        setting = max(NEIGHBOUR_SETTING, need)
        raise SimError(
            f"a pod of {nodes} sim nodes needs up to {need} neighbour (ARP) entries on this host, one for "
            f"every node each node talks to, but net.ipv4.neigh.default.gc_thresh3 is {limit}: past it a "
            f"multi-node job's connections fail with 'No route to host'. Raise it: sysctl -w "
            f"net.ipv4.neigh.default.gc_thresh2={setting // 2} net.ipv4.neigh.default.gc_thresh3={setting} "
            f"(and put the settings in /etc/sysctl.d/ to keep them)\n{SETUP_HINT}"
        )


def preflight(command: str, path: str | None = None, euid: int | None = None) -> Tools:
    require_root(euid)
    tools = find_tools(command, path)
    if command == "image":
        check_debootstrap()
    if "podman" in tools.paths:
        check_podman(tools)
    return tools
