"""The InfiniBand fabric as its tools show it (topology files, port counters), checked against the planned cable map."""

from podctl.ibfabric.check import CableFinding, CablingReport, check_cabling
from podctl.ibfabric.formats import (
    CablingError,
    End,
    Link,
    Topology,
    parse_iblinkinfo,
    parse_ibnetdiscover,
    topology_from_plan,
)

__all__ = [
    "CablingError",
    "CablingReport",
    "End",
    "CableFinding",
    "Link",
    "Topology",
    "check_cabling",
    "parse_iblinkinfo",
    "parse_ibnetdiscover",
    "topology_from_plan",
]
