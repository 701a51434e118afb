"""The subnet manager's unicast forwarding tables: read from a dump, placed on the plan, written from it.

Every switch forwards by destination LID, through a linear forwarding table (LFT) the subnet
manager programmed. `ibroute <switch>` prints one; `dump_lfts.sh` (`dump_fts`) prints every
switch's, one block after another; OpenSM writes the same blocks to `opensm-lfts.dump`. A block:

    Unicast lids [0x0-0x1f] of switch Lid 3 guid 0x0002c90200400bd8 (MF0;leaf-01:MQM8700/U1):
      Lid  Out   Destination
           Port     Info
    0x0001 001 : (Channel Adapter portguid 0x0002c903000a3b11: 'dgx001 mlx5_0')
    0x0003 000 : (Switch portguid 0x0002c90200400bd8: 'MF0;leaf-01:MQM8700/U1')
    0x0004 017 : (path #1 out of 2: portguid 0x0002c903000a3b11)
    31 valid lids dumped

The header may address the switch by directed route (`of switch DR path slid 0; dlid 0; 0,1,3
guid ...`); LIDs may print in decimal (python-rdma's `ibtool`); the separator may be `:` or `#`
and the destination's description may be absent (`unknown node and type`, or the entry alone).
Extra LIDs of a port with LMC > 0 (`path #i out of n`) are kept apart: traffic is sent to a port's
base LID unless it asks otherwise. rdma-core's `dump_lfts.sh` appends a line of its own after the
tables (`*** WARNING ***: this command has been replaced by dump_fts`), which is not an entry.

`ibroute` and `dump_fts` (infiniband-diags 44) never print a table's top LID when it is a multiple
of 64: the header's range ends at it (`Unicast lids [0x0-0x200]`), and no entry follows, even when
the range is asked for alone. A pod whose top LID falls there (a 16-SU DGX H100 pod does) loses
that port's routes from every table; `MissingTop` names the LID, its port where the fabric's
ibnetdiscover dump says whose it is, and the switches. OpenSM's own `opensm-lfts.dump` has it.

`place_forwarding` turns the tables into what `podctl.localize.routing.Router` follows: switch
-> (host, rail) -> output port, by the plan's names. A switch is placed by its GUID (as the
cabling check identified it in an ibnetdiscover dump) or else by its description; a destination
by its port GUID, or else by a description that names its host and HCA (`dgx001 mlx5_0`).
`<host> HCA-<n>` names no rail, so such destinations need the ibnetdiscover dump.

Tool output is input from outside: as in podctl.ibfabric.formats, every expression runs in
linear time, a line over 64 KiB is refused, errors name the file and line, and the tools' stderr
lines are skipped with a warning.

Why one module: a dump is read, placed and followed in one pass of `routes_from_dump`, over the
same tables (one byte per LID and switch, which a 1,344-node pod has ten million of) and the
same LID bookkeeping (the top LID the tool dropped is found reading, named placing and excused
following); split apart, each part would reach into the others' internals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from podctl.core.model import HcaNames, hca_name
from podctl.derive.topology import FabricPlan
from podctl.ibfabric.identity import Naming, PlannedNames, parse_guid
from podctl.ibfabric.topofile import (
    CablingError,
    Topology,
    guid_key,
    is_command_echo,
    is_stderr_line,
    not_output,
    numbered_lines,
    read_text,
    skipped,
)

TOOL = "ibroute"
_HEADER = re.compile(
    r"\s*+Unicast lids \[(?P<lo>0x[0-9a-fA-F]{1,4}+|\d{1,5}+)-(?P<hi>0x[0-9a-fA-F]{1,4}+|\d{1,5}+)\] of switch "
    r"(?:Lid (?P<lid>\d{1,5}+)|DR path [^()]{0,400}?)\s++guid (?P<guid>0x[0-9a-fA-F]{1,16}+)"
    r"\s*+\((?P<desc>.{0,400})\):?\s*+",
    re.ASCII,
)
_MULTICAST = re.compile(r"\s*+Multicast mlids \[.{0,400}", re.ASCII)
_COLUMNS = re.compile(r"\s*+Lid\s++Out\s++Destination\s*+|\s*+Port\s++Info\s*+", re.ASCII)
_ENTRY = re.compile(
    r"\s*+(?P<lid>0x[0-9a-fA-F]{1,4}+|\d{1,5}+)\s++(?P<port>\d{1,3}+)(?:\s++[:#]\s*+(?P<info>.{0,600}))?\s*+",
    re.ASCII,
)
# ibroute counts the entries it printed ("N valid lids dumped"); OpenSM's dump prints its top LID ("N lids dumped").
_TRAILER = re.compile(r"\s*+(?P<count>\d{1,6}+) (?P<valid>valid )?lids dumped\s*+", re.ASCII)
_PORT_INFO = re.compile(
    r"\(?(?P<kind>Switch|Channel Adapter|Router|Unknown) portguid (?P<guid>0x[0-9a-fA-F]{1,16}+):\s*+"
    r"'(?P<desc>.{0,256}?)'\)?",
    re.ASCII,
)
_PATH_INFO = re.compile(
    r"\(?path #(?P<i>\d{1,3}+) out of (?P<n>\d{1,3}+): portguid (?P<guid>0x[0-9a-fA-F]{1,16}+)\)?", re.ASCII
)
# What rdma-core's dump_lfts.sh prints after dump_fts's output, on standard output.
_DEPRECATED = re.compile(r"\s*+\*\*\* WARNING \*\*\*: this command has been replaced by [\w.]{1,40}+\s*+", re.ASCII)
MAX_LID = 0xBFFF  # unicast LIDs are 0x0001-0xbfff
MAX_PORT = 255


@dataclass(frozen=True, slots=True)
class Destination:
    kind: str  # "Switch", "Channel Adapter", "Router", "" when the dump does not say
    port_guid: int | None
    desc: str | None
    extra_path: bool = False  # an extra LID of a port with LMC > 0 ("path #2 out of 4")


NO_PORT = 0xFF  # what an LFT holds for a LID it does not route


@dataclass
class SwitchTable:
    guid: int
    lid: int | None  # None when the dump addressed the switch by directed route
    desc: str
    line: int
    top: int = 0  # the last LID of the header's range
    counted: bool = False  # the block ended with ibroute's "N valid lids dumped" (not OpenSM's "N lids dumped")
    # destination LID -> output port (0: the switch itself), NO_PORT where the dump has no entry: one byte
    # per LID, as the switch holds it (a 1,344-node pod's dump has ten million entries), grown as LIDs come
    ports: bytearray = field(default_factory=bytearray)

    def port(self, lid: int) -> int:
        return self.ports[lid] if lid < len(self.ports) else NO_PORT

    @property
    def out(self) -> dict[int, int]:
        """The entries as a dict (LID -> port): for reading a small table."""
        return {lid: port for lid, port in enumerate(self.ports) if port != NO_PORT}


@dataclass
class Lfts:
    switches: list[SwitchTable] = field(default_factory=list)
    # What each LID is, as the dump describes it: once per LID, not once per switch (a 1,344-node
    # pod's dump has millions of entries and about eleven thousand LIDs).
    dest: dict[int, Destination] = field(default_factory=dict)
    source: str = "<ibroute>"
    warnings: list[str] = field(default_factory=list)

    def missing_top(self) -> dict[int, list[SwitchTable]]:
        """LID -> the ibroute tables whose range ends at it, a multiple of 64, with no entry for it (see the
        module docstring): what the tool failed to print, not a LID the subnet manager left unrouted."""
        missing: dict[int, list[SwitchTable]] = {}
        for table in self.switches:
            if table.counted and table.top and table.top % 64 == 0 and table.port(table.top) == NO_PORT:
                missing.setdefault(table.top, []).append(table)
        return missing


def _number(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def _destination(info: str | None) -> Destination:
    text = (info or "").strip()
    match = _PORT_INFO.fullmatch(text)
    if match:
        return Destination(match["kind"], int(match["guid"], 16), match["desc"].strip())
    match = _PATH_INFO.fullmatch(text)
    if match:
        return Destination("", int(match["guid"], 16), None, extra_path=int(match["i"]) > 1)
    return Destination("", None, None)


_HEX_ENTRY = re.compile(r"0x(?P<lid>[0-9a-fA-F]{4}) (?P<port>\d{3})(?: [:#] (?P<info>.{0,600}))?", re.ASCII)
# What the tables may hold in all, in bytes (one per LID and switch), against the text's length: a real
# dump spends about 70 bytes of text per entry; a file of headers alone must not take gigabytes.
TABLE_BYTES_PER_CHAR = 4
TABLE_BYTES_FLOOR = 64 * 2**20
TOOLS = ("ibroute", "dump_lfts.sh", "dump_lfts", "dump_fts")


class _Entry(dict):
    """A fast entry's groups, read like a re.Match's."""


def _fast_entry(line: str, described: Mapping[int, Destination]) -> _Entry | re.Match[str] | None:
    """The common line `0x0001 017 : (...)` of a LID already described: its LID and port without
    reading the description again (a large dump repeats every LID's description in every table)."""
    match = _HEX_ENTRY.fullmatch(line.rstrip())
    if match is None:
        return _ENTRY.fullmatch(line)
    known = described.get(int(match["lid"], 16))
    if known is not None and known.port_guid is not None:
        return _Entry(lid="0x" + match["lid"], port=match["port"], info=None)
    return _ENTRY.fullmatch(line)


def parse_lfts(text: str, source: str = "<ibroute>") -> Lfts:
    """Every unicast table in `text`: one `ibroute` run, or many concatenated (dump_lfts.sh, opensm-lfts.dump)."""
    lfts = Lfts(source=source)
    table: SwitchTable | None = None
    in_multicast = False
    counted = 0
    budget = max(TABLE_BYTES_FLOOR, TABLE_BYTES_PER_CHAR * len(text))
    expected = "an `Unicast lids [...] of switch ... guid ... (...)` header, a `0x<lid> <port> : (...)` entry or `N valid lids dumped`"
    for lineno, line in numbered_lines(text, source, TOOL):
        stripped = line.strip()
        if not stripped or any(is_command_echo(line, tool) for tool in TOOLS) or _DEPRECATED.fullmatch(line):
            continue
        header = _HEADER.fullmatch(line)
        if header:
            guid = parse_guid(header["guid"])
            if guid is None:
                raise CablingError(f"{source}:{lineno}: switch GUID {header['guid']!r} is not a GUID")
            # OpenSM's dump quotes the description: ('MF0;leaf-01:MQM8700/U1')
            desc = header["desc"].strip()
            desc = desc[1:-1] if len(desc) > 1 and desc[0] == desc[-1] == "'" else desc
            table = SwitchTable(
                guid, int(header["lid"]) if header["lid"] else None, desc, lineno, top=_number(header["hi"])
            )
            lfts.switches.append(table)
            in_multicast, counted = False, 0
            continue
        if _MULTICAST.fullmatch(line):
            in_multicast, table = True, None
            lfts.warnings.append(f"{source}:{lineno}: skipped a multicast table (only unicast routes are used)")
            continue
        if in_multicast or _COLUMNS.fullmatch(line):
            continue
        trailer = _TRAILER.fullmatch(line)
        if trailer:
            if table is not None and trailer["valid"]:
                table.counted = True
                if int(trailer["count"]) != counted:
                    lfts.warnings.append(
                        f"{source}:{lineno}: the tool counted {trailer['count']} LIDs for {table.desc!r}, "
                        f"{counted} entries were read: the block may be cut"
                    )
            table = None
            continue
        entry = _ENTRY.fullmatch(line) if line[:1] != "0" or table is None else _fast_entry(line, lfts.dest)
        if entry is None:
            if is_stderr_line(line):
                skipped(lfts.warnings, source, lineno, line, TOOL)
                continue
            raise not_output(TOOL, source, lineno, line, expected)
        if table is None:
            raise CablingError(f"{source}:{lineno}: a forwarding entry outside any switch's table: {stripped[:80]!r}")
        lid, port = _number(entry["lid"]), int(entry["port"])
        if not 0 < lid <= MAX_LID:
            raise CablingError(f"{source}:{lineno}: LID {entry['lid']} is not a unicast LID (0x0001-0xbfff)")
        if port > MAX_PORT:
            raise CablingError(f"{source}:{lineno}: output port {port} is past the largest switch port ({MAX_PORT})")
        counted += 1
        if port == NO_PORT:
            continue
        if table.port(lid) != NO_PORT:
            raise CablingError(
                f"{source}:{lineno}: LID {entry['lid']} appears twice in the table of {table.desc!r}, "
                f"with ports {table.port(lid)} and {port}"
            )
        if lid >= len(table.ports):
            budget -= lid + 1 - len(table.ports)
            if budget < 0:
                raise CablingError(
                    f"{source}:{lineno}: the tables reach LIDs far beyond what a dump of this length holds; "
                    "this is not a forwarding-table dump"
                )
            table.ports.extend(bytes([NO_PORT]) * (lid + 1 - len(table.ports)))
        table.ports[lid] = port
        info = entry["info"]
        if lid not in lfts.dest or (lfts.dest[lid].port_guid is None and info):
            lfts.dest[lid] = _destination(info)
    if not lfts.switches:
        raise CablingError(
            f"{source}: no forwarding table found: expected `ibroute` output (`Unicast lids [...] of switch "
            "...`), e.g. from `dump_lfts.sh` or OpenSM's opensm-lfts.dump"
        )
    return lfts


def read_lfts(path: str) -> Lfts:
    return parse_lfts(read_text(path, "save the tables there first (e.g. `dump_lfts.sh > FILE`)"), path)


# -- written from a plan --------------------------------------------------------------------------


def write_lfts(topo: Topology, tables: Mapping[str, Mapping[tuple[str, int], int]], plan: FabricPlan,
               hca_names: HcaNames | None = None) -> str:  # fmt: skip
    """`tables` (Router.tables(): switch -> (host, rail) -> port) as dump_lfts.sh prints them, with the
    GUIDs and LIDs of `topo` (topology_from_plan of the same plan)."""
    by_desc = {d.desc: d for d in topo.devices.values()}
    hca_of = PlannedNames(plan, hca_names).hca  # (host, rail) -> "dgx001 mlx5_0"
    out: list[str] = []
    top = max((d.lid or 0) for d in topo.devices.values())
    for switch in plan.switches:
        device = by_desc[switch.name]
        assert device.guid is not None
        rows: list[tuple[int, str]] = [
            (device.lid or 0, f"000 : (Switch portguid 0x{device.guid:016x}: '{switch.name}')")
        ]
        for (host, rail), port in tables.get(switch.name, {}).items():
            ca = by_desc[hca_of[(host, rail)]]
            guid = ca.port_guids.get(1, ca.guid)
            rows.append((ca.lid or 0, f"{port:03d} : (Channel Adapter portguid 0x{guid:016x}: '{ca.desc}')"))
        rows.sort()
        out.append(
            f"Unicast lids [0x0-0x{top:x}] of switch Lid {device.lid} guid 0x{device.guid:016x} ({switch.name}):"
        )
        out += ["  Lid  Out   Destination", "       Port     Info "]
        out += [f"0x{lid:04x} {row}" for lid, row in rows]
        out.append(f"{len(rows)} valid lids dumped ")
    return "\n".join(out) + "\n"


# -- placed on the plan ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MissingTop:
    """A top LID ibroute left out of tables (see the module docstring)."""

    lid: int
    owner: str | None  # whose port it is, where the fabric's ibnetdiscover dump says (a planned name)
    switches: tuple[str, ...]  # the tables that lack it: planned names, else the dump's descriptions
    destination: tuple[str, int] | None = None  # the owner as (host, rail), where it is an HCA of the plan

    def render(self) -> str:
        whose = f", {self.owner}" if self.owner else ", whose port the dump does not say: give --ibnetdiscover"
        listed = ", ".join(self.switches[:5]) + (
            f" and {len(self.switches) - 5} more" if len(self.switches) > 5 else ""
        )
        return (
            f"LID {self.lid} (0x{self.lid:x}{whose}) is missing from {len(self.switches)} switch table(s): the range "
            f"ends at it, a multiple of 64, which ibroute and dump_fts never dump (OpenSM's opensm-lfts.dump has it); "
            f"routes to it there are the model's: {listed}"
        )

    def as_dict(self) -> dict[str, object]:
        return {"lid": self.lid, "owner": self.owner, "switches": list(self.switches)}


@dataclass(frozen=True)
class PlacedForwarding:
    forwarding: dict[str, dict[tuple[str, int], int]]  # switch -> (host, rail) -> output port
    unplaced: tuple[str, ...]  # tables and destinations the plan has no place for, with why
    destinations: int  # (host, rail) entries placed, over every switch
    missing_top: tuple[MissingTop, ...] = ()
    tables: Mapping[str, SwitchTable] = field(default_factory=dict)  # switch -> its table, by LID (balance.py)

    def summary(self) -> str:
        return f"{len(self.forwarding)} switch table(s) placed on the plan, {self.destinations} route entries" + (
            f", {len(self.unplaced)} not placed" if self.unplaced else ""
        )


def place_forwarding(
    plan: FabricPlan,
    lfts: Lfts,
    hca_names: HcaNames | None = None,
    naming: Naming | None = None,
    names_by_guid: Mapping[str, str] | None = None,
    names_by_lid: Mapping[int, str] | None = None,
) -> PlacedForwarding:
    """The dump's tables by the plan's names; see the module docstring for how each is placed.

    `names_by_guid` ("0x<guid>" -> planned name, node and port GUIDs alike) and `names_by_lid` (LID
    -> name) come from identifying an ibnetdiscover dump of the same fabric
    (podctl.validate.cabling.names_by_guid, CablingReport.names and .lids)."""
    naming = naming or Naming()
    names = names_by_guid or {}
    planned = PlannedNames(plan, hca_names)
    switches = planned.switches

    def destination(dest: Destination) -> tuple[str, int] | None:
        name = names.get(guid_key(dest.port_guid)) if dest.port_guid is not None else None
        if name in planned.hca_at:
            return planned.hca_at[name]
        claim = naming.hca_claim(dest.desc) if dest.desc else None
        host = planned.host_named.get(claim.host.lower()) if claim is not None and claim.hca else None
        rail = planned.rail_named.get((host, claim.hca.lower())) if host and claim and claim.hca else None
        return (host, rail) if host and rail is not None else None

    forwarding: dict[str, dict[tuple[str, int], int]] = {}
    placed_tables: dict[str, SwitchTable] = {}
    unplaced: list[str] = []
    unnamed: list[str] = []
    placed = 0
    where_of: dict[int, tuple[str, int]] = {}  # LID -> (host, rail): each LID resolved once
    seen: set[tuple[str, int]] = set()
    for lid, dest in sorted(lfts.dest.items()):
        if dest.extra_path or dest.kind in ("Switch", "Router"):
            continue
        where = destination(dest)
        if where is not None:
            # With LMC > 0 OpenSM's dump describes a port's extra LIDs like its base LID, the lowest:
            # traffic goes to the base LID, so that one's port is the route.
            if where not in seen:
                where_of[lid] = where
                seen.add(where)
        elif dest.kind == "Channel Adapter" or dest.desc:
            unnamed.append(f"{dest.desc!r} (LID {lid})")
    table_names: dict[int, str] = {}  # id(table) -> its switch's planned name
    for table in lfts.switches:
        name = names.get(guid_key(table.guid))
        if name not in switches:
            by_desc = naming.switch_name(table.desc) if table.desc else None
            name = planned.switch_named.get(by_desc.lower()) if by_desc else None
        if name is not None:
            table_names[id(table)] = name
        if name is None:
            unplaced.append(
                f"{lfts.source}:{table.line}: the table of {table.desc!r} (0x{table.guid:016x}): no switch of the "
                "plan by that GUID or description"
            )
            continue
        if name in forwarding:
            raise CablingError(
                f"{lfts.source}:{table.line}: a second table for switch {name} ({table.desc!r}); "
                "each switch's table appears once in a dump"
            )
        entries = {where: table.port(lid) for lid, where in where_of.items() if table.port(lid) != NO_PORT}
        forwarding[name] = entries
        placed_tables[name] = table
        placed += len(entries)
    if unnamed:
        distinct = sorted(set(unnamed))
        unplaced.append(
            f"{lfts.source}: {len(distinct)} destination(s) name no HCA of the plan, e.g. {', '.join(distinct[:3])}"
            + (
                "; `<host> HCA-<n>` names no rail: give the fabric's ibnetdiscover dump so GUIDs identify them"
                if any("HCA-" in u for u in distinct)
                else ""
            )
        )
    owners = names_by_lid or {}
    missing = tuple(
        MissingTop(
            lid,
            owners.get(lid),
            tuple(table_names.get(id(t), t.desc) for t in tables),
            planned.hca_at.get(owners.get(lid, "")),
        )
        for lid, tables in sorted(lfts.missing_top().items())
    )
    return PlacedForwarding(forwarding, tuple(unplaced), placed, missing, placed_tables)


# -- followed -------------------------------------------------------------------------------------

MAX_PROBLEMS = 20


@dataclass(frozen=True)
class RouteCheck:
    """Every route of the placed tables followed, from every leaf to every destination of its rail."""

    placed: PlacedForwarding
    problems: tuple[str, ...]  # loops, ports without a planned cable, misdelivered destinations (the first 20)
    problem_count: int
    modelled: tuple[str, ...]  # switches a route crossed that the dump has no table (or entry) for
    uncrossed: Mapping[str, tuple[int, int]]  # switch tier -> (cables no route crosses, cables of the tier)
    differ: int  # (switch, destination) entries the subnet manager forwards other than podctl's model; -1: not compared
    unrouted: tuple[tuple[str, int], ...] = ()  # planned (host, rail) that no table routes: the SM gave them no LID

    def as_dict(self) -> dict[str, object]:
        return {
            "switch_tables": len(self.placed.forwarding),
            "entries": self.placed.destinations,
            "unplaced": list(self.placed.unplaced),
            "missing_top_lids": [m.as_dict() for m in self.placed.missing_top],
            "problems": list(self.problems),
            "problem_count": self.problem_count,
            "modelled_switches": list(self.modelled),
            "uncrossed": {t: {"cables": n, "of": total} for t, (n, total) in self.uncrossed.items()},
            "differ_from_model": self.differ,
            "unrouted": [{"host": host, "rail": rail} for host, rail in self.unrouted],
        }


def check_routes(
    plan: FabricPlan, placed: PlacedForwarding, compare_model: bool = True, hca_names: HcaNames | None = None
) -> RouteCheck:
    """Follow every route; with `compare_model`, also count the entries podctl's model would forward
    otherwise (a third of the work at 1,344 nodes: `podctl fabric routes` says it, validate skips it)."""
    from podctl.localize.routing import Router, RoutingError

    if not placed.forwarding:
        raise CablingError(
            "no table of the dump is one of the plan's switches: "
            + ("; ".join(placed.unplaced[:2]) or "the dump holds no table")
            + "; is it this fabric's? Give its ibnetdiscover dump too when the switches keep factory names"
        )
    if not placed.destinations:
        raise CablingError(
            "the tables route no destination that is an HCA of the plan: "
            + ("; ".join(placed.unplaced[-1:]) or "their entries describe no destination (dump_lfts.sh -n?)")
            + "; give the fabric's ibnetdiscover dump so that GUIDs name them"
        )
    router = Router(plan, forwarding=placed.forwarding)
    problems: list[str] = []
    seen: set[str] = set()
    for rail in range(1, router.rails + 1):
        for leaf in sorted({router.leaf(h, rail) for h in router.hosts}):
            for dst in router.hosts:
                try:
                    router.route(leaf, dst, rail)
                except RoutingError as exc:
                    if str(exc) not in seen:  # one bad entry breaks the routes of every leaf to it
                        seen.add(str(exc))
                        if len(problems) < MAX_PROBLEMS:
                            problems.append(str(exc))
    # A planned HCA that no table routes has no LID: the subnet manager never reached its port (down,
    # or its cable out). The top LID ibroute failed to print is the tool's loss, not the fabric's; when
    # the dump cannot say whose that LID is, the HCAs no table routes are listed but accuse nothing.
    routed = {dst for table in placed.forwarding.values() for dst in table}
    explained = {m.destination for m in placed.missing_top}
    unrouted = tuple(
        (host, rail)
        for host in router.hosts
        for rail in range(1, router.rails + 1)
        if (host, rail) not in routed and (host, rail) not in explained
    )
    if not any(m.destination is None for m in placed.missing_top):
        for host, rail in unrouted:
            leaf = plan.leaf_port(host, rail)
            seen.add(f"unrouted {host} {rail}")
            if len(problems) < MAX_PROBLEMS:
                problems.append(
                    f"no table routes {host} {hca_name(host, rail, hca_names)} (rail {rail}, its cable at "
                    f"{leaf.device}[{leaf.port}]): the subnet manager "
                    "gave its port no LID; is the port down or its cable out?"
                )
    uncrossed: dict[str, tuple[int, int]] = {}
    if not problems:
        crossed = {c for rail in range(1, router.rails + 1) for c in router.users(rail)}
        for tier in ("leaf-spine", "spine-core"):
            ids = [router.cable_id[c] for c in plan.cables_in(tier)]
            if ids:
                uncrossed[tier] = (sum(i not in crossed for i in ids), len(ids))
    model = Router(plan).tables(placed.forwarding) if compare_model else {}
    # Compared where the model routes the destination at all: a dump of one subnet holds every rail's
    # LIDs in every table, the model a switch's own rails.
    differ = (
        sum(
            port != model[switch][dst]
            for switch, table in placed.forwarding.items()
            for dst, port in table.items()
            if dst in model.get(switch, {})
        )
        if compare_model
        else -1
    )
    return RouteCheck(placed, tuple(problems), len(seen), tuple(sorted(router.modelled)), uncrossed, differ, unrouted)


def routes_from_dump(
    plan: FabricPlan,
    path: str,
    hca_names: HcaNames | None = None,
    naming: Naming | None = None,
    names_by_guid: Mapping[str, str] | None = None,
    compare_model: bool = True,
    names_by_lid: Mapping[int, str] | None = None,
) -> tuple[Lfts, RouteCheck]:
    """Read a dump, place its tables on the plan and follow every route: `podctl fabric routes` and
    `podctl validate --lfts` alike. CablingError when it is no dump of this fabric."""
    lfts = read_lfts(path)
    placed = place_forwarding(plan, lfts, hca_names, naming, names_by_guid, names_by_lid)
    return lfts, check_routes(plan, placed, compare_model, hca_names)
