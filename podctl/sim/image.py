"""The node images: one per supported Debian release (podctl.core.platforms), from
debootstrap, a few files baked in, imported into podman.  No registry can be
reached here, so they are built locally.

An image carries the hash of its recipe and the key of its platform as
labels; `ensure_image` builds only when no image with the current hash
exists.  The debootstrap result is
cached as a tarball under the state dir, keyed by the debootstrap arguments
alone, so changing a baked-in file re-imports in seconds without another
download.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podctl.core import state
from podctl.core.platforms import Platform
from podctl.sim.errors import SimError
from podctl.sim.podman import LABEL_IMAGE, LABEL_PLATFORM, LABEL_RECIPE, Podman

IMAGE_REPO = "localhost/podctl-sim-node"
IMAGE_KIND = "sim-node"

# Bump when the build procedure changes in a way the recipe data does not show.
# 2: the platform label and the platform in the tag.
RECIPE_VERSION = 2

VARIANT = "minbase"
MIRROR = os.environ.get("PODCTL_SIM_MIRROR", "http://deb.debian.org/debian")
PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "python3",
    "sudo",
    "iproute2",
    "ca-certificates",
    # ps/pgrep/free: what playbooks and people reach for first on a node.
    "procps",
)

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_LOCAL_CAS = Path("/usr/local/share/ca-certificates")


def sources_list(codename: str) -> str:
    """The node's apt sources: the release, its updates and its security suite."""
    return (
        "# Plain http: the package mirror is reachable without the TLS proxy.\n"
        f"deb http://deb.debian.org/debian {codename} main\n"
        f"deb http://deb.debian.org/debian {codename}-updates main\n"
        f"deb http://deb.debian.org/debian-security {codename}-security main\n"
    )


PIP_CONF = """\
# HTTPS leaves this machine through a proxy whose CA is in the system bundle
# (copied from the host), not in pip's own certifi bundle.
[global]
cert = /etc/ssl/certs/ca-certificates.crt
"""

# Every node would otherwise share the host keys generated when the image
# was built; generate them on first boot instead.  Only ed25519 and ECDSA:
# RSA key generation took ~6 s of a 4-node boot on 2 cores.  `sshd -t` must
# run after the keys exist, so the unit's ExecStartPre list is replaced.
SSH_HOST_KEYS_DROPIN = """\
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c '[ -s /etc/ssh/ssh_host_ed25519_key ] || exec /usr/bin/ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key'
ExecStartPre=/bin/sh -c '[ -s /etc/ssh/ssh_host_ecdsa_key ] || exec /usr/bin/ssh-keygen -q -t ecdsa -N "" -f /etc/ssh/ssh_host_ecdsa_key'
ExecStartPre=/usr/sbin/sshd -t
"""

SSHD_HOST_KEYS = """\
# podctl sim: the host keys generated at first boot (no RSA key, see the
# ssh.service drop-in).
HostKey /etc/ssh/ssh_host_ed25519_key
HostKey /etc/ssh/ssh_host_ecdsa_key
"""

JOURNALD_DROPIN = """\
# The journal lives on a tmpfs in the container: keep idle nodes small.
[Journal]
Storage=volatile
RuntimeMaxUse=16M
"""

# systemd in a container on this host's cgroup v1 (hybrid) hierarchy does not
# always learn that a stopped unit's cgroup became empty, so a stop that has
# to wait for leftover processes sits out the whole timeout (90 s by default).
SYSTEM_CONF_DROPIN = """\
[Manager]
DefaultTimeoutStopSec=10s
"""

# Units that make no sense in a container, or that would hold the apt lock
# at random moments while a playbook wants it.  A unit a release lacks
# (e2scrub_reap on trixie's minbase, which has no e2fsprogs; sshd-keygen on
# bookworm) is masked all the same: the link to /dev/null is harmless.
MASKED_UNITS: tuple[str, ...] = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "getty@tty1.service",
    "systemd-remount-fs.service",
    "e2scrub_reap.service",
    # trixie: `ssh-keygen -A` at first boot, RSA key included; the ssh.service
    # drop-in makes the ed25519 and ECDSA keys instead.
    "sshd-keygen.service",
)

REMOVED_PATHS: tuple[str, ...] = (
    "etc/ssh/ssh_host_*",
    "var/cache/apt/archives/*.deb",
    "var/cache/apt/*.bin",
    "var/lib/apt/lists/*",
    "var/log/*.log",
    # systemd copies this into an empty /etc/machine-id at boot, which would
    # give every node the id of the build; without it each node gets its own.
    "var/lib/dbus/machine-id",
)


@dataclass(frozen=True)
class BakedFile:
    path: str  # absolute path inside the image
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Recipe:
    platform: str  # podctl.core.platforms key: debian-13
    suite: str
    variant: str
    mirror: str
    packages: tuple[str, ...]
    files: tuple[BakedFile, ...]
    masked_units: tuple[str, ...]
    removed: tuple[str, ...]
    version: int = RECIPE_VERSION
    extra: dict[str, str] = field(default_factory=dict)

    def debootstrap_args(self) -> list[str]:
        return [
            f"--variant={self.variant}",
            f"--include={','.join(self.packages)}",
            "--components=main",
            self.suite,
        ]

    def rootfs_key(self) -> str:
        """What the debootstrap tarball depends on."""
        payload = {"args": self.debootstrap_args(), "mirror": self.mirror}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def digest(self) -> str:
        """What the image depends on: debootstrap inputs plus every baked file."""
        payload = {
            "version": self.version,
            "platform": self.platform,
            "rootfs": self.rootfs_key(),
            "files": [[f.path, f.mode, hashlib.sha256(f.content).hexdigest()] for f in self.files],
            "masked": list(self.masked_units),
            "removed": list(self.removed),
            "extra": self.extra,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    @property
    def tag(self) -> str:
        return f"{IMAGE_REPO}:{self.platform}-{self.digest()[:12]}"


def host_ca_files(bundle: Path = HOST_CA_BUNDLE, local_dir: Path = HOST_LOCAL_CAS) -> tuple[BakedFile, ...]:
    """The host's CA bundle, and its locally added CAs so that the node's own
    update-ca-certificates (run by any later package install) keeps them."""
    files: list[BakedFile] = []
    if bundle.is_file():
        files.append(BakedFile("/etc/ssl/certs/ca-certificates.crt", bundle.read_bytes()))
    if local_dir.is_dir():
        for cert in sorted(local_dir.rglob("*.crt")):
            rel = cert.relative_to(local_dir)
            files.append(BakedFile(f"/usr/local/share/ca-certificates/{rel}", cert.read_bytes()))
    return tuple(files)


def recipe_for(platform: Platform, ca_files: tuple[BakedFile, ...] | None = None) -> Recipe:
    """The node image of one release; `ca_files` None reads the host's CAs."""
    files = (
        BakedFile("/etc/apt/sources.list", sources_list(platform.codename).encode()),
        BakedFile("/etc/pip.conf", PIP_CONF.encode()),
        BakedFile("/etc/systemd/system/ssh.service.d/podctl-host-keys.conf", SSH_HOST_KEYS_DROPIN.encode()),
        BakedFile("/etc/ssh/sshd_config.d/podctl-sim-host-keys.conf", SSHD_HOST_KEYS.encode()),
        BakedFile("/etc/systemd/journald.conf.d/podctl-sim.conf", JOURNALD_DROPIN.encode()),
        BakedFile("/etc/systemd/system.conf.d/podctl-sim.conf", SYSTEM_CONF_DROPIN.encode()),
        # Empty: systemd gives each container its own id at boot.
        BakedFile("/etc/machine-id", b""),
        *(host_ca_files() if ca_files is None else ca_files),
    )
    return Recipe(
        platform=platform.key,
        suite=platform.codename,
        variant=VARIANT,
        mirror=MIRROR,
        packages=PACKAGES,
        files=files,
        masked_units=MASKED_UNITS,
        removed=REMOVED_PATHS,
    )


def find_image(podman: Podman, recipe: Recipe) -> str | None:
    rows = podman.images(["--filter", f"label={LABEL_RECIPE}={recipe.digest()}"])
    for row in rows:
        names = row.get("Names") or []
        if recipe.tag in names:
            return recipe.tag
    if rows:
        # Same recipe under another name (e.g. retagged): use it by id.
        return str(rows[0].get("Id"))
    return None


Progress = Callable[[str], None]


def ensure_image(
    podman: Podman, recipe: Recipe, progress: Progress, force: bool = False, prune: bool = True
) -> tuple[str, bool]:
    """Return (image reference, built?).  Builds when no image carries the
    recipe's hash, or when `force`.  After a build, node images of other
    recipes that no container uses are removed unless `prune` is False (the
    benchmark builds a throwaway recipe and must not prune the real one)."""
    if not force:
        found = find_image(podman, recipe)
        if found:
            return found, False
    cache = state.image_cache_dir()
    with state.locked(cache / ".lock"):
        if not force:
            # Another process may have built it while we waited for the lock.
            found = find_image(podman, recipe)
            if found:
                return found, False
        build_image(podman, recipe, cache, progress)
    if prune:
        prune_old_images(podman, [recipe])
    return recipe.tag, True


def build_image(podman: Podman, recipe: Recipe, cache: Path, progress: Progress) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / f"build-{os.getpid()}"
    rootfs = work / "rootfs"
    tarball = cache / f"rootfs-{recipe.rootfs_key()[:16]}.tar"
    shutil.rmtree(work, ignore_errors=True)
    rootfs.mkdir(parents=True)
    try:
        if tarball.exists():
            progress(f"unpacking cached debootstrap rootfs {tarball.name}")
            _run(["tar", "-C", str(rootfs), "--numeric-owner", "-xpf", str(tarball)], "unpacking the cached rootfs")
        else:
            debootstrap(recipe, rootfs, cache / "debs", progress)
            progress("caching the debootstrap rootfs")
            partial = tarball.with_suffix(".partial")
            _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."], "caching the rootfs")
            partial.replace(tarball)
        progress("baking in sources.list, CA certificates and systemd settings")
        customize(rootfs, recipe)
        progress(f"importing into podman as {recipe.tag}")
        import_rootfs(podman, rootfs, recipe)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def debootstrap(recipe: Recipe, rootfs: Path, debs: Path, progress: Progress) -> None:
    debs.mkdir(parents=True, exist_ok=True)
    cmd = ["debootstrap", f"--cache-dir={debs}", *recipe.debootstrap_args(), str(rootfs), recipe.mirror]
    progress("debootstrap " + " ".join(recipe.debootstrap_args()))
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-15:]
        if line.startswith(
            (
                "I: Retrieving",
                "I: Validating",
                "I: Extracting",
                "I: Unpacking",
                "I: Configuring",
                "I: Installing",
                "I: Base system",
            )
        ):
            progress(f"debootstrap ({time.monotonic() - started:.0f} s): {line[3:]}")
    if proc.wait() != 0:
        log = rootfs / "debootstrap" / "debootstrap.log"
        log_tail = ""
        if log.exists():
            log_tail = "\n  ".join(log.read_text(errors="replace").splitlines()[-10:])
        raise SimError(
            f"debootstrap of {recipe.suite} from {recipe.mirror} failed:\n  "
            + "\n  ".join(tail[-8:])
            + (f"\n  debootstrap.log:\n  {log_tail}" if log_tail else "")
            + "\nhint: check that the mirror is reachable over http (set PODCTL_SIM_MIRROR to use another)"
        )


def _inside(rootfs: Path, path: str) -> Path:
    return rootfs / path.lstrip("/")


def customize(rootfs: Path, recipe: Recipe) -> None:
    for pattern in recipe.removed:
        for victim in rootfs.glob(pattern):
            if victim.is_dir() and not victim.is_symlink():
                shutil.rmtree(victim)
            else:
                victim.unlink()
    for baked in recipe.files:
        target = _inside(rootfs, baked.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_bytes(baked.content)
        target.chmod(baked.mode)
    for unit in recipe.masked_units:
        link = _inside(rootfs, f"/etc/systemd/system/{unit}")
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to("/dev/null")
    ssh_dir = _inside(rootfs, "/root/.ssh")
    ssh_dir.mkdir(parents=True, exist_ok=True)
    ssh_dir.chmod(0o700)


def import_rootfs(podman: Podman, rootfs: Path, recipe: Recipe) -> None:
    digest = recipe.digest()
    tar = subprocess.Popen(
        ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", "-", "."],
        stdout=subprocess.PIPE,
    )
    cmd = podman.command(
        [
            "import",
            "--change",
            f"LABEL {LABEL_RECIPE}={digest}",
            "--change",
            f"LABEL {LABEL_IMAGE}={IMAGE_KIND}",
            "--change",
            f"LABEL {LABEL_PLATFORM}={recipe.platform}",
            "--change",
            'CMD ["/sbin/init"]',
            "--change",
            "STOPSIGNAL SIGRTMIN+3",
            "-",
            recipe.tag,
        ]
    )
    imp = subprocess.run(cmd, stdin=tar.stdout, capture_output=True, text=True, check=False)
    assert tar.stdout is not None
    tar.stdout.close()
    if tar.wait() != 0 or imp.returncode != 0:
        raise SimError(f"podman import of the {recipe.platform} node image failed:\n  {imp.stderr.strip()}")


def prune_old_images(podman: Podman, current: Iterable[Recipe]) -> list[str]:
    """Remove the node images of older recipes (and untagged ones of the current recipe) of each
    `current` recipe's platform, once that recipe's image exists under a name; never another
    platform's image, nor one a container uses (even a stopped one: podman would refuse too, but
    the sim says so itself).  Returns the removed ids."""
    wanted = {recipe.platform: recipe.digest() for recipe in current}
    nodes = [
        row for row in podman.images(["--filter", f"label={LABEL_IMAGE}={IMAGE_KIND}"]) if _kind(row) == IMAGE_KIND
    ]
    present = {(image_platform(row), _recipe(row)) for row in nodes if row.get("Names")}
    in_use = {str(row.get("ImageID", "")) for row in podman.json(["ps", "-a", "--format", "json"]) or []}
    removed = []
    for row in nodes:
        platform, image_id = image_platform(row), str(row.get("Id"))
        if platform not in wanted or (platform, wanted[platform]) not in present:
            continue
        # The current recipe's image is kept, but not the untagged one a `--force` rebuild left.
        if (_recipe(row) == wanted[platform] and row.get("Names")) or image_id in in_use:
            continue
        if podman.run(["rmi", image_id], check=False).returncode == 0:
            removed.append(image_id)
    return removed


def _kind(row: dict[str, Any]) -> str:
    return str((row.get("Labels") or {}).get(LABEL_IMAGE, ""))


def _recipe(row: dict[str, Any]) -> str:
    return str((row.get("Labels") or {}).get(LABEL_RECIPE, ""))


def image_platform(row: dict[str, Any]) -> str:
    """The platform key an image is labelled with; "" for one without the label.  Those (from
    before one image per release, or from another checkout's older podctl on the same host) are
    never pruned: nothing tells which release they hold."""
    return str((row.get("Labels") or {}).get(LABEL_PLATFORM) or "")


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SimError(f"{what} failed: {proc.stderr.strip()}")
