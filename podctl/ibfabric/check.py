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

Devices are named after the plan by `podctl.ibfabric.identity`: podctl's own
names, the usual vendor descriptions (`MF0;<name>:...`, `<host> HCA-<n>`),
the site's `Naming` patterns, GUID anchors, and for switches still on their
factory description, what they are cabled to. A device the plan does not
know is named by description, with its GUID where that could be confused
(`Quantum Mellanox Technologies (0x...)`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from podctl.core.errors import PodctlError
from podctl.core.model import Fabric, HcaNames
from podctl.derive.topology import FabricPlan
from podctl.ibfabric.formats import read_topology
from podctl.ibfabric.identity import Anchors, Naming, identify, naming_from_templates
from podctl.ibfabric.topofile import End, Link, Topology, guid_key, planned_ends


class FabricCheckError(PodctlError):
    """A fabric check that cannot run as asked; the message says what to change."""


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
class CableFinding:
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

    @property
    def label(self) -> str | None:
        """The planned cable's label in the cable schedule (podctl.ibfabric.schedule: its upper end,
        `switch[port]`, which is this finding's first end); None for a link the plan does not have."""
        return None if self.kind.startswith("unexpected-") else self.end_a

    def render(self, align: bool = True) -> str:
        """One line, both ends named; `align` pads the kind so that a column of lines lines up."""
        kind = f"{self.kind.upper():<18}" if align else self.kind.upper()
        text = f"{kind} {self.end_a} <-> {self.end_b}"
        return f"{text}: {self.problem}" if self.problem else text

    def as_dict(self) -> dict[str, str | None]:
        return {
            "kind": self.kind,
            "label": self.label,
            "end_a": self.end_a,
            "end_b": self.end_b,
            "expected": self.expected,
            "found": self.found,
        }


@dataclass(frozen=True)
class CablingReport:
    fabric: str
    source: str
    cables_planned: int
    links_found: int  # cables the tools showed (links to SHARP aggregation nodes, inside a switch, left out)
    findings: tuple[CableFinding, ...]
    warnings: tuple[str, ...] = ()  # lines the parser skipped, devices that could not be told apart
    identified: Mapping[str, int] = field(default_factory=dict)  # devices per way they were named (Identity.counts)
    names: Mapping[str, str] = field(default_factory=dict)  # device key ("0x<guid>"), or a port GUID -> planned name
    lids: Mapping[int, str] = field(default_factory=dict)  # LID -> the device's name in findings (the tools' LIDs)

    @property
    def ok(self) -> bool:
        return not self.findings

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(KINDS, 0)
        for finding in self.findings:
            counts[finding.kind] += 1
        return {k: v for k, v in counts.items() if v}

    def as_dict(self) -> dict[str, object]:
        return {
            "fabric": self.fabric,
            "source": self.source,
            "ok": self.ok,
            "cables_planned": self.cables_planned,
            "links_found": self.links_found,
            "counts": self.counts(),
            "findings": [f.as_dict() for f in self.findings],
            "identified": dict(self.identified),
            "warnings": list(self.warnings),
        }


def check_cabling(
    plan: FabricPlan,
    topo: Topology,
    width: str = "4x",
    hca_names: HcaNames | None = None,
    naming: Naming | None = None,
    anchors: Anchors | None = None,
) -> CablingReport:
    """Every difference between `topo` and the planned cables of `plan`, one finding per cable.

    `hca_names` (podctl.derive.facts.hca_names) says what each node calls its HCAs; without it rail r is mlx5_<r-1>.
    `naming` adds the site's patterns for node descriptions, `anchors` the GUID of each (host, rail) HCA
    (podctl.ibfabric.identity); without them devices are named by the built-in patterns and their neighbours.
    """
    identity = identify(plan, topo, hca_names, naming, anchors)
    ca_like = dict(identity.ca_like)
    seen: list[tuple[End, End, Link]] = []
    for link in topo.links:
        if identity.internal & {link.a.device, link.b.device}:
            continue
        seen.append(
            (End(identity.display[link.a.device], link.a.port), End(identity.display[link.b.device], link.b.port), link)
        )
    far: dict[End, tuple[End, Link]] = {}
    for a, b, link in seen:
        far[a] = (b, link)
        far[b] = (a, link)
    known = {s.name for s in plan.switches}
    planned: list[tuple[End, End, str]] = []
    for cable in plan.cables:
        upper, lower = planned_ends(cable, hca_names)
        planned.append((upper, lower, cable.rate))
        known.add(lower.device)
        ca_like[upper.device] = False
        ca_like[lower.device] = cable.tier == "node-leaf"

    def text(end: End) -> str:
        # An HCA needs no port number on its port 1; a switch always shows it.
        return end.device if end.port == 1 and ca_like.get(end.device, False) else f"{end.device}[{end.port}]"

    accounted: set[int] = set()  # id() of links some finding or match explains
    findings: list[CableFinding] = []
    for upper, lower, rate in planned:
        expected_rate = f"{width}{rate}"
        hit = far.get(lower)
        if hit is None:
            # The lower end is dark; the upper end may still be cabled elsewhere,
            # which the unexpected-link pass reports from its own side.
            findings.append(CableFinding("missing", text(upper), text(lower), text(upper), None))
            continue
        seen_end, link = hit
        accounted.add(id(link))
        if seen_end != upper:
            kind = "wrong-port" if seen_end.device == upper.device else "wrong-switch"
            findings.append(CableFinding(kind, text(upper), text(lower), text(upper), text(seen_end)))
            continue
        if link.rate != expected_rate:
            width_bad = link.width != width
            speed_bad = link.speed != rate
            kind = (
                "wrong-width-and-speed" if width_bad and speed_bad else ("wrong-width" if width_bad else "wrong-speed")
            )
            findings.append(CableFinding(kind, text(upper), text(lower), expected_rate, link.rate))
    for a, b, link in seen:
        if id(link) in accounted:
            continue
        a_known, b_known = a.device in known, b.device in known
        if a_known and b_known:
            findings.append(CableFinding("unexpected-link", text(a), text(b), None, link.rate))
        else:
            ours, theirs = (a, b) if a_known else (b, a)
            findings.append(CableFinding("unexpected-device", text(ours), text(theirs), None, theirs.device))
    return CablingReport(
        plan.fabric,
        topo.source,
        len(plan.cables),
        len(seen),
        tuple(findings),
        tuple(topo.warnings) + identity.warnings,
        identity.counts(),
        {
            **dict(identity.names),
            # A CA's port GUID names it too: forwarding tables and perfquery address ports.
            **{
                guid_key(g): name for key, name in identity.names.items() for g in topo.devices[key].port_guids.values()
            },
        },
        {device.lid: identity.display.get(key, device.desc) for key, device in topo.devices.items() if device.lid},
    )


def check_sources(
    fabric: Fabric,
    plan: FabricPlan,
    hca_names: HcaNames | None,
    sources: Sequence[tuple[str, str]],
    anchors: Anchors | None = None,
) -> list[CablingReport]:
    """Each (path, format) of the tools' output checked against the plan, with the fabric's naming
    templates and, where known, the HCAs' GUIDs (anchors)."""
    naming = naming_from_templates(fabric.naming_switch, fabric.naming_hca)
    return [
        check_cabling(plan, read_topology(str(path), fmt), hca_names=hca_names, naming=naming, anchors=anchors)
        for path, fmt in sources
    ]
