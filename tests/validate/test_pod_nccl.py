"""The pod nccl suite's planning and attribution, with Slurm replaced by a model of the jobs.

The real path (srun on a deployed sim pod) is tests/validate/test_validate_sim.py;
here a fake `Slurm.run` answers each job from a table of node speeds, so the
rounds, the localization and the per-node verdicts can be checked exactly.
"""

from __future__ import annotations

import pytest

from podctl.core.model import Reference, ValidationTools
from podctl.derive.topology import plan_fabric
from podctl.localize.schedule import check_disjoint
from podctl.validate.judge import judge
from podctl.validate.nccl import REPEATS, WARMUP_ITERS, NcclSpec, pairwise_rounds, run_nccl, size_label
from podctl.validate.slurm import Job, srun_argv
from tests.helpers.fabrics import small_fabric

MEASUREMENT = "all_reduce_busbw_16MiB"


class FakeSlurm:
    """Each job's busbw is the slowest member's speed (a ring is as fast as its slowest link)."""

    def __init__(self, speeds: dict[str, float]) -> None:
        self.speeds = speeds
        self.jobs: list[Job] = []

    def run(self, job: Job) -> dict:
        self.jobs.append(job)
        value = min(self.speeds[n] for n in job.nodes)
        return {
            "check": "collectives",
            "host": job.nodes[0],
            "hosts": list(job.nodes),
            "status": "pass",
            "duration_s": 1.0,
            "findings": [],
            "measurements": [{"figure": MEASUREMENT, "value": value, "unit": "GB/s", "device": None}],
            "details": {"slurm": {"label": job.label}},
        }


def spec(bound: float | None = 0.5) -> NcclSpec:
    return NcclSpec(
        tools=ValidationTools("/opt/v", None, None, ()),
        gpu=False,
        tasks_per_node=1,
        gpus_per_node=0,
        figure="allreduce_busbw_multinode_cpu",
        measurement=MEASUREMENT,
        size="16M",
        bound=bound,
        emulated=True,
        hca_names={},
    )


def rows(hosts):
    ref = Reference("allreduce_busbw_multinode_cpu", 1.0, 0.5, "GB/s", "test")
    return {h: [ref] for h in hosts}


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8])
def test_pairwise_rounds_are_disjoint_and_cover_every_node(n):
    plan = plan_fabric(small_fabric(n))
    hosts = [h for su in plan.scalable_units for h in su]
    rounds = pairwise_rounds(plan, hosts)
    for _, tests in rounds:
        check_disjoint(tests)
        assert all(len(t.nodes) == 2 for t in tests)
    assert {h for _, tests in rounds for t in tests for h in t.nodes} == set(hosts)


def test_healthy_pod_one_all_nodes_job_then_pairs_and_everyone_passes():
    plan = plan_fabric(small_fabric(3))
    hosts = list(plan.scalable_units[0])
    slurm = FakeSlurm({h: 1.0 for h in hosts})
    out = run_nccl(slurm, spec(), plan, hosts, lambda _: None)
    assert out.rounds == 1 and out.diagnosis.healthy
    assert set(slurm.jobs[0].nodes) == set(hosts)
    assert "--collectives" in slurm.jobs[0].argv  # round 1 measures the judged figure only
    assert "--collectives" not in slurm.jobs[-1].argv  # a healthy pod ends with the full sweep, for the report
    # The sweep takes the judged test's few repeats, not the check's defaults.
    timing = [(j.argv[j.argv.index("--warmup-iters") + 1], j.argv[j.argv.index("--repeats") + 1]) for j in slurm.jobs]
    assert set(timing) == {(str(WARMUP_ITERS), str(REPEATS))}
    assert all(j.env.get("NCCL_ALGO") == "Ring" for j in slurm.jobs[1:-1])
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert cert.certified, cert.failures


@pytest.mark.parametrize("bad", ["n001", "n002", "n003"])
def test_a_slow_node_is_named_by_localization_and_no_one_else_fails(bad):
    plan = plan_fabric(small_fabric(3))
    hosts = list(plan.scalable_units[0])
    slurm = FakeSlurm({h: (0.02 if h == bad else 1.0) for h in hosts})
    out = run_nccl(slurm, spec(), plan, hosts, lambda _: None)
    assert out.diagnosis.bad_nodes == (bad,)
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert set(cert.failures) == {bad}
    assert any("named by fault localization" in r for r in cert.failures[bad])


class MaskingSlurm(FakeSlurm):
    """Groups of more than two nodes read healthy whatever their members: a sim job of many
    co-hosted ranks is scaled to the sim's reference density, which can lift a slow node's
    ring over the bound (16 sim nodes on 2 cores, bench/results/2026-12-02-cost-bench-16.json).
    Pairs are never scaled: they carry the slow node's figure."""

    def run(self, job: Job) -> dict:
        envelope = super().run(job)
        if len(job.nodes) > 2:
            envelope["measurements"][0]["value"] = 1.0
        return envelope


@pytest.mark.parametrize(("su_size", "radix"), [(8, 16), (4, 8)])
@pytest.mark.parametrize("bad", ["n001", "n004", "n007", "n008"])
def test_a_slow_pair_behind_a_passing_all_nodes_test_is_localized_from_the_pairs(bad, su_size, radix):
    plan = plan_fabric(small_fabric(8, su_size=su_size, radix=radix))
    hosts = [h for su in plan.scalable_units for h in su]
    slurm = MaskingSlurm({h: (0.02 if h == bad else 1.0) for h in hosts})
    said: list[str] = []
    out = run_nccl(slurm, spec(), plan, hosts, said.append)
    assert out.diagnosis.bad_nodes == (bad,) and not out.diagnosis.suspects
    assert any("localizing from the pairs" in line for line in said), said
    # Localization rounds: round 1 (all nodes, passed) and the tries against cleared partners; the
    # pairwise rounds are not localization and are not counted.
    assert out.rounds == out.diagnosis.rounds_used >= 2
    assert slurm.jobs[0].label.startswith("all-nodes ")
    assert any(j.label.startswith("localize-") for j in slurm.jobs)
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert set(cert.failures) == {bad}, cert.failures
    assert any("named by fault localization" in r for r in cert.failures[bad])
    # No sweep of every collective over a pod with a slow node.
    assert all("--collectives" in j.argv for j in slurm.jobs)


def one_su(make_slurm):
    """run_nccl on 8 nodes of one SU; the fake Slurm made from the hosts."""
    plan = plan_fabric(small_fabric(8, su_size=8, radix=16))
    hosts = list(plan.scalable_units[0])
    slurm = make_slurm(hosts)
    said: list[str] = []
    return hosts, slurm, run_nccl(slurm, spec(), plan, hosts, said.append), said


def test_no_pair_below_the_bound_starts_no_localization():
    _, _, out, said = one_su(lambda hosts: MaskingSlurm({h: 1.0 for h in hosts}))
    assert out.diagnosis.healthy and out.rounds == 1 and not any("localiz" in line for line in said), said


class OnceSlowSlurm(FakeSlurm):
    """Every node is healthy, but the first job of one pair reads slow (a transient)."""

    def __init__(self, speeds: dict[str, float], pair: tuple[str, str]) -> None:
        super().__init__(speeds)
        self.pair = set(pair)
        self.hit = False

    def run(self, job: Job) -> dict:
        envelope = super().run(job)
        if set(job.nodes) == self.pair and not self.hit:
            self.hit = True
            envelope["measurements"][0]["value"] = 0.02
        return envelope


def test_a_slow_pair_that_reads_healthy_again_accuses_no_node_but_fails_the_pod():
    hosts, slurm, out, said = one_su(lambda hosts: OnceSlowSlurm({h: 1.0 for h in hosts}, ("n001", "n002")))
    assert slurm.hit and any("localizing from the pairs" in line for line in said), said
    assert out.diagnosis.bad_nodes == () and out.diagnosis.suspects == ()
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert set(cert.failures) == {"nccl"}, cert.failures
    assert any("no node or cable named explains it" in r for r in cert.failures["nccl"])


def test_most_pairs_slow_is_a_pod_wide_problem_and_is_not_localized():
    # A bound the pinned ring cannot reach: every pair is slow, the all-nodes job is not.
    hosts, slurm, out, said = one_su(lambda hosts: MaskingSlurm({h: 0.02 for h in hosts}))
    assert any("a pod-wide problem, not localized" in line for line in said), said
    assert out.rounds == 1 and not [j for j in slurm.jobs if j.label.startswith("localize")]
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert set(cert.failures) == {"nccl"}, cert.failures


def test_without_a_reference_nothing_is_judged_or_localized():
    plan = plan_fabric(small_fabric(4))
    hosts = list(plan.scalable_units[0])
    slurm = FakeSlurm({h: 1.0 for h in hosts})
    out = run_nccl(slurm, spec(bound=None), plan, hosts, lambda _: None)
    assert out.diagnosis is None and all(v.status == "pass" for v in out.verdicts)


def test_srun_line_asks_slurm_for_exactly_the_nodes_and_fails_fast_when_they_are_busy():
    job = Job(
        "pairs n1,n2",
        "collectives",
        ("n1", "n2"),
        8,
        8,
        ("python", "-m", "validation.collectives"),
        {"NCCL_IB_HCA": "=mlx5_0"},
        300,
    )
    argv = srun_argv(job, "batch")
    assert argv[:1] == ["srun"] and "--nodelist=n1,n2" in argv and "--nodes=2" in argv
    assert "--ntasks-per-node=8" in argv and "--gpus-per-node=8" in argv and "--partition=batch" in argv
    assert any(a.startswith("--immediate=") for a in argv)
    assert "--export=ALL,NCCL_IB_HCA==mlx5_0" in argv
    assert argv[-3:] == ["python", "-m", "validation.collectives"]


def test_size_label():
    assert size_label("all_reduce_busbw_16MiB") == "16M" and size_label("all_reduce_busbw_8GiB") == "8G"


def test_busbw_at_the_judged_size_takes_the_world_aligned_size_nearby():
    from podctl.validate.nccl import busbw

    env = {
        "measurements": [
            {"figure": "all_reduce_busbw_8388600B", "value": 1.0},
            {"figure": "all_reduce_busbw_16777212B", "value": 2.0},
            {"figure": "all_gather_busbw_16MiB", "value": 9.0},
        ]
    }
    assert busbw(env, "all_reduce_busbw_16MiB") == 2.0
    assert busbw({"measurements": []}, "all_reduce_busbw_16MiB") == 0.0


class RailSlurm(FakeSlurm):
    """A real (not emulated) fabric: a job pinned to one HCA carries 1/rails of a node's traffic."""

    def __init__(self, speeds: dict[str, float], rails: int, slow_rail: tuple[str, str] | None = None) -> None:
        super().__init__(speeds)
        self.rails = rails
        self.slow_rail = slow_rail  # (host, HCA name) of a slow cable

    def run(self, job: Job) -> dict:
        envelope = super().run(job)
        hca = job.env.get("NCCL_IB_HCA", "").lstrip("=")
        value = envelope["measurements"][0]["value"]
        if self.slow_rail and self.slow_rail[0] in job.nodes and (not hca or hca == self.slow_rail[1]):
            value = min(value, 0.02 if hca else 0.02 * self.rails)  # one slow rail holds the whole ring back
        envelope["measurements"][0]["value"] = value / self.rails if hca else value
        return envelope


def real_spec() -> NcclSpec:
    return NcclSpec(
        tools=ValidationTools("/opt/v", None, None, ()),
        gpu=True,
        tasks_per_node=8,
        gpus_per_node=8,
        figure="allreduce_busbw_multinode",
        measurement=MEASUREMENT,
        size="16M",
        bound=0.5,
        emulated=False,
        hca_names={f"n{i:03d}": ("mlx5_0", "mlx5_1") for i in range(1, 9)},
    )


def test_per_rail_jobs_are_judged_as_a_share_of_the_node_and_accuse_only_the_slow_node():
    plan = plan_fabric(small_fabric(8))
    hosts = [h for su in plan.scalable_units for h in su]
    slurm = RailSlurm({h: (0.02 if h == "n004" else 1.0) for h in hosts}, rails=2)
    out = run_nccl(slurm, real_spec(), plan, hosts, lambda _: None)
    assert out.diagnosis.bad_nodes == ("n004",)
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert set(cert.failures) == {"n004"}, cert.failures


def test_a_slow_cable_fails_its_node_with_the_cable_named_and_no_one_else():
    plan = plan_fabric(small_fabric(4))
    hosts = list(plan.scalable_units[0])
    slurm = RailSlurm({h: 1.0 for h in hosts}, rails=2, slow_rail=("n002", "mlx5_1"))
    out = run_nccl(slurm, real_spec(), plan, hosts, lambda _: None)
    assert out.diagnosis.bad_nodes == () and len(out.diagnosis.bad_links) == 1
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert set(cert.failures) == {"n002"}, cert.failures
    assert any("mlx5_1" in r for r in cert.failures["n002"])


def test_a_job_that_measured_nothing_stops_the_suite_and_blames_no_node_for_slowness():
    plan = plan_fabric(small_fabric(3))
    hosts = list(plan.scalable_units[0])

    class Refused(FakeSlurm):
        def run(self, job):
            envelope = super().run(job)
            envelope.update(
                status="error",
                measurements=[],
                findings=[
                    {"severity": "error", "message": "srun: error: Unable to allocate resources", "device": None}
                ],
            )
            return envelope

    slurm = Refused({h: 1.0 for h in hosts})
    out = run_nccl(slurm, spec(), plan, hosts, lambda _: None)
    assert len(slurm.jobs) == 2  # the all-nodes job, tried once more
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert "nccl" in cert.failures and any("Unable to allocate" in r for r in cert.failures["nccl"])
    assert not any("named by fault localization" in r for rs in cert.failures.values() for r in rs)


def test_fast_but_wrong_results_are_not_certified():
    plan = plan_fabric(small_fabric(3))
    hosts = list(plan.scalable_units[0])

    class Wrong(FakeSlurm):
        def run(self, job):
            envelope = super().run(job)
            if "n002" in job.nodes:
                envelope.update(
                    status="fail",
                    findings=[
                        {"severity": "error", "device": None, "message": "all_reduce gave wrong results at 16MiB"}
                    ],
                )
            return envelope

    out = run_nccl(Wrong({h: 1.0 for h in hosts}), spec(), plan, hosts, lambda _: None)
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert not cert.certified and any("wrong results" in r for r in cert.failures["n002"])


class TaskFailedSlurm(FakeSlurm):
    """Every job measures well, but jobs with `host` in them had a task fail on it (the finding
    SlurmJobs adds when srun exits non-zero after rank 0 reported pass names that host)."""

    def __init__(self, speeds: dict[str, float], host: str) -> None:
        super().__init__(speeds)
        self.host = host

    def run(self, job: Job) -> dict:
        envelope = super().run(job)
        if self.host in job.nodes:
            envelope["status"] = "fail"
            envelope["findings"] = [
                {"severity": "error", "message": f"rank 0 reported pass, but srun exited 2: {self.host}: task 1: Killed",
                 "device": self.host}
            ]  # fmt: skip
        return envelope


def test_a_job_whose_task_failed_fails_the_host_srun_named_not_its_partners():
    plan = plan_fabric(small_fabric(4))
    hosts = list(plan.scalable_units[0])
    out = run_nccl(TaskFailedSlurm({h: 1.0 for h in hosts}, "n002"), spec(), plan, hosts, lambda _: None)
    cert = judge("t", rows(hosts), out.records + out.verdicts)
    assert set(cert.failures) == {"n002"}, cert.failures
    assert any("srun exited 2" in r for r in cert.failures["n002"])
