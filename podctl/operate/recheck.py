"""`podctl nodes recheck`: the safe way back into service for a drained node.

    drained nodes -> the health gate on each (no Slurm)
                  -> a maintenance reservation over them and idle known-good partners
                  -> resume them inside it (no user job can land: the reservation is root's)
                  -> certify_site on them alone: health, burn-in, intra-node and paired collectives,
                     the report and each node's record of its certification
                  -> pass: stay resumed; fail: drained again with the new reason
                  -> the reservation deleted, whatever happened

A node a person drained (a reason podctl did not write) is left alone unless asked. A node
that is resumed but not proven (an interruption, a broken job) is drained again before the
command returns: nothing leaves a recheck in service without having passed.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Role, Site
from podctl.derive.nodehealth import GATE_PROGRAM
from podctl.runtime.remote import Nodes, command_line, site_nodes
from podctl.validate.certify import SiteCertification, certify_site
from podctl.validate.local import ValidationError
from podctl.validate.pod import pick_partners
from podctl.validate.request import Progress, ValidateRequest
from podctl.validate.slurm import NodeState, SlurmError, SlurmJobs

# A recheck's maintenance reservation; long enough for a quick burn-in and the paired collectives.
RESERVATION_MINUTES = 120
SUITES = ("health", "burnin", "collectives")


@dataclass
class Recheck:
    resumed: list[str] = field(default_factory=list)
    still_drained: dict[str, str] = field(default_factory=dict)  # host -> the new reason
    skipped: dict[str, str] = field(default_factory=dict)  # host -> why it was not rechecked
    problems: list[str] = field(default_factory=list)  # Slurm calls that failed
    validation: SiteCertification | None = None  # None: none ran (no node to test, or no reservation)


def _gate(nodes: Nodes, hosts: list[str]) -> dict[str, list[str]]:
    """Each host's health gate findings (empty: healthy), run by hand: --no-drain, --print."""
    results = nodes.run_each({h: command_line([GATE_PROGRAM, "--no-drain", "--print"]) for h in hosts}, 60)
    out: dict[str, list[str]] = {}
    for host, r in results.items():
        try:
            record = json.loads(r.stdout)
            out[host] = [str(f) for f in record.get("findings", [])]
            if record.get("status") == "error":
                out[host] = [f"health gate could not judge the node: {'; '.join(record.get('errors', []))[:200]}"]
        except ValueError:
            out[host] = [f"health gate did not run: {(r.error or r.stderr.strip() or 'no output')[:200]}"]
    return out


def reason(findings: list[str]) -> str:
    text = "podctl recheck: " + findings[0] + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else "")
    return text[:200]


def recheck(
    site: Site,
    hosts: tuple[str, ...],
    private_key: Path | None,
    any_reason: bool,
    burnin: str,
    report_dir: Path,
    progress: Progress,
) -> Recheck:
    if site.slurm is None:
        raise ValidationError(f"{site.source}: the site has no slurm section: there is nothing to drain or resume")
    compute = [n.hostname for n in site.nodes if n.has(Role.COMPUTE)]
    unknown = [h for h in hosts if h not in compute]
    if unknown:
        raise ValidationError(f"{', '.join(unknown)}: not compute node(s) of {site.source} ({fold_hostlist(compute)})")
    nodes = site_nodes(site, private_key)
    slurm = SlurmJobs(nodes, site.slurm.controllers[0], None)
    try:
        states = slurm.states(compute)
    except SlurmError as exc:
        raise ValidationError(str(exc)) from None
    out = Recheck()
    candidates = _candidates(hosts, states, any_reason, out)
    if not candidates:
        return out
    progress(f"recheck: {fold_hostlist(candidates)}: health gate ...")
    for host, findings in _gate(nodes, candidates).items():
        if findings:
            out.still_drained[host] = reason(findings)
    candidates = [h for h in candidates if h not in out.still_drained]
    try:
        if candidates:
            _validate_in_reservation(site, slurm, states, candidates, private_key, burnin, report_dir, progress, out)
    finally:
        # Also after an interruption: every node not proven leaves drained, with the newest reason.
        for host, why in out.still_drained.items():
            problem = slurm.scontrol("update", f"NodeName={host}", "State=DRAIN", f"Reason={why}")
            if problem:
                out.problems.append(f"could not drain {host}: {problem}")
    return out


def _candidates(hosts: tuple[str, ...], states: dict[str, NodeState], any_reason: bool, out: Recheck) -> list[str]:
    candidates = []
    for host in hosts:
        state = states.get(host)
        if state is None:
            out.skipped[host] = "Slurm does not know this node (deploy it first)"
        elif not state.drained:
            out.skipped[host] = f"not drained ({state.state})"
        elif not state.by_podctl and not any_reason:
            out.skipped[host] = f"drained by a person ({state.reason}); --any-reason rechecks it too"
        else:
            candidates.append(host)
    return candidates


def _validate_in_reservation(
    site: Site,
    slurm: SlurmJobs,
    states: dict[str, NodeState],
    candidates: list[str],
    private_key: Path | None,
    burnin: str,
    report_dir: Path,
    progress: Progress,
    out: Recheck,
) -> None:
    from podctl.derive.facts import Facts

    idle = tuple(h for h, s in states.items() if s.idle and h not in candidates)
    partners = pick_partners(Facts(site).plans.get("compute"), tuple(candidates), idle)
    name = f"podctl-recheck-{uuid.uuid4().hex[:8]}"
    members = ",".join([*candidates, *partners])
    problem = slurm.scontrol(
        "create",
        "reservation",
        f"ReservationName={name}",
        "StartTime=now",
        f"Duration={RESERVATION_MINUTES}",
        f"Nodes={members}",
        "Users=root",
        "Flags=MAINT,IGNORE_JOBS",
    )
    if problem:
        out.problems.append(f"could not create the maintenance reservation: {problem}")
        out.still_drained.update({h: "podctl recheck: could not reserve the node to test it" for h in candidates})
        return
    proven: set[str] = set()
    try:
        progress(f"recheck: reservation {name} on {members}; resuming {fold_hostlist(candidates)} inside it ...")
        for host in candidates:
            problem = slurm.scontrol("update", f"NodeName={host}", "State=RESUME")
            if problem:
                out.problems.append(f"could not resume {host}: {problem}")
        request = ValidateRequest(
            site=site,
            private_key=private_key,
            suites=SUITES,
            report_dir=report_dir,
            burnin=burnin,
            only=tuple(candidates),
            reservation=name,
            partner_pool=partners,
            mode="recheck",
        )
        result = certify_site(request, progress)
        out.validation = result
        for host in candidates:
            failures = result.cert.failures.get(host)
            if failures:
                out.still_drained[host] = reason(failures)
            else:
                proven.add(host)
                out.resumed.append(host)
    finally:
        for host in candidates:
            if host not in proven and host not in out.still_drained:
                out.still_drained[host] = "podctl recheck: interrupted before the node was proven"
        problem = slurm.scontrol("delete", f"ReservationName={name}")
        if problem:
            out.problems.append(f"could not delete reservation {name}: {problem}")
