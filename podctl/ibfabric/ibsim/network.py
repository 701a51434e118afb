"""ibsim's network file: written from a plan, its devices found by name, faults cabled into it.

ibsim reads ibnetdiscover's topology format (`podctl fabric topology SITE` prints one), each
device a `Switch <n> "S-<guid>"` or `Ca <n> "H-<guid>"` line with its description after `#`,
then a line per cabled port with the far end and the link's width and speed (`4xNDR`). The
width and speed are what the port may train to: ibsim brings each link up at the best both
ends allow. ibsim's console names devices by the id in quotes (`"S-<guid>"`), never by
description: `node_ids` maps one to the other.

Faults that are the way a pod was built rather than something that happened to it (two
cables swapped, a link that trains below its width or speed) are cabled into the file, and
ibsim is started on it; faults that happen to a running fabric (a cable pulled, counters
that count) go through the console (podctl.ibfabric.ibsim.fabric).
"""

from __future__ import annotations

import re

from podctl.core.model import HcaNames
from podctl.derive.topology import FabricPlan
from podctl.ibfabric.corrupt import set_rate, swap_ports
from podctl.ibfabric.formats import parse_ibnetdiscover, topology_from_plan, write_ibnetdiscover
from podctl.ibfabric.ibsim.install import IbsimError
from podctl.ibfabric.topofile import End

_DEVICE = re.compile(r"(?:Switch|Ca|Rt)\s++\d{1,3}+\s++\"([^\"]{1,64}+)\"[^#]*+#\s*+\"([^\"]{0,256}+)\"", re.ASCII)


def network_from_plan(plan: FabricPlan, rate: str, hca_names: HcaNames | None = None) -> str:
    """The network file of a fabric cabled exactly as planned: what `podctl fabric topology` prints."""
    return write_ibnetdiscover(topology_from_plan(plan, rate, hca_names))


def node_ids(network: str) -> dict[str, str]:
    """description -> ibsim's id of the device (`"S-<guid>"`); a description that several devices
    share maps to "" (the console cannot be told which one by it)."""
    ids: dict[str, str] = {}
    for line in network.splitlines():
        match = _DEVICE.match(line)
        if match:
            node, desc = match.groups()
            ids[desc] = "" if desc in ids else node
    return ids


def node_id(ids: dict[str, str], device: str) -> str:
    """ibsim's id of the device described as `device` (an HCA "dgx001 mlx5_0", a switch by name)."""
    found = ids.get(device)
    if found is None:
        raise IbsimError(f"no device {device!r} in the simulated fabric's network file")
    if not found:
        raise IbsimError(f"several devices of the simulated fabric are described as {device!r}; name one by its id")
    return found


def _edit(network: str, what: str, change) -> str:  # type: ignore[no-untyped-def]
    topo = parse_ibnetdiscover(network, "<network file>")
    try:
        return write_ibnetdiscover(change(topo))
    except KeyError as exc:
        raise IbsimError(f"{what}: {exc.args[0]}") from None


def swap_cables(network: str, first: tuple[str, int], second: tuple[str, int]) -> str:
    """The network with the cables at two ports traded (each a (device description, port)):
    a technician's swap, as ibnetdiscover would find it."""
    return _edit(network, f"swap {first} and {second}", lambda topo: swap_ports(topo, End(*first), End(*second)))


def set_link_rate(network: str, at: tuple[str, int], width: str | None = None, speed: str | None = None) -> str:
    """The network with the cable at `at` (device description, port) able to train only to
    `width` ("2x", "1x") and/or `speed` ("HDR", "EDR"): a damaged cable or a port set down."""
    if width is not None and not re.fullmatch(r"(1|2|4|8|12)x", width):
        raise IbsimError(f"link width {width!r}: one of 1x, 2x, 4x, 8x, 12x")
    if speed is not None and speed not in ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR"):
        raise IbsimError(f"link speed {speed!r}: one of SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR (what ibsim knows)")
    return _edit(network, f"rate at {at}", lambda topo: set_rate(topo, End(*at), width, speed))
