#!/usr/bin/env python3
"""A sim pod of N nodes brought up, deployed, re-run and certified, the way an operator would:
the walls of each step and of each suite, whether the re-run restarted anything, and whether
one throttled node is named, alone.

    .venv/bin/python bench/certify_bench.py --nodes 32 [--keep] [--out FILE]

Steps, on a fresh pod `certN` (1 head + N-1 compute: the built-in sim site grown, as
bench/cost_bench.py grows it):

1. `podctl sim up`, then one whole `podctl deploy`;
2. a no-change re-run, with every running service's NRestarts, ActiveEnterTimestamp and main PID
   read on every node before and after it (a re-run that changes nothing restarts nothing), and
   the nodes Slurm has drained after it;
3. `podctl validate` with every suite (conformance, health, burn-in, collectives, smoke): the
   verdict, and each suite's wall from validate's own progress lines (conformance split into the
   check-mode drift run and the testinfra tests);
4. one compute node throttled to 100 Mb/s (`podctl sim fault --rate`), `podctl validate --suite
   collectives`: the verdict and the nodes it names.

The figures go to bench/results/<date>-certify-<N>.json (written after every step, so a run cut
short keeps what it measured) with its log beside it; a later run on the same day adds -run2,
-run3 rather than overwrite them. --keep leaves the pod up for more
measurements (`podctl sim down --pod certN` removes it). Needs root, podman and the sim image
(make sim-setup). Long: about 2.5 h at 32 nodes on a 2-core host; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cost_bench import measured, podctl, site_for  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SERVICES = (
    "systemctl list-units --type=service --state=running --no-legend --plain | awk '{print $1}'"
    " | xargs -r systemctl show -p Id -p NRestarts -p ActiveEnterTimestamp -p MainPID"
)
_CONFORMANCE = re.compile(r"drift check done in (?P<drift>[\d.]+) s|conformance tests done in (?P<tests>[\d.]+) s")


def daemons(pod: str, hosts: list[str]) -> dict[str, dict[str, str]]:
    """host -> {service: 'NRestarts ActiveEnterTimestamp MainPID'} for every running service."""
    out: dict[str, dict[str, str]] = {}
    for host in hosts:
        proc = subprocess.run(
            [*podctl(), "sim", "exec", "--pod", pod, host, "--", "sh", "-c", SERVICES],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        units = {}
        for block in proc.stdout.strip().split("\n\n"):
            fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
            if "Id" in fields:
                units[fields["Id"]] = " ".join(
                    fields.get(k, "") for k in ("NRestarts", "ActiveEnterTimestamp", "MainPID")
                )
        out[host] = units
    return out


def restarted(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[str]:
    return [
        f"{host} {unit}"
        for host in before
        for unit, state in before[host].items()
        if after.get(host, {}).get(unit) != state
    ]


def drained(pod: str) -> list[str]:
    proc = subprocess.run(
        [*podctl(), "sim", "exec", "--pod", pod, "head01", "--", "sinfo", "-h", "-R", "-o", "%N|%E"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return [line for line in proc.stdout.splitlines() if line.strip()]


def validate(site: Path, report: Path, *suite: str) -> dict:
    output = report.with_name(report.name + ".log")
    step = measured([*podctl(), "validate", str(site), "--report", str(report), *suite], 7200, output)
    data = json.loads((report / "report.json").read_text()) if (report / "report.json").is_file() else {}
    step["verdict"] = data.get("verdict")
    step["failures"] = {k: v[:2] for k, v in data.get("failures", {}).items()}
    for match in _CONFORMANCE.finditer(output.read_text()):
        for key, value in match.groupdict().items():
            if value:
                step[f"conformance_{key}_s"] = float(value)
    return step


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=32, help="1 head + NODES-1 compute (default 32)")
    p.add_argument("--keep", action="store_true", help="leave the pod up at the end")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    n = args.nodes
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    out_path = args.out or REPO / "bench" / "results" / f"{stamp}-certify-{n}.json"
    run = 1
    while args.out is None and (out_path.exists() or out_path.with_name(out_path.stem + "-log.txt").exists()):
        run += 1  # a second run on one day keeps the first's figures: -run2, -run3
        out_path = REPO / "bench" / "results" / f"{stamp}-certify-{n}-run{run}.json"
    log_path = out_path.with_name(out_path.stem + "-log.txt")
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"certify-bench-{os.getpid()}"
    work.mkdir(parents=True)
    # cost_bench names its pods costN; this one is certN on the same subnet (never both at once).
    site = work / f"cert{n}.yaml"
    site.write_text(site_for(n, work).read_text().replace(f"name: cost{n}", f"name: cert{n}"))
    pod = f"cert{n}"
    hosts = ["head01", *(f"node{i:02d}" for i in range(1, n))]
    results: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nodes": n,
        "host_cores": os.cpu_count(),
        "podctl_commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip(),
        "steps": {},
    }
    steps = results["steps"]

    def log(what: str, step: dict) -> None:
        line = (
            f"N={n} {what:<34} rc {step.get('rc')}  wall {step.get('wall_s', 0):>7.1f} s  "
            f"cpu {step.get('cpu_s', 0):>7.1f} s  load {os.getloadavg()[0]:.1f}"
        )
        extra = {k: step[k] for k in ("verdict", "failures", "phase_wall_s", "restarted", "drained") if k in step}
        print(line, json.dumps(extra) if extra else "", flush=True)
        with log_path.open("a") as handle:
            handle.write(line + (" " + json.dumps(extra) if extra else "") + "\n")
        out_path.write_text(json.dumps(results, indent=1) + "\n")

    started = time.monotonic()
    try:
        steps["sim_up"] = measured([*podctl(), "sim", "up", str(site), "--timeout", "900"], 1800)
        log("sim up", steps["sim_up"])
        runs = work / "runs"
        steps["deploy"] = measured([*podctl(), "deploy", str(site), "--runs-dir", str(runs)], 7200)
        log("deploy, every stage", steps["deploy"])
        before = daemons(pod, hosts)
        steps["rerun"] = measured([*podctl(), "deploy", str(site), "--runs-dir", str(runs)], 7200)
        steps["rerun"]["restarted"] = restarted(before, daemons(pod, hosts))
        steps["rerun"]["services_watched"] = sum(len(u) for u in before.values())
        steps["rerun"]["drained"] = drained(pod)
        log("no-change re-run", steps["rerun"])
        steps["validate"] = validate(site, work / "report-all")
        log("validate, every suite", steps["validate"])
        victim = f"node{n // 2:02d}"
        subprocess.run([*podctl(), "sim", "fault", "--pod", pod, victim, "--rate", "100mbit"], check=True)
        try:
            steps["fault"] = validate(site, work / "report-fault", "--suite", "collectives")
            steps["fault"]["victim"] = victim
            log(f"collectives, {victim} at 100 Mb/s", steps["fault"])
        finally:
            subprocess.run([*podctl(), "sim", "fault", "--pod", pod, victim, "--clear"], check=False)
    finally:
        results["wall_s"] = round(time.monotonic() - started, 1)
        out_path.write_text(json.dumps(results, indent=1) + "\n")
        if not args.keep:
            subprocess.run([*podctl(), "sim", "down", "--pod", pod], capture_output=True, check=False)
    print(f"wrote {out_path} and {log_path}; work folder {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
