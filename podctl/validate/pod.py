"""`podctl validate SITE`: certify a deployed pod, suite by suite.

    site model -> rendered inventory -> conformance (testinfra)
               -> per-node checks over SSH, all nodes at once (health, burnin, intra-node nccl)
               -> multi-node checks as Slurm jobs (nccl with fault localization, smoke)
               -> CheckRuns -> judge against each node's profile -> report

The node-side programs are the `validation` package that the deploy stage
`validation-tools` installed with torch into a virtualenv on the nodes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..facts import Facts, hca_names
from ..inventory import write_inventory
from ..model import Profile, Reference, Role, Site, mounts_shared_by, validation_python
from .envelope import broken_envelope, parse_envelope
from .figures import CHECK_SUITES, FIGURES
from .judge import Certification, CheckRun, effective_reference, judge
from .local import LocalCheck, ValidationError, plan_local
from .nccl import NcclOutcome, NcclSpec, run_nccl, size_label
from .remote import Nodes, SshTarget, command_line
from .slurm import Job, Slurm

NODE_ENV = {"PYTHONUNBUFFERED": "1"}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PodTarget:
    site: Site
    hosts: tuple[str, ...]  # compute nodes under test, in site order
    excluded: dict[str, str]  # host -> reason
    controller: str
    python: str  # the validation virtualenv's interpreter on the nodes
    shared_dir: str | None  # a folder on storage every compute node mounts


def target(site: Site) -> PodTarget:
    if site.slurm is None or not site.slurm.controllers:
        raise ValidationError(f"{site.source}: the site has no slurm section; `podctl validate` runs its "
                              "multi-node checks through Slurm (add slurm.controllers and partitions)")
    excluded = {h: e.reason for e in site.validation.exclude for h in e.hosts}
    compute = [n.hostname for n in site.nodes if n.has(Role.COMPUTE)]
    if not compute:
        raise ValidationError(f"{site.source}: no node has the compute role; nothing to validate")
    hosts = tuple(h for h in compute if h not in excluded)
    if not hosts:
        raise ValidationError(f"{site.source}: validation.exclude leaves no compute node to validate")
    shared = next((m.mountpoint for m in mounts_shared_by(site.storage, compute)), None)
    return PodTarget(site, hosts, {h: r for h, r in excluded.items() if h in compute}, site.slurm.controllers[0],
                     validation_python(site), shared)


def ssh_nodes(site: Site, private_key: Path | None) -> Nodes:
    return Nodes({n.hostname: SshTarget(n.hostname, str(n.address), "root", private_key) for n in site.nodes})


def reference_rows(site: Site, profile: Profile, suites: tuple[str, ...]) -> list[Reference]:
    rows = effective_reference(profile, site.validation.thresholds.get(profile.name, {}))
    return [r for r in rows if r.figure in FIGURES and CHECK_SUITES[FIGURES[r.figure].check] in suites]


# -- per-node checks over SSH ---------------------------------------------------------------


def node_checks(pod: PodTarget, nodes: Nodes, suites: tuple[str, ...], burnin: str,
                progress: Progress) -> list[CheckRun]:
    """health, burnin and intra-node nccl on every node at once, one suite after the other."""
    site = pod.site
    plans: dict[str, list[LocalCheck]] = {}
    for host in pod.hosts:
        node = site.node(host)
        local_suites = tuple(s for s in ("health", "burnin", "nccl") if s in suites)
        checks = plan_local(site.profile_of(node), local_suites, burnin, None)
        # Intra-node collectives need two local ranks or more; a one-GPU node has no intra-node figure.
        plans[host] = [c for c in checks if c.check != "collectives" or _local_ranks(site.profile_of(node)) > 1]
    runs: list[CheckRun] = []
    for suite in ("health", "burnin", "nccl"):
        commands: dict[str, str] = {}
        checks: dict[str, LocalCheck] = {}
        for host, planned in plans.items():
            for check in planned:
                if check.suite == suite:
                    checks[host] = check
                    commands[host] = command_line([pod.python, "-m", *check.argv], NODE_ENV)
        if not commands:
            continue
        timeout = max(c.timeout_s for c in checks.values())
        progress(f"{suite}: {checks[next(iter(checks))].check} on {len(commands)} node(s) over SSH ...")
        started = time.monotonic()
        results = nodes.run_each(commands, timeout_s=timeout)
        for host in commands:
            r = results[host]
            check = checks[host].check
            if r.error:
                envelope = broken_envelope(check, host, r.error)
            else:
                envelope = parse_envelope(r.stdout, r.returncode, r.stderr, check, host)
                if r.returncode == 127 and not r.stdout.strip():
                    envelope = broken_envelope(check, host, f"{pod.python} is missing on {host}: deploy the "
                                                            "validation tools (`podctl deploy SITE --only validation-tools`)")
            runs.append(CheckRun(check, "node", host, envelope))
        failed = [r.node for r in runs[-len(commands):] if r.status in ("fail", "error")]
        progress(f"{suite}: done in {time.monotonic() - started:.0f} s"
                 + (f"; failing: {', '.join(failed)}" if failed else ""))
    return runs


def _local_ranks(profile: Profile) -> int:
    return profile.gpus.count if profile.gpus else 2


# -- multi-node checks through Slurm -------------------------------------------------------


def _tasks(profile: Profile) -> tuple[int, int]:
    """(tasks per node, GPUs per node) of a multi-node job: one rank per GPU, one per CPU-only node."""
    return (profile.gpus.count, profile.gpus.count) if profile.gpus else (1, 0)


def _uniform_profile(pod: PodTarget) -> Profile:
    profiles = {pod.site.profile_of(pod.site.node(h)).name: pod.site.profile_of(pod.site.node(h)) for h in pod.hosts}
    if len({(_tasks(p), p.compute_hcas.names) for p in profiles.values()}) > 1:
        raise ValidationError("the compute nodes under test mix GPU counts or HCA names "
                              f"({', '.join(sorted(profiles))}): one Slurm job cannot span them; validate one kind "
                              "at a time, listing the others under validation.exclude")
    return next(iter(profiles.values()))


def nccl_spec(pod: PodTarget, suites: tuple[str, ...]) -> NcclSpec:
    site = pod.site
    profile = _uniform_profile(pod)
    figure = "allreduce_busbw_multinode" if profile.gpus else "allreduce_busbw_multinode_cpu"
    bounds = []
    for host in pod.hosts:
        rows = reference_rows(site, site.profile_of(site.node(host)), suites)
        bounds += [r.bound for r in rows if r.figure == figure]
    measurement = FIGURES[figure].measurement
    tasks, gpus = _tasks(profile)
    return NcclSpec(python=pod.python, gpu=profile.gpus is not None, tasks_per_node=tasks, gpus_per_node=gpus,
                    figure=figure, measurement=measurement, size=size_label(measurement),
                    bound=min(bounds) if bounds else None, emulated=profile.emulated,
                    hca_names=hca_names(site, "compute"))


def smoke_run(pod: PodTarget, slurm: Slurm, stamp: str, progress: Progress) -> CheckRun:
    profile = _uniform_profile(pod)
    tasks, gpus = _tasks(profile)
    world = tasks * len(pod.hosts)
    first = pod.hosts[0]
    if pod.shared_dir is None:
        envelope = broken_envelope("smoke", first, "no storage mount is shared by every compute node: the smoke "
                                                   "test writes its checkpoint there and restores it on every rank")
        envelope["hosts"] = list(pod.hosts)
        return CheckRun("smoke", "pod", first, envelope)
    argv = [pod.python, "-m", "validation.smoke", "--expect-world-size", str(world),
            "--checkpoint-dir", f"{pod.shared_dir}/.podctl-smoke/{stamp}"]
    if profile.gpus is None:
        argv.append("--cpu")
    elif profile.gpus.peak_bf16_tflops:
        argv += ["--peak-tflops", f"{profile.gpus.peak_bf16_tflops:g}"]
    progress(f"smoke: training across {len(pod.hosts)} node(s), {world} rank(s), through Slurm ...")
    started = time.monotonic()
    envelope = slurm.run(Job(f"smoke {len(pod.hosts)} nodes", "smoke", pod.hosts, tasks, gpus, tuple(argv),
                             NODE_ENV, 1200.0))
    progress(f"smoke: {envelope['status']} in {time.monotonic() - started:.0f} s")
    return CheckRun("smoke", "pod", first, envelope)


# -- the whole run --------------------------------------------------------------------------


@dataclass
class PodValidation:
    cert: Certification
    runs: list[CheckRun]
    meta: dict[str, Any]
    drained: dict[str, str | None]


def validate_pod(site: Site, suites: tuple[str, ...], burnin: str, workdir: Path, private_key: Path | None,
                 drain: bool, extra_runs: list[CheckRun], progress: Progress) -> PodValidation:
    pod = target(site)
    facts = Facts(site)  # derived once: the fabric plan for nccl, the inventory for conformance
    # Every configuration problem before any suite runs: not after an hour of burn-in.
    spec: NcclSpec | None = None
    plan = None
    if "nccl" in suites and len(pod.hosts) >= 2:
        if "compute" not in site.fabrics:
            raise ValidationError(f"{site.source}: the nccl suite plans its rounds over the compute fabric; "
                                  "declare fabrics.compute, or leave nccl out with --suite")
        plan = facts.plans["compute"]
        spec = nccl_spec(pod, suites)
    if "smoke" in suites:
        _uniform_profile(pod)
        if pod.shared_dir is None:
            raise ValidationError(f"{site.source}: the smoke test writes its checkpoint to storage every compute "
                                  "node mounts, and no storage entry is mounted by all of them; add one, or leave "
                                  "smoke out with --suite")
    nodes = ssh_nodes(site, private_key)
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    runs: list[CheckRun] = list(extra_runs)
    if "conformance" in suites:
        from .conformance.run import run_conformance

        progress("conformance: rendering the inventory and the configs podctl would write ...")
        inventory = workdir / "inventory"
        write_inventory(site, inventory, facts)
        runs += run_conformance(site, inventory, workdir / "conformance", private_key, progress)
        failed = sorted({r.node for r in runs if r.check == "conformance" and r.status != "pass"})
        progress("conformance: " + (f"failing: {', '.join(failed)}" if failed else "every host conforms"))
    runs += node_checks(pod, nodes, suites, burnin, progress)
    slurm = Slurm(nodes, pod.controller, _partition(site, pod.hosts))
    nccl: NcclOutcome | None = None
    if spec is not None and plan is not None:
        nccl = run_nccl(slurm, spec, plan, pod.hosts, progress)
        runs += nccl.records + nccl.verdicts
    if "smoke" in suites:
        runs.append(smoke_run(pod, slurm, f"{started:%Y%m%dT%H%M%SZ}", progress))
    rows = {h: reference_rows(site, site.profile_of(site.node(h)), suites) for h in pod.hosts}
    if len(pod.hosts) < 2:
        # One node under test has no partner: figures between nodes cannot be measured, nor missed.
        rows = {h: [r for r in rs if FIGURES[r.figure].scope != "pod"] for h, rs in rows.items()}
    if "conformance" in suites:
        # Head and login nodes are certified on conformance alone: no figures are judged on them.
        rows.update({n.hostname: [] for n in site.nodes if n.hostname not in rows and n.hostname not in pod.excluded})
    cert = judge(f"{site.name} ({site.source})", rows, runs, pod.excluded)
    drained: dict[str, str | None] = {}
    if drain:
        drained = drain_failing(slurm, cert, pod.hosts, progress)
    meta = {"started": started.isoformat(timespec="seconds"), "mode": "site", "site": site.source,
            "suites": list(suites), "burnin": burnin, "wall_s": round(time.monotonic() - t0, 1),
            "hosts": list(pod.hosts), "controller": pod.controller, "python": pod.python,
            "nccl": None if nccl is None or spec is None else {
                "figure": spec.figure, "bound_gbps": spec.bound,
                "localization_rounds": nccl.rounds,
                "bad_nodes": list(nccl.diagnosis.bad_nodes) if nccl.diagnosis else [],
                "bad_links": [list(x) for x in nccl.diagnosis.bad_links] if nccl.diagnosis else [],
                "suspects": list(nccl.diagnosis.suspects) if nccl.diagnosis else []},
            "drained": drained}
    return PodValidation(cert, runs, meta, drained)


def _partition(site: Site, hosts: tuple[str, ...]) -> str | None:
    """A partition holding every node under test, the default one if it does."""
    if site.slurm is None:
        return None
    fits = [p for p in site.slurm.partitions if set(hosts) <= set(p.nodes)]
    if not fits:
        return None
    return next((p.name for p in fits if p.default), fits[0].name)


def drain_failing(slurm: Slurm, cert: Certification, hosts: tuple[str, ...], progress: Progress) -> dict[str, str | None]:
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
        progress(f"not draining: all {len(hosts)} nodes failed, which points at the pod (Slurm, storage, fabric), "
                 "not at nodes")
        return {}
    progress(f"draining {', '.join(sorted(reasons))} in Slurm ...")
    return slurm.drain(reasons)
