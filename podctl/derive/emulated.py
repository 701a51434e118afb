"""The emulated compute fabric of a sim pod, as the inventory and the sim see it.

Only a pod that `podctl sim up` made is emulated (podctl.core.state.sim_pod: the sim's own
record, never the site file). Its compute fabric is served by ibsim in the network namespace of
the first subnet-manager host's container, on that namespace's loopback, to root's sockets alone
(podctl.ibfabric.ibsim.guard): that host's OpenSM and the tools root runs there reach it; no other
host, and no other user there. podctl.ibfabric.emulated writes its network file; podctl.sim.fabric
runs it. A real pod's facts (podctl.derive.facts) never mention it.
"""

from __future__ import annotations

from podctl.core.model import Site
from podctl.derive.facts import Facts, cached_plan, hca_names
from podctl.derive.topology import name_guid

EMULATED_FABRIC = "compute"
# On the emulated SM host: `podctl-umad2sim TOOL ARGS...` runs TOOL against the emulated fabric.
UMAD2SIM_PROGRAM = "/usr/local/sbin/podctl-umad2sim"
# The systemd unit that runs OpenSM under umad2sim there.
EMULATED_SM_SERVICE = "podctl-opensm-sim"


def has_emulated_fabric(site: Site) -> bool:
    return EMULATED_FABRIC in site.fabrics and bool(site.fabrics[EMULATED_FABRIC].subnet_managers)


def emulated_server(site: Site) -> str:
    """The SM host in whose container's network namespace ibsim runs."""
    return site.fabrics[EMULATED_FABRIC].subnet_managers[0]


def emulated_attachments(site: Site) -> dict[str, str]:
    """SM host -> the device of the network file its OpenSM and tools attach at (SIM_HOST, by
    description): its rail-1 HCA where it has one on the fabric, else a switch of its own (the
    plan's switches in order, leaves first), as an SM on a managed switch. ibsim lets one SM attach
    per device."""
    fabric = site.fabrics[EMULATED_FABRIC]
    names = hca_names(site, EMULATED_FABRIC)
    switches = iter(s.name for s in cached_plan(fabric).switches)
    out: dict[str, str] = {}
    for host in fabric.subnet_managers:
        out[host] = f"{host} {names[host][0]}" if names.get(host) else next(switches, "")
    return out


def emulated_host_facts(derived: Facts, host: str) -> dict[str, object] | None:
    """What the fabric role needs on `host` of a sim pod: where ibsim is, where to attach, and the
    GUIDs of updn's roots (the emulated fabric's GUIDs are podctl's, topology.name_guid: on a real
    fabric they are the switches' own, which podctl does not know); None on a host that runs no SM
    there. Only the host whose namespace serves ibsim can reach it."""
    site = derived.site
    if not has_emulated_fabric(site) or host != emulated_server(site):
        return None
    return {
        "fabric": EMULATED_FABRIC,
        "attach": emulated_attachments(site)[host],
        "client_program": UMAD2SIM_PROGRAM,
        "service": EMULATED_SM_SERVICE,
        "root_guids": [f"0x{name_guid(name):016x}" for name in derived.routing_roots(EMULATED_FABRIC)],
    }
