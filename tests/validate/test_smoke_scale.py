"""The smoke test's throughput on a crowded sim pod: a job across more emulated nodes than the host
runs at the sim's reference density shares the cores, so its per-node figure is scaled back to that
density (as the collectives' figures are), the raw figure and the scale kept in the report. Found at
32 sim nodes on 2 cores: 31 nodes read 0.00009 TFLOP/s per node against the bound 0.0001."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from podctl.core.cohost import cohost_capacity
from podctl.derive.site import load_site
from podctl.validate.judge import judge
from podctl.validate.pod import PodTarget, reference_rows, smoke_run, target
from tests.helpers.simpod import grown_sim_site

RAW = 9e-5  # TFLOP/s per node, as 31 nodes read on 2 cores


class SmokeSlurm:
    """One smoke job: every node reads RAW, with a spread around it."""

    def __init__(self) -> None:
        self.jobs: list[Any] = []

    def run(self, job: Any) -> dict[str, Any]:
        self.jobs.append(job)
        spread = {"min": RAW * 0.8, "max": RAW * 1.2, "p10": RAW * 0.9, "p90": RAW * 1.1, "iqr": RAW * 0.1}
        return {
            "check": "smoke",
            "status": "pass",
            "hosts": list(job.nodes),
            "measurements": [
                {
                    "figure": "smoke_tflops_per_node",
                    "value": RAW,
                    "unit": "TFLOP/s",
                    "device": h,
                    "samples": 8,
                    "spread": dict(spread),
                }
                for h in job.nodes
            ],  # fmt: skip
            "findings": [],
            "details": {},
        }


def pod_of(tmp_path: Path, compute: int) -> PodTarget:
    return target(load_site(grown_sim_site(tmp_path, "scale", compute)))


def smoke(tmp_path: Path, compute: int) -> tuple[PodTarget, dict[str, Any], Any]:
    pod = pod_of(tmp_path, compute)
    run = smoke_run(pod, SmokeSlurm(), "stamp", lambda _m: None, pod.hosts)
    return pod, run.envelope, run


def test_a_smoke_job_past_the_density_is_scaled_back_to_it_and_keeps_the_raw_figure(tmp_path: Path) -> None:
    compute = cohost_capacity() * 10 + 1
    pod, envelope, run = smoke(tmp_path, compute)
    scale = round(compute / cohost_capacity(), 3)
    assert envelope["details"]["cohost_scale"] == scale
    for m in envelope["measurements"]:
        assert m["raw_value"] == RAW and m["value"] == pytest.approx(RAW * scale)
        assert m["spread"]["min"] == pytest.approx(RAW * 0.8 * scale)
    # Judged against the sim profile's reference, the scaled figure is what counts.
    site = pod.site
    rows_of = {h: reference_rows(site, site.profile_of(site.node(h)), ("smoke",)) for h in pod.hosts}
    cert = judge("scale", rows_of, [run])
    assert cert.certified, cert.failures
    rows = [v for v in cert.verdicts if v.figure == "smoke_tflops_per_node"]
    assert len(rows) == compute and all(v.value == pytest.approx(RAW * scale) for v in rows)


def test_a_smoke_job_within_the_density_is_judged_on_its_raw_figure(tmp_path: Path) -> None:
    _, envelope, _ = smoke(tmp_path, cohost_capacity())
    assert "cohost_scale" not in envelope["details"]
    assert all(m["value"] == RAW and "raw_value" not in m for m in envelope["measurements"])
