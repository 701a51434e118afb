"""Known corruptions of a topology, to test that the cabling check catches each.

Each function returns a new Topology; `at` names an end of the cable to
change: a device, by its key in the topology or by a description only one
device has, and a port.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from podctl.ibfabric.topofile import Device, End, Link, Topology, name_guid


def _link_at(topo: Topology, at: End) -> Link:
    for link in topo.links:
        if at in (topo.resolve(link.a), topo.resolve(link.b)):
            return link
    raise KeyError(f"no cable at {at}")


def _other(topo: Topology, link: Link, end: End) -> End:
    a, b = topo.resolve(link.a), topo.resolve(link.b)
    return b if a == end else a


def _copy(topo: Topology) -> Topology:
    return Topology(copy.deepcopy(topo.devices), list(topo.links), topo.source, list(topo.warnings))


def drop_cable(topo: Topology, at: End) -> Topology:
    out = _copy(topo)
    out.links.remove(_link_at(out, out.resolve(at)))
    return out


def swap_ports(topo: Topology, first: End, second: End) -> Topology:
    """The cables at `first` and `second` trade places (e.g. two ports of a leaf)."""
    out = _copy(topo)
    first, second = out.resolve(first), out.resolve(second)
    one, two = _link_at(out, first), _link_at(out, second)
    far_one, far_two = _other(out, one, first), _other(out, two, second)
    out.links = [link for link in out.links if link not in (one, two)]
    out.links += [Link(first, far_two, two.width, two.speed), Link(second, far_one, one.width, one.speed)]
    return out


def move_cable(topo: Topology, at: End, to: End) -> Topology:
    """The cable plugged in at `at` is plugged in at the free port `to` instead."""
    out = _copy(topo)
    at, to = out.resolve(at), out.resolve(to)
    link = _link_at(out, at)
    out.links.remove(link)
    out.links.append(Link(to, _other(out, link, at), link.width, link.speed))
    return out


def set_rate(topo: Topology, at: End, width: str | None = None, speed: str | None = None) -> Topology:
    out = _copy(topo)
    link = _link_at(out, out.resolve(at))
    index = out.links.index(link)
    out.links[index] = replace(link, width=width or link.width, speed=speed or link.speed)
    return out


def add_device(topo: Topology, desc: str, kind: str, at: End, width: str = "4x", speed: str = "NDR") -> Topology:
    """A device the plan does not know, cabled from its port 1 to the free port `at`."""
    out = _copy(topo)
    guid = name_guid(f"{desc} {len(out.devices)}")  # a new GUID even where the description is not new
    device = out.add(
        Device(desc, kind, 1 if kind == "ca" else 64, guid, port_guids={1: guid + 1} if kind == "ca" else {})
    )
    out.links.append(Link(out.resolve(at), End(device.key, 1), width, speed))
    return out
