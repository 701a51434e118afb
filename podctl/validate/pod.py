"""The pieces of a pod's certification, which podctl.validate.certify runs in order:

    site model -> the compute nodes under test (target), their partners under --nodes
               -> per-node checks over SSH, all nodes at once (health, burnin, intra-node collectives)
               -> multi-node checks as Slurm jobs (collectives with fault localization, smoke)
               -> CheckRuns -> judged against each node's profile (reference_rows) -> drained if asked

The node-side programs are the `validation` package that the deploy stage
`validation-tools` installed with torch into a virtualenv on the nodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from podctl.core.cohost import cohost_capacity, cohost_scale
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import VALIDATION_EXEC, Profile, Reference, Role, Site, ValidationTools, mounts_shared_by
from podctl.derive.facts import hca_names
from podctl.derive.topology import SWITCH_TIERS, FabricPlan
from podctl.runtime.remote import Nodes, command_line
from podctl.validate.envelope import broken_envelope, note_dropped, parse_envelope
from podctl.validate.figures import FIGURES, NODE_SUITES, suite_of
from podctl.validate.judge import Certification, CheckRun, effective_reference
from podctl.validate.local import LocalCheck, ValidationError, plan_local
from podctl.validate.nccl import NcclSpec, pairwise_rounds, size_label
from podctl.validate.ncclperf import PerfSpec, perf_verdicts, run_perf
from podctl.validate.request import Progress
from podctl.validate.slurm import Job, SlurmJobs

NODE_ENV = {"PYTHONUNBUFFERED": "1"}


@dataclass(frozen=True)
class PodTarget:
    site: Site
    hosts: tuple[str, ...]  # compute nodes under test, in site order
    excluded: dict[str, str]  # host -> reason
    controller: str
    tools: ValidationTools  # what runs the checks on the nodes (as root, through VALIDATION_EXEC)
    shared_dir: str | None  # a folder on storage every compute node mounts
    # With --nodes: the pod's other compute nodes, known good, that multi-node jobs pair the nodes
    # under test with; their own figures are evidence, not judged.
    partners: tuple[str, ...] = ()


def target(site: Site, only: tuple[str, ...] = ()) -> PodTarget:
    if site.slurm is None or not site.slurm.controllers:
        raise ValidationError(
            f"{site.source}: the site has no slurm section; `podctl validate` runs its "
            "multi-node checks through Slurm (add slurm.controllers and partitions)"
        )
    excluded = {h: e.reason for e in site.validation.exclude for h in e.hosts}
    compute = [n.hostname for n in site.nodes if n.has(Role.COMPUTE)]
    if not compute:
        raise ValidationError(f"{site.source}: no node has the compute role; nothing to validate")
    hosts = tuple(h for h in compute if h not in excluded)
    if not hosts:
        raise ValidationError(f"{site.source}: validation.exclude leaves no compute node to validate")
    partners: tuple[str, ...] = ()
    if only:
        unknown = [h for h in only if h not in compute]
        if unknown:
            raise ValidationError(
                f"--nodes names {', '.join(unknown)}, not compute node(s) of {site.source}; "
                f"its compute nodes: {fold_hostlist(compute)}"
            )
        partners = tuple(h for h in hosts if h not in only)
        hosts = tuple(h for h in hosts if h in only)
        if not hosts:
            raise ValidationError(f"--nodes: every node named is under validation.exclude in {site.source}")
    shared = next((m.mountpoint for m in mounts_shared_by(site.storage, compute)), None)
    return PodTarget(
        site,
        hosts,
        {h: r for h, r in excluded.items() if h in compute},
        site.slurm.controllers[0],
        site.validation.tools,
        shared,
        partners,
    )


def pick_partners(plan: FabricPlan | None, hosts: tuple[str, ...], candidates: tuple[str, ...]) -> tuple[str, ...]:
    """One known-good partner per node under test for the multi-node jobs, from its own scalable
    unit where one is free (the test then crosses its leaf), else from anywhere; fewer when the
    pod has fewer others."""
    units = {h: i for i, su in enumerate(plan.scalable_units) for h in su} if plan else {}
    free = list(candidates)
    chosen: list[str] = []
    for host in hosts:
        if not free:
            break
        near = [c for c in free if units.get(c) == units.get(host)]
        pick = (near or free)[0]
        chosen.append(pick)
        free.remove(pick)
    return tuple(sorted(chosen, key=candidates.index))


def reference_rows(site: Site, profile: Profile, suites: tuple[str, ...]) -> list[Reference]:
    rows = effective_reference(profile, site.validation.thresholds.get(profile.name, {}))
    return [r for r in rows if r.figure in FIGURES and suite_of(r.figure) in suites]


# -- per-node checks over SSH ---------------------------------------------------------------


def node_checks(
    pod: PodTarget, nodes: Nodes, suites: tuple[str, ...], burnin: str, progress: Progress
) -> list[CheckRun]:
    """health, burnin and intra-node collectives on every node at once, one suite after the other."""
    site = pod.site
    plans: dict[str, list[LocalCheck]] = {}
    for host in pod.hosts:
        node = site.node(host)
        local_suites = tuple(s for s in NODE_SUITES if s in suites)
        checks = plan_local(site.profile_of(node), local_suites, burnin, None)
        # Intra-node collectives need two local ranks or more; a one-GPU node has no intra-node figure.
        plans[host] = [c for c in checks if c.check != "collectives" or _local_ranks(site.profile_of(node)) > 1]
    runs: list[CheckRun] = []
    for suite in NODE_SUITES:
        commands: dict[str, str] = {}
        checks: dict[str, LocalCheck] = {}
        for host, planned in plans.items():
            for check in planned:
                if check.suite == suite:
                    checks[host] = check
                    commands[host] = command_line(pod.tools.argv(*check.argv), NODE_ENV)
        if not commands:
            continue
        timeout = max(c.timeout_s for c in checks.values())
        progress(f"{suite}: {checks[next(iter(checks))].check} on {len(commands)} node(s) over SSH ...")
        started = time.monotonic()
        results = {}
        for wave in waves(pod, suite, list(commands)):
            results.update(nodes.run_each({h: commands[h] for h in wave}, timeout_s=timeout))
        for host in commands:
            r = results[host]
            check = checks[host].check
            if r.error:
                envelope = broken_envelope(check, host, r.error)
            else:
                envelope = parse_envelope(r.stdout, r.returncode, r.stderr, check, host)
                if r.returncode == 127 and not r.stdout.strip():
                    envelope = broken_envelope(
                        check,
                        host,
                        f"{VALIDATION_EXEC} or {pod.tools.python} is missing on {host}: deploy the "
                        "validation tools (`podctl deploy SITE --only validation-tools`)",
                    )
            runs.append(CheckRun(check, "node", host, note_dropped(envelope, r.dropped_note)))
        failed = [r.node for r in runs[-len(commands) :] if r.status in ("fail", "error")]
        progress(
            f"{suite}: done in {time.monotonic() - started:.0f} s"
            + (f"; failing: {', '.join(failed)}" if failed else "")
        )
    return runs


def waves(pod: PodTarget, suite: str, hosts: list[str]) -> list[list[str]]:
    """The nodes that run a node suite's check together, wave after wave. All of them at once on a
    real pod, and on a sim for a suite that measures no figure (health). On a sim, a suite whose
    figures are judged runs in waves that keep the co-hosted nodes at the density its reference
    figures were measured at (podctl.core.cohost), the nodes of a wave started together as they were
    then. (A window, a node started as soon as another finished, can put one node's interpreter
    start-up on another's measurement; at 32 sim nodes, one of two runs with it read two nodes'
    intra-node all-reduce below the bound: docs/scale.md.)"""
    measures = any(suite_of(f) == suite for f in FIGURES)
    if not measures or not all(pod.site.profile_of(pod.site.node(h)).emulated for h in hosts):
        return [hosts]
    size = max(1, cohost_capacity())
    return [hosts[i : i + size] for i in range(0, len(hosts), size)]


def _local_ranks(profile: Profile) -> int:
    return profile.gpus.count if profile.gpus else 2


# -- multi-node checks through Slurm -------------------------------------------------------


def _tasks(profile: Profile) -> tuple[int, int]:
    """(tasks per node, GPUs per node) of a multi-node job: one rank per GPU, one per CPU-only node."""
    return (profile.gpus.count, profile.gpus.count) if profile.gpus else (1, 0)


def uniform_profile(pod: PodTarget) -> Profile:
    """The profile of every compute node under test: one Slurm job cannot span GPU counts or HCA names."""
    profiles = {pod.site.profile_of(pod.site.node(h)).name: pod.site.profile_of(pod.site.node(h)) for h in pod.hosts}
    if len({(_tasks(p), p.compute_hcas.names) for p in profiles.values()}) > 1:
        raise ValidationError(
            "the compute nodes under test mix GPU counts or HCA names "
            f"({', '.join(sorted(profiles))}): one Slurm job cannot span them; validate one kind "
            "at a time, listing the others under validation.exclude"
        )
    return next(iter(profiles.values()))


def nccl_spec(pod: PodTarget, suites: tuple[str, ...]) -> NcclSpec:
    site = pod.site
    profile = uniform_profile(pod)
    figure = "allreduce_busbw_multinode" if profile.gpus else "allreduce_busbw_multinode_cpu"
    bounds = []
    for host in pod.hosts:
        rows = reference_rows(site, site.profile_of(site.node(host)), suites)
        bounds += [r.bound for r in rows if r.figure == figure]
    measurement = FIGURES[figure].measurement
    tasks, gpus = _tasks(profile)
    return NcclSpec(
        tools=pod.tools,
        gpu=profile.gpus is not None,
        tasks_per_node=tasks,
        gpus_per_node=gpus,
        figure=figure,
        measurement=measurement,
        size=size_label(measurement),
        bound=min(bounds) if bounds else None,
        emulated=profile.emulated,
        hca_names=hca_names(site, "compute"),
    )


def smoke_run(pod: PodTarget, slurm: SlurmJobs, stamp: str, progress: Progress, hosts: tuple[str, ...]) -> CheckRun:
    """The training smoke test across `hosts`: the nodes under test, with their partners under --nodes."""
    profile = uniform_profile(pod)
    tasks, gpus = _tasks(profile)
    world = tasks * len(hosts)
    first = hosts[0]
    if pod.shared_dir is None:
        envelope = broken_envelope(
            "smoke",
            first,
            "no storage mount is shared by every compute node: the smoke "
            "test writes its checkpoint there and restores it on every rank",
        )
        envelope["hosts"] = list(hosts)
        return CheckRun("smoke", "pod", first, envelope)
    argv = pod.tools.argv(
        "validation.smoke",
        "--expect-world-size",
        str(world),
        "--checkpoint-dir",
        f"{pod.shared_dir}/.podctl-smoke/{stamp}",
    )
    if profile.gpus is None:
        argv.append("--cpu")
    elif profile.gpus.peak_bf16_tflops:
        argv += ["--peak-tflops", f"{profile.gpus.peak_bf16_tflops:g}"]
    progress(f"smoke: training across {len(hosts)} node(s), {world} rank(s), through Slurm ...")
    started = time.monotonic()
    envelope = slurm.run(Job(f"smoke {len(hosts)} nodes", "smoke", hosts, tasks, gpus, tuple(argv), NODE_ENV, 1200.0))
    progress(f"smoke: {envelope['status']} in {time.monotonic() - started:.0f} s")
    scale = cohost_scale(len(hosts)) if profile.emulated else None
    if scale is not None:
        scale_to_density(envelope, SMOKE_SCALED, scale)
    return CheckRun("smoke", "pod", first, envelope)


# The smoke figures that measure throughput, which co-hosted sim nodes share (MFU is per GPU:
# never emulated).
SMOKE_SCALED = ("smoke_tflops_per_node",)


def scale_to_density(envelope: dict[str, Any], figures: tuple[str, ...], scale: float) -> None:
    """A sim job across more nodes than the host runs at its reference density: each node had
    1/scale of the cores the reference was measured with. Its throughput figures are scaled back
    to that density, the raw median kept beside each (`raw_value`), and the scale recorded in the details (as
    the collectives record theirs), so the report shows both."""
    envelope.setdefault("details", {})["cohost_scale"] = scale
    for m in envelope.get("measurements", []):
        if m.get("figure") in figures and isinstance(m.get("value"), int | float):
            m["raw_value"] = m["value"]
            m["value"] = m["value"] * scale
            spread = m.get("spread")
            if isinstance(spread, dict):  # min, max, percentiles, IQR: the same units as the value
                m["spread"] = {k: v * scale if isinstance(v, int | float) else v for k, v in spread.items()}


def fabric_layout(plan: FabricPlan, hosts: tuple[str, ...]) -> dict[str, Any]:
    """For the report: the nodes under test in fabric order (unit by unit), the units' sizes,
    and every switch by tier."""
    wanted = set(hosts)
    units = [[h for h in su if h in wanted] for su in plan.scalable_units]
    return {
        "node_order": [h for su in units for h in su],
        "su_sizes": [len(su) for su in units if su],
        "switches": {tier: [s.name for s in plan.switches_in(tier)] for tier in SWITCH_TIERS},
    }


def nccl_tests_runs(
    pod: PodTarget, spec: NcclSpec, plan: FabricPlan, slurm: SlurmJobs, progress: Progress, hosts: tuple[str, ...]
) -> list[CheckRun]:
    """The site's nccl-tests on the node sets of podctl's collectives: all nodes, and every pair."""
    site = pod.site
    perf = PerfSpec(site.validation.nccl_tests_path or "", site.validation.nccl_tests, spec.tasks_per_node,
                    spec.gpus_per_node)  # fmt: skip
    sets = [("all-nodes", hosts)] + [
        (name, test.nodes) for name, tests in pairwise_rounds(plan, hosts) for test in tests
    ]
    progress(f"nccl-tests: {', '.join(perf.binaries)} on {len(sets)} node set(s) through Slurm ...")
    records = run_perf(slurm, perf, sets, progress)
    return records + perf_verdicts(hosts, records)


def partition_for(site: Site, hosts: tuple[str, ...]) -> str | None:
    """A partition holding every node under test, the default one if it does."""
    if site.slurm is None:
        return None
    fits = [p for p in site.slurm.partitions if set(hosts) <= set(p.nodes)]
    if not fits:
        return None
    return next((p.name for p in fits if p.default), fits[0].name)


def drain_failing(
    slurm: SlurmJobs, cert: Certification, hosts: tuple[str, ...], progress: Progress
) -> dict[str, str | None]:
    """Drain the compute nodes that failed on something of their own.

    A figure that is missing only because a pod-wide job broke is no reason to
    take a node out; and when every node failed, the fault is the pod's (a
    Slurm, storage or fabric problem), so nothing is drained.
    """
    own = {h: [r for r in cert.failures.get(h, []) if "missing measurement" not in r] for h in hosts}
    reasons = {h: "podctl validate: " + "; ".join(rs) for h, rs in own.items() if rs}
    if not reasons:
        return {}
    if len(reasons) == len(hosts) and len(hosts) > 1:
        progress(
            f"not draining: all {len(hosts)} nodes failed, which points at the pod (Slurm, storage, fabric), "
            "not at nodes"
        )
        return {}
    progress(f"draining {', '.join(sorted(reasons))} in Slurm ...")
    return slurm.drain(reasons)
