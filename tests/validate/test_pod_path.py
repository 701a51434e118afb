"""podctl's multi-node job path run for real on this machine: the jobs validate builds for a pod
(collectives on all nodes, a pair, one rail; the smoke test) through SlurmJobs, the srun command
line and envelope parsing, with bench/gpu/srun_standin.py as srun (one "node" per process, gloo).
The same runner ran the smoke job on an H200 (bench/gpu.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.repo import REPO


def test_the_pods_jobs_run_through_a_local_srun(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu" / "pod_path.py"), "--nodes", "2", "--cpu", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [j["job"] for j in summary["jobs"]] == [
        "collectives-all-nodes",
        "collectives-pair",
        "collectives-pair-rail-1",
        "smoke",
    ]
    assert all(j["status"] == "pass" for j in summary["jobs"])
    assert summary["jobs"][0]["figures"]["all_reduce_busbw_16MiB"] > 0
    smoke = json.loads((tmp_path / "smoke.json").read_text())
    # Each rank reports the node Slurm ran it on (SLURMD_NODENAME), not this host's name.
    assert [r["host"] for r in smoke["details"]["ranks"]] == ["gpu01", "gpu02"]
    assert "srun --job-name=podctl-smoke-" in proc.stdout and "--nodelist=gpu01,gpu02" in proc.stdout
