"""A synthetic certification of a whole pod, built from the simulated fabric: every node's
burn-in and collectives envelopes, the paired collectives, the pod-wide verdicts and the
smoke test, with values drawn around the profile's references (seeded) and a few faults
planted where an operator must find them:

- one GPU slow at GEMM (BAD_GPU),
- every node under one leaf switch slow between nodes (SLOW_LEAF: a stripe in the heat map),
- that leaf switch named at fault by the fabric check (a fabric-scope failure),
- one node whose intra-node collective is missing (its check broke).

Used by tests/validate/test_report_scale.py.
"""

from __future__ import annotations

import random
from pathlib import Path

from podctl.core.model import Reference
from podctl.derive.facts import Facts
from podctl.derive.init import render_site
from podctl.derive.site import load_site
from podctl.validate.judge import Certification, CheckRun, effective_reference, judge
from podctl.validate.pod import fabric_layout

MULTINODE = Reference("allreduce_busbw_multinode", 370.0, 0.10, "GB/s", "synthetic: dgx-h100's row")
BAD_GPU = ("dgx0100", "gpu3")
SLOW_SU = 12  # the nodes of this scalable unit's rail-1 leaf are slow between nodes
BROKEN = "dgx0777"


def _m(figure: str, value: float, unit: str, device: str | None = None) -> dict:
    return {"figure": figure, "value": round(value, 3), "unit": unit, "device": device}


def _env(check: str, measurements: list[dict], status: str = "pass", hosts: list[str] | None = None,
         findings: list[dict] | None = None) -> dict:  # fmt: skip
    env = {"check": check, "status": status, "measurements": measurements, "findings": findings or [],
           "details": {}, "duration_s": 1.0}  # fmt: skip
    if hosts is not None:
        env["hosts"] = hosts
    return env


def synthetic_pod(tmp: Path, scalable_units: int = 42, seed: int = 7) -> tuple[Certification, list[CheckRun], dict]:
    site_file = tmp / "pod.yaml"
    site_file.write_text(render_site("dgx-h200", scalable_units, None, "pod", "site.schema.json"))
    site = load_site(site_file)
    plan = Facts(site).plans["compute"]
    hosts = tuple(h for su in plan.scalable_units for h in su)
    rng = random.Random(seed)
    profile = site.profile_of(site.node(hosts[0]))
    rows = [*effective_reference(profile, {}), MULTINODE]
    ref = {r.figure: r.value for r in rows}
    slow = set(plan.scalable_units[SLOW_SU - 1])
    leaf = next(s.name for s in plan.switches_in("leaf") if s.su == SLOW_SU and s.rail == 1)

    def around(figure: str, spread: float = 0.012) -> float:
        return ref[figure] * rng.gauss(1.04, spread)

    runs: list[CheckRun] = []
    smoke: list[dict] = []
    for host in hosts:
        burn = []
        for g in range(8):
            gpu = f"gpu{g}"
            gemm = around("gemm_bf16_tflops") * (0.6 if (host, gpu) == BAD_GPU else 1.0)
            burn += [
                _m("gemm_bf16_tflops", gemm, "TFLOP/s", gpu),
                _m("gemm_bf16_tflops_sustained", around("gemm_bf16_tflops_sustained"), "TFLOP/s", gpu),
                _m("hbm_bandwidth", around("hbm_bandwidth", 0.004), "TB/s", gpu),
            ]
            smoke.append(_m("smoke_mfu", around("smoke_mfu", 0.01), "fraction", f"{host}/{gpu}"))
        runs.append(CheckRun("burnin", "node", host, _env("burnin", burn, "fail" if host == BAD_GPU[0] else "pass")))
        if host == BROKEN:
            bad = [{"severity": "error", "message": "NCCL WARN Cuda failure 'out of memory'", "device": None}]
            runs.append(CheckRun("collectives", "node", host, _env("collectives", [], "error", findings=bad)))
        else:
            runs.append(CheckRun("collectives", "node", host,
                                 _env("collectives", [_m("all_reduce_busbw_8GiB", around("allreduce_busbw_node"), "GB/s")])))  # fmt: skip
        multi = around("allreduce_busbw_multinode") * (0.8 if host in slow else 1.0)
        runs.append(CheckRun("collectives", "pod", host,
                             _env("collectives", [_m("all_reduce_busbw_8GiB", multi, "GB/s")], hosts=[host])))  # fmt: skip
    for su in plan.scalable_units:  # one pairwise round: neighbours in each unit
        for a, b in zip(su[0::2], su[1::2], strict=False):
            value = around("allreduce_busbw_multinode") * (0.8 if a in slow or b in slow else 1.0)
            runs.append(CheckRun("collectives", "pair", a,
                                 _env("collectives", [_m("all_reduce_busbw_8GiB", value, "GB/s")], hosts=[a, b])))  # fmt: skip
    finding = {"severity": "error", "message": f"cables of {leaf} slow: 32 nodes under it at 0.8x", "device": None}
    runs.append(CheckRun("collectives", "fabric", leaf, _env("collectives", [], "fail", findings=[finding])))
    runs.append(CheckRun("smoke", "pod", hosts[0], _env("smoke", smoke, hosts=list(hosts))))
    cert = judge(f"{site.name} (synthetic, {len(hosts)} nodes)", {h: rows for h in hosts}, runs)
    meta = {
        "started": "2026-12-01T00:00:00+00:00",
        "podctl": "synthetic",
        "suites": ["health", "burnin", "collectives", "smoke"],
        "mode": "site",
        "hosts": list(hosts),
        "fabric": fabric_layout(plan, hosts),
    }
    return cert, runs, {**meta, "_slow_leaf": leaf}
