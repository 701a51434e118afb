"""Certify a deployed pod: what `podctl validate SITE` and `podctl nodes recheck` run.

    ValidateRequest -> the fabric's evidence (fabric_inputs)
                    -> validate_pod: conformance (testinfra), the node suites over SSH, the multi-node
                       ones through Slurm (the pieces in podctl.validate.pod), judged against each
                       node's profile
                    -> report.json, junit.xml, report.html -> each node's record of its certification

The command builds the request from its options and prints what comes back; nothing here knows
which command asked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from podctl import __version__
from podctl.core import state
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Site
from podctl.derive.facts import Facts
from podctl.derive.inventory import write_inventory
from podctl.derive.secrets import vault_env
from podctl.derive.topology import FabricPlan
from podctl.localize.localize import PortEvidence
from podctl.localize.routing import Forwarding
from podctl.runtime.remote import Nodes, site_nodes
from podctl.validate.fabric_inputs import FabricEvidence, read_fabric
from podctl.validate.figures import FIGURES
from podctl.validate.judge import Certification, CheckRun, judge
from podctl.validate.ledger import record_certifications
from podctl.validate.local import ValidationError, scratch_dir
from podctl.validate.nccl import NcclOutcome, NcclSpec, run_nccl
from podctl.validate.pod import (
    PodTarget,
    drain_failing,
    fabric_layout,
    nccl_spec,
    nccl_tests_runs,
    node_checks,
    partition_for,
    pick_partners,
    reference_rows,
    smoke_run,
    target,
    uniform_profile,
)
from podctl.validate.portcounters import port_counter_runs, port_evidence
from podctl.validate.report import write_report
from podctl.validate.request import Progress, ValidateRequest
from podctl.validate.slurm import SlurmError, SlurmJobs


@dataclass(frozen=True)
class SiteCertification:
    """What certify_site judged and wrote."""

    cert: Certification
    runs: list[CheckRun]
    meta: dict[str, Any]  # as report.json holds it
    drained: dict[str, str | None]  # host -> None once drained in Slurm, else why it could not be
    reports: dict[str, Path]  # json, junit, html -> the file written
    unrecorded: dict[str, str]  # host -> why its record of this certification could not be written


def certify_site(request: ValidateRequest, progress: Progress) -> SiteCertification:
    """Run the request's suites on the pod, judge them against each node's profile, write the
    report into request.report_dir and each node's record of its certification (podctl status
    reads it there). A configuration problem is a ValidationError before any suite runs."""
    site = request.site
    opens_vault = (
        vault_env(site, request.vault_password_files, request.vault_ids, os.environ)
        if "conformance" in request.suites
        else {}
    )
    workdir = scratch_dir(request.report_dir)
    nodes = site_nodes(site, request.private_key)
    fabric = FabricEvidence()
    if request.fabric is not None:
        fabric = read_fabric(site, request.fabric, nodes, workdir, progress)
    for note in fabric.notes:
        progress(note)
    result = validate_pod(request, nodes, workdir, fabric, opens_vault, progress)
    meta = {**result.meta, "podctl": __version__}
    if fabric.collected is not None:
        meta["fabric_tools"] = fabric.tools_meta()
    paths = write_report(request.report_dir, result.cert, result.runs, meta)
    recorded = record_certifications(
        nodes, result.cert, result.meta["hosts"], paths["html"].resolve(), request.suites, __version__
    )
    unrecorded = {host: why for host, why in recorded.items() if why}
    return SiteCertification(result.cert, result.runs, meta, result.drained, paths, unrecorded)


@dataclass
class PodValidation:
    """What validate_pod judged, for certify_site to report and record."""

    cert: Certification
    runs: list[CheckRun]
    meta: dict[str, Any]
    drained: dict[str, str | None]


def validate_pod(
    request: ValidateRequest,
    nodes: Nodes,
    workdir: Path,
    fabric: FabricEvidence,
    opens_vault: Mapping[str, str],
    progress: Progress,
) -> PodValidation:
    """Run the request's suites on the pod's compute nodes and judge them; with `request.only`,
    those nodes alone, paired in the multi-node jobs with known-good partners from the rest of the
    pod (a node added or repaired). `fabric` is what certify_site read of the fabric before; its
    runs are judged with the suites'. `opens_vault`: the environment that opens the site's !vault
    values for conformance."""
    site, suites = request.site, request.suites
    pod = target(site, request.only)
    facts = Facts(site)  # derived once: the fabric plan for nccl, the inventory for conformance
    slurm = SlurmJobs(nodes, pod.controller, None, request.reservation)
    partners = _partners(request, pod, facts, slurm)
    job_hosts = tuple(h for h in (*pod.hosts, *partners))
    if partners:
        progress(f"nodes under test: {fold_hostlist(pod.hosts)}; known-good partners: {fold_hostlist(partners)}")
    spec, plan = _configuration_checks(pod, facts, suites, job_hosts)
    started = datetime.now(UTC)
    t0 = time.monotonic()
    runs: list[CheckRun] = list(fabric.runs)
    if "conformance" in suites:
        runs += _conformance(request, pod, facts, workdir, opens_vault, progress)
    runs += node_checks(pod, nodes, suites, request.burnin, progress)
    evidence: list[PortEvidence] = []
    if "compute" in facts.plans:
        evidence, counter_runs = _port_counters(site, facts.plans["compute"], runs, fabric, progress)
        runs += counter_runs
    slurm.partition = partition_for(site, job_hosts)
    nccl: NcclOutcome | None = None
    if spec is not None and plan is not None:
        nccl = run_nccl(slurm, spec, plan, job_hosts, progress, evidence, fabric.forwarding)
        named = [h for h in partners if nccl.diagnosis and h in nccl.diagnosis.bad_nodes]
        if named:
            progress(f"note: fault localization named partner(s) {', '.join(named)}: certify them again")
        runs += nccl.records + nccl.verdicts
        if site.validation.nccl_tests_path:
            runs += nccl_tests_runs(pod, spec, plan, slurm, progress, job_hosts)
    if "smoke" in suites:
        runs.append(smoke_run(pod, slurm, f"{started:%Y%m%dT%H%M%SZ}", progress, job_hosts))
    cert = _judge(request, pod, runs, job_hosts)
    drained: dict[str, str | None] = {}
    if request.drain:
        drained = drain_failing(slurm, cert, pod.hosts, progress)
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "mode": request.mode,
        "site": site.source,
        "suites": list(suites),
        "burnin": request.burnin,
        "wall_s": round(time.monotonic() - t0, 1),
        "hosts": list(pod.hosts),
        "partners": list(partners),
        "controller": pod.controller,
        "python": pod.tools.python,
        "nccl": _nccl_meta(spec, nccl, fabric.forwarding),
        "drained": drained,
        "fabric": fabric_layout(facts.plans["compute"], pod.hosts) if "compute" in facts.plans else None,
    }
    return PodValidation(cert, runs, meta, drained)


def _partners(request: ValidateRequest, pod: PodTarget, facts: Facts, slurm: SlurmJobs) -> tuple[str, ...]:
    """With --nodes, the known-good partners of the nodes under test: from the request's
    partner_pool (podctl nodes recheck: the nodes it reserved), else from the idle ones."""
    if not request.only:
        return ()
    if request.partner_pool is not None:
        pool = tuple(h for h in pod.partners if h in request.partner_pool)
    else:
        try:
            states = slurm.states(pod.partners)
        except SlurmError as exc:
            raise ValidationError(f"cannot choose partners for --nodes: {exc}") from None
        pool = tuple(h for h in pod.partners if h in states and states[h].idle)
    return pick_partners(facts.plans.get("compute"), pod.hosts, pool)


def _configuration_checks(
    pod: PodTarget, facts: Facts, suites: tuple[str, ...], job_hosts: tuple[str, ...]
) -> tuple[NcclSpec | None, FabricPlan | None]:
    """Every configuration problem before any suite runs, not after an hour of burn-in; the
    multi-node collectives' spec and fabric plan when they run."""
    site = pod.site
    spec: NcclSpec | None = None
    plan = None
    if "collectives" in suites and len(job_hosts) >= 2:
        if "compute" not in site.fabrics:
            raise ValidationError(
                f"{site.source}: the collectives suite plans its rounds over the compute "
                "fabric; declare fabrics.compute, or leave collectives out with --suite"
            )
        plan = facts.plans["compute"]
        spec = nccl_spec(pod, suites)
    if "smoke" in suites:
        uniform_profile(pod)
        if pod.shared_dir is None:
            raise ValidationError(
                f"{site.source}: the smoke test writes its checkpoint to storage every compute "
                "node mounts, and no storage entry is mounted by all of them; add one, or leave "
                "smoke out with --suite"
            )
    return spec, plan


def _conformance(
    request: ValidateRequest,
    pod: PodTarget,
    facts: Facts,
    workdir: Path,
    opens_vault: Mapping[str, str],
    progress: Progress,
) -> list[CheckRun]:
    """The conformance suite's runs: the inventory podctl would write, checked on every host."""
    from podctl.validate.conformance.run import run_conformance

    site = pod.site
    progress("conformance: rendering the inventory and the configs podctl would write ...")
    inventory = workdir / "inventory"
    write_inventory(site, inventory, facts, sim=state.sim_pod(site))
    conformance = run_conformance(
        site,
        inventory,
        workdir / "conformance",
        request.private_key,
        progress,
        opens_vault,
        request.mitogen,
        request.full_drift,
    )
    # Under --nodes only the nodes under test are certified; the others are not judged here.
    kept = [r for r in conformance if not request.only or r.node in pod.hosts]
    failed = sorted({r.node for r in kept if r.status != "pass"})
    progress("conformance: " + (f"failing: {', '.join(failed)}" if failed else "every host conforms"))
    return kept


def _port_counters(
    site: Site, plan: FabricPlan, done: list[CheckRun], fabric: FabricEvidence, progress: Progress
) -> tuple[list[PortEvidence], list[CheckRun]]:
    """The evidence against cables from the port counters (ibqueryerrors) and the runs `done`, for
    fault localization; and its runs for the report, when there is any."""
    evidence, unplaced = port_evidence(site, plan, done, fabric.ibqueryerrors, fabric.names_by_guid)
    if not (evidence or unplaced or fabric.ibqueryerrors is not None):
        return evidence, []
    runs = port_counter_runs(evidence, unplaced, site)
    progress(
        f"port counters: {len(evidence)} cable(s) with evidence against them"
        + (f", {len(unplaced)} port(s) not on the plan" if unplaced else "")
    )
    return evidence, runs


def _judge(request: ValidateRequest, pod: PodTarget, runs: list[CheckRun], job_hosts: tuple[str, ...]) -> Certification:
    """Each node under test against its profile's reference rows for the suites run."""
    site, suites = pod.site, request.suites
    rows = {h: reference_rows(site, site.profile_of(site.node(h)), suites) for h in pod.hosts}
    if len(job_hosts) < 2:
        # One node under test has no partner: figures between nodes cannot be measured, nor missed.
        rows = {h: [r for r in rs if FIGURES[r.figure].scope != "pod"] for h, rs in rows.items()}
    if "conformance" in suites and not request.only:
        # Head and login nodes are certified on conformance alone: no figures are judged on them.
        rows.update({n.hostname: [] for n in site.nodes if n.hostname not in rows and n.hostname not in pod.excluded})
    return judge(f"{site.name} ({site.source})", rows, runs, pod.excluded)


def _nccl_meta(spec: NcclSpec | None, nccl: NcclOutcome | None, forwarding: Forwarding | None) -> dict[str, Any] | None:
    """report.json's `nccl`: the multi-node collectives' bound and what fault localization found."""
    if nccl is None or spec is None:
        return None
    return {
        "figure": spec.figure,
        "bound_gbps": spec.bound,
        # Which routes localization followed: the subnet manager's (--lfts), else podctl's model.
        "routes": "subnet manager's tables" if forwarding else "podctl's model of ftree (no --lfts)",
        "localization_rounds": nccl.rounds,
        "bad_nodes": list(nccl.diagnosis.bad_nodes) if nccl.diagnosis else [],
        "bad_links": [list(x) for x in nccl.diagnosis.bad_links] if nccl.diagnosis else [],
        "suspects": list(nccl.diagnosis.suspects) if nccl.diagnosis else [],
    }
