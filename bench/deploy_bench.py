#!/usr/bin/env python3
"""Deploy benchmark on the 4-node sim: full deploy and no-change re-run, with
podctl's settings and with `--ansible-defaults`, and the ratios.

Each mode starts from fresh nodes (`podctl sim down` + `sim up`), so both
full deploys install the same packages from the same mirror. Prints a table
and writes the figures as JSON (default bench/out/deploy_bench.json).

    .venv/bin/python bench/deploy_bench.py --site /tmp/podA/site.yaml --stages os,fabric,storage

Starts: the site's sim pod (podman containers); leaves it up, deployed with
the last mode. The machine's load matters: on the shared 2-core machines
report the figures with the load average this prints.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def podctl() -> list[str]:
    exe = shutil.which("podctl", path=str(Path(sys.executable).parent)) or shutil.which("podctl")
    return [exe] if exe else [sys.executable, "-m", "podctl.cli"]


def run(cmd: list[str], what: str, check: bool = True) -> float:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if check and proc.returncode != 0:
        sys.exit(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds


def deploy(site: str, stages: str, runs_dir: Path, defaults: bool) -> float:
    cmd = [*podctl(), "deploy", site, "--only", stages, "--runs-dir", str(runs_dir)]
    if defaults:
        cmd.append("--ansible-defaults")
    return run(cmd, "podctl deploy" + (" --ansible-defaults" if defaults else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", default=str(REPO / "inventory" / "sim" / "site.yaml"))
    parser.add_argument("--stages", default="os,fabric,storage")
    parser.add_argument("--out", default=str(REPO / "bench" / "out" / "deploy_bench.json"))
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="podctl-deploy-bench-") as tmp:
        for mode, defaults in (("podctl", False), ("ansible-defaults", True)):
            runs_dir = Path(tmp) / mode  # its own fact cache: nothing carries over between modes
            run([*podctl(), "sim", "down", "--site", args.site], "podctl sim down")
            run([*podctl(), "sim", "up", args.site], "podctl sim up")
            # SSH control sockets of the previous nodes would point at dead hosts.
            shutil.rmtree(f"/tmp/podctl-ssh-{os.getuid()}", ignore_errors=True)
            loads.append(os.getloadavg()[0])
            full = deploy(args.site, args.stages, runs_dir, defaults)
            loads.append(os.getloadavg()[0])
            rerun = deploy(args.site, args.stages, runs_dir, defaults)
            loads.append(os.getloadavg()[0])
            results[mode] = {"full_s": round(full, 1), "no_change_s": round(rerun, 1)}
            print(f"{mode:17s} full {full:6.1f} s   no-change re-run {rerun:6.1f} s", flush=True)

    fast, base = results["podctl"], results["ansible-defaults"]
    ratios = {
        "full": round(fast["full_s"] / base["full_s"], 2),
        "no_change": round(fast["no_change_s"] / base["no_change_s"], 2),
    }
    print(f"\n{'':17s} {'full (s)':>9s} {'no-change (s)':>14s}")
    for mode, r in results.items():
        print(f"{mode:17s} {r['full_s']:9.1f} {r['no_change_s']:14.1f}")
    print(f"{'podctl/defaults':17s} {ratios['full']:9.2f} {ratios['no_change']:14.2f}")
    goal = ratios["no_change"] <= 0.5
    print(f"goal (no-change re-run at most half the defaults' time): {'met' if goal else 'NOT met'}")
    print(f"load average during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "site": args.site,
                "stages": args.stages,
                "results": results,
                "ratios": ratios,
                "goal_met": goal,
                "load_average": [min(loads), max(loads)],
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
