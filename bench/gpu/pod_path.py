#!/usr/bin/env python3
"""podctl's multi-node job path, run for real on one host: the jobs `podctl validate SITE` builds
(the smoke test across nodes; collectives on a pair, on all nodes, and per rail with NCCL_IB_HCA)
go through podctl's own SlurmJobs, srun command line and envelope parsing, with `srun` on the
PATH being bench/gpu/srun_standin.py: one "node" per GPU (or, with --cpu, per process).

    python3 bench/gpu/pod_path.py --nodes 2 --out DIR            # GPU: one node per GPU
    python3 bench/gpu/pod_path.py --nodes 2 --cpu --out DIR      # the same path on CPUs, gloo

It writes a site for N nodes of a one-GPU profile (or the sim profile with --cpu), runs
validate_pod's smoke_run and the SlurmTester's jobs, and prints each job's command line, status,
figures and wall time; the envelopes go to DIR. Nothing reaches a real Slurm or another host.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from podctl.derive.site import load_site  # noqa: E402
from podctl.localize.schedule import Test  # noqa: E402
from podctl.runtime.remote import RemoteResult  # noqa: E402
from podctl.validate.nccl import SlurmTester  # noqa: E402
from podctl.validate.pod import nccl_spec, smoke_run, target  # noqa: E402
from podctl.validate.slurm import SlurmJobs  # noqa: E402

SITE = """apiVersion: podctl/v1alpha1
kind: Site
metadata: {{ name: podpath, description: podctl's job path on one host }}
profiles:
  h200-1:
    description: one H200 per node (a stand-in node per GPU of the lent host)
    gpus: {{ count: 1, model: H200-SXM, memory_gib: 141, peak_bf16_tflops: 989 }}
    compute_hcas: {{ count: 1, rate: NDR }}
    storage_hcas: {{ count: 0 }}
    cpu_cores: 16
    memory_gib: 128
    reference:
      - {{ figure: allreduce_busbw_multinode, value: 300, tolerance: 0.5, unit: GB/s, source: "pod_path bench: a loose floor" }}
nodes:
  - group: head
    hosts: head01
    profile: {profile}
    roles: [controller, storage-client]
    address: 10.99.0.10
  - group: compute
    hosts: gpu[01-{last:02d}]
    profile: {profile}
    roles: [compute, storage-client]
    address: 10.99.0.11
networks:
  management: {{ cidr: 10.99.0.0/24, domain: podpath.internal, dns: [10.99.0.1], ntp: [head01] }}
fabrics:
  compute:
    type: infiniband
    rate: NDR
    switch: {{ model: sim-switch-8, radix: 8 }}
    scalable_unit_size: 4
    nodes: gpu[01-{last:02d}]
    subnet_managers: head01
storage:
  - {{ name: scratch, type: nfs, server: head01, export: /export/scratch, mountpoint: {shared}, options: [rw] }}
slurm:
  controllers: head01
  partitions:
    - {{ name: batch, nodes: "gpu[01-{last:02d}]", default: true }}
validation:
  tools: {{ path: /opt/podpath }}
"""


class LocalNodes:
    """podctl.runtime.remote.Nodes for one host: every command runs here, with the stand-in as srun."""

    def __init__(self, bin_dir: Path) -> None:
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(self, host: str, command: str, timeout_s: float) -> RemoteResult:
        started = time.monotonic()
        print(f"$ {command[:400]}", flush=True)
        try:
            proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout_s,
                                  env=self.env, check=False)  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            return RemoteResult(
                host, None, str(exc.stdout or ""), str(exc.stderr or ""), f"timed out after {timeout_s:.0f} s"
            )
        print(f"  exit {proc.returncode} in {time.monotonic() - started:.1f} s", flush=True)
        return RemoteResult(host, proc.returncode, proc.stdout, proc.stderr)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--cpu", action="store_true", help="the sim profile: one rank per node over gloo")
    p.add_argument("--out", type=Path, default=Path("bench/out/pod_path"))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="pod-path-"))
    shared = work / "shared"
    shared.mkdir()
    site_file = work / "site.yaml"
    site_file.write_text(SITE.format(profile="sim" if args.cpu else "h200-1", last=args.nodes, shared=shared))
    site = load_site(site_file)
    pod = target(site)
    # The validation tools here are this checkout, run by this Python (srun_standin.py).
    pod = replace(pod, shared_dir=str(shared))
    bin_dir = work / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(f'#!/bin/sh\nexec {sys.executable} {REPO / "bench" / "gpu" / "srun_standin.py"} "$@"\n')
    srun.chmod(0o755)
    os.environ["PYTHONPATH"] = f"{REPO}:{os.environ.get('PYTHONPATH', '')}"
    slurm = SlurmJobs(LocalNodes(bin_dir), pod.controller, "batch")  # type: ignore[arg-type]
    summary: dict = {"host": socket.gethostname(), "nodes": list(pod.hosts), "cpu": args.cpu, "jobs": []}

    def record(name: str, envelope: dict, seconds: float) -> None:
        (args.out / f"{name}.json").write_text(json.dumps(envelope, indent=1))
        figures = {m["figure"]: round(m["value"], 4) for m in envelope.get("measurements", [])[:12]}
        errors = [f["message"][:200] for f in envelope.get("findings", []) if f.get("severity") == "error"]
        summary["jobs"].append({"job": name, "status": envelope.get("status"), "wall_s": round(seconds, 1),
                                "figures": figures, "errors": errors})  # fmt: skip
        print(f"{name}: {envelope.get('status')} in {seconds:.1f} s {figures} {errors}", flush=True)

    spec = nccl_spec(pod, ("collectives",))
    tester = SlurmTester(slurm, spec, pod.hosts, 1, lambda m: print(m, flush=True))
    tests = []
    if len(pod.hosts) >= 2:  # a test across nodes needs two
        tests.append(("all-nodes", Test(pod.hosts)))
        tests.append(("pair", Test(pod.hosts[:2])))
        tests.append(("pair-rail-1", Test(pod.hosts[:2], rail=1)))
    for name, test in tests:
        started = time.monotonic()
        tester.label = name
        tester.run_round([test])
        record(f"collectives-{name}", tester.records[-1].envelope, time.monotonic() - started)
    started = time.monotonic()
    run = smoke_run(pod, slurm, time.strftime("%Y%m%dT%H%M%SZ"), lambda m: print(m, flush=True), pod.hosts)
    record("smoke", run.envelope, time.monotonic() - started)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0 if all(j["status"] == "pass" for j in summary["jobs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
