"""The network file of a sim pod's emulated fabric (podctl.derive.facts: where ibsim runs, its sockets, and
where each SM attaches): the compute fabric cabled exactly as planned, what `podctl fabric
topology` prints. podctl.sim.fabric serves it with ibsim beside the pod."""

from __future__ import annotations

from podctl.core.model import Site
from podctl.derive.emulated import EMULATED_FABRIC
from podctl.derive.facts import cached_plan, hca_names
from podctl.ibfabric.ibsim.network import network_from_plan


def network(site: Site) -> str:
    fabric = site.fabrics[EMULATED_FABRIC]
    return network_from_plan(cached_plan(fabric), fabric.rate, hca_names(site, EMULATED_FABRIC))
