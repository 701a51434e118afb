"""Compare what the fabric tools saw with the cable map podctl planned.

One finding per cable, both ends named, the planned (switch) end first:

    MISSING       ib-leaf-su01-r3[5] <-> dgx005 mlx5_2
    WRONG-PORT    ib-leaf-su01-r3[5] <-> dgx005 mlx5_2: found at ib-leaf-su01-r3[6]
    WRONG-SWITCH  ib-leaf-su01-r3[5] <-> dgx005 mlx5_2: found at ib-leaf-su01-r4[40]
    WRONG-WIDTH   ib-leaf-su01-r3[5] <-> dgx005 mlx5_2: expected 4xNDR, found 2xNDR
    WRONG-SPEED   ib-leaf-su01-r3[5] <-> dgx005 mlx5_2: expected 4xNDR, found 4xHDR
    UNEXPECTED-LINK    ib-leaf-su01-r3[40] <-> dgx009 mlx5_2
    UNEXPECTED-DEVICE  ib-leaf-su01-r3[33] <-> rogue-switch[1]

A cable is identified by its lower end (the HCA, or the leaf/spine up-port),
which is what a technician follows: when that end lands elsewhere, the
finding says where. Links that the planned cables do not account for are
reported once each; a link to a device the plan does not know is an
unexpected device.
"""

from __future__ import annotations

from dataclasses import dataclass

from podctl.model import HcaNames
from podctl.topology import Cable, FabricPlan

from .formats import End, Link, Topology, hca_desc

KINDS = (
    "missing",
    "wrong-port",
    "wrong-switch",
    "wrong-width",
    "wrong-speed",
    "wrong-width-and-speed",
    "unexpected-link",
    "unexpected-device",
)


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    end_a: str  # the planned upper (switch) end, or for unexpected links the end the plan knows
    end_b: str  # the planned lower end (HCA, or the switch up-port)
    expected: str | None  # what the plan says: the far end, or a rate like 4xNDR
    found: str | None  # what the tool showed

    @property
    def problem(self) -> str:
        """What the tools showed instead, for the wrong-* kinds; '' for the others, whose kind says it all."""
        if self.kind in ("wrong-port", "wrong-switch"):
            return f"found at {self.found}"
        if self.kind.startswith("wrong-"):
            return f"expected {self.expected}, found {self.found}"
        return ""

    def render(self, align: bool = True) -> str:
        """One line, both ends named; `align` pads the kind so that a column of lines lines up."""
        kind = f"{self.kind.upper():<18}" if align else self.kind.upper()
        text = f"{kind} {self.end_a} <-> {self.end_b}"
        return f"{text}: {self.problem}" if self.problem else text

    def as_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "end_a": self.end_a, "end_b": self.end_b,
                "expected": self.expected, "found": self.found}


@dataclass(frozen=True)
class CablingReport:
    fabric: str
    source: str
    cables_planned: int
    links_found: int
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not self.findings

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(KINDS, 0)
        for finding in self.findings:
            counts[finding.kind] += 1
        return {k: v for k, v in counts.items() if v}

    def as_dict(self) -> dict[str, object]:
        return {"fabric": self.fabric, "source": self.source, "ok": self.ok,
                "cables_planned": self.cables_planned, "links_found": self.links_found,
                "counts": self.counts(), "findings": [f.as_dict() for f in self.findings]}


def planned_ends(cable: Cable, hca_names: HcaNames | None = None) -> tuple[End, End]:
    """(upper, lower) ends of a planned cable as the tools name them."""
    upper = End(cable.upper.device, cable.upper.port)
    if cable.tier == "node-leaf":
        return upper, End(hca_desc(cable.lower.device, cable.lower.port, hca_names), 1)
    return upper, End(cable.lower.device, cable.lower.port)


def check_cabling(plan: FabricPlan, topo: Topology, width: str = "4x",
                  hca_names: HcaNames | None = None) -> CablingReport:
    """Every difference between `topo` and the planned cables of `plan`, one finding per cable.

    `hca_names` (podctl.facts.hca_names) says what each node calls its HCAs; without it rail r is mlx5_<r-1>.
    """
    far: dict[End, tuple[End, Link]] = {}
    for link in topo.links:
        far[link.a] = (link.b, link)
        far[link.b] = (link.a, link)
    known = {s.name for s in plan.switches}
    planned: list[tuple[End, End, str]] = []
    for cable in plan.cables:
        upper, lower = planned_ends(cable, hca_names)
        planned.append((upper, lower, cable.rate))
        known.add(lower.device)
    accounted: set[int] = set()  # id() of links some finding or match explains
    findings: list[Finding] = []
    for upper, lower, rate in planned:
        expected_rate = f"{width}{rate}"
        hit = far.get(lower)
        if hit is None:
            # The lower end is dark; the upper end may still be cabled elsewhere,
            # which the unexpected-link pass reports from its own side.
            findings.append(Finding("missing", str(upper), str(lower), str(upper), None))
            continue
        seen_end, link = hit
        accounted.add(id(link))
        if seen_end != upper:
            kind = "wrong-port" if seen_end.device == upper.device else "wrong-switch"
            findings.append(Finding(kind, str(upper), str(lower), str(upper), str(seen_end)))
            continue
        if link.rate != expected_rate:
            width_bad = link.width != width
            speed_bad = link.speed != rate
            kind = "wrong-width-and-speed" if width_bad and speed_bad else ("wrong-width" if width_bad else "wrong-speed")
            findings.append(Finding(kind, str(upper), str(lower), expected_rate, link.rate))
    for link in topo.links:
        if id(link) in accounted:
            continue
        a_known, b_known = link.a.device in known, link.b.device in known
        if a_known and b_known:
            findings.append(Finding("unexpected-link", str(link.a), str(link.b), None, link.rate))
        else:
            ours, theirs = (link.a, link.b) if a_known else (link.b, link.a)
            findings.append(Finding("unexpected-device", str(ours), str(theirs), None, theirs.device))
    return CablingReport(plan.fabric, topo.source, len(plan.cables), len(topo.links), tuple(findings))
