"""Merge the container engine settings the sim needs into containers.conf.

Standard library only: `.ci/sim-setup.sh` runs this module before anything
else of podctl is importable.  The merge is line-based on purpose: it keeps
the operator's comments, ordering and unrelated settings, and only replaces
or adds the keys podctl needs (tomllib can read TOML but not write it back).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from podctl.core.fsio import atomic_write

CONTAINERS_CONF = Path("/etc/containers/containers.conf")

# Verified on the dev/CI VMs (see docs/environment.md): crun fails on this hybrid
# cgroup setup, and podman's default ulimits exceed the VM's hard limits.
REQUIRED_SETTINGS: dict[str, dict[str, str]] = {
    "containers": {"default_ulimits": '["nofile=1024:1024", "nproc=4096:4096"]'},
    "engine": {"runtime": '"runc"'},
    # Networks created without a subnet (Molecule's, anyone's) take the next free /24 of
    # podman's pool, which starts at 10.89.0.0 -- the sim site's management subnet. A pool
    # of its own keeps them off every 10.89.x network a sim pod declares.
    "network": {"default_subnet_pools": '[{"base" = "10.120.0.0/16", "size" = 24}]'},
}

_SECTION = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*=")


def merge_containers_conf(text: str, settings: dict[str, dict[str, str]] = REQUIRED_SETTINGS) -> str:
    """Return `text` with every `settings[section][key] = value` present.

    Existing assignments of those keys are replaced in place; missing keys are
    added right after their section header; missing sections are appended.
    A multi-line value (an array spread over lines) of a replaced key is
    removed along with its first line.
    """
    lines = text.splitlines()
    out: list[str] = []
    section: str | None = None
    pending: dict[str, dict[str, str]] = {s: dict(kv) for s, kv in settings.items()}
    skipping_continuation = False

    for line in lines:
        if skipping_continuation:
            # Drop the rest of a replaced multi-line array.
            if "]" in line.split("#", 1)[0]:
                skipping_continuation = False
            continue
        header = _SECTION.match(line)
        if header:
            section = header.group(1).strip()
            out.append(line)
            for key, value in pending.get(section, {}).items():
                out.append(f"{key} = {value}")
            # Keys are now written right after the header; existing
            # assignments further down in this section are dropped below.
            continue
        key_match = _KEY.match(line)
        if section in settings and key_match and key_match.group(1) in settings[section]:
            value_part = line.split("=", 1)[1].split("#", 1)[0]
            if value_part.count("[") > value_part.count("]"):
                skipping_continuation = True
            continue
        out.append(line)

    seen_sections = {m.group(1).strip() for m in map(_SECTION.match, lines) if m}
    for section_name, kv in pending.items():
        if section_name in seen_sections:
            continue
        if out and out[-1].strip():
            out.append("")
        out.append(f"[{section_name}]")
        out.extend(f"{key} = {value}" for key, value in kv.items())
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else CONTAINERS_CONF
    before = path.read_text() if path.exists() else ""
    after = merge_containers_conf(before)
    if after != before:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, after, mode=path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        print(f"updated {path}")
    else:
        print(f"{path} already has the sim settings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
