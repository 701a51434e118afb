#!/usr/bin/env python3
"""Deploy benchmark on a sim pod (issue 33): the calibration, podctl now (Mitogen, and with
--no-mitogen), podctl as it was before the speed work, and Ansible's defaults, each for a full
deploy, a no-change re-run and the drift check, in seconds and as a ratio to the calibration.

The calibration is plain Ansible with its defaults and 4 forks running
`ansible -i INV all -m command -a true` 10 times against the same pod (the same key and host
keys); it is run before the first mode and after the last, and the ratios use the mean of the two.
Each mode starts from fresh nodes (`podctl sim down` + `sim up`), so every full deploy installs
the same packages from the same mirror. Absolute times swing more than 2x between these 2-core
hosts; the ratios, measured side by side in one run, are what to compare (docs/scale.md).

    .venv/bin/python bench/deploy_bench.py --site inventory/sim/site.yaml \\
        --before 573c835 --out bench/results/deploy-bench-DATE.json

`--before REV` builds podctl at that git revision into a virtualenv of its own (with its deploy
extra) and benchmarks it as the "before" mode. Besides the seconds, each run's slowest tasks
(summed over hosts, from ansible-runner's events) are recorded: the profile docs/scale.md quotes.
Leaves the pod up, deployed by the last mode. Report the load average it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from podctl import state  # noqa: E402
from podctl.derive.site import load_site  # noqa: E402

CALIBRATION_REPEATS = 10
CALIBRATION_FORKS = 4
PROFILE_TOP = 12
MODES = ("now", "now-no-mitogen", "before", "ansible-defaults")
# podctl's own modes, which consult the nodes' records of their last converged deploy (podctl.runtime.converged)
# unless told --full / --full-drift: measured both ways.
EVERY_TASK_MODES = ("now", "now-no-mitogen")
_RUN_DIR = re.compile(r"run directory: (\S+)")
_DRIFT = re.compile(r"drift check done in ([0-9.]+) s")


def this_podctl() -> str:
    exe = shutil.which("podctl", path=str(Path(sys.executable).parent)) or shutil.which("podctl")
    if not exe:
        sys.exit("no podctl beside this Python: run with the checkout's .venv/bin/python")
    return exe


def run(cmd: list[str], what: str, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    if proc.returncode not in ok:
        sys.exit(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout + proc.stderr


def build_before(rev: str, folder: Path) -> str:
    """podctl at `rev`, installed with its deploy extra into folder/venv: its podctl executable."""
    src = folder / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
    pip = str(folder / "venv" / "bin" / "pip")
    subprocess.run([pip, "install", "-q", f"{src}[deploy]"], check=True)
    return str(folder / "venv" / "bin" / "podctl")


def site_copy(site_path: str, dest: Path, release: str | None) -> str:
    """A copy of the site whose nodes run `release` (None: no `os` key), its relative paths made
    absolute so that it works from another folder."""
    site = yaml.safe_load(Path(site_path).read_text(encoding="utf-8"))
    site.pop("os", None)
    if release is not None:
        site["os"] = {"distribution": "debian", "release": release}
    tools = site.get("validation", {}).get("tools", {})
    if isinstance(tools.get("wheels"), str):
        tools["wheels"] = str((Path(site_path).resolve().parent / tools["wheels"]).resolve())
    dest.write_text(yaml.safe_dump(site, sort_keys=False), encoding="utf-8")
    return str(dest)


def calibration(site_path: str, workdir: Path) -> float:
    """Plain Ansible, its defaults and 4 forks: `command true` on every node, 10 times."""
    site = load_site(site_path)
    pod = site.name
    hosts = {
        "all": {"hosts": {n.hostname: {"ansible_host": str(n.address), "ansible_user": "root"} for n in site.nodes}}
    }
    inventory = workdir / "calibration-hosts.json"
    inventory.write_text(json.dumps(hosts))
    ansible = str(Path(sys.executable).parent / "ansible")
    cmd = [
        ansible, "-i", str(inventory), "all", "-f", str(CALIBRATION_FORKS), "-m", "command", "-a", "true",
        "--private-key", str(state.ssh_key_path(pod)),
        f"--ssh-common-args=-o UserKnownHostsFile={state.known_hosts_path(pod)} -o StrictHostKeyChecking=yes",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    started = time.monotonic()
    for _ in range(CALIBRATION_REPEATS):
        run(cmd, "calibration (ansible command true)", env)
    return time.monotonic() - started


def profile(run_dir: Path) -> dict[str, object]:
    """Where one run's time went, from the runner's events: its wall (first to last event), the
    tasks and host-task results it ran, host-seconds per role (summed over hosts), and the slowest
    tasks."""
    per_task: dict[str, float] = defaultdict(float)
    per_role: dict[str, float] = defaultdict(float)
    hosts: dict[str, set[str]] = defaultdict(set)
    results = 0
    stamps: list[str] = []
    for path in run_dir.rglob("job_events/*.json"):
        try:
            event = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(event.get("created"), str):
            stamps.append(event["created"])
        data = event.get("event_data") or {}
        if event.get("event") not in ("runner_on_ok", "runner_on_skipped", "runner_on_failed"):
            continue
        duration = data.get("duration")
        if not isinstance(duration, (int, float)):
            continue
        role = data.get("role") or "-"
        task = f"{role} | {data.get('task')}"
        per_task[task] += duration
        per_role[role] += duration
        hosts[task].add(str(data.get("host")))
        results += 1
    wall = None
    if stamps:
        first, last = (datetime.fromisoformat(t) for t in (min(stamps), max(stamps)))
        wall = round((last - first).total_seconds(), 1)
    top = sorted(per_task.items(), key=lambda kv: -kv[1])[:PROFILE_TOP]
    return {
        "events_wall_s": wall,
        "tasks": len(per_task),
        "host_task_results": results,
        "host_seconds_by_role": {r: round(v, 1) for r, v in sorted(per_role.items(), key=lambda kv: -kv[1])},
        "slowest_tasks": [{"task": t, "host_seconds": round(v, 2), "hosts": len(hosts[t])} for t, v in top],
    }


def deploy(podctl: list[str], site: str, runs_dir: Path, extra: list[str]) -> tuple[float, dict[str, object]]:
    seconds, out = run(
        [*podctl, "deploy", site, "--runs-dir", str(runs_dir), *extra], "podctl deploy " + " ".join(extra)
    )
    found = _RUN_DIR.findall(out)
    return seconds, profile(Path(found[-1])) if found else {}


def drift(podctl: list[str], site: str, out_dir: Path, extra: list[str]) -> tuple[float, float | None]:
    """`podctl validate --suite conformance`: its wall, and the drift check's own seconds (its line)."""
    seconds, out = run(
        [*podctl, "validate", site, "--suite", "conformance", "--report", str(out_dir), *extra],
        "podctl validate conformance",
        ok=(0, 1),  # 1: not certified; the drift check ran all the same
    )
    found = _DRIFT.findall(out)
    return seconds, float(found[-1]) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", default=str(REPO / "inventory" / "sim" / "site.yaml"))
    parser.add_argument("--before", metavar="REV", help="git revision of podctl before the speed work")
    parser.add_argument(
        "--release",
        help="the nodes' Debian release (os.release), written into copies of --site; 'before' needs 12, "
        "the only release that code knew (its copy leaves `os` out)",
    )
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {','.join(MODES)}")
    parser.add_argument("--out", default=str(REPO / "bench" / "out" / "deploy_bench.json"))
    parser.add_argument(
        "--profile",
        metavar="RUN_DIR",
        help="only print where one run went (a deploy's run directory, or a drift check's)",
    )
    args = parser.parse_args()
    if args.profile:
        print(json.dumps(profile(Path(args.profile)), indent=2))
        return
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        sys.exit(f"unknown mode(s) {', '.join(sorted(unknown))}; known: {', '.join(MODES)}")
    if "before" in modes and not args.before:
        sys.exit("mode 'before' needs --before REV")

    now = this_podctl()
    if "before" in modes and args.release not in (None, "12"):
        sys.exit(f"mode 'before' runs Debian 12 nodes only (the code at {args.before} knew no other): --release 12")
    results: dict[str, dict[str, object]] = {}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="podctl-deploy-bench-") as tmp_name:
        tmp = Path(tmp_name)
        site_now = site_before = args.site
        if args.release:
            site_now = site_copy(args.site, tmp / "site-now.yaml", args.release)
            site_before = site_copy(args.site, tmp / "site-before.yaml", None)
        commands = {
            "now": ([now], [], []),
            "now-no-mitogen": ([now], ["--no-mitogen"], ["--no-mitogen"]),
            # validate has no --ansible-defaults: its drift check is not measured in this mode
            "ansible-defaults": ([now], ["--ansible-defaults"], None),
        }
        if "before" in modes:
            print(f"building podctl at {args.before} ...", flush=True)
            commands["before"] = ([build_before(args.before, tmp / "before")], [], [])
        calibrations: list[float] = []
        for i, mode in enumerate(modes):
            podctl, deploy_extra, validate_extra = commands[mode]
            runs_dir = tmp / mode  # its own fact cache: nothing carries over between modes
            site = site_before if mode == "before" else site_now
            run([now, "sim", "down", "--site", site_now], "podctl sim down")
            run([now, "sim", "up", site_now], "podctl sim up")
            if i == 0:
                calibrations.append(calibration(site_now, tmp))
                print(f"calibration       {calibrations[-1]:6.1f} s", flush=True)
            loads.append(os.getloadavg()[0])
            full, full_profile = deploy(podctl, site, runs_dir, deploy_extra)
            loads.append(os.getloadavg()[0])
            rerun, rerun_profile = deploy(podctl, site, runs_dir, deploy_extra)
            loads.append(os.getloadavg()[0])
            check_s, drift_s = (
                drift(podctl, site, tmp / f"{mode}-report", validate_extra)
                if validate_extra is not None
                else (float("nan"), None)
            )
            loads.append(os.getloadavg()[0])
            results[mode] = {
                "full_s": round(full, 1),
                "no_change_s": round(rerun, 1),
                "conformance_s": round(check_s, 1) if drift_s is not None else None,
                "drift_s": drift_s,
                "profile_full": full_profile,
                "profile_no_change": rerun_profile,
            }
            if mode in EVERY_TASK_MODES:
                # The same two with every task run (no records consulted): what a run costs
                # whenever something did change.
                every, every_profile = deploy(podctl, site, runs_dir, [*deploy_extra, "--full"])
                _, every_drift = drift(podctl, site, tmp / f"{mode}-report-full", [*validate_extra, "--full-drift"])
                loads.append(os.getloadavg()[0])
                results[mode] |= {
                    "no_change_every_task_s": round(every, 1),
                    "drift_every_task_s": every_drift,
                    "profile_no_change_every_task": every_profile,
                }
            print(
                f"{mode:17s} full {full:6.1f} s   no-change re-run {rerun:6.1f} s   drift check "
                f"{drift_s if drift_s is not None else float('nan'):6.1f} s (conformance {check_s:.1f} s)",
                flush=True,
            )
            write(args, calibrations, results, loads, final=False)
        calibrations.append(calibration(site_now, tmp))
        print(f"calibration       {calibrations[-1]:6.1f} s", flush=True)

    write(args, calibrations, results, loads, final=True)


def write(
    args: argparse.Namespace,
    calibrations: list[float],
    results: dict[str, dict[str, object]],
    loads: list[float],
    final: bool,
) -> None:
    """The results so far, as ratios to the calibration: after each mode, so a run cut short keeps
    what it measured."""
    cal = sum(calibrations) / len(calibrations)

    def ratio(value: object) -> float | None:
        return round(float(str(value)) / cal, 2) if value is not None else None

    ratios = {
        mode: {
            "full": ratio(r["full_s"]),
            "no_change": ratio(r["no_change_s"]),
            "drift": ratio(r["drift_s"]),
            "no_change_every_task": ratio(r.get("no_change_every_task_s")),
            "drift_every_task": ratio(r.get("drift_every_task_s")),
        }
        for mode, r in results.items()
    }
    print(f"\nratios to the calibration ({cal:.1f} s, mean of {', '.join(f'{c:.1f}' for c in calibrations)})")
    columns = ("full", "no_change", "drift", "no_change_every_task", "drift_every_task")
    print(f"{'':17s} " + " ".join(f"{c:>20s}" for c in columns))
    for mode, q in ratios.items():
        print(f"{mode:17s} " + " ".join(f"{'-' if q[c] is None else f'{q[c]:.2f}':>20s}" for c in columns))
    print(f"load average during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "site": args.site,
        "release": args.release,
        "before": args.before,
        "calibration_s": [round(c, 1) for c in calibrations],
        "calibration": f"ansible -i INV all -f {CALIBRATION_FORKS} -m command -a true, x{CALIBRATION_REPEATS}",
        "complete": final,
        "results": results,
        "ratios": ratios,
        "load_average": [round(min(loads), 2), round(max(loads), 2)],
        "cpus": os.cpu_count(),
    }
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}" + ("" if final else " (so far)"), flush=True)


if __name__ == "__main__":
    main()
