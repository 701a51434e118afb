#!/usr/bin/env python3
"""Model of deploy and certify time at pod scale, from the measured cost curves.

Inputs: a cost-bench results file (bench/cost_bench.py), the controller (cores, Ansible forks)
and the time of one pairwise NCCL job on a real pod (not measurable here: no InfiniBand, one GPU).
The fabric, the pairwise rounds and the jobs-at-once cap are podctl's own (the real
`pairwise_rounds` on the rendered dgx-h200 site, `MAX_CONCURRENT_JOBS`, `MAX_FORKS`).

Per Ansible step (deploy stages, no-change re-run, conformance): its wall is the larger of
- waves x one wave's wall: Ansible runs each task on `forks` hosts at a time, so ceil(N/forks)
  waves, each as long as the smallest measured pod's whole step (every host in one wave there;
  an upper bound, since the sim's nodes share the host's cores), and
- the controller's CPU: N x the step's CPU work per node, over the controller's cores. The work
  per node comes from splitting each step's CPU over the measured sizes into a * N + b * wall
  (cost_bench.work_and_wait): Ansible's controller also spends CPU while it waits, about 0.13 s
  a second with 32 forks (bench/ansible_overhead.py), and on the sim the wall grows faster than N.
Collectives: round 1 (one job over all nodes), the pairwise rounds in waves of the jobs-at-once
cap, and the sweep (one job over all nodes, taken as two pairwise jobs long).

    .venv/bin/python bench/pod_model.py bench/results/2026-12-01-cost-bench.json [--nodes 1344]
        [--cores 64] [--forks 256] [--job-s 30] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from cost_bench import STAGES, load_sizes, work_and_wait

from podctl.derive.facts import Facts
from podctl.derive.init import render_site
from podctl.derive.site import load_site
from podctl.runtime.ansible import MAX_FORKS
from podctl.validate.nccl import MAX_CONCURRENT_JOBS, pairwise_rounds

ANSIBLE_STEPS = (
    *(f"deploy:{s}" for s in STAGES),
    "deploy:whole",  # every stage in one run (cost_bench --reruns-only)
    "deploy:no-change",
    "deploy:no-change-every-task",
    "validate:conformance",
)


def pod_rounds(nodes: int) -> list[tuple[str, int]]:
    """(round, jobs) of the pairwise rounds podctl plans on a dgx-h200 pod of `nodes` (32 per SU)."""
    units = max(1, math.ceil(nodes / 32))
    with tempfile.TemporaryDirectory() as tmp:
        site_file = Path(tmp) / "pod.yaml"
        site_file.write_text(render_site("dgx-h200", units, None, "pod", "site.schema.json"))
        plan = Facts(load_site(site_file)).plans["compute"]
    hosts = [h for su in plan.scalable_units for h in su][:nodes]
    return [(name, len(tests)) for name, tests in pairwise_rounds(plan, hosts)]


def ansible_step(sizes: list[dict], step: str, nodes: int, cores: int, forks: int) -> dict | None:
    points = [z for z in sizes if step in z["steps"] and z["steps"][step]["rc"] in (0, 1)]
    if not points:
        return None
    small, large = min(points, key=lambda z: z["nodes"]), max(points, key=lambda z: z["nodes"])
    wave = small["steps"][step]["wall_s"]
    # The work per node, without the CPU Ansible spends waiting (which on the sim grows with the
    # crowded host's wall, and on a pod with the waves): from the split over every size where there
    # are three, else the largest pod's CPU per node.
    split = work_and_wait([(z["nodes"], z["steps"][step]) for z in points])
    per_node = split["work_cpu_s_per_node"] if split else large["steps"][step]["cpu_s"] / large["nodes"]
    waves = math.ceil(nodes / forks)
    latency, cpu = waves * wave, nodes * per_node / cores
    return {
        "wave_s": wave,
        "waves": waves,
        "cpu_s_per_node": round(per_node, 2),
        "cpu_s_per_node_at_largest": round(large["steps"][step]["cpu_s"] / large["nodes"], 2),
        "wait_cpu_s_per_wall_s": split["wait_cpu_s_per_wall_s"] if split else None,
        "latency_bound_s": round(latency),
        "cpu_bound_s": round(cpu),
        "wall_s": round(max(latency, cpu)),
        "bound": "forks" if latency >= cpu else "controller CPU",
    }


def model(sizes: list[dict], nodes: int, cores: int, forks: int, job_s: float) -> dict:
    steps = {s: m for s in ANSIBLE_STEPS if (m := ansible_step(sizes, s, nodes, cores, forks))}
    rounds = pod_rounds(nodes)
    waves = [(name, jobs, math.ceil(jobs / MAX_CONCURRENT_JOBS)) for name, jobs in rounds]
    collectives = job_s * (1 + sum(w for _, _, w in waves) + 2)
    health = sizes[0]["steps"].get("validate:health", {}).get("wall_s", 0.0)
    deploy = sum(steps[f"deploy:{s}"]["wall_s"] for s in STAGES if f"deploy:{s}" in steps) or steps.get(
        "deploy:whole", {}
    ).get("wall_s", 0)
    quick = steps.get("validate:conformance", {}).get("wall_s", 0) + health + collectives
    return {
        "nodes": nodes,
        "controller": {"cores": cores, "forks": forks},
        "pairwise_job_s": job_s,
        "jobs_at_once": MAX_CONCURRENT_JOBS,
        "steps": steps,
        "pairwise_rounds": [{"round": n, "jobs": j, "waves": w} for n, j, w in waves],
        "collectives_s": round(collectives),
        "health_s": health,
        "deploy_s": deploy,
        "certify_quick_s": round(quick),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, nargs="+", help="cost-bench results files (their sizes are merged)")
    p.add_argument("--nodes", type=int, default=1344)
    p.add_argument("--cores", type=int, default=64, help="the controller's cores")
    p.add_argument("--forks", type=int, default=MAX_FORKS, help=f"Ansible forks (podctl's cap: {MAX_FORKS})")
    p.add_argument("--job-s", type=float, default=30.0, help="one pairwise NCCL job on a real pod, seconds")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    sizes = load_sizes(args.results)
    m = model(sizes, args.nodes, args.cores, args.forks, args.job_s)
    m["measured_sizes"] = [z["nodes"] for z in sizes]
    print(f"{m['nodes']} nodes, controller {args.cores} cores, {args.forks} forks; measured at {m['measured_sizes']}")
    print(f"{'step':<26}{'waves':>6}{'wave s':>8}{'cpu s/node':>11}{'forks-bound s':>14}{'cpu-bound s':>12}  bound")
    for step, s in m["steps"].items():
        print(
            f"{step:<26}{s['waves']:>6}{s['wave_s']:>8.0f}{s['cpu_s_per_node']:>11.2f}"
            f"{s['latency_bound_s']:>14}{s['cpu_bound_s']:>12}  {s['bound']}"
        )
    for r in m["pairwise_rounds"]:
        print(f"{r['round']:<26} {r['jobs']} jobs, {m['jobs_at_once']} at once: {r['waves']} waves")
    print(f"collectives (round 1, pairwise waves, sweep at {args.job_s:g} s a job): {m['collectives_s']} s")
    print(f"deploy, every stage: {m['deploy_s']} s; certify, quick suites: {m['certify_quick_s']} s")
    if args.out:
        args.out.write_text(json.dumps(m, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
