"""The InfiniBand diagnostic tools' topology outputs, read and written: one place to import them from.

- `ibnetdiscover` topology files, plain, grouped (-g) and the ports report (-p):
  podctl.ibfabric.ibnetdiscover;
- `iblinkinfo`: podctl.ibfabric.iblinkinfo;
- what both read into (devices keyed by GUID, links) and share:
  podctl.ibfabric.topofile.
"""

from __future__ import annotations

from podctl.ibfabric.iblinkinfo import parse_iblinkinfo, write_iblinkinfo
from podctl.ibfabric.ibnetdiscover import parse_ibnetdiscover, write_ibnetdiscover
from podctl.ibfabric.topofile import (
    LANE_GBPS,
    MAX_LINE,
    CablingError,
    Device,
    End,
    Link,
    Topology,
    guid_key,
    hca_desc,
    links_of,
    planned_ends,
    read_text,
    topology_from_plan,
)


def read_topology(path: str, fmt: str) -> Topology:
    """Read an ibnetdiscover ("ibnetdiscover": plain, -g or -p) or iblinkinfo ("iblinkinfo") file."""
    text = read_text(path, f"save the tool's output there first (e.g. `{fmt} > {path}`)")
    if fmt == "ibnetdiscover":
        return parse_ibnetdiscover(text, path)
    if fmt == "iblinkinfo":
        return parse_iblinkinfo(text, path)
    raise ValueError(f"unknown format {fmt!r}")


__all__ = [
    "CablingError",
    "Device",
    "End",
    "LANE_GBPS",
    "Link",
    "MAX_LINE",
    "Topology",
    "guid_key",
    "hca_desc",
    "links_of",
    "parse_iblinkinfo",
    "parse_ibnetdiscover",
    "planned_ends",
    "read_text",
    "read_topology",
    "topology_from_plan",
    "write_iblinkinfo",
    "write_ibnetdiscover",
]
