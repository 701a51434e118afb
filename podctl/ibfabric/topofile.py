"""A fabric as its tools show it: devices keyed by GUID, links, and what the readers share.

Devices are keyed by GUID, never by description: real fabrics have hundreds
of HCAs that share a factory description. `Topology.devices` maps a key to a
`Device`: `0x<16 hex digits>`, the node GUID (ibnetdiscover, iblinkinfo
switches), or a CA's port GUID where the tool shows no node GUID (iblinkinfo
CA blocks, `ibnetdiscover -p`). An iblinkinfo far end without a block of its
own has no GUID in the file: it is keyed `lid <lid> <description>` (LIDs are
unique in a subnet; the description guards against a LID that moved). A
GUID someone masked before publishing (`9c05<redacted>`) keys as the masked
text plus the description. Link ends (`End`) name devices by that key.

What podctl writes, podctl's names in the descriptions: an HCA's is
`"<hostname> <hca>"`, the HCA named as the node's profile lists it
(`compute_hcas.names`, rail 1 first; mlx5_<r-1> by default), a switch's is
its podctl name. GUIDs and LIDs in generated files are made up but stable
(derived from the names). `podctl.ibfabric.identity` maps the names real
fabrics use onto the plan's.

Tool output is input from outside: every expression of the readers matches in
linear time (possessive quantifiers, no two quantifiers that can share text),
a line over 64 KiB is refused, and every error names the file and line. Lines
the tools write to stderr (`ibwarn: ...`, `src/query_smp.c:195; ...`) are
skipped with a warning (`Topology.warnings`) when they were mixed into the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from podctl.core.errors import PodctlError
from podctl.core.model import HcaNames, hca_name
from podctl.derive.topology import Cable, FabricPlan, name_guid

# Lane signalling rate, in Gbps, that iblinkinfo prints for each IB generation.
LANE_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.3125,
    "FDR": 14.0625,
    "EDR": 25.78125,
    "HDR": 53.125,
    "NDR": 106.25,
    "XDR": 212.5,
}
# No line of the tools' output comes near this; a longer one is not their output.
MAX_LINE = 64 * 1024


class CablingError(PodctlError):
    """A topology file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True, order=True)
class End:
    # In a Topology: the device's key there ("0x<guid>", see the module docstring).
    # In the check's findings and in planned_ends: the device's name.
    device: str
    port: int

    def __str__(self) -> str:
        # An HCA's description is "<host> <hca>", whatever the profile calls its HCAs; podctl's
        # switch names have no space. A single-port HCA needs no port number.
        if " " in self.device and self.port == 1:
            return self.device
        return f"{self.device}[{self.port}]"


@dataclass(frozen=True, slots=True)
class Link:
    a: End
    b: End
    width: str  # "4x", "2x", "1x"
    speed: str  # "NDR", "HDR", ...
    lines: tuple[int, ...] = field(default=(), compare=False)  # the lines of the file that show it: one per end seen

    @property
    def rate(self) -> str:
        return f"{self.width}{self.speed}"


@dataclass
class Device:
    desc: str
    kind: str  # "switch" | "ca" | "router" | "unknown" (an iblinkinfo far end without a block of its own)
    nports: int
    guid: int | None = None  # the node GUID, where the tool shows it
    lid: int | None = None
    key: str = ""  # its key in Topology.devices, set by Topology.add
    port_guids: dict[int, int] = field(default_factory=dict)
    masked: str = ""  # a GUID that whoever published the file masked: "9c05<redacted>"
    line: int = 0  # where the file first describes it

    @property
    def tag(self) -> str:
        """What tells this device apart from others with the same description: a GUID, else its LID."""
        if self.guid is not None:
            return guid_key(self.guid)
        if self.port_guids:
            return guid_key(self.port_guids[min(self.port_guids)])
        if self.masked:
            return self.masked
        return f"lid {self.lid}" if self.lid is not None else "no GUID"


@dataclass
class Topology:
    devices: dict[str, Device] = field(default_factory=dict)  # key -> device
    links: list[Link] = field(default_factory=list)
    source: str = "<memory>"
    warnings: list[str] = field(default_factory=list)  # "file:line: what was skipped and why"

    def add(self, device: Device, key: str | None = None) -> Device:
        device.key = key or device.key or guid_key(need_guid(device))
        self.devices[device.key] = device
        return device

    def add_link(self, link: Link) -> None:
        self.links.append(link)

    def named(self, desc: str) -> list[Device]:
        """The devices whose node description is `desc`."""
        return [d for d in self.devices.values() if d.desc == desc]

    def resolve(self, end: End) -> End:
        """`end` keyed as this topology keys it: `end.device` may be a key or a description that only one device has."""
        if end.device in self.devices:
            return end
        found = self.named(end.device)
        if len(found) != 1:
            raise KeyError(f"{end.device!r}: {'no' if not found else len(found)} devices with that description")
        return End(found[0].key, end.port)

    def desc(self, end: End) -> str:
        return self.devices[end.device].desc


def guid_key(guid: int) -> str:
    return f"0x{guid:016x}"


def need_guid(device: Device) -> int:
    if device.guid is None:
        raise ValueError(f"device {device.desc!r} has no GUID; give Topology.add a key")
    return device.guid


def hca_desc(host: str, rail: int, names: HcaNames | None = None) -> str:
    """The node description of `host`'s HCA on `rail` (1-based), named as `names` says (podctl.derive.facts.hca_names)."""
    return f"{host} {hca_name(host, rail, names)}"


def planned_ends(cable: Cable, hca_names: HcaNames | None = None) -> tuple[End, End]:
    """(upper, lower) ends of a planned cable, named as podctl names devices: an HCA as "<host> <hca>", port 1."""
    upper = End(cable.upper.device, cable.upper.port)
    if cable.tier == "node-leaf":
        return upper, End(hca_desc(cable.lower.device, cable.lower.port, hca_names), 1)
    return upper, End(cable.lower.device, cable.lower.port)


def topology_from_plan(plan: FabricPlan, rate: str, hca_names: HcaNames | None = None) -> Topology:
    """What the diagnostic tools would show for a pod cabled exactly as planned."""
    topo = Topology(source=f"plan of fabric {plan.fabric!r}")
    lid = 0
    key_of: dict[str, str] = {}
    for switch in plan.switches:
        lid += 1
        key_of[switch.name] = topo.add(Device(switch.name, "switch", switch.radix, name_guid(switch.name), lid)).key
    for cable in plan.cables:
        if cable.tier == "node-leaf":
            desc = hca_desc(cable.lower.device, cable.lower.port, hca_names)
            lid += 1
            guid = name_guid(desc)
            # A CA's port GUID follows its node GUID.
            lower = End(topo.add(Device(desc, "ca", 1, guid, lid, port_guids={1: guid + 1})).key, 1)
        else:
            lower = End(key_of[cable.lower.device], cable.lower.port)
        topo.add_link(Link(End(key_of[cable.upper.device], cable.upper.port), lower, "4x", cable.rate))
    return topo


def assign_ids(topo: Topology) -> None:
    used = {d.lid for d in topo.devices.values() if d.lid}
    next_lid = max(used, default=0)
    for device in topo.devices.values():
        if device.guid is None:
            device.guid = name_guid(device.key)
        if not device.lid:
            next_lid += 1
            device.lid = next_lid


def port_guid(device: Device, port: int) -> int:
    assert device.guid is not None
    return device.port_guids.get(port, device.guid + port)


def port_map(topo: Topology) -> dict[str, dict[int, tuple[End, Link]]]:
    """device key -> port -> (far end, link); ends that name a device by description are resolved."""
    by_device: dict[str, dict[int, tuple[End, Link]]] = {}
    for link in topo.links:
        a, b = topo.resolve(link.a), topo.resolve(link.b)
        by_device.setdefault(a.device, {})[a.port] = (b, link)
        by_device.setdefault(b.device, {})[b.port] = (a, link)
    return by_device


# -- reading lines ----------------------------------------------------------

# What the tools write to stderr: libibmad/libibnetdisc warnings, and positions in their sources.
_STDERR_WORDS = (
    "ibwarn:",
    "ibpanic:",
    "iberror:",
    "ibdebug:",
    "ibnetdiscover:",
    "iblinkinfo:",
    "perfquery:",
    "ibqueryerrors:",
    "libibumad:",
    "umad_init:",
)
_SOURCE_POSITION = re.compile(r"[\w./-]{1,200}\.c:\d{1,6}[;:]?")


def is_command_echo(line: str, tool: str) -> bool:
    """The command line a user pasted above the output: `# tool ...`, `$ tool ...`, `# $ tool`."""
    words = line.strip().lstrip("#$ ").split(None, 1)
    return line.strip()[:1] in ("#", "$") and bool(words) and words[0].rsplit("/", 1)[-1] == tool


def is_stderr_line(line: str) -> bool:
    """A line the tools write to stderr, which `cmd > file 2>&1` mixes into their output."""
    word = line.split(None, 1)[0] if line.strip() else ""
    return word.startswith(_STDERR_WORDS) or (len(word) <= 210 and _SOURCE_POSITION.fullmatch(word) is not None)


def numbered_lines(text: str, source: str, tool: str) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) of `text`; a line over MAX_LINE is a CablingError that names it."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if len(line) > MAX_LINE:
            raise CablingError(
                f"{source}:{lineno}: a line of {len(line)} characters; no {tool} line is longer "
                f"than {MAX_LINE}: this is not {tool} output"
            )
        yield lineno, line


def skipped(warnings: list[str], source: str, lineno: int, line: str, tool: str) -> None:
    warnings.append(
        f"{source}:{lineno}: skipped a message the tools write to stderr, not {tool} output: {line.strip()[:120]!r}"
    )


def not_output(tool: str, source: str, lineno: int, line: str, expected: str) -> CablingError:
    """The error for a line that is not `tool`'s output: file, line, the line itself, what was expected."""
    stripped = line.strip()
    quoted = (
        "; the lines start with '> ': remove the mail quoting first"
        if stripped.startswith(">")
        else "; this is a web page's copy: remove the HTML (<br>, <p>, &nbsp;) first"
        if stripped.startswith(("<br", "<p", "&nbsp;", "<pre"))
        else "; the lines start with '//': remove the comment marks first"
        if stripped.startswith("//")
        else "; the line starts with '#': remove the comment marks first"
        if stripped.startswith("#") and tool != "ibnetdiscover"
        else ""
    )
    return CablingError(f"{source}:{lineno}: not {tool} output: {line.strip()[:80]!r} ({expected}{quoted})")


def line_of(
    pattern: re.Pattern[str], line: str, topo: Topology, lineno: int, tool: str, expected: str
) -> re.Match[str] | None:
    """`pattern`'s match of the whole line; None for a stderr line, skipped with a warning; else not `tool` output."""
    match = pattern.fullmatch(line)
    if match is None:
        if not is_stderr_line(line):
            raise not_output(tool, topo.source, lineno, line, expected)
        skipped(topo.warnings, topo.source, lineno, line, tool)
    return match


Sighting = tuple[str, int, str, int, str, str, int]


def add_links(topo: Topology, ends: Iterable[Sighting]) -> None:
    """Each cable once, though the tools show it from both ends; where the ends disagree on its rate, the lower."""
    seen: dict[frozenset[tuple[str, int]], int] = {}  # the pair of ends -> index in topo.links
    for key, port, far_key, far_port, width, speed, lineno in ends:
        pair = frozenset(((key, port), (far_key, far_port)))
        if pair not in seen:
            seen[pair] = len(topo.links)
            topo.add_link(Link(End(key, port), End(far_key, far_port), width, speed, (lineno,)))
            continue
        index = seen[pair]
        link = topo.links[index]
        rate = (link.width, link.speed)
        if (width, speed) != rate:
            rate = min(rate, (width, speed), key=rate_order)
            topo.warnings.append(
                f"{topo.source}:{lineno}: the two ends of a cable disagree on its rate: "
                f"{link.rate} at line {link.lines[0]}, {width}{speed} here; {''.join(rate)} is kept"
            )
        topo.links[index] = Link(link.a, link.b, *rate, link.lines + (lineno,))


def rate_order(rate: tuple[str, str]) -> tuple[int, float]:
    width, speed = rate
    return (int(width[:-1]) if width[:-1].isdigit() else 0, LANE_GBPS.get(speed, 0.0))


def warn_shared_ports(topo: Topology) -> None:
    cables: dict[End, int] = {}
    for link in topo.links:
        for end in (link.a, link.b) if link.a != link.b else (link.a,):
            cables[end] = cables.get(end, 0) + 1
    for end, count in sorted(cables.items()):
        if count > 1:
            device = topo.devices[end.device]
            topo.warnings.append(
                f"{topo.source}: port {end.port} of {device.desc!r} ({device.tag}) shows "
                f"{count} different far ends; a port holds one cable"
            )


# ibnetdiscover -p: "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'a' - 'b' )"


def read_text(path: str, hint: str) -> str:
    """A file's text; a file that cannot be read is a CablingError that says so and, when absent, what to do (`hint`)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        raise CablingError(f"{path}: no such file; {hint}") from None
    except OSError as exc:
        raise CablingError(f"{path}: cannot read it: {exc.strerror}") from None


def links_of(topo: Topology, device: str) -> Iterable[Link]:
    """The links at the device keyed `device`."""
    return (link for link in topo.links if device in (link.a.device, link.b.device))
