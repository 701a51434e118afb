"""A thin, typed layer over the podman CLI, plus the label rules that keep
podctl to its own containers and networks.

Every object podctl creates carries `io.podctl.pod=<pod>`; every listing
filters on it and every removal re-checks it, so a container or network
without the label is never modified, whatever its name.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podctl.sim.errors import SimError

LABEL_POD = "io.podctl.pod"
LABEL_SITE = "io.podctl.site"
LABEL_NODE = "io.podctl.node"
LABEL_ADDRESS = "io.podctl.address"
LABEL_SPEC = "io.podctl.spec"
LABEL_RECIPE = "io.podctl.recipe"
LABEL_IMAGE = "io.podctl.image"
LABEL_PLATFORM = "io.podctl.platform"  # a node image's and a node's OS: podctl.core.platforms key, debian-13


def container_name(pod: str, hostname: str) -> str:
    return f"podctl-{pod}-{hostname}"


def network_name(pod: str) -> str:
    return f"podctl-{pod}"


def pod_filter(pod: str) -> list[str]:
    """podman `--filter` arguments that select exactly this pod's objects."""
    return ["--filter", f"label={LABEL_POD}={pod}"]


def any_pod_filter() -> list[str]:
    return ["--filter", f"label={LABEL_POD}"]


def owned_by(labels: Mapping[str, str] | None, pod: str) -> bool:
    """True when an object's labels say it belongs to `pod` (the check made
    again before any change, in case a filter ever matched too loosely)."""
    return bool(labels) and labels.get(LABEL_POD) == pod  # type: ignore[union-attr]


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    name: str
    state: str  # created | running | exited | stopped | paused | ...
    labels: dict[str, str]

    @property
    def node(self) -> str:
        return self.labels.get(LABEL_NODE, "")

    @property
    def pod(self) -> str:
        return self.labels.get(LABEL_POD, "")

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass(frozen=True)
class NetworkInfo:
    name: str
    labels: dict[str, str]
    subnets: tuple[tuple[str, str | None], ...]  # (cidr, gateway)


class Podman:
    """Runs podman with the runtime podctl needs passed explicitly, so a
    containers.conf that still names crun cannot break the sim."""

    def __init__(self, executable: str, runtime: str) -> None:
        self.executable = executable
        self.runtime = runtime

    def command(self, args: Sequence[str]) -> list[str]:
        return [self.executable, "--runtime", self.runtime, *args]

    def run(
        self,
        args: Sequence[str],
        *,
        check: bool = True,
        timeout: float | None = 120,
    ) -> subprocess.CompletedProcess[str]:
        cmd = self.command(args)
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise SimError(f"`podman {' '.join(args[:3])} ...` did not finish within {timeout:.0f} s") from exc
        if check and proc.returncode != 0:
            raise SimError(explain_podman_failure(list(args), proc.stderr or proc.stdout))
        return proc

    def graph_root(self) -> Path:
        """Where podman keeps images and the containers' own files."""
        return Path(self.run(["info", "--format", "{{.Store.GraphRoot}}"]).stdout.strip())

    def json(self, args: Sequence[str]) -> Any:
        out = self.run(args).stdout.strip()
        return json.loads(out) if out else []

    # -- containers -------------------------------------------------------

    def containers(self, filters: Sequence[str]) -> list[ContainerInfo]:
        rows = self.json(["ps", "-a", "--format", "json", *filters]) or []
        result = []
        for row in rows:
            names = row.get("Names") or []
            result.append(
                ContainerInfo(
                    id=row.get("Id", ""),
                    name=names[0] if names else "",
                    state=str(row.get("State", "")).lower(),
                    labels=dict(row.get("Labels") or {}),
                )
            )
        return result

    def container_by_name(self, name: str) -> ContainerInfo | None:
        for info in self.containers(["--filter", f"name=^{name}$"]):
            if info.name == name:
                return info
        return None

    def container_pid(self, name: str) -> int:
        out = self.run(["inspect", "--type", "container", "--format", "{{.State.Pid}}", name]).stdout.strip()
        try:
            pid = int(out)
        except ValueError as exc:
            raise SimError(f"could not read the process id of container {name}: {out!r}") from exc
        if pid <= 0:
            raise SimError(f"container {name} is not running")
        return pid

    # -- networks ---------------------------------------------------------

    def network(self, name: str) -> NetworkInfo | None:
        proc = self.run(["network", "inspect", name], check=False)
        if proc.returncode != 0:
            return None
        data = json.loads(proc.stdout or "[]")
        if not data:
            return None
        return parse_network(data[0])

    def networks(self, filters: Sequence[str]) -> list[NetworkInfo]:
        rows = self.json(["network", "ls", "--format", "json", *filters]) or []
        return [parse_network(row) for row in rows]

    # -- images -----------------------------------------------------------

    def images(self, filters: Sequence[str]) -> list[dict[str, Any]]:
        return self.json(["images", "--format", "json", *filters]) or []


def parse_network(row: Mapping[str, Any]) -> NetworkInfo:
    """Both the netavark-era and the CNI-era `network inspect`/`ls` JSON of
    podman 4 carry lower-case `name`, `labels` and `subnets`."""
    subnets = []
    for sub in row.get("subnets") or []:
        subnets.append((str(sub.get("subnet")), sub.get("gateway")))
    return NetworkInfo(
        name=str(row.get("name") or row.get("Name") or ""),
        labels=dict(row.get("labels") or row.get("Labels") or {}),
        subnets=tuple(subnets),
    )


# Known podman failure texts on this kind of host, and what to do about them.
_HINTS: tuple[tuple[str, str], ...] = (
    (
        "cgroups in hybrid mode",
        "crun does not work on this host; install runc (apt-get install -y runc) "
        'and set `runtime = "runc"` under [engine] in /etc/containers/containers.conf (.ci/sim-setup.sh does both)',
    ),
    (
        "setrlimit",
        "podman's default ulimits exceed this machine's hard limits; set "
        'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"] under [containers] in '
        "/etc/containers/containers.conf (.ci/sim-setup.sh does it)",
    ),
    (
        "is being used by",
        "another podman network already uses this subnet; take that pod down "
        "(podctl sim down --pod NAME) or give this site a different management cidr",
    ),
    ("subnet", "check that no other podman network or host interface uses the site's management cidr"),
    ("iptables", "the container network needs iptables: apt-get install -y iptables"),
)


def explain_podman_failure(args: list[str], stderr: str) -> str:
    text = stderr.strip()
    lines = text.splitlines()
    tail = "\n".join(lines[-6:]) if lines else "(no output)"
    message = f"podman {' '.join(args[:2])} failed:\n  " + tail.replace("\n", "\n  ")
    for needle, hint in _HINTS:
        if needle in text:
            return f"{message}\nhint: {hint}"
    return message
