"""The man pages each supported release's Slurm ships, as Debian packages them: this machine's
own for the host's release (CI's host is Debian 12: Slurm 22.05), the consumers image's for
Debian 13 (Slurm 24.11, .ci/consumers-image.sh). `make slurm-keys` writes the keys they describe
into podctl/core/slurm-keys.json (python -m tests.helpers.slurm_man);
tests/deploy/test_slurm_settings.py reads them again and compares."""

from __future__ import annotations

import json
import subprocess
import sys

from podctl.core import platforms, slurmkeys
from tests.helpers.repo import REPO

MAN5 = "/usr/share/man/man5"
PACKAGES = "slurm-client"  # its version names where the pages come from


def _consumers_image() -> str:
    return subprocess.run(
        ["bash", str(REPO / ".ci" / "consumers-image.sh"), "--tag"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _read(release: platforms.SlurmVersion) -> tuple[str, dict[str, str]]:
    """(where the pages came from, page -> roff) for `release`'s Slurm."""
    pages = sorted({page for page, _ in slurmkeys.SOURCES.values()})
    script = f"dpkg-query -W -f='${{Version}}\\n' {PACKAGES}; " + "; ".join(
        f"echo '=== {page}'; zcat {MAN5}/{page}.gz" for page in pages
    )
    here = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
    if here.returncode != 0 or not here.stdout.startswith(f"{release}."):
        here = subprocess.run(
            ["podman", "run", "--rm", "--network=none", _consumers_image(), "sh", "-c", script],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    version, *parts = here.stdout.split("=== ")
    version = version.strip()
    if not version.startswith(f"{release}."):
        raise SystemExit(f"no Slurm {release} here or in the consumers image (found {version})")
    texts = dict(part.split("\n", 1) for part in parts)
    return f"slurm-client {version}", texts


def table() -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for platform in platforms.SUPPORTED:
        source, texts = _read(platform.slurm)
        entry: dict[str, object] = {"source": f"{source}: " + ", ".join(sorted(texts))}
        for where, (page, sections) in slurmkeys.SOURCES.items():
            entry[where] = slurmkeys.keys_from_man(texts[page], sections)
        out[str(platform.slurm)] = entry
    return out


def render(data: dict[str, dict[str, object]]) -> str:
    return json.dumps(data, indent=1) + "\n"


if __name__ == "__main__":
    target = REPO / "podctl" / "core" / slurmkeys.KEYS_FILE
    target.write_text(render(table()))
    print(f"wrote {target.relative_to(REPO)}", file=sys.stderr)
