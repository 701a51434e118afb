"""Judge check results against a profile's reference table.

Every reference row becomes one verdict per node (or per device, for
per-GPU figures). A measurement below its bound fails; a missing one fails
too, with the reason; a check that failed or broke fails its node with its
own findings. The verdict names every failing node and why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..model import Profile, Reference, ThresholdOverride
from .figures import FIGURES


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
            "verdicts": [asdict(v) for v in self.verdicts],
        }


# Runs that are evidence for other verdicts (the nccl suite's pair and group
# tests): their status blames no one by itself; the per-node verdict runs do.
EVIDENCE_SCOPES = ("pair", "group")


def _hosts(run: CheckRun) -> list[str]:
    return [str(h) for h in run.envelope.get("hosts", [run.node])]


def effective_reference(profile: Profile, overrides: dict[str, ThresholdOverride]) -> list[Reference]:
    """The profile's table with the site's overrides applied."""
    rows = []
    for row in profile.reference:
        o = overrides.get(row.figure)
        if o is not None:
            row = Reference(row.figure, o.value if o.value is not None else row.value,
                            o.tolerance if o.tolerance is not None else row.tolerance, row.unit,
                            row.source + " (overridden by the site)")
        rows.append(row)
    return rows


def judge(subject: str, nodes: dict[str, list[Reference]], runs: list[CheckRun],
          excluded: dict[str, str] | None = None) -> Certification:
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
            # A job's finding that names its rank ("node02/gpu3", "node02") is that node's alone.
            owner = str(finding.get("device") or "").split("/")[0]
            for node in [owner] if owner in blamed and len(blamed) > 1 else blamed:
                cert.fail(node, f"{run.check}: {finding['message']}")
    pod_runs = [r for r in runs if r.scope == "pod"]
    for node, rows in sorted(nodes.items()):
        for row in rows:
            spec = FIGURES.get(row.figure)
            if spec is None:
                cert.fail(node, f"{row.figure}: no check measures this figure")
                continue
            in_pod = next((r for r in pod_runs if r.check == spec.check and node in _hosts(r)), None)
            run = in_pod if spec.scope == "pod" else by_check.get((spec.check, "node", node)) or in_pod
            found = run.measurements(spec.measurement) if run else []
            if run is not None and run.scope == "pod":
                # A job across nodes reports per host (or per host/GPU): keep this node's own.
                found = [m for m in found if m.get("device") in (None, node) or
                         str(m.get("device", "")).startswith(f"{node}/")]
            if spec.per_device:
                found = [m for m in found if m.get("device")]
            if not found:
                why = (f"{spec.check} did not run" if run is None else
                       f"{spec.check} reported no {spec.measurement} (status {run.status})")
                verdict = Verdict(node, row.figure, None, False, None, row.bound, row.value, row.tolerance, row.unit,
                                  row.source, f"missing measurement: {why}")
                cert.verdicts.append(verdict)
                cert.fail(node, f"{row.figure}: missing measurement ({why})")
                continue
            for m in found:
                value = float(m["value"])
                passed = value >= row.bound
                device = m.get("device")
                where = f" on {device}" if device else ""
                reason = (f"{value:.4g} {row.unit} >= {row.bound:.4g}" if passed else
                          f"{value:.4g} {row.unit}{where} is below {row.bound:.4g} "
                          f"({row.value:g} - {row.tolerance:.0%})")
                cert.verdicts.append(Verdict(node, row.figure, device, passed, value, row.bound, row.value,
                                             row.tolerance, row.unit, row.source, reason))
                if not passed:
                    cert.fail(node, f"{row.figure}: {reason}")
    return cert
