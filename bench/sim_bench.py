"""Benchmark: the simulated pod's node image build, `sim up`, and idle memory.

Prints:
  - node image build time, cold (empty debootstrap and .deb caches) and warm
    (debootstrap tarball cached, so only the bake-in and podman import run);
  - `podctl sim up` wall time for a 4-node pod with a cached image, as a user
    runs it (its own process, interpreter start included), median of --repeat
    runs from no containers, plus a second `up` on a healthy pod (no-op);
  - memory per idle node (cgroup usage and anonymous RSS), after --settle s.
Goal: a 4-node pod up and reachable in under 30 s with a cached image.

Uses its own pod (`simbench`, 10.89.250.0/24, from inventory/sim/site.yaml) and,
for the cold build, a throwaway recipe and state dir, so the real image,
its caches and other pods are left alone.  Needs root, podman, runc,
debootstrap (.ci/sim-setup.sh).

    .venv/bin/python bench/sim_bench.py [--repeat 3] [--skip-cold]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from podctl import platforms, state  # noqa: E402
from podctl.sim import image  # noqa: E402
from podctl.sim.health import ssh_answers  # noqa: E402
from podctl.sim.podman import Podman, pod_filter  # noqa: E402
from podctl.sim.preflight import preflight  # noqa: E402

POD = "simbench"
SUBNET_FROM, SUBNET_TO = "10.89.0.", "10.89.250."
PODCTL = [sys.executable, "-m", "podctl.cli"]


def bench_site(tmp: Path) -> Path:
    text = (REPO / "inventory/sim/site.yaml").read_text()
    text = text.replace("name: sim\n", f"name: {POD}\n").replace(SUBNET_FROM, SUBNET_TO)
    text = text.replace("../../podctl/schema", str(REPO / "podctl/schema"))
    path = tmp / f"{POD}.yaml"
    path.write_text(text)
    return path


def build_times(podman: Podman, tmp: Path) -> tuple[float, float]:
    """Cold and warm build of a throwaway recipe (the bench site's release: same packages and
    files, different hash) under a throwaway state dir."""
    base = image.recipe_for(platforms.DEFAULT)
    recipe = dataclasses.replace(base, extra={"bench": str(time.time_ns())})
    old = os.environ.get("PODCTL_STATE_DIR")
    os.environ["PODCTL_STATE_DIR"] = str(tmp / "state")
    try:
        started = time.perf_counter()
        image.ensure_image(podman, recipe, lambda _msg: None, prune=False)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        image.ensure_image(podman, recipe, lambda _msg: None, force=True, prune=False)
        warm = time.perf_counter() - started
    finally:
        if old is None:
            os.environ.pop("PODCTL_STATE_DIR", None)
        else:
            os.environ["PODCTL_STATE_DIR"] = old
        podman.run(["rmi", "--force", recipe.tag], check=False)
    return cold, warm


def timed_cli(args: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(PODCTL + args, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"podctl {' '.join(args)} failed:\n{proc.stderr}")
    return wall


def node_memory(podman: Podman) -> list[tuple[str, float, float]]:
    """(node, cgroup usage MiB, anonymous RSS MiB) per container of the pod."""
    rows = []
    for c in podman.containers(pod_filter(POD)):
        cgroup = podman.run(["inspect", "--format", "{{.State.CgroupPath}}", c.name]).stdout.strip()
        v1 = Path("/sys/fs/cgroup/memory") / cgroup.lstrip("/")
        v2 = Path("/sys/fs/cgroup") / cgroup.lstrip("/")
        if (v1 / "memory.usage_in_bytes").exists():
            usage = int((v1 / "memory.usage_in_bytes").read_text())
            stat = dict(line.split() for line in (v1 / "memory.stat").read_text().splitlines())
            anon = int(stat.get("total_rss", stat.get("rss", 0)))
        else:
            usage = int((v2 / "memory.current").read_text())
            stat = dict(line.split() for line in (v2 / "memory.stat").read_text().splitlines())
            anon = int(stat.get("anon", 0))
        rows.append((c.node, usage / 2**20, anon / 2**20))
    return sorted(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="cold `sim up` runs (median reported)")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold image build (~80 s)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds idle before sampling memory")
    args = parser.parse_args()

    tools = preflight("image")
    podman = Podman(tools.podman, tools.runc)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        figures: list[tuple[str, str]] = []
        if not args.skip_cold:
            cold, warm = build_times(podman, tmp)
            figures += [
                ("image build, cold (debootstrap + import)", f"{cold:.1f} s"),
                ("image build, rootfs cached (bake + import)", f"{warm:.1f} s"),
            ]

        # The real image of the bench site's release (it names none: the default), so `up` below
        # finds it cached.
        image.ensure_image(podman, image.recipe_for(platforms.DEFAULT), lambda _msg: None)
        site = bench_site(tmp)
        timed_cli(["sim", "down", "--pod", POD])
        ups = []
        for _ in range(args.repeat):
            ups.append(timed_cli(["sim", "up", str(site)]))
            if len(ups) < args.repeat:
                timed_cli(["sim", "down", "--pod", POD])
        noop = timed_cli(["sim", "up", str(site)])
        key = state.ssh_key_path(POD)
        containers = podman.containers(pod_filter(POD))
        known_hosts = state.known_hosts_path(POD)
        reachable = sum(ssh_answers(key, known_hosts, c.labels["io.podctl.address"])[0] for c in containers)
        figures += [
            (f"sim up, 4 nodes, cached image (median of {len(ups)})", f"{statistics.median(ups):.1f} s"),
            ("sim up, 4 nodes, runs", ", ".join(f"{u:.1f}" for u in ups) + " s"),
            ("sim up again on a healthy pod (no-op)", f"{noop:.1f} s"),
            ("nodes reachable over SSH afterwards", f"{reachable}/{len(containers)}"),
        ]

        deadline = time.monotonic() + args.settle
        while time.monotonic() < deadline:  # let boot-time work finish before sampling
            time.sleep(0.5)
        mem = node_memory(podman)
        figures += [
            ("memory per idle node, cgroup usage (mean)", f"{statistics.mean(m[1] for m in mem):.1f} MiB"),
            ("memory per idle node, anonymous RSS (mean)", f"{statistics.mean(m[2] for m in mem):.1f} MiB"),
        ]
        figures += [(f"  {node}: usage / anon", f"{u:.1f} / {a:.1f} MiB") for node, u, a in mem]
        timed_cli(["sim", "down", "--pod", POD, "--purge"])

    width = max(len(name) for name, _ in figures)
    for name, value in figures:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
