"""Where podctl keeps what outlives one command: the sim, and a site's secrets on the controller.

Layout (root = $PODCTL_STATE_DIR, else $XDG_STATE_HOME/podctl, else
~/.local/state/podctl):

    <root>/sim/image-cache/       debootstrap rootfs tarballs, keyed by recipe
    <root>/sim/<pod>/id_ed25519   the pod's SSH key (and .pub)
    <root>/sim/<pod>/ssh_config   `ssh -F` file naming every node
    <root>/sim/<pod>/mounts/<m>/  host folder standing in for shared mount <m>
    <root>/sim/<pod>/faults.json  faults injected and not yet cleared
    <root>/sim/<pod>/pod.json     the nodes `podctl sim up` made: host name -> address
    <root>/sim/<pod>/known_hosts  their SSH host keys, read from each container by podman

    <root>/sites/<site>/monitoring-password
                                  the password of Prometheus's and Alertmanager's login (user
                                  podctl), 0600 in a 0700 folder: the monitoring role writes it
                                  on the first deploy, `podctl status` reads it; the Prometheus
                                  host keeps only its bcrypt hash

Only `podctl sim up` writes pod.json. It is how podctl knows that a site's nodes are containers
it made (`sim_pod`): a site file cannot say so itself, so it cannot switch off what the sim alone
may do without (Slurm's cgroup limits on a cgroup v1 host).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from podctl.core.errors import PodctlError
from podctl.core.fsio import atomic_write
from podctl.core.model import Site


def state_root() -> Path:
    explicit = os.environ.get("PODCTL_STATE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "podctl"


def sim_root() -> Path:
    return state_root() / "sim"


def image_cache_dir() -> Path:
    return sim_root() / "image-cache"


def pod_dir(pod: str) -> Path:
    return sim_root() / pod


def ssh_key_path(pod: str) -> Path:
    return pod_dir(pod) / "id_ed25519"


def ssh_config_path(pod: str) -> Path:
    return pod_dir(pod) / "ssh_config"


def site_dir(site: str) -> Path:
    return state_root() / "sites" / site


def monitoring_password_path(site: str) -> Path:
    return site_dir(site) / "monitoring-password"


def mount_dir(pod: str, mount_name: str) -> Path:
    return pod_dir(pod) / "mounts" / mount_name


def faults_path(pod: str) -> Path:
    return pod_dir(pod) / "faults.json"


def pod_record_path(pod: str) -> Path:
    return pod_dir(pod) / "pod.json"


def known_hosts_path(pod: str) -> Path:
    return pod_dir(pod) / "known_hosts"


def write_pod_record(pod: str, nodes: dict[str, str]) -> None:
    pod_dir(pod).mkdir(parents=True, exist_ok=True)
    atomic_write(pod_record_path(pod), json.dumps({"nodes": nodes}, indent=1, sort_keys=True) + "\n", mode=0o600)


def sim_pod(site: Site) -> bool:
    """Whether every node of `site` is a container `podctl sim up` made for a pod of its name, at
    the address the site gives it (pod.json)."""
    try:
        made = json.loads(pod_record_path(site.name).read_text())["nodes"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(made, dict) and all(made.get(n.hostname) == str(n.address) for n in site.nodes)


def pod_known_hosts(site: Site) -> tuple[Path, ...]:
    """The known_hosts files that vouch for `site`'s nodes besides the user's and the system's: a sim
    pod's own (its containers' host keys, read through podman at `sim up`)."""
    path = known_hosts_path(site.name)
    return (path,) if sim_pod(site) and path.is_file() else ()


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the block, so
    two `sim up`/`down` on one pod, or two image builds, do not interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_faults(pod: str) -> dict[str, dict[str, object]]:
    path = faults_path(pod)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def write_faults(pod: str, faults: dict[str, dict[str, object]]) -> None:
    path = faults_path(pod)
    path.parent.mkdir(parents=True, exist_ok=True)
    cleaned = {node: f for node, f in sorted(faults.items()) if f}
    atomic_write(path, json.dumps(cleaned, indent=2, sort_keys=True) + "\n")


def private_key_for(site: Site, given: Path | None, first: str) -> Path | None:
    """The SSH key for root on the site's nodes: `given`, else for a sim pod (podctl.core.state.sim_pod:
    the sim's own record says so, never the site file) the key `podctl sim up` made, else None
    (ssh's own defaults). `first` is what to run when a site of emulated profiles has no sim pod."""
    if given is not None:
        return given
    if not sim_pod(site):
        if site.emulated:
            raise PodctlError(f"pod {site.name}: no sim pod of this site is up; bring it up first: {first}")
        return None
    key = ssh_key_path(site.name)
    if not key.is_file():
        raise PodctlError(f"pod {site.name}: no sim SSH key; bring the pod up first: {first}")
    return key
