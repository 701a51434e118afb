"""nccl-tests as a suite of its own: beside podctl's collectives, judged against the same reference rows.

The outputs are real nccl-tests logs from tests/data/nccl-tests (what srun or
the binary would have printed); Slurm and the binary are the only stand-ins.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from podctl.core.model import Reference
from podctl.runtime.remote import RemoteResult
from podctl.validate.judge import judge
from podctl.validate.ncclperf import MEASUREMENT, PerfSpec, perf_verdicts, run_perf
from podctl.validate.slurm import Job, srun_argv
from tests.helpers.cli import podctl
from tests.helpers.repo import DATA

H200_2GPU = DATA / "nccl-tests" / "podctl-h200-2gpu-nv18-all_reduce.txt"
H100_2NODE = DATA / "nccl-tests" / "a3mega-h100-2node-mpirun-all_reduce.txt"


class FakeSlurm:
    """srun answered with a real log per node set; remembers each job."""

    controller = "head01"

    def __init__(self, logs: dict[tuple[str, ...], str]) -> None:
        self.logs = logs
        self.jobs: list[Job] = []

    def run_output(self, job: Job) -> RemoteResult:
        self.jobs.append(job)
        text = self.logs.get(job.nodes)
        if text is None:
            return RemoteResult("head01", 1, "", "srun: error: Unable to allocate resources")
        return RemoteResult("head01", 0, text, "")


def test_nccl_tests_run_as_mpi_jobs_on_podctls_node_sets_and_are_judged_on_the_same_row() -> None:
    hosts = ("dgx001", "dgx002", "dgx003", "dgx004")
    log = H100_2NODE.read_text()
    slurm = FakeSlurm({hosts: log, ("dgx001", "dgx002"): log, ("dgx003", "dgx004"): log})
    spec = PerfSpec("/opt/nccl-tests/build", ("all_reduce_perf",), tasks_per_node=8, gpus_per_node=8)
    sets = [("all-nodes", hosts), ("pairs-intra-leaf", hosts[:2]), ("pairs-intra-leaf", hosts[2:])]
    records = run_perf(slurm, spec, sets, lambda _m: None)
    job = slurm.jobs[1]
    argv = srun_argv(job, "batch")
    assert "--mpi=pmix" in argv and "--ntasks-per-node=8" in argv and "--gpus-per-node=8" in argv
    assert argv[argv.index("/opt/nccl-tests/build/all_reduce_perf") :][:7] == [
        "/opt/nccl-tests/build/all_reduce_perf", "-b", "8G", "-e", "8G", "-g", "1"]  # fmt: skip
    assert "--export=ALL,NCCL_ALGO=Ring" in argv  # pairs: the ring, as podctl's own pair tests
    assert all(r.status == "pass" for r in records)
    assert [round(r.measurements(MEASUREMENT)[0]["value"], 2) for r in records] == [338.82] * 3
    verdicts = perf_verdicts(hosts, records)
    assert [v.node for v in verdicts] == list(hosts) and {v.scope for v in verdicts} == {"pod"}
    # dgx-h100's multi-node row: 370 GB/s - 5% = 351.5; this H100 pod's nccl-tests show 338.82.
    row = Reference("allreduce_busbw_multinode", 370, 0.05, "GB/s", "public figure")
    cert = judge("pod", {h: [row] for h in hosts}, verdicts)
    by = {(v.node, v.measured_by) for v in cert.verdicts}
    assert ("dgx001", "nccl-tests") in by
    # podctl's own collectives did not run here: only the nccl-tests verdict can be judged, and the
    # podctl figure is missing.
    assert any(
        "allreduce_busbw_multinode (nccl-tests): 338.8 GB/s is below 351.5" in r for r in cert.failures["dgx001"]
    )


def test_a_job_that_did_not_run_fails_its_nodes_with_srun_s_reason() -> None:
    hosts = ("n1", "n2")
    records = run_perf(FakeSlurm({}), PerfSpec("/x", ("all_reduce_perf",), 1, 1), [("all-nodes", hosts)],
                       lambda _m: None)  # fmt: skip
    assert records[0].status == "fail"
    assert "Unable to allocate resources" in json.dumps(records[0].envelope["findings"])
    verdicts = perf_verdicts(hosts, records)
    assert all(v.status == "fail" and not v.envelope["measurements"] for v in verdicts)


FAKE_PYTHON = """#!/bin/sh
# The validation virtualenv's python for --local: podctl's own collectives print a passing envelope;
# nccl-tests runs for real (validation.nccl_tests) on a binary that prints a real log.
if [ "$2" = validation.collectives ]; then
  echo '{"check": "collectives", "host": "h", "status": "pass", "findings": [], "details": {}, "measurements":
  [{"figure": "all_reduce_busbw_8GiB", "value": 350.0, "unit": "GB/s"}, {"figure": "all_reduce_busbw_1GiB",
  "value": 330.0, "unit": "GB/s"}]}' | tr -d '\\n'
  echo
  exit 0
fi
exec %(python)s "$@"
"""


def test_validate_local_shows_podctl_and_nccl_tests_side_by_side(tmp_path: Path) -> None:
    build = tmp_path / "nccl-tests"
    build.mkdir()
    (build / "all_reduce_perf").write_text(f"#!/bin/sh\ncat {H200_2GPU}\n")
    (build / "all_reduce_perf").chmod(0o755)
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON % {"python": sys.executable})
    fake.chmod(0o755)
    report = tmp_path / "report"
    ran = podctl("validate", "--local", "--profile", "hgx-h200-2", "--suite", "collectives", "--python", str(fake),
                 "--nccl-tests", str(build), "--report", str(report))  # fmt: skip
    assert ran.rc == 0, ran.out + ran.err
    data = json.loads((report / "report.json").read_text())
    side = {(v["figure"], v["measured_by"]): v["value"] for v in data["verdicts"]}
    assert side[("allreduce_busbw_node", "podctl")] == 350.0
    assert side[("allreduce_busbw_node", "nccl-tests")] == 347.11
    assert side[("allreduce_busbw_node_1g", "nccl-tests")] == 324.05
    # Both rows side by side in the figures table: podctl's, then nccl-tests' (min = median = max on one node).
    page = (report / "report.html").read_text()
    assert "<td>allreduce_busbw_node</td><td>nccl-tests</td><td>1</td>" in page
    assert "<td>347.1</td><td>347.1</td><td>347.1</td>" in page
