"""iblinkinfo (infiniband-diags): written from a plan, read from a fabric.

One block per switch, `Switch: 0x<guid> <desc>:`, and per CA, `CA: <desc>:`,
then a line per port with width, lane speed in Gbps (NDR: 106.25, HDR:
53.125), state, and the far end's LID, port and description; unconnected ports
show `Down/ Polling`. A CA's lines start with its port GUID; the far end is
named by LID and description only.

`iblinkinfo -l` prints no blocks: every line names its device, by GUID and
description (right-aligned in quotes), before the port, and the far end by GUID
too: `0x<guid> "  <desc>" <lid> <port>[  ] ==( 4X 106.25 Gbps Active/  LinkUp)==>
0x<guid> <lid> <port>[  ] "<desc>" ( )`. As in the blocks, a switch is named by
its node GUID and a CA port by its port GUID. The lines do not say what the
device is: one whose lines share a LID over several ports, or that has more
than two ports (iblinkinfo prints every port of a switch, Down ones included),
is a switch; any other a CA, whose ports each have a LID of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from podctl.ibfabric.topofile import (
    LANE_GBPS,
    CablingError,
    Device,
    Sighting,
    Topology,
    add_links,
    assign_ids,
    guid_key,
    line_of,
    not_output,
    numbered_lines,
    port_guid,
    port_map,
    warn_shared_ports,
)


def write_iblinkinfo(topo: Topology) -> str:
    """Switch blocks, then a block per CA that starts with its port GUID, as iblinkinfo prints them."""
    assign_ids(topo)
    ports = port_map(topo)
    out = []
    devices = sorted(topo.devices.values(), key=lambda d: (d.kind != "switch", d.lid or 0))
    for device in devices:
        connected = ports.get(device.key, {})
        if device.kind == "switch":
            out.append(f"Switch: 0x{device.guid:016x} {device.desc}:")
        else:
            out.append(f"CA: {device.desc}:")
        for port in range(1, device.nports + 1):
            head = f"{device.lid:>11} {port:>4}[  ] ==("
            if device.kind != "switch":
                head = f"      0x{port_guid(device, port):016x} {device.lid:>6} {port:>4}[  ] ==("
            if port in connected:
                far, link = connected[port]
                remote = topo.devices[far.device]
                lane = LANE_GBPS[link.speed]
                out.append(
                    f"{head} {link.width.upper():>3} {lane:>14g} Gbps Active/  LinkUp)==> "
                    f'{remote.lid:>7} {far.port:>4}[  ] "{remote.desc}" ( )'
                )
            elif device.kind == "switch":
                out.append(f'{head}                Down/ Polling)==>             [  ] "" ( )')
    return "\n".join(out) + "\n"


_LI_KIND = {"Switch": "switch", "CA": "ca", "Router": "router"}
_LI_HEAD = re.compile(r"(Switch|CA|Router):\s++(?:0x([0-9a-fA-F]{1,16}+)\s++)?+(.*+)")
_LI_PORT = re.compile(
    r"(?:0x([0-9a-fA-F]{1,16}+)\s++)?+(\d{1,6}+)\s++(\d{1,5}+)\[[^\]]{0,8}+\]\s*+"
    r"==\(([^)]{0,100}+)\)==>\s*+(.*+)"
)
_LI_ACTIVE = re.compile(r"\s*+(\d{1,2}+)X\s++(\d{1,4}+(?:\.\d{1,12}+)?+)\s++Gbps\s++\w{1,30}+/\s*+\w{1,30}+\s*+")
_LI_IDLE = re.compile(r"\s*+\w{1,30}+/\s*+\w{1,30}+\s*+")
_LI_ONE_LINE = re.compile(
    r"0x([0-9a-fA-F]{1,16}+)\s++\"\s*+([^\"]{0,256}+)\"\s++(\d{1,6}+)\s++(\d{1,5}+)\[[^\]]{0,8}+\]\s*+"
    r"==\(([^)]{0,100}+)\)==>\s*+(.*+)"
)
_LI_FAR_GUID = re.compile(r"0x[0-9a-fA-F]{1,16}+\s++(.*+)")
_LI_FAR = re.compile(r"(\d{1,6}+)\s++(\d{1,5}+)\[[^\]]{0,8}+\]\s++\"(.*+)")
_LI_NO_FAR = re.compile(r"\[[^\]]{0,8}+\]\s++\"\"\s++\(.*+")
_LI_EXPECTED = "expected '<lid> <port>[  ] ==( 4X 106.25 Gbps Active/  LinkUp)==> <lid> <port>[  ] \"<desc>\" ( )'"


@dataclass
class _Block:
    kind: str
    guid: int | None
    desc: str
    lineno: int
    lids: list[int] = field(default_factory=list)
    port_guids: dict[int, int] = field(default_factory=dict)
    nports: int = 0


@dataclass
class _LinkLine:
    block: _Block
    port: int
    far_lid: int
    far_port: int
    far_desc: str
    width: str
    speed: str
    lineno: int


def _speed_of(lane: float) -> str | None:
    for name, gbps in LANE_GBPS.items():
        if abs(gbps - lane) < 0.001 * gbps:
            return name
    return None


def parse_iblinkinfo(text: str, source: str = "<iblinkinfo>") -> Topology:
    """iblinkinfo output as a Topology: switches keyed by GUID, CAs by port GUID, far ends by LID and description."""
    topo = Topology(source=source)
    blocks: list[_Block] = []
    lines: list[_LinkLine] = []
    current: _Block | None = None
    one_line: dict[int, _Block] = {}  # iblinkinfo -l: GUID -> the block of its lines
    for lineno, line in numbered_lines(text, source, "iblinkinfo"):
        stripped = line.strip()
        if not stripped:
            continue
        if (match := _LI_HEAD.fullmatch(stripped)) and stripped.endswith(":"):
            kind, guid, desc = match.groups()
            current = _Block(_LI_KIND[kind], int(guid, 16) if guid else None, desc[:-1].rstrip(), lineno)
            blocks.append(current)
            continue
        if (match := _LI_ONE_LINE.fullmatch(stripped)) is not None:
            guid, desc, lid, port, state, far = match.groups()
            block = one_line.get(int(guid, 16))
            if block is None:
                block = one_line[int(guid, 16)] = _Block("", int(guid, 16), desc.strip(), lineno)
                blocks.append(block)
            block.port_guids[int(port)] = int(guid, 16)
            far_guid = _LI_FAR_GUID.fullmatch(far)
            far = far_guid.group(1) if far_guid else far
        else:
            match = line_of(_LI_PORT, stripped, topo, lineno, "iblinkinfo", _LI_EXPECTED)
            if match is None:
                continue
            if current is None:
                raise CablingError(
                    f"{source}:{lineno}: a port line before any 'Switch:' or 'CA:' line: {stripped[:80]!r}"
                )
            block = current
            port_guid, lid, port, state, far = match.groups()
            if port_guid:
                block.port_guids[int(port)] = int(port_guid, 16)
        block.nports = max(block.nports, int(port))
        if int(lid) not in block.lids:
            block.lids.append(int(lid))
        active = _LI_ACTIVE.fullmatch(state)
        if active is None:
            if _LI_IDLE.fullmatch(state) is None or _LI_NO_FAR.fullmatch(far) is None:
                raise not_output("iblinkinfo", source, lineno, stripped, _LI_EXPECTED)
            continue
        width, lane = active.groups()
        speed = _speed_of(float(lane))
        if speed is None:
            raise CablingError(
                f"{source}:{lineno}: unknown lane speed {lane} Gbps (known: "
                + ", ".join(f"{k} {v:g}" for k, v in LANE_GBPS.items())
                + ")"
            )
        far_match = _LI_FAR.fullmatch(far)
        if far_match is None:
            if _LI_NO_FAR.fullmatch(far):
                continue  # up, but the far end was not discovered
            raise not_output("iblinkinfo", source, lineno, stripped, _LI_EXPECTED)
        rlid, rport, tail = far_match.groups()
        # '"<desc>" ( <note>)': the note says things like "Could be 53.125 Gbps".
        cut = tail.rfind('" (')
        if cut < 0 or not tail.endswith(")"):
            raise not_output("iblinkinfo", source, lineno, stripped, _LI_EXPECTED)
        lines.append(_LinkLine(block, int(port), int(rlid), int(rport), tail[:cut], f"{width}x", speed, lineno))
    for block in one_line.values():
        _one_line_kind(block)
    _iblinkinfo_devices(topo, blocks, lines)
    warn_shared_ports(topo)
    return topo


def _one_line_kind(block: _Block) -> None:
    """What a device of `iblinkinfo -l` is (the module docstring says how it is told): a switch keeps
    its node GUID; a CA is known by its ports' GUIDs, as in a `CA:` block."""
    if block.nports > 2 or (len(block.port_guids) > 1 and len(block.lids) == 1):
        block.kind, block.port_guids = "switch", {}
    else:
        block.kind, block.guid = "ca", None


def _iblinkinfo_devices(topo: Topology, blocks: list[_Block], lines: list[_LinkLine]) -> None:
    by_lid: dict[tuple[int, str], Device] = {}
    device_of: dict[int, Device] = {}  # id(block) -> its device
    for block in blocks:
        if block.guid is not None:
            key = guid_key(block.guid)
        elif block.port_guids:
            key = guid_key(block.port_guids[min(block.port_guids)])
        else:
            key = f"lid {block.lids[0] if block.lids else '?'} {block.desc}"
        if key in topo.devices:
            raise CablingError(
                f"{topo.source}:{block.lineno}: a second block for {key} (the first is at line "
                f"{topo.devices[key].line})"
            )
        device = topo.add(
            Device(
                block.desc,
                block.kind,
                block.nports,
                block.guid,
                block.lids[0] if block.lids else None,
                key,
                dict(block.port_guids),
                line=block.lineno,
            ),
            key,
        )
        device_of[id(block)] = device
        for lid in block.lids:
            by_lid.setdefault((lid, block.desc), device)
    ends: list[Sighting] = []
    for line in lines:
        far = by_lid.get((line.far_lid, line.far_desc))
        if far is None:
            key = f"lid {line.far_lid} {line.far_desc}"
            far = topo.devices.get(key) or topo.add(
                Device(line.far_desc, "unknown", 0, None, line.far_lid, line=line.block.lineno), key
            )
            by_lid[(line.far_lid, line.far_desc)] = far
            far.nports = max(far.nports, line.far_port)
        ends.append(
            (device_of[id(line.block)].key, line.port, far.key, line.far_port, line.width, line.speed, line.lineno)
        )
    add_links(topo, ends)
