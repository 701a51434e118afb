"""The InfiniBand diagnostic tools' topology outputs: a generator and a parser.

Two formats, the subset of them that describes cables:

- `ibnetdiscover` topology files (infiniband-diags): one block per device,
  `Switch <nports> "S-<guid>" # "<desc>" ... lid <n> lmc 0` or
  `Ca <nports> "H-<guid>" # "<desc>"`, each followed by one line per
  connected port naming the far end, its description, LID and link rate
  (`4xNDR`). Every cable appears twice, once from each end.
- `iblinkinfo` (infiniband-diags): one block per switch, `Switch: 0x<guid>
  <desc>:`, then a line per port with width, lane speed in Gbps (NDR:
  106.25, HDR: 53.125), state, and the far end's LID, port and description;
  unconnected ports show `Down/ Polling`.

Devices are named as real fabrics show them: an HCA's node description is
`"<hostname> <hca>"`, the HCA named as the node's profile lists it
(`compute_hcas.names`, rail 1 first; mlx5_<r-1> by default), a switch's is
its podctl name, as set with the switch's node description. GUIDs and LIDs in generated
files are made up but stable (derived from the names).

Both parsers return a `Topology`: devices by description and each cable once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from podctl.errors import PodctlError
from podctl.model import HcaNames, hca_name
from podctl.topology import FabricPlan

# Lane signalling rate, in Gbps, that iblinkinfo prints for each IB generation.
LANE_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR": 14.0625,
    "EDR": 25.78125,
    "HDR": 53.125,
    "NDR": 106.25,
    "XDR": 212.5,
}
NVIDIA_OUI = 0xB83FD2


class CablingError(PodctlError):
    """A topology file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True, order=True)
class End:
    device: str  # node description: "dgx005 mlx5_4" or a switch name
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

    @property
    def rate(self) -> str:
        return f"{self.width}{self.speed}"


@dataclass
class Device:
    desc: str
    kind: str  # "switch" | "ca"
    nports: int
    guid: int | None = None
    lid: int | None = None


@dataclass
class Topology:
    devices: dict[str, Device] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    source: str = "<memory>"

    def add_link(self, link: Link) -> None:
        self.links.append(link)


def hca_desc(host: str, rail: int, names: HcaNames | None = None) -> str:
    """The node description of `host`'s HCA on `rail` (1-based), named as `names` says (podctl.facts.hca_names)."""
    return f"{host} {hca_name(host, rail, names)}"


def _guid(name: str) -> int:
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:5], "big")
    return (NVIDIA_OUI << 40) | digest


def topology_from_plan(plan: FabricPlan, rate: str, hca_names: HcaNames | None = None) -> Topology:
    """What the diagnostic tools would show for a pod cabled exactly as planned."""
    topo = Topology(source=f"plan of fabric {plan.fabric!r}")
    lid = 0
    for switch in plan.switches:
        lid += 1
        topo.devices[switch.name] = Device(switch.name, "switch", switch.radix, _guid(switch.name), lid)
    for cable in plan.cables:
        if cable.tier == "node-leaf":
            desc = hca_desc(cable.lower.device, cable.lower.port, hca_names)
            lid += 1
            topo.devices[desc] = Device(desc, "ca", 1, _guid(desc), lid)
            lower = End(desc, 1)
        else:
            lower = End(cable.lower.device, cable.lower.port)
        topo.add_link(Link(End(cable.upper.device, cable.upper.port), lower, "4x", cable.rate))
    return topo


def _assign_ids(topo: Topology) -> None:
    used = {d.lid for d in topo.devices.values() if d.lid}
    next_lid = max(used, default=0)
    for device in topo.devices.values():
        if device.guid is None:
            device.guid = _guid(device.desc)
        if not device.lid:
            next_lid += 1
            device.lid = next_lid


def _ports(topo: Topology) -> dict[str, dict[int, tuple[End, Link]]]:
    by_device: dict[str, dict[int, tuple[End, Link]]] = {}
    for link in topo.links:
        by_device.setdefault(link.a.device, {})[link.a.port] = (link.b, link)
        by_device.setdefault(link.b.device, {})[link.b.port] = (link.a, link)
    return by_device


# -- ibnetdiscover --------------------------------------------------------


def write_ibnetdiscover(topo: Topology) -> str:
    _assign_ids(topo)
    ports = _ports(topo)
    out = [
        "#",
        "# Topology file: generated by podctl from the planned cable map",
        "#",
        f"# Initiated from node {next(iter(topo.devices.values())).guid:016x} port 1" if topo.devices else "#",
        "",
    ]
    for device in sorted(topo.devices.values(), key=lambda d: (d.kind != "switch", d.lid)):
        guid = f"{device.guid:016x}"
        if device.kind == "switch":
            out += [
                "vendid=0x2c9",
                "devid=0xd2f0",
                f"sysimgguid=0x{guid}",
                f"switchguid=0x{guid}(0x{guid})",
                f'Switch\t{device.nports} "S-{guid}"\t\t# "{device.desc}" enhanced port 0 lid {device.lid} lmc 0',
            ]
        else:
            out += [
                "vendid=0x2c9",
                "devid=0x1021",
                f"sysimgguid=0x{guid}",
                f"caguid=0x{guid}",
                f'Ca\t{device.nports} "H-{guid}"\t\t# "{device.desc}"',
            ]
        for port, (far, link) in sorted(ports.get(device.desc, {}).items()):
            remote = topo.devices[far.device]
            rguid = f"{remote.guid:016x}"
            rtag = "S" if remote.kind == "switch" else "H"
            if device.kind == "switch":
                # A CA's port GUID follows its node GUID; switch ports have none of their own.
                rport_guid = f"({remote.guid + far.port:x})" if remote.kind == "ca" else ""
                out.append(
                    f'[{port}]\t"{rtag}-{rguid}"[{far.port}]{rport_guid}\t\t# "{remote.desc}" lid {remote.lid} {link.rate}'
                )
            else:
                out.append(
                    f'[{port}]({device.guid + port:x}) \t"{rtag}-{rguid}"[{far.port}]\t\t'
                    f'# lid {device.lid} lmc 0 "{remote.desc}" lid {remote.lid} {link.rate}'
                )
        out.append("")
    return "\n".join(out)


_SWITCH = re.compile(r'^Switch\s+(\d+)\s+"S-([0-9a-fA-F]+)"\s*#\s*"(.*)"(.*)$')
_CA = re.compile(r'^Ca\s+(\d+)\s+"H-([0-9a-fA-F]+)"\s*#\s*"(.*)"\s*$')
_PORT = re.compile(
    r'^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s*"([SH])-([0-9a-fA-F]+)"\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s*#(.*?)\s(\d+)x(\w+)\s*$'
)
_KEYS = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "Rt", "rtguid=")


def parse_ibnetdiscover(text: str, source: str = "<ibnetdiscover>") -> Topology:
    topo = Topology(source=source)
    by_guid: dict[int, Device] = {}
    raw: list[tuple[int, int, int, int, str, str, int]] = []  # guid, port, rguid, rport, width, speed, line
    current: Device | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith(_KEYS):
            continue
        if match := _SWITCH.match(stripped):
            nports, guid, desc, rest = match.groups()
            lid = re.search(r"\blid (\d+)", rest)
            current = Device(desc, "switch", int(nports), int(guid, 16), int(lid.group(1)) if lid else None)
        elif match := _CA.match(stripped):
            nports, guid, desc = match.groups()
            current = Device(desc, "ca", int(nports), int(guid, 16))
        elif match := _PORT.match(stripped):
            if current is None:
                raise CablingError(f"{source}:{lineno}: a port line before any Switch or Ca line: {stripped!r}")
            port, _, _, rguid, rport, _, _, width, speed = match.groups()
            raw.append((current.guid or 0, int(port), int(rguid, 16), int(rport), f"{width}x", speed.upper(), lineno))
            continue
        else:
            raise CablingError(
                f"{source}:{lineno}: not ibnetdiscover topology output: {stripped[:80]!r} "
                "(expected a Switch, Ca or [port] line; run `ibnetdiscover > FILE`)"
            )
        assert current.guid is not None
        by_guid[current.guid] = current
        topo.devices[current.desc] = current
    seen: set[frozenset[tuple[int, int]]] = set()
    for guid, port, rguid, rport, width, speed, lineno in raw:
        key = frozenset(((guid, port), (rguid, rport)))
        if key in seen:
            continue
        seen.add(key)
        remote = by_guid.get(rguid)
        if remote is None:
            raise CablingError(f"{source}:{lineno}: port {port} leads to GUID {rguid:#x}, which no Switch or Ca block describes")
        topo.add_link(Link(End(by_guid[guid].desc, port), End(remote.desc, rport), width, speed))
    return topo


# -- iblinkinfo -----------------------------------------------------------


def write_iblinkinfo(topo: Topology) -> str:
    _assign_ids(topo)
    ports = _ports(topo)
    out = []
    for device in sorted(topo.devices.values(), key=lambda d: d.lid or 0):
        if device.kind != "switch":
            continue
        out.append(f"Switch: 0x{device.guid:016x} {device.desc}:")
        connected = ports.get(device.desc, {})
        for port in range(1, device.nports + 1):
            if port in connected:
                far, link = connected[port]
                remote = topo.devices[far.device]
                lane = LANE_GBPS[link.speed]
                out.append(
                    f"{device.lid:>11} {port:>4}[  ] ==( {link.width.upper():>3} {lane:>14g} Gbps Active/  LinkUp)==> "
                    f"{remote.lid:>7} {far.port:>4}[  ] \"{remote.desc}\" ( )"
                )
            else:
                out.append(f"{device.lid:>11} {port:>4}[  ] ==(                Down/ Polling)==>             [  ] \"\" ( )")
    return "\n".join(out) + "\n"


_LI_HEAD = re.compile(r"^(Switch|CA):\s+(?:(0x[0-9a-fA-F]+)\s+)?(.*):\s*$")
_LI_PORT = re.compile(
    r"^(?:0x[0-9a-fA-F]+\s+)?(\d+)\s+(\d+)\[\s*\]\s+==\(\s*(\d+)X\s+([\d.]+)\s+Gbps\s+(\w+)/\s*(\w+)\)==>\s+"
    r"(\d+)\s+(\d+)\[\s*\]\s+\"(.*)\"\s+\(.*\)\s*$"
)
_LI_DOWN = re.compile(r"^(?:0x[0-9a-fA-F]+\s+)?(\d+)\s+(\d+)\[\s*\]\s+==\(.*\)==>\s+\[\s*\]\s+\"\"\s+\(.*\)\s*$")


def _speed_of(lane: float) -> str | None:
    for name, gbps in LANE_GBPS.items():
        if abs(gbps - lane) < 0.01 * gbps:
            return name
    return None


def parse_iblinkinfo(text: str, source: str = "<iblinkinfo>") -> Topology:
    topo = Topology(source=source)
    current: Device | None = None
    seen: set[frozenset[tuple[str, int]]] = set()
    max_port: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if match := _LI_HEAD.match(stripped):
            kind, guid, desc = match.groups()
            current = topo.devices.get(desc) or Device(desc, "switch" if kind == "Switch" else "ca", 0)
            current.kind = "switch" if kind == "Switch" else "ca"
            if guid:
                current.guid = int(guid, 16)
            topo.devices[desc] = current
            continue
        if current is None:
            raise CablingError(f"{source}:{lineno}: a port line before any 'Switch:' or 'CA:' line: {stripped[:80]!r}")
        if match := _LI_DOWN.match(stripped):
            current.nports = max(current.nports, int(match.group(2)))
            continue
        match = _LI_PORT.match(stripped)
        if match is None:
            raise CablingError(
                f"{source}:{lineno}: not iblinkinfo output: {stripped[:80]!r} "
                "(expected '<lid> <port>[  ] ==( 4X 106.25 Gbps Active/  LinkUp)==> <lid> <port>[  ] \"<desc>\" ( )')"
            )
        lid, port, width, lane, _state, _phys, rlid, rport, rdesc = match.groups()
        speed = _speed_of(float(lane))
        if speed is None:
            raise CablingError(f"{source}:{lineno}: unknown lane speed {lane} Gbps (known: "
                               + ", ".join(f"{k} {v:g}" for k, v in LANE_GBPS.items()) + ")")
        current.lid = int(lid)
        current.nports = max(current.nports, int(port))
        remote = topo.devices.get(rdesc)
        if remote is None:
            # The far end's kind shows in its own block, if it has one; an HCA has none.
            remote = Device(rdesc, "ca", 1, None, int(rlid))
            topo.devices[rdesc] = remote
        remote.lid = int(rlid)
        max_port[rdesc] = max(max_port.get(rdesc, 0), int(rport))
        key = frozenset(((current.desc, int(port)), (rdesc, int(rport))))
        if key in seen:
            continue
        seen.add(key)
        topo.add_link(Link(End(current.desc, int(port)), End(rdesc, int(rport)), f"{width}x", speed))
    for desc, port in max_port.items():
        topo.devices[desc].nports = max(topo.devices[desc].nports, port)
    return topo


def read_topology(path: str, fmt: str) -> Topology:
    """Read an ibnetdiscover ("ibnetdiscover") or iblinkinfo ("iblinkinfo") file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise CablingError(f"{path}: no such file; save the tool's output there first (e.g. `{fmt} > {path}`)") from None
    except OSError as exc:
        raise CablingError(f"{path}: cannot read it: {exc.strerror}") from None
    if fmt == "ibnetdiscover":
        return parse_ibnetdiscover(text, path)
    if fmt == "iblinkinfo":
        return parse_iblinkinfo(text, path)
    raise ValueError(f"unknown format {fmt!r}")


def links_of(topo: Topology, device: str) -> Iterable[Link]:
    return (link for link in topo.links if device in (link.a.device, link.b.device))
