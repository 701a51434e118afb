"""Where podctl keeps what outlives one command: the sim, and a site's secrets on the controller.

Layout (root = $PODCTL_STATE_DIR, else $XDG_STATE_HOME/podctl, else
~/.local/state/podctl):

    <root>/sim/image-cache/       debootstrap rootfs tarballs, keyed by recipe
    <root>/sim/<pod>/id_ed25519   the pod's SSH key (and .pub)
    <root>/sim/<pod>/ssh_config   `ssh -F` file naming every node
    <root>/sim/<pod>/mounts/<m>/  host folder standing in for shared mount <m>
    <root>/sim/<pod>/faults.json  faults injected and not yet cleared
    <root>/sites/<site>/monitoring-password
                                  the password of Prometheus's and Alertmanager's login (user
                                  podctl), 0600 in a 0700 folder: the monitoring role writes it
                                  on the first deploy, `podctl status` reads it; the Prometheus
                                  host keeps only its bcrypt hash
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .fsio import atomic_write


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
