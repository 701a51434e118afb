"""The nccl suite across the pod: all nodes at once, fault localization, pairwise rounds.

Order of work:

1. the all-nodes test, all_reduce at the judged size; it is round 1 of
   `podctl.localize`: when it falls short, the localizer runs further rounds
   of node-disjoint Slurm jobs until the evidence names the bad nodes and cables;
2. pairwise rounds over the fabric plan (ring algorithm pinned), disjoint pairs
   in each round, until every node has been in a pair: the report's pairwise
   matrix, and a check that no pair is slow where localization saw nothing; when one is
   (an all-nodes test that passed, a pair that did not: on a sim pod of many co-hosted
   nodes the all-nodes figure is scaled and can hide a slow node), localization starts
   again from the pairs' results and tries their nodes against cleared partners;
3. when nothing was found, all nodes once more with every collective over the
   size sweep, for the report's busbw curves (a slow node would only make the
   sweep crawl: it is skipped when localization named something).

Each node then gets one verdict run for the multi-node figure, carrying the
evidence behind it: the node's best passing test, or the tests that named it.
A node is failed only on evidence: named by the localizer, left as a suspect
it could not clear, or in a slow pair no accusation explains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from podctl.core.cohost import cohost_capacity, cohost_scale
from podctl.core.model import ValidationTools
from podctl.derive.topology import FabricPlan
from podctl.localize.localize import Diagnosis, Localizer, PortEvidence, Result, localize
from podctl.localize.routing import Forwarding, Router
from podctl.localize.schedule import Test, check_disjoint, cross_su_matching, intra_leaf_matching
from podctl.validate.envelope import envelope, finding
from podctl.validate.judge import CheckRun, finding_hosts
from podctl.validate.slurm import Job, SlurmJobs

# Warm-up operations and timed chunks (each a median's sample) of every job: the judged test and
# the sweep alike (the sweep's curves are read no finer than the judged figure). On co-hosted sim
# ranks one operation at the sweep's larger sizes outlasts a chunk, so its cost grows with this
# count: 7 per size and collective, where the check's defaults (3 and 10) make 13.
WARMUP_ITERS = 2
REPEATS = 5


@dataclass(frozen=True)
class NcclSpec:
    tools: ValidationTools
    gpu: bool
    tasks_per_node: int
    gpus_per_node: int
    figure: str  # the reference figure judged on every node: allreduce_busbw_multinode[_cpu]
    measurement: str  # its measurement in the collectives envelope, e.g. all_reduce_busbw_16MiB
    size: str  # the judged message size, as the check's --min/--max-bytes take it
    bound: float | None  # GB/s; None: the profile has no reference, nothing can be judged
    emulated: bool  # the sim: every rail is the one management network
    hca_names: dict[str, tuple[str, ...]]  # host -> HCA names, rail 1 first
    timeout_s: float = 900.0


def size_label(measurement: str) -> str:
    """'all_reduce_busbw_16MiB' -> '16M' (the unit the check's size options take)."""
    text = measurement.rsplit("_", 1)[1]
    return text.replace("GiB", "G").replace("MiB", "M").replace("KiB", "K")


class JobBroke(Exception):
    """A job that measured nothing (srun refused it, a rank died, a node lacks the tools).

    Not evidence of slowness: counting it as 0 GB/s would accuse whoever was
    in it. The suite stops and reports the job's own error instead."""

    def __init__(self, record: CheckRun) -> None:
        super().__init__(record.envelope["details"]["slurm"]["label"])
        self.record = record


# Jobs of one round at once. Each is an srun on the controller over an SSH connection of
# its own; the connections are opened a few at a time (podctl.runtime.remote.HANDSHAKES_PER_HOST,
# under sshd's MaxStartups), so this bounds what the controller holds: 128 srun processes
# and sshd sessions, a few MB each. A pairwise round of a 1,344-node pod (672 pairs) is 6 waves.
MAX_CONCURRENT_JOBS = 128


class SlurmTester:
    """`podctl.localize.Tester` over the pod's Slurm: one job per test, a round's tests at once."""

    def __init__(
        self, slurm: SlurmJobs, spec: NcclSpec, hosts: Sequence[str], rails: int, on_progress: Callable[[str], None]
    ) -> None:
        self.slurm = slurm
        self.spec = spec
        self.hosts = tuple(hosts)
        self.rails = rails
        self.on_progress = on_progress
        self.records: list[CheckRun] = []
        self.rounds = 0
        self.label: str | None = None  # the next rounds' name; None: the localizer's rounds
        self.sweep = False  # the next jobs sweep every collective and size (for the report's curves)

    def run_round(self, tests: Sequence[Test]) -> list[Result]:
        check_disjoint(tests)
        self.rounds += 1
        name = self.label or ("all-nodes" if self.rounds == 1 else f"localize-{self.rounds}")
        self.on_progress(
            f"nccl round {self.rounds} ({name}): {len(tests)} test(s) over {sum(len(t.nodes) for t in tests)} node(s)"
        )
        workers = MAX_CONCURRENT_JOBS
        if self.spec.emulated:
            ranks = max((len(t.nodes) for t in tests), default=1) * self.spec.tasks_per_node
            workers = max(1, cohost_capacity() // max(1, ranks))
        with ThreadPoolExecutor(max_workers=max(1, min(len(tests), workers))) as pool:
            return list(pool.map(lambda t: self._test(t, name), tests))

    def _test(self, test: Test, round_name: str) -> Result:
        if test.per_rail and not self.spec.emulated:
            figures = tuple(self._job(test, round_name, rail) for rail in range(1, self.rails + 1))
            return Result(test, min(figures), figures)
        value = self._job(test, round_name, test.rail)
        # In the sim every "rail" is the same bridge: one measurement stands for all of them.
        return Result(test, value, (value,) * self.rails if test.per_rail else None)

    def _job(self, test: Test, round_name: str, rail: int | None) -> float:
        spec = self.spec
        world = len(test.nodes) * spec.tasks_per_node
        argv = spec.tools.argv("validation.collectives", "--expect-world-size", str(world))
        if not self.sweep:
            # Pass or fail needs one figure: all_reduce at the judged size.
            argv += ["--collectives", "all_reduce", "--min-bytes", spec.size, "--max-bytes", spec.size]
        argv += ["--warmup-iters", str(WARMUP_ITERS), "--repeats", str(REPEATS)]
        if not spec.gpu:
            argv.append("--cpu")
        env = {}
        if len(test.nodes) == 2:
            env["NCCL_ALGO"] = "Ring"
        if rail is not None and not spec.emulated:
            # NCCL takes one HCA list for the job: nodes of one profile name their rails alike.
            env["NCCL_IB_HCA"] = "=" + spec.hca_names[test.nodes[0]][rail - 1]
        label = f"{round_name} {','.join(test.nodes)}" + (f" rail {rail}" if rail else "")
        job = Job(
            label,
            "collectives",
            tuple(test.nodes),
            spec.tasks_per_node,
            spec.gpus_per_node,
            tuple(argv),
            env,
            spec.timeout_s,
        )
        result = self.slurm.run(job)
        if _broke(result, spec.measurement):
            self.on_progress(f"nccl: {label} broke ({_errors(result)[:200]}); trying it once more")
            result = self.slurm.run(job)
        result["details"]["round"] = round_name
        if rail is not None:
            result["details"]["rail"] = rail
            # One HCA carries 1/rails of a node's traffic: scale it to compare with the node's bound.
            result["details"]["rail_scale"] = 1 if spec.emulated else self.rails
        scale = cohost_scale(world) if spec.emulated else None
        if scale is not None:
            # A sim job of more ranks than the host holds at the reference density shares the cores:
            # its figure is scaled back to that density (pairs never are: they carry the judgement of
            # a throttled node). Recorded, so the report shows raw figure and scale.
            result["details"]["cohost_scale"] = scale
        scope = "pair" if len(test.nodes) == 2 else "group"
        record = CheckRun("collectives", scope, test.nodes[0], result)
        self.records.append(record)
        if _broke(result, spec.measurement):
            raise JobBroke(record)
        return figure(record, spec.measurement)


def _broke(envelope: dict[str, Any], measurement: str) -> bool:
    return envelope.get("status") == "error" or not busbw(envelope, measurement)


def _errors(envelope: dict[str, Any]) -> str:
    found = [f["message"] for f in envelope.get("findings", []) if f.get("severity") == "error"]
    return "; ".join(found) or f"status {envelope.get('status')}, no {envelope.get('check')} figure"


def figure(record: CheckRun, measurement: str) -> float:
    """A job's busbw at the judged size, as a whole node's figure (per-rail jobs scaled up; a sim job
    of many co-hosted ranks scaled to the sim's reference density, see SlurmTester._job)."""
    details = record.envelope.get("details", {})
    return busbw(record.envelope, measurement) * details.get("rail_scale", 1) * details.get("cohost_scale", 1)


_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
# Bounded runs: figure names come from the nodes' envelopes.
_SIZED = re.compile(r"(?P<name>[A-Za-z0-9_]{1,64}_busbw)_(?P<n>\d{1,15})(?P<unit>B|KiB|MiB|GiB|TiB)")


def _split(figure: str) -> tuple[str, int] | None:
    m = _SIZED.fullmatch(figure)
    return (m.group("name"), int(m.group("n")) * _UNITS[m.group("unit")]) if m else None


def busbw(envelope: dict[str, Any], measurement: str) -> float:
    """The busbw at the judged size. Sizes are rounded to a multiple of the world
    size (as nccl-tests does), so with 3 ranks '16MiB' is measured at 16777212 B:
    the nearest size within 1% stands for it."""
    target = _split(measurement)
    best: tuple[float, float] | None = None
    for m in envelope.get("measurements", []):
        if m.get("figure") == measurement:
            return float(m["value"])
        got = _split(str(m.get("figure", "")))
        if target and got and got[0] == target[0]:
            off = abs(got[1] - target[1]) / target[1]
            if off <= 0.01 and (best is None or off < best[0]):
                best = (off, float(m["value"]))
    return best[1] if best else 0.0  # no figure: the test failed outright


def pairwise_rounds(plan: FabricPlan, hosts: Sequence[str]) -> list[tuple[str, list[Test]]]:
    """Disjoint pairs per round until every node under test has been in a pair.

    Pairs inside each leaf first, then across scalable units (so on a
    multi-SU fabric the spines carry traffic); a node left without a partner
    (odd counts) is paired with an already tested node in a last round.
    """
    wanted = set(hosts)
    units = [[h for h in su if h in wanted] for su in plan.scalable_units]
    units = [u for u in units if u]
    rounds = [("pairs-intra-leaf", list(intra_leaf_matching(units, per_rail=False)))]
    if len(units) > 1:
        rounds.append(("pairs-cross-su", list(cross_su_matching(units, 0, per_rail=False))))
    covered = {n for _, tests in rounds for t in tests for n in t.nodes}
    left = [h for h in hosts if h not in covered]
    partners = [h for h in hosts if h in covered]
    extra = [Test((a, b)) for a, b in zip(left, partners)]
    if len(left) > len(partners) and len(left) >= 2:
        rest = left[len(partners) :]
        extra += [Test((a, b)) for a, b in zip(rest[0::2], rest[1::2])]
    if extra:
        rounds.append(("pairs-remaining", extra))
    return [(name, tests) for name, tests in rounds if tests]


@dataclass
class NcclOutcome:
    records: list[CheckRun]  # every job's envelope (scope "group" or "pair"): evidence and plots
    verdicts: list[CheckRun]  # one per node (scope "pod") and per bad switch cable (scope "fabric")
    diagnosis: Diagnosis | None
    rounds: int


def run_nccl(
    slurm: SlurmJobs,
    spec: NcclSpec,
    plan: FabricPlan,
    hosts: Sequence[str],
    on_progress: Callable[[str], None],
    port_evidence: Sequence[PortEvidence] = (),
    forwarding: Forwarding | None = None,
) -> NcclOutcome:
    router = Router(plan, forwarding=forwarding)
    tester = SlurmTester(slurm, spec, hosts, router.rails, on_progress)
    if len(hosts) < 2:
        return NcclOutcome([], [], None, 0)
    diagnosis: Diagnosis | None = None
    measuring = 0  # rounds that are not localization: the pairwise rounds and the sweep
    try:
        if spec.bound is None:
            tester.run_round([Test(tuple(hosts))])
        else:
            diagnosis = localize(
                plan, tester, spec.bound, router, hosts=hosts, hca_names=spec.hca_names, port_evidence=port_evidence
            )
            if not diagnosis.healthy:
                on_progress(_found(diagnosis))
        pairs: list[list[Result]] = []
        for name, tests in pairwise_rounds(plan, hosts):
            tester.label = name
            measuring += 1
            pairs.append(tester.run_round(tests))
        if diagnosis is not None and diagnosis.healthy:
            diagnosis = _from_pairs(plan, tester, spec, router, hosts, port_evidence, diagnosis, pairs, on_progress)
        if diagnosis is None or diagnosis.healthy:
            tester.label, tester.sweep = "all-nodes-sweep", True
            measuring += 1
            tester.run_round([Test(tuple(hosts))])
    except JobBroke as broke:
        # Nothing after a broken job is trustworthy evidence: report the job's error, on the pod.
        env = broke.record.envelope
        message = (
            f"job {env['details']['slurm']['label']} on {', '.join(env['hosts'])} measured nothing: {_errors(env)}"
        )
        on_progress(f"nccl: stopped: {message[:300]}")
        stop = CheckRun(
            "collectives", "fabric", "nccl", _envelope("nccl", "error", None, spec.measurement, [message], {})
        )
        return NcclOutcome(tester.records, [stop], None, tester.rounds - measuring)
    verdicts = attribute(spec, hosts, tester.records, diagnosis)
    return NcclOutcome(tester.records, verdicts, diagnosis, tester.rounds - measuring)


# Localizing from the pairs is for a few slow pairs. When more are slow than this share of all
# of them, the problem is pod-wide (every pair slow: a bound the pinned ring algorithm cannot
# reach, a congested fabric), and trying every node against a partner would only say that,
# in up to log2(N) rounds of per-rail jobs.
MAX_SLOW_PAIR_SHARE = 0.25


def _from_pairs(
    plan: FabricPlan,
    tester: SlurmTester,
    spec: NcclSpec,
    router: Router,
    hosts: Sequence[str],
    port_evidence: Sequence[PortEvidence],
    diagnosis: Diagnosis,
    pairs: list[list[Result]],
    on_progress: Callable[[str], None],
) -> Diagnosis:
    """After an all-nodes test that passed: the diagnosis from the pairwise rounds when a pair
    fell short (Localizer.resolve), counting round 1 and the rounds it ran."""
    bound = spec.bound
    assert bound is not None
    every = [r for results in pairs for r in results]
    slow = [r for r in every if r.bandwidth < bound]
    if not slow:
        return diagnosis
    which = ", ".join("-".join(r.test.nodes) for r in slow[:4]) + (" ..." if len(slow) > 4 else "")
    if len(slow) > MAX_SLOW_PAIR_SHARE * len(every):
        on_progress(
            f"nccl: {len(slow)} of {len(every)} pairs below {bound:.3g} GB/s ({which}): a pod-wide problem, "
            "not localized"
        )
        return diagnosis
    on_progress(
        f"nccl: {len(slow)} pair(s) below {bound:.3g} GB/s after an all-nodes test that passed ({which}); "
        "localizing from the pairs"
    )
    tester.label = None
    found = Localizer(
        plan, tester, bound, router, hosts=hosts, hca_names=spec.hca_names, port_evidence=port_evidence
    ).resolve(pairs)
    found = replace(
        found,
        rounds_used=diagnosis.rounds_used + found.rounds_used,
        tests_run=diagnosis.tests_run + found.tests_run,
    )
    on_progress(_found(found))
    return found


def _found(diagnosis: Diagnosis) -> str:
    return (
        f"nccl: localization used {diagnosis.rounds_used} round(s): "
        f"nodes {', '.join(diagnosis.bad_nodes) or 'none'}, links {len(diagnosis.bad_links)}, "
        f"suspects {', '.join(diagnosis.suspects) or 'none'}"
    )


def attribute(
    spec: NcclSpec, hosts: Sequence[str], records: list[CheckRun], diagnosis: Diagnosis | None
) -> list[CheckRun]:
    """One verdict run per node for the multi-node figure, with the evidence behind it.

    A node fails only on evidence that points at it: the localizer named it or
    its cable, could not clear it, or a job it was in gave wrong results. A slow
    test that nothing named explains fails the pod (scope "fabric", under
    "nccl"), not the healthy nodes that happened to be in it.
    """
    per_host: dict[str, list[tuple[float, CheckRun]]] = {h: [] for h in hosts}
    for run in records:
        value = figure(run, spec.measurement)
        for h in run.envelope.get("hosts", []):
            if h in per_host:
                per_host[h].append((value, run))
    accused = set(diagnosis.bad_nodes) if diagnosis else set()
    suspects = set(diagnosis.suspects) if diagnosis else set()
    link_hosts: dict[str, list[str]] = {}
    pod_problems: list[str] = []
    fabric_runs: list[CheckRun] = []
    switch_faults = False
    for a, b in diagnosis.bad_links if diagnosis else ():
        host = a.split(" ")[0]
        if host in per_host:
            link_hosts.setdefault(host, []).append(f"cable {a} <-> {b} is slow (named by fault localization)")
        else:
            switch_faults = True
            switch = a.split("[")[0]
            fabric_runs.append(
                CheckRun(
                    "collectives",
                    "fabric",
                    switch,
                    _envelope(
                        switch,
                        "fail",
                        None,
                        spec.measurement,
                        [f"switch cable {a} <-> {b} is slow (named by fault localization)"],
                        {},
                    ),
                )
            )
    named = accused | suspects | set(link_hosts)

    def explained(run: CheckRun) -> bool:
        members = set(run.envelope.get("hosts", []))
        return bool(members & named) or (switch_faults and len(members) > 1)

    bound = spec.bound
    wrong: dict[str, list[str]] = {}
    for run in records:
        label = run.envelope["details"]["slurm"]["label"]
        if run.status == "fail":  # measured, but the results were wrong (or the world size was, or a task failed)
            members = list(run.envelope.get("hosts", []))
            errors = [f for f in run.envelope.get("findings", []) if f.get("severity") == "error"] or [{}]
            for h in sorted({h for f in errors for h in finding_hosts(f, members)}, key=members.index):
                wrong.setdefault(h, []).append(f"{label}: {_errors(run.envelope)}")
        elif bound is not None and figure(run, spec.measurement) < bound and not explained(run):
            pod_problems.append(
                f"{label}: all_reduce busbw {figure(run, spec.measurement):.3g} GB/s is below "
                f"{bound:.3g}, and no node or cable named explains it (rerun; if it persists, "
                "localize with these nodes alone)"
            )
    verdicts: list[CheckRun] = []
    rounds = diagnosis.rounds_used if diagnosis else 0
    for host in hosts:
        tests = per_host[host]
        passing = [v for v, _ in tests if bound is not None and v >= bound]
        problems: list[str] = list(link_hosts.get(host, [])) + wrong.get(host, [])
        value: float | None
        if host in accused:
            pairs = [(v, r) for v, r in tests if len(r.envelope["hosts"]) == 2 and bound is not None and v < bound]
            value = min(v for v, _ in pairs) if pairs else min(v for v, _ in tests)
            partners = sorted({p for _, r in pairs for p in r.envelope["hosts"] if p != host})
            problems.insert(
                0,
                f"named by fault localization after {rounds} round(s): all_reduce busbw "
                f"{value:.3g} GB/s, below {bound:.3g}, with every partner tried "
                f"({', '.join(partners) or 'none'})",
            )
        elif host in suspects:
            value = None
            problems.insert(0, f"fault localization could not clear this node after {rounds} round(s)")
        else:
            value = max(passing) if passing else (max(v for v, _ in tests) if tests else None)
        status = "fail" if problems else "pass"
        details = {
            "tests": [
                {"label": r.envelope["details"]["slurm"]["label"], "busbw_gbps": round(v, 4), "status": r.status}
                for v, r in tests
            ],
            "localization_rounds": rounds,
        }
        verdicts.append(
            CheckRun("collectives", "pod", host, _envelope(host, status, value, spec.measurement, problems, details))
        )
    if pod_problems:
        fabric_runs.append(
            CheckRun(
                "collectives", "fabric", "nccl", _envelope("nccl", "fail", None, spec.measurement, pod_problems, {})
            )
        )
    return verdicts + fabric_runs


def _envelope(
    host: str, status: str, value: float | None, measurement: str, problems: list[str], details: dict[str, Any]
) -> dict[str, Any]:
    measured = [] if value is None else [{"figure": measurement, "value": value, "unit": "GB/s", "device": None}]
    return {
        **envelope("collectives", host, status, [finding(m) for m in problems], measurements=measured, details=details),
        "hosts": [host],
    }
