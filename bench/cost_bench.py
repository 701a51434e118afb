#!/usr/bin/env python3
"""Cost curves: how deploy and validate grow with the pod, measured on sim pods of N nodes.

For each N (default 4, 8, 16, 32: one head node and N-1 compute nodes, the built-in sim site
grown), on a fresh pod:

- full deploy, stage by stage (`podctl deploy SITE --only STAGE`, in the site playbook's order);
- a no-change re-run of the whole site (`podctl deploy SITE`);
- validate, suite by suite (`podctl validate SITE --suite S`), then once with a fault injected
  (one compute node's network throttled to 100 Mb/s): the healthy pod must certify and the
  fault must be caught.

With `--reruns-only`: one whole deploy, a no-change re-run (by the nodes' records of that deploy,
podctl.runtime.converged) and one with `--full` (every task), and no validation.

Each step records wall seconds, the controller's CPU seconds (user + system of podctl and
every process it waited for: ansible-playbook and its forks, ssh, the validate fan-out) and
the controller's peak resident memory (the largest of those processes). The figures go to
bench/results/<date>-cost-bench.json, with the host's cores and load. `--fit` reads such a file,
fits each step's cost against N (least squares on log-log: the exponent says what grows faster
than linear), models a 1,344-node pod and plots the curves (bench/results/<date>-cost-curves.png).

    .venv/bin/python bench/cost_bench.py [--sizes 4,8,16,32] [--out FILE]
    .venv/bin/python bench/cost_bench.py --fit bench/results/2026-12-01-cost-bench.json [MORE.json ...]

Needs root, podman and the sim image (make sim-setup). Uses its own pods (`costN`, 10.89.2xx.0/24)
and removes each after measuring it. Long: about two hours on a 2-core host; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGES = ("os", "fabric", "storage", "slurm", "monitoring", "validation-tools")
SUITES = ("conformance", "health", "burnin", "collectives", "smoke")


def podctl() -> list[str]:
    exe = shutil.which("podctl", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "podctl.cli"]


def site_for(nodes: int, folder: Path) -> Path:
    """inventory/sim/site.yaml grown to 1 head + nodes-1 compute nodes, as pod costN on its own subnet."""
    text = (REPO / "inventory" / "sim" / "site.yaml").read_text()
    last = nodes - 1
    text = text.replace("node[01-03]", f"node[01-{last:02d}]")
    text = re.sub(r"(?m)^  name: sim$", f"  name: cost{nodes}", text)
    text = text.replace("10.89.0.", f"10.89.{200 + nodes}.").replace("172.30.0.0/16", f"172.{25 + nodes // 8}.0.0/16")
    text = text.replace("../../.cache/validation-wheels", str(REPO / ".cache" / "validation-wheels"))
    text = re.sub(r"(?m)^# yaml-language-server.*\n", "", text)
    path = folder / f"cost{nodes}.yaml"
    path.write_text(text)
    return path


def measured(cmd: list[str], timeout: float, output: Path | None = None) -> dict[str, float | int | str]:
    """Run `cmd`; its wall seconds, CPU seconds and peak RSS (of it and what it waited for). With
    `output`, everything it printed is kept in that file."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.monotonic() - started
    if output is not None:
        output.write_text(proc.stdout + proc.stderr)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        # ru_maxrss of children is the largest child's, in KiB, over the process's life: a lower bound per step
        "peak_rss_mib": round(after.ru_maxrss / 1024, 1),
        "tail": (proc.stdout[-600:] + proc.stderr[-600:]) if proc.returncode not in (0, 1) else proc.stdout[-300:],
        "phase_wall_s": phase_walls(proc.stdout + proc.stderr),
    }


_PROGRESS = re.compile(r"^\s*(?P<t>\d+(?:\.\d+)?)s (?P<phase>[a-z]+):", re.M)


def phase_walls(text: str) -> dict[str, float]:
    """Seconds per suite of one validate run, from its progress lines ('  79.3s health: ...'):
    from a suite's first line to the next suite's first line (or its own last line)."""
    starts: dict[str, float] = {}
    last = 0.0
    for m in _PROGRESS.finditer(text):
        t = float(m.group("t"))
        last = max(last, t)
        if m.group("phase") in SUITES:
            starts.setdefault(m.group("phase"), t)
    order = sorted(starts.items(), key=lambda kv: kv[1])
    return {
        phase: round((order[i + 1][1] if i + 1 < len(order) else last) - t, 1) for i, (phase, t) in enumerate(order)
    }


def bench_size(
    nodes: int,
    folder: Path,
    log,
    per_suite: bool = True,
    save=lambda out: None,
    reruns_only: bool = False,
    every_task: bool = False,
) -> dict:
    site = site_for(nodes, folder)
    pod = f"cost{nodes}"
    out: dict = {"nodes": nodes, "compute": nodes - 1, "steps": {}}
    step = out["steps"]
    try:
        step["sim_up"] = measured([*podctl(), "sim", "up", str(site), "--timeout", "900"], 1800)
        log(nodes, "sim up", step["sim_up"])
        runs = folder / f"runs{nodes}"
        if reruns_only:
            # One whole deploy (every stage in one run), then a no-change re-run by the nodes'
            # records (podctl.runtime.converged) and, with every_task, one that runs every task (--full).
            steps: list[tuple[str, list[str]]] = [("deploy:whole", []), ("deploy:no-change", [])]
            for name, extra in steps + ([("deploy:no-change-every-task", ["--full"])] if every_task else []):
                step[name] = measured([*podctl(), "deploy", str(site), "--runs-dir", str(runs), *extra], 5400)
                log(nodes, name, step[name])
                save(out)
            return out
        for stage in STAGES:
            step[f"deploy:{stage}"] = measured(
                [*podctl(), "deploy", str(site), "--only", stage, "--runs-dir", str(runs)], 5400
            )
            log(nodes, f"deploy {stage}", step[f"deploy:{stage}"])
        step["deploy:no-change"] = measured([*podctl(), "deploy", str(site), "--runs-dir", str(runs)], 5400)
        log(nodes, "no-change re-run", step["deploy:no-change"])
        for suite in SUITES if per_suite else ():
            report = folder / f"report{nodes}-{suite}"
            step[f"validate:{suite}"] = measured(
                [*podctl(), "validate", str(site), "--suite", suite, "--report", str(report)], 5400
            )
            log(nodes, f"validate {suite}", step[f"validate:{suite}"])
        step["validate:all"] = measured(
            [*podctl(), "validate", str(site), "--report", str(folder / f"report{nodes}-all")], 7200
        )
        log(nodes, "validate all suites", step["validate:all"])
        victim = f"node{nodes // 2:02d}"
        subprocess.run([*podctl(), "sim", "fault", "--pod", pod, victim, "--rate", "100mbit"], check=True)
        try:
            report = folder / f"report{nodes}-fault"
            step["validate:fault"] = measured(
                [*podctl(), "validate", str(site), "--suite", "collectives", "--report", str(report)], 5400
            )
            data = json.loads((report / "report.json").read_text())
            step["validate:fault"]["victim"] = victim
            step["validate:fault"]["failures"] = {k: v[:2] for k, v in data.get("failures", {}).items()}
            log(nodes, f"validate with {victim} at 100 Mb/s", step["validate:fault"])
        finally:
            subprocess.run([*podctl(), "sim", "fault", "--pod", pod, victim, "--clear"], check=False)
        save(out)  # before the pod goes down: removing a large pod takes minutes
    finally:
        subprocess.run([*podctl(), "sim", "down", "--pod", pod], capture_output=True, check=False)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="4,8,16,32")
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--no-per-suite",
        action="store_true",
        help="validate all suites once, not also suite by suite (its progress lines still time each suite)",
    )
    p.add_argument(
        "--reruns-only",
        action="store_true",
        help="one whole deploy, then a no-change re-run by the records (and with --every-task one with --full); "
        "no validation",
    )
    p.add_argument("--every-task", action="store_true", help="with --reruns-only: also a no-change re-run with --full")
    p.add_argument("--fit", type=Path, nargs="+", help="fit and plot results files instead of measuring")
    args = p.parse_args()
    if args.fit:
        return fit(args.fit)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    out_path = args.out or REPO / "bench" / "results" / f"{stamp}-cost-bench.json"
    results = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host_cores": os.cpu_count(),
        "host_memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "sizes": [],
    }
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"cost-bench-{os.getpid()}"
    work.mkdir(parents=True)

    def log(nodes: int, what: str, m: dict) -> None:
        load = os.getloadavg()[0]
        print(f"N={nodes:>3} {what:<28} rc {m['rc']}  wall {m['wall_s']:>7.1f} s  cpu {m['cpu_s']:>7.1f} s  "
              f"peak {m['peak_rss_mib']:>6.0f} MiB  load {load:.1f}", flush=True)  # fmt: skip

    def save(out: dict) -> None:  # a partial run keeps its figures: the sizes done, and this one
        out_path.write_text(json.dumps({**results, "sizes": [*results["sizes"], out]}, indent=1) + "\n")

    for nodes in [int(n) for n in args.sizes.split(",")]:
        results["sizes"].append(
            bench_size(nodes, work, log, not args.no_per_suite, save, args.reruns_only, args.every_task)
        )
    print(f"wrote {out_path}")
    return 0


# -- fitting ------------------------------------------------------------------------------------


def _loglog(ns: list[float], ys: list[float]) -> tuple[float, float]:
    """y = a * n^b by least squares on logs: (a, b)."""
    xs, ls = [math.log(n) for n in ns], [math.log(max(y, 1e-3)) for y in ys]
    mx, my = sum(xs) / len(xs), sum(ls) / len(ls)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ls, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return math.exp(my - b * mx), b


def work_and_wait(points: list[tuple[int, dict]]) -> dict[str, float] | None:
    """Split a step's controller CPU into work per node and waiting per wall second: least squares of
    cpu = a * N + b * wall over the sizes (3 or more). On the sim the wall grows faster than N (the
    nodes share the host's cores) and Ansible's controller polls while it waits, so CPU per node at
    the largest pod mixes the two; a real pod's wall per wave does not grow with N."""
    if len(points) < 3:
        return None
    ns = [float(n) for n, _ in points]
    walls = [m["wall_s"] for _, m in points]
    cpus = [m["cpu_s"] for _, m in points]
    snn = sum(n * n for n in ns)
    sww = sum(w * w for w in walls)
    snw = sum(n * w for n, w in zip(ns, walls, strict=True))
    snc = sum(n * c for n, c in zip(ns, cpus, strict=True))
    swc = sum(w * c for w, c in zip(walls, cpus, strict=True))
    det = snn * sww - snw * snw
    if abs(det) < 1e-9:
        return None
    a = (snc * sww - swc * snw) / det
    b = (swc * snn - snc * snw) / det
    residual = max(abs(a * n + b * w - c) / c for n, w, c in zip(ns, walls, cpus, strict=True))
    return {
        "work_cpu_s_per_node": round(a, 2),
        "wait_cpu_s_per_wall_s": round(b, 3),
        "split_max_error": round(residual, 2),
    }


def load_sizes(paths: list[Path]) -> list[dict]:
    """The measured sizes of one or more results files, smallest pod first."""
    return sorted((z for p in paths for z in json.loads(p.read_text())["sizes"]), key=lambda z: z["nodes"])


def fit(paths: list[Path]) -> int:
    """Fit the sizes of one or more results files (merged, smallest pod first); the fit and the plot
    are written next to the last file."""
    sizes = load_sizes(paths)
    path = paths[-1]
    steps = sorted({s for size in sizes for s in size["steps"]}, key=lambda s: (s.split(":")[0], s))
    print(f"{'step':<26} {'N':>24} {'exponent wall':>14} {'exponent cpu':>13} {'cpu s per node':>15}")
    fits = {}
    for step in steps:
        points = [
            (z["nodes"], z["steps"][step]) for z in sizes if step in z["steps"] and z["steps"][step]["rc"] in (0, 1)
        ]
        if len(points) < 2:
            continue
        ns = [float(n) for n, _ in points]
        _, bw = _loglog(ns, [m["wall_s"] for _, m in points])
        _, bc = _loglog(ns, [m["cpu_s"] for _, m in points])
        per_node = points[-1][1]["cpu_s"] / points[-1][0]
        fits[step] = {"wall_exponent": round(bw, 2), "cpu_exponent": round(bc, 2), "cpu_s_per_node": round(per_node, 2)}
        split = work_and_wait(points)
        if split is not None:
            fits[step].update(split)
        print(f"{step:<26} {','.join(str(int(n)) for n in ns):>24} {bw:>14.2f} {bc:>13.2f} {per_node:>15.2f}")
    path.with_suffix(".fit.json").write_text(json.dumps(fits, indent=1) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, label in ((axes[0], "wall_s", "wall seconds"), (axes[1], "cpu_s", "controller CPU seconds")):
        for step in steps:
            points = [(z["nodes"], z["steps"][step][key]) for z in sizes if step in z["steps"]]
            if len(points) >= 2 and not step.startswith("sim_up"):
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", ms=3, label=step)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("nodes in the sim pod")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=6, ncol=2)
    out = path.with_name(path.name.replace(".json", "").replace("cost-bench", "cost-curves") + ".png")
    fig.savefig(out, dpi=110, bbox_inches="tight")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
