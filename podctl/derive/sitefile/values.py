"""Checks of single site values: paths, addresses."""

from __future__ import annotations

import ipaddress
import re


def under(path: str, mountpoint: str) -> bool:
    return path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


# Folders of the operating system: nothing podctl mounts or installs may land in or under them.
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
)
# Folders where users other than root may write (world-writable temporary folders, users' homes):
# nothing root runs may come from under them.
UNTRUSTED_TREES = ("/tmp", "/var/tmp", "/dev/shm", "/home")
# Folders that hold the system's own files below them: taking one over hides them.
SYSTEM_FOLDERS = (
    "/",
    "/opt",
    "/root",
    "/srv",
    "/tmp",
    "/var",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/spool",
    "/var/tmp",
)


def system_path(path: str) -> str | None:
    """The system folder `path` (normalised) is or lies under, if any."""
    if path in SYSTEM_FOLDERS:
        return path
    return next((tree for tree in SYSTEM_TREES if under(path, tree)), None)


def written_as_address(text: str) -> bool:
    """Digits and dots (IPv4), or a colon (IPv6): meant as an address, not a name."""
    return ":" in text or re.fullmatch(r"[0-9.]+", text) is not None


def address_problem(text: str) -> str | None:
    """Why `text`, written as an IP address, is not one; None for valid addresses and for names."""
    if not written_as_address(text):
        return None
    try:
        (ipaddress.IPv6Address if ":" in text else ipaddress.IPv4Address)(text)
    except ValueError as exc:
        return str(exc)
    return None
