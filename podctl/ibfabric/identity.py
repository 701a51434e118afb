"""Who is who in a fabric dump: the plan's name for each device the tools show.

Real fabrics do not carry podctl's names. Switches describe themselves as
`MF0;<name>:<model>/U1` (the name set on the switch) or keep a factory
description (`Quantum Mellanox Technologies`); HCAs as `<host> HCA-<n>`,
`<host> mlx5_<n>` or a factory description (`MT4129 ConnectX7   Mellanox
Technologies`) that hundreds of them share. `identify` names each device of a
Topology after the plan, from, in this order:

1. anchors: (host, rail) -> the GUID of that HCA's port (or its node GUID),
   as podctl reads it on the node (`/sys/class/infiniband/<dev>/ports/1/gids/0`
   or `node_guid`) or from a file (`read_anchors`). An anchored HCA is that
   HCA whatever its description says.
2. descriptions, through `Naming`: the site's patterns first, then the
   built-in ones (`MF0;<name>:...`, `<host> HCA-<n>`, `<host> <hca>`, the
   whole description as a switch name). A switch name, or a host and HCA
   name, that the plan has is taken as it is; `<host> HCA-<n>` names a host
   and a number, not a rail.
3. landing: an HCA known by its host only is the rail of that host whose
   planned leaf port it is plugged into.
4. neighbours: a switch that no description names is the planned switch
   that the planned cables of its identified neighbours lead to (a leaf by
   the HCAs on its node ports, spines by the leaves, cores by the spines),
   when more than half of those votes agree and no other device has it.
5. order: a host's HCAs still unplaced take its free rails in the order of
   their HCA numbers (numbers follow the node's device order, and may skip),
   then step 4 runs again. Without anchors, an HCA known by number can
   therefore not reveal two of a host's cables swapped between rails.

A device left unknown is named by its description, with its GUID (or LID)
added where the description alone could be confused: shared with another
device, a factory default, empty, or a name the plan uses. Links to SHARP
aggregation nodes are inside a switch (no cable) and are left out.

Why one module of this size: naming patterns, anchors and the neighbour vote
are one algorithm, each stage feeding the next.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from podctl.core.model import HcaNames
from podctl.derive.topology import FabricPlan
from podctl.ibfabric.topofile import CablingError, End, Topology, numbered_lines, planned_ends, read_text

Anchors = Mapping[tuple[str, int], int]  # (host, rail) -> GUID of the HCA's port, or its node GUID
# The IB NodeDescription is 64 bytes; a node-name-map may give longer names. Site patterns, which
# need not run in linear time, are not tried on anything longer.
MAX_DESC = 256


class NamingError(CablingError):
    """A site naming pattern that cannot be used; the message names the pattern and what is wrong."""


@dataclass(frozen=True)
class HcaClaim:
    """What an HCA's description says of it: its host, and its name or number there if it says."""

    host: str
    hca: str | None = None  # the HCA's name as the profile lists it: mlx5_4
    number: int | None = None  # the n of "HCA-<n>"


_MF0 = re.compile(r"MF0;(?P<name>[^:;]{1,64}+):[^/]{0,64}+(?:/U\d{1,3}+)?+")
_HCA_N = re.compile(r"(?P<host>\S{1,253}+) HCA-(?P<n>\d{1,4}+)")
_HOST_HCA = re.compile(r"(?P<host>\S{1,253}+) (?P<hca>\S{1,64}+)")
_VENDOR = re.compile(r"(?i)\b(?:mellanox technologies|voltaire|nvidia)\b")
_CHIP = re.compile(r"MT\d{4,5}+\b")


def is_factory_default(desc: str) -> bool:
    """A description a device ships with, which many devices share: `Quantum Mellanox Technologies`, `MT4129 ...`."""
    desc = desc.strip()
    return _CHIP.match(desc) is not None or _VENDOR.search(desc) is not None


def is_aggregation_node(desc: str) -> bool:
    """A SHARP aggregation node: a CA inside a switch, on a port no cable reaches."""
    return "aggregation node" in desc.lower()


def _compile(kind: str, index: int, pattern: str, groups: set[str], required: set[str]) -> re.Pattern[str]:
    where = f"naming {kind} pattern {index + 1} {pattern!r}"
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise NamingError(f"{where}: not a regular expression: {exc.msg} at position {exc.pos}") from None
    named = set(compiled.groupindex)
    if not required <= named:
        missing = ", ".join(sorted(required - named))
        raise NamingError(f"{where}: needs the named group(s) {missing}, e.g. (?P<{min(required - named)}>...)")
    if not named <= groups:
        raise NamingError(
            f"{where}: unknown named group(s) {', '.join(sorted(named - groups))}; known: {', '.join(sorted(groups))}"
        )
    if {"hca", "n"} <= named:
        raise NamingError(f"{where}: give (?P<hca>...) or (?P<n>...), not both")
    return compiled


@dataclass(frozen=True)
class Naming:
    """A site's own patterns for node descriptions, tried before the built-in ones.

    Each is a regular expression that must match a whole description (spaces
    at either end stripped). `switch` patterns have a group `name`: the
    switch's planned name. `hca` patterns have a group `host` and at most one
    of `hca` (the HCA's name as the profile lists it, e.g. mlx5_4) and `n` (an
    HCA number, as in `HCA-<n>`). Errors in them are NamingErrors, raised when
    the Naming is made.
    """

    switch: tuple[str, ...] = ()
    hca: tuple[str, ...] = ()
    _switch: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _hca: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "switch", tuple(self.switch))
        object.__setattr__(self, "hca", tuple(self.hca))
        object.__setattr__(
            self, "_switch", tuple(_compile("switch", i, p, {"name"}, {"name"}) for i, p in enumerate(self.switch))
        )
        object.__setattr__(
            self, "_hca", tuple(_compile("hca", i, p, {"host", "hca", "n"}, {"host"}) for i, p in enumerate(self.hca))
        )

    def switch_name(self, desc: str) -> str | None:
        """The name a switch's description gives it: a site pattern's, MF0's, else the whole description."""
        desc = desc.strip()
        if not desc or len(desc) > MAX_DESC:
            return None
        for pattern in (*self._switch, _MF0):
            if match := pattern.fullmatch(desc):
                return match.group("name").strip()
        return desc

    def hca_claim(self, desc: str) -> HcaClaim | None:
        """What an HCA's description says of it; None for a factory description or one no pattern reads."""
        desc = desc.strip()
        if not desc or len(desc) > MAX_DESC:
            return None
        for pattern in self._hca:
            if match := pattern.fullmatch(desc):
                groups = match.groupdict()
                number = groups.get("n")
                return HcaClaim(groups["host"], groups.get("hca"), int(number) if number and number.isdigit() else None)
        if is_factory_default(desc):
            return None
        if match := _HCA_N.fullmatch(desc):
            return HcaClaim(match.group("host"), number=int(match.group("n")))
        if match := _HOST_HCA.fullmatch(desc):
            return HcaClaim(match.group("host"), match.group("hca"))
        return None


# A site writes its naming patterns as templates, not regular expressions: placeholders in
# braces, the rest literal. Each placeholder matches a bounded run of characters, so a
# pattern takes bounded time on any description (a site cannot write a pattern that backtracks
# for ever).
TEMPLATE_PLACEHOLDERS = {  # one per podctl.core.model.NAMING_PLACEHOLDERS
    "name": r"(?P<name>\S{1,64})",
    "host": r"(?P<host>[A-Za-z0-9._-]{1,63})",
    "hca": r"(?P<hca>[A-Za-z0-9_.-]{1,32})",
    "n": r"(?P<n>\d{1,4})",
    "*": r".{0,64}",
}
_TEMPLATE_PART = re.compile(r"\{([^{}]{0,16})\}")


def template_regex(template: str) -> str:
    """`{host} HCA-{n}` -> the regular expression Naming takes; NamingError for an unknown placeholder."""
    out, end = [], 0
    for match in _TEMPLATE_PART.finditer(template):
        key = match.group(1)
        if key not in TEMPLATE_PLACEHOLDERS:
            known = ", ".join("{" + k + "}" for k in TEMPLATE_PLACEHOLDERS)
            raise NamingError(f"naming template {template!r}: unknown placeholder {{{key}}}; placeholders: {known}")
        out += [re.escape(template[end : match.start()]), TEMPLATE_PLACEHOLDERS[key]]
        end = match.end()
    out.append(re.escape(template[end:]))
    return "".join(out)


def naming_from_templates(switch: Sequence[str] = (), hca: Sequence[str] = ()) -> Naming:
    """A site's naming section (templates with {name}, {host}, {hca}, {n}, {*}) as a Naming."""
    for kind, templates, needs in (("switch", switch, "{name}"), ("hca", hca, "{host}")):
        for template in templates:
            if needs not in template:
                raise NamingError(
                    f"naming {kind} template {template!r} has no {needs}: it must say where the "
                    f"{'switch name' if kind == 'switch' else 'host name'} is"
                )
            if kind == "hca" and "{hca}" in template and "{n}" in template:
                raise NamingError(f"naming hca template {template!r}: give {{hca}} or {{n}}, not both")
    return Naming(switch=tuple(template_regex(t) for t in switch), hca=tuple(template_regex(t) for t in hca))


# -- anchors ------------------------------------------------------------------

ANCHORS_HEADER = """\
# podctl anchors: the GUID of each HCA, as read on its node.
# One HCA a line: host, rail (1-based, as in `podctl plan`), GUID. The GUID may be
# written 0x0123456789abcdef, 0123:4567:89ab:cdef (sysfs node_guid) or as a port GID
# fe80:0000:0000:0000:0123:4567:89ab:cdef (sysfs ports/1/gids/0).
"""


def parse_guid(text: str) -> int | None:
    """A GUID written as the tools and sysfs write it; a GID gives its lower 64 bits (the port GUID)."""
    text = text.strip().lower()
    if ":" in text:
        if len(text) > 39:
            return None
        parts = text.split(":")
        if len(parts) == 4 and all(0 < len(p) <= 4 and _is_hex(p) for p in parts):
            return int("".join(p.rjust(4, "0") for p in parts), 16)
        try:
            return int(ipaddress.IPv6Address(text)) & (2**64 - 1)
        except ValueError:
            return None
    digits = text.removeprefix("0x")
    return int(digits, 16) if 0 < len(digits) <= 16 and _is_hex(digits) else None


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def parse_anchors(text: str, source: str = "<anchors>") -> dict[tuple[str, int], int]:
    """`host rail guid` lines (see ANCHORS_HEADER) as {(host, rail): guid}; errors name the file and line."""
    anchors: dict[tuple[str, int], int] = {}
    line_of: dict[tuple[str, int], int] = {}
    owner: dict[int, tuple[tuple[str, int], int]] = {}
    for lineno, line in numbered_lines(text, source, "anchors"):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 3:
            raise CablingError(
                f"{source}:{lineno}: expected 'HOST RAIL GUID', found {len(fields)} field(s): {line.strip()[:80]!r}"
            )
        host, rail_text, guid_text = fields
        if not rail_text.isdigit() or not 0 < int(rail_text) < 1000:
            raise CablingError(f"{source}:{lineno}: rail {rail_text[:20]!r} is not a rail number (1, 2, ...)")
        guid = parse_guid(guid_text)
        if guid is None:
            raise CablingError(
                f"{source}:{lineno}: {guid_text[:45]!r} is not a GUID (0x0123456789abcdef, "
                "0123:4567:89ab:cdef or a GID)"
            )
        where = (host, int(rail_text))
        if where in anchors:
            raise CablingError(f"{source}:{lineno}: {host} rail {where[1]} again (first at line {line_of[where]})")
        if guid in owner:
            (other_host, other_rail), other_line = owner[guid]
            raise CablingError(
                f"{source}:{lineno}: GUID 0x{guid:016x} is also {other_host} rail {other_rail} "
                f"(line {other_line}); one HCA port has one GUID"
            )
        anchors[where] = guid
        line_of[where] = lineno
        owner[guid] = (where, lineno)
    return anchors


def node_anchors(host: str, hcas: Sequence[str], guids: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """One node's anchors: rail r is `hcas[r - 1]` (podctl.derive.facts.hca_names), `guids` maps an HCA name to the GUID
    read on the node (`parse_guid` of /sys/class/infiniband/<hca>/ports/1/gids/0 or node_guid)."""
    return {(host, rail): guids[hca] for rail, hca in enumerate(hcas, start=1) if hca in guids}


def read_anchors(path: str) -> dict[tuple[str, int], int]:
    return parse_anchors(read_text(path, "write one 'HOST RAIL GUID' line per HCA"), path)


def write_anchors(anchors: Anchors) -> str:
    return ANCHORS_HEADER + "".join(f"{host} {rail} 0x{guid:016x}\n" for (host, rail), guid in sorted(anchors.items()))


# -- identification -----------------------------------------------------------


@dataclass(frozen=True)
class Identity:
    """The plan's names for a Topology's devices, and how findings name the rest."""

    names: Mapping[str, str]  # device key -> planned name (switch, or "<host> <hca>")
    how: Mapping[str, str]  # device key -> "anchor" | "description" | "landing" | "neighbours" | "order"
    display: Mapping[str, str]  # device key -> its name in findings: the planned one, else see the module docstring
    internal: frozenset[str]  # keys of SHARP aggregation nodes
    ca_like: Mapping[str, bool]  # display name -> shown without a port when on port 1 (an HCA)
    warnings: tuple[str, ...]

    def counts(self) -> dict[str, int]:
        """Devices per way they were identified, plus "unknown" and "internal"."""
        counts = Counter(self.how.values())
        counts["unknown"] = len(self.display) - len(self.names) - len(self.internal)
        counts["internal"] = len(self.internal)
        return {k: v for k, v in sorted(counts.items()) if v}


class PlannedNames:
    """The plan's names, indexed: switches, and each HCA's planned name with its (host, rail)."""

    def __init__(self, plan: FabricPlan, hca_names: HcaNames | None) -> None:
        self.switches = {s.name for s in plan.switches}
        self.switch_named = {s.name.lower(): s.name for s in plan.switches}
        self.hca: dict[tuple[str, int], str] = {}  # (host, rail) -> planned HCA name
        self.hca_at: dict[str, tuple[str, int]] = {}  # planned HCA name -> (host, rail)
        self.host_named: dict[str, str] = {}  # lower-case host -> host
        self.rails: dict[str, list[int]] = {}
        self.rail_named: dict[tuple[str, str], int] = {}  # (host, lower-case HCA name) -> rail
        self.other: dict[End, End] = {}  # a planned end -> the planned far end of its cable
        for cable in plan.cables:
            upper, lower = planned_ends(cable, hca_names)
            self.other[upper], self.other[lower] = lower, upper
            if cable.tier == "node-leaf":
                host, rail = cable.lower.device, cable.lower.port
                self.hca[(host, rail)] = lower.device
                self.hca_at[lower.device] = (host, rail)
                self.host_named[host.lower()] = host
                self.rails.setdefault(host, []).append(rail)
                self.rail_named[(host, lower.device.split(" ", 1)[1].lower())] = rail

    def names(self) -> set[str]:
        return self.switches | set(self.hca_at)


class _Resolver:
    def __init__(
        self, plan: FabricPlan, topo: Topology, hca_names: HcaNames | None, naming: Naming, anchors: Anchors
    ) -> None:
        self.plan = PlannedNames(plan, hca_names)
        self.topo = topo
        self.naming = naming
        self.anchors = anchors
        self.names: dict[str, str] = {}
        self.how: dict[str, str] = {}
        self.owner: dict[str, str] = {}  # planned name -> device key
        self.pending: dict[str, list[tuple[str, int | None]]] = {}  # planned host -> (key, HCA number)
        self.votes: dict[str, Counter[str]] = {}
        self.warnings: list[str] = []
        self.internal = frozenset(k for k, d in topo.devices.items() if is_aggregation_node(d.desc))
        self.adjacent: dict[str, list[tuple[int, End]]] = {}
        for link in topo.links:
            self.adjacent.setdefault(link.a.device, []).append((link.a.port, link.b))
            self.adjacent.setdefault(link.b.device, []).append((link.b.port, link.a))

    def run(self) -> Identity:
        self._anchored()
        self._described()
        while self._land() | self._vote():
            pass
        self._order()
        while self._vote():
            pass
        self._report_disputes()
        display = self._display()
        ca_like = {
            display[key]: (self.names[key] in self.plan.hca_at if key in self.names else device.kind != "switch")
            for key, device in self.topo.devices.items()
        }
        return Identity(dict(self.names), dict(self.how), display, self.internal, ca_like, tuple(self.warnings))

    def _assign(self, key: str, planned: str, how: str) -> None:
        self.names[key] = planned
        self.how[key] = how
        self.owner[planned] = key

    def _label(self, key: str) -> str:
        device = self.topo.devices[key]
        return f"{device.desc.strip()!r} ({device.tag})"

    def _anchored(self) -> None:
        by_guid: dict[int, str] = {}
        for (host, rail), guid in self.anchors.items():
            planned = self.plan.hca.get((self.plan.host_named.get(host.lower(), host), rail))
            if planned is None:
                self.warnings.append(f"anchors: {host} rail {rail}: the plan of this fabric has no such HCA")
            else:
                by_guid[guid] = planned
        if not by_guid:
            return
        for key, device in self.topo.devices.items():
            if device.kind == "switch" or key in self.internal:
                continue
            hits = {by_guid[g] for g in (device.guid, *device.port_guids.values()) if g in by_guid}
            if len(hits) > 1:
                self.warnings.append(f"anchors: {self._label(key)} carries the GUIDs of {', '.join(sorted(hits))}")
            elif hits:
                self._assign(key, hits.pop(), "anchor")

    def _described(self) -> None:
        claims: dict[str, list[str]] = {}
        for key, device in self.topo.devices.items():
            if key in self.names:
                self._contradicted(key, device.desc)
                continue
            if key in self.internal:
                continue
            if device.kind in ("switch", "unknown"):
                name = self.naming.switch_name(device.desc)
                planned = self.plan.switch_named.get(name.lower()) if name else None
                if planned is not None:
                    claims.setdefault(planned, []).append(key)
                    continue
            if device.kind == "switch":
                continue
            claim = self.naming.hca_claim(device.desc)
            host = self.plan.host_named.get(claim.host.lower()) if claim else None
            if claim is None or host is None:
                continue
            if claim.hca is None:
                self.pending.setdefault(host, []).append((key, claim.number))
            elif (rail := self.plan.rail_named.get((host, claim.hca.lower()))) is not None:
                claims.setdefault(self.plan.hca[(host, rail)], []).append(key)
            # else: an HCA of a planned host that this fabric does not cable; it stays unknown.
        for planned, keys in claims.items():
            if planned in self.owner:
                for key in keys:
                    self.warnings.append(
                        f"{self._label(key)} is described as {planned}, but the anchors put "
                        f"{planned} at {self._label(self.owner[planned])}"
                    )
            elif len(keys) > 1:
                self.warnings.append(
                    f"{len(keys)} devices are described as {planned}: "
                    f"{', '.join(self._label(k) for k in sorted(keys))}; none is taken for it"
                )
            else:
                self._assign(keys[0], planned, "description")

    def _contradicted(self, key: str, desc: str) -> None:
        """Say so when an anchored HCA's description names another host or HCA: the description is stale."""
        claim = self.naming.hca_claim(desc)
        host = self.plan.host_named.get(claim.host.lower()) if claim else None
        if claim is None or host is None:
            return
        anchored_host, _ = self.plan.hca_at[self.names[key]]
        rail = self.plan.rail_named.get((host, claim.hca.lower())) if claim.hca else None
        if host != anchored_host or (claim.hca is not None and self.plan.hca.get((host, rail or 0)) != self.names[key]):
            self.warnings.append(
                f"{self._label(key)} is described as {desc.strip()!r}, but its GUID is anchored as {self.names[key]}"
            )

    def _land(self) -> bool:
        progress = False
        for host, entries in self.pending.items():
            for key, _ in entries:
                if key in self.names:
                    continue
                for _, far in self.adjacent.get(key, ()):
                    if self.names.get(far.device) not in self.plan.switches:
                        continue
                    planned = self.plan.other.get(End(self.names[far.device], far.port))
                    if (
                        planned is not None
                        and planned.device not in self.owner
                        and self.plan.hca_at.get(planned.device, ("",))[0] == host
                    ):
                        self._assign(key, planned.device, "landing")
                        progress = True
                        break
        return progress

    def _vote(self) -> bool:
        self.votes = {}
        for key, device in self.topo.devices.items():
            if key in self.names or key in self.internal or device.kind not in ("switch", "unknown"):
                continue
            votes: Counter[str] = Counter()
            for _, far in self.adjacent.get(key, ()):
                name = self.names.get(far.device)
                if name is None:
                    continue
                planned = self.plan.other.get(End(name, 1 if name in self.plan.hca_at else far.port))
                if planned is not None and planned.device in self.plan.switches:
                    votes[planned.device] += 1
            if votes:
                self.votes[key] = votes
        proposals: dict[str, list[tuple[int, str]]] = {}
        for key, votes in self.votes.items():
            best, count = votes.most_common(1)[0]
            if 2 * count > sum(votes.values()) and best not in self.owner:
                proposals.setdefault(best, []).append((count, key))
        progress = False
        for planned, offers in proposals.items():
            offers.sort(key=lambda offer: (-offer[0], offer[1]))
            if len(offers) == 1 or offers[0][0] > offers[1][0]:
                self._assign(offers[0][1], planned, "neighbours")
                progress = True
        return progress

    def _order(self) -> None:
        for host, entries in self.pending.items():
            unplaced = [(number, key) for key, number in entries if key not in self.names]
            free = [r for r in sorted(self.plan.rails[host]) if self.plan.hca[(host, r)] not in self.owner]
            if not unplaced or not free:
                continue
            if any(number is None for number, _ in unplaced):
                if len(unplaced) == 1 == len(free):
                    self._assign(unplaced[0][1], self.plan.hca[(host, free[0])], "order")
                continue
            for (_, key), rail in zip(sorted(unplaced, key=lambda e: (e[0] or 0, e[1])), free, strict=False):
                self._assign(key, self.plan.hca[(host, rail)], "order")

    def _report_disputes(self) -> None:
        for key, votes in sorted(self.votes.items()):
            tally = ", ".join(f"{name} ({n})" for name, n in votes.most_common(4))
            best = votes.most_common(1)[0][0]
            if best in self.owner:
                why = f"its neighbours point to {best}, which is {self._label(self.owner[best])}"
            else:
                why = f"its neighbours do not agree on which planned switch it is: {tally}"
            self.warnings.append(f"switch {self._label(key)} is left unknown: {why}")

    def _display(self) -> dict[str, str]:
        shared = Counter(d.desc.strip() for d in self.topo.devices.values())
        planned = {name.lower() for name in self.plan.names()}
        display: dict[str, str] = {}
        for key, device in self.topo.devices.items():
            if key in self.names:
                display[key] = self.names[key]
                continue
            desc = device.desc.strip()
            confusable = not desc or shared[desc] > 1 or is_factory_default(desc) or desc.lower() in planned
            display[key] = f"{desc} ({device.tag})" if confusable else desc
        return display


def identify(
    plan: FabricPlan,
    topo: Topology,
    hca_names: HcaNames | None = None,
    naming: Naming | None = None,
    anchors: Anchors | None = None,
) -> Identity:
    """The plan's name for each device of `topo` that the plan has; see the module docstring for how."""
    return _Resolver(plan, topo, hca_names, naming or Naming(), anchors or {}).run()
