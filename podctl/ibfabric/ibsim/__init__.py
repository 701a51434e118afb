"""The real InfiniBand tools on a simulated fabric: Debian's ibsim, OpenSM and infiniband-diags.

- `install`: which ibsim to run (podctl's build of ibsim 0.12, which knows NDR, else Debian's
  0.10), and the limits a network file needs;
- `network`: the network file, from a plan, with faults cabled in (cables swapped, a link that
  trains below its width or speed);
- `fabric`: `SimulatedFabric`, ibsim started on a network file, attached to and stopped, with
  its console (`console`: cables pulled, counters raised) and the diagnostic tools run against it
  (`tools`); `process`: how its processes are started and waited on;
- `opensm`: OpenSM routing it once, or a subnet manager that stays (master or standby), and
  which routing engine really routed;
- `guard`: ibsim with no authority (an account of its own, no capabilities) and, for a sim pod,
  reachable by root alone.

docs/fabric.md says what ibsim can and cannot do (its sockets, remote mode, two SMs).
"""

from podctl.ibfabric.ibsim.fabric import SimulatedFabric
from podctl.ibfabric.ibsim.install import IbsimError, Install, Limits, find_install, network_limits
from podctl.ibfabric.ibsim.network import network_from_plan, node_ids, set_link_rate, swap_cables
from podctl.ibfabric.ibsim.opensm import RoutingRun, SubnetManager, route, start_sm
from podctl.ibfabric.ibsim.tools import ToolRun

__all__ = [
    "IbsimError",
    "Install",
    "Limits",
    "RoutingRun",
    "SimulatedFabric",
    "SubnetManager",
    "ToolRun",
    "find_install",
    "network_from_plan",
    "network_limits",
    "node_ids",
    "route",
    "set_link_rate",
    "start_sm",
    "swap_cables",
]
