"""Judge check results against a profile's reference table.

Every reference row becomes one verdict per node (or per device, for
per-GPU figures). A measurement below its bound fails; a missing one fails
too, with the reason; a check that failed or broke fails its node with its
own findings. The verdict names every failing node and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from podctl.core.model import Profile, Reference, ThresholdOverride
from podctl.validate.figures import FIGURES, NCCL_TESTS_CHECK, Figure


@dataclass(frozen=True)
class CheckRun:
    """One node-side check's JSON envelope, as collected from a node or a job."""

    check: str
    scope: str  # "node", "pod", "pair" or "fabric"
    node: str  # the host it ran on (pod-scope: the job's first host; fabric-scope: the switch at fault, or "fabric")
    envelope: dict[str, Any]

    @property
    def status(self) -> str:
        return str(self.envelope.get("status", "error"))

    def measurements(self, figure: str) -> list[dict[str, Any]]:
        return [m for m in self.envelope.get("measurements", []) if m.get("figure") == figure]


@dataclass(frozen=True)
class Verdict:
    node: str
    figure: str
    device: str | None
    passed: bool
    value: float | None
    bound: float
    reference: float
    tolerance: float
    unit: str
    source: str
    reason: str
    measured_by: str = "podctl"  # or "nccl-tests": the same reference row, judged on NVIDIA's benchmark


@dataclass
class Certification:
    subject: str
    verdicts: list[Verdict] = field(default_factory=list)
    # node -> reasons; a node with no entry passed everything judged on it
    failures: dict[str, list[str]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)

    @property
    def certified(self) -> bool:
        return not self.failures and bool(self.nodes)

    def fail(self, node: str, reason: str) -> None:
        reasons = self.failures.setdefault(node, [])
        if reason not in reasons:
            reasons.append(reason)

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "certified": self.certified,
            "verdict": "CERTIFIED" if self.certified else "NOT CERTIFIED",
            "nodes": self.nodes,
            "failures": self.failures,
            "excluded": self.excluded,
            # vars() rather than asdict(): Verdict holds no nested dataclass, and asdict deep-copies each field.
            "verdicts": [dict(vars(v)) for v in self.verdicts],
        }


# Runs that are evidence for other verdicts (the nccl suite's pair and group
# tests): their status blames no one by itself; the per-node verdict runs do.
EVIDENCE_SCOPES = ("pair", "group")


def finding_hosts(finding: dict[str, Any], members: list[str]) -> list[str]:
    """The hosts a job's finding blames: a finding that names its rank ("node02/gpu3", "node02")
    is that node's alone; any other, every member's."""
    owner = str(finding.get("device") or "").split("/")[0]
    return [owner] if owner in members and len(members) > 1 else list(members)


def _hosts(run: CheckRun) -> list[str]:
    return [str(h) for h in run.envelope.get("hosts", [run.node])]


def effective_reference(profile: Profile, overrides: dict[str, ThresholdOverride]) -> list[Reference]:
    """The profile's table with the site's overrides applied."""
    rows = []
    for row in profile.reference:
        o = overrides.get(row.figure)
        if o is not None:
            row = Reference(
                row.figure,
                o.value if o.value is not None else row.value,
                o.tolerance if o.tolerance is not None else row.tolerance,
                row.unit,
                row.source + " (overridden by the site)",
            )
        rows.append(row)
    return rows


def judge(
    subject: str, nodes: dict[str, list[Reference]], runs: list[CheckRun], excluded: dict[str, str] | None = None
) -> Certification:
    """`nodes` maps each node under test to its effective reference rows."""
    cert = Certification(subject=subject, nodes=sorted(nodes), excluded=dict(excluded or {}))
    by_check: dict[tuple[str, str, str], CheckRun] = {}
    for run in runs:
        by_check[(run.check, run.scope, run.node)] = run
        if run.status not in ("fail", "error") or run.scope in EVIDENCE_SCOPES:
            continue
        # A fabric element (a switch, its cables) at fault fails the pod under its own name;
        # a job across nodes fails every node it ran on.
        blamed = [run.node] if run.scope == "fabric" else [h for h in _hosts(run) if h in nodes]
        errors = [f for f in run.envelope.get("findings", []) if f.get("severity") == "error"]
        for finding in errors or [{"message": f"{run.check} ended with status {run.status}"}]:
            for node in finding_hosts(finding, blamed):
                cert.fail(node, f"{run.check}: {finding['message']}")
    pods = _PodRuns([r for r in runs if r.scope == "pod"])
    for node, rows in sorted(nodes.items()):
        for row in rows:
            spec = FIGURES.get(row.figure)
            if spec is None:
                cert.fail(node, f"{row.figure}: no check measures this figure")
                continue
            _judge_row(cert, node, row, spec, spec.check, spec.measurement, by_check, pods, "podctl")
            if spec.nccl_tests is not None:
                _judge_row(cert, node, row, spec, NCCL_TESTS_CHECK, spec.nccl_tests, by_check, pods, "nccl-tests")
    return cert


class _PodRuns:
    """Jobs across nodes, indexed once: the first job of a check each host was in, and each job's
    measurements by host. Looked up per node and row, a scan would cost nodes x jobs (and x the
    job's measurements): minutes at 1,344 nodes."""

    def __init__(self, runs: list[CheckRun]) -> None:
        self.first: dict[tuple[str, str], CheckRun] = {}
        for run in runs:
            for host in _hosts(run):
                self.first.setdefault((run.check, host), run)
        self._by_host: dict[tuple[int, str], dict[str, list[dict[str, Any]]]] = {}

    def run_of(self, check: str, host: str) -> CheckRun | None:
        return self.first.get((check, host))

    def measurements(self, run: CheckRun, measurement: str, host: str) -> list[dict[str, Any]]:
        """The job's measurements of this host: device None or the host, or "host/gpuN"."""
        key = (id(run), measurement)
        if key not in self._by_host:
            grouped: dict[str, list[dict[str, Any]]] = {}
            for m in run.measurements(measurement):
                device = m.get("device")
                owner = str(device).split("/")[0] if device else None
                if owner is None:
                    for h in _hosts(run):
                        grouped.setdefault(h, []).append(m)
                else:
                    grouped.setdefault(owner, []).append(m)
            self._by_host[key] = grouped
        return self._by_host[key].get(host, [])


def _judge_row(
    cert: Certification,
    node: str,
    row: Reference,
    spec: Figure,
    check: str,
    measurement: str,
    by_check: dict[tuple[str, str, str], CheckRun],
    pods: _PodRuns,
    measured_by: str,
) -> None:
    """The verdicts of one reference row on one node, from `check`'s `measurement`. nccl-tests figures
    are judged only where nccl-tests ran: a site without an nccl-tests build is not failed for it."""
    in_pod = pods.run_of(check, node)
    run = in_pod if spec.scope == "pod" else by_check.get((check, "node", node)) or in_pod
    if run is None and measured_by == "nccl-tests":
        return
    if run is not None and run.scope == "pod":
        # A job across nodes reports per host (or per host/GPU): keep this node's own.
        found = pods.measurements(run, measurement, node)
    else:
        found = run.measurements(measurement) if run else []
    if spec.per_device:
        found = [m for m in found if m.get("device")]
    label = row.figure if measured_by == "podctl" else f"{row.figure} ({measured_by})"
    if not found:
        why = f"{check} did not run" if run is None else f"{check} reported no {measurement} (status {run.status})"
        cert.verdicts.append(
            Verdict(
                node,
                row.figure,
                None,
                False,
                None,
                row.bound,
                row.value,
                row.tolerance,
                row.unit,
                row.source,
                f"missing measurement: {why}",
                measured_by,
            )
        )
        cert.fail(node, f"{label}: missing measurement ({why})")
        return
    for m in found:
        value = float(m["value"])
        passed = value >= row.bound
        device = m.get("device")
        where = f" on {device}" if device else ""
        reason = (
            f"{value:.4g} {row.unit} >= {row.bound:.4g}"
            if passed
            else f"{value:.4g} {row.unit}{where} is below {row.bound:.4g} ({row.value:g} - {row.tolerance:.0%})"
        )
        cert.verdicts.append(
            Verdict(
                node,
                row.figure,
                device,
                passed,
                value,
                row.bound,
                row.value,
                row.tolerance,
                row.unit,
                row.source,
                reason,
                measured_by,
            )
        )
        if not passed:
            cert.fail(node, f"{label}: {reason}")
