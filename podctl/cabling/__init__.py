"""The cabling check: the InfiniBand tools' view of a fabric against the planned cable map."""

from .check import CablingReport, Finding, check_cabling
from .formats import CablingError, End, Link, Topology, parse_iblinkinfo, parse_ibnetdiscover, topology_from_plan

__all__ = [
    "CablingError",
    "CablingReport",
    "End",
    "Finding",
    "Link",
    "Topology",
    "check_cabling",
    "parse_iblinkinfo",
    "parse_ibnetdiscover",
    "topology_from_plan",
]
