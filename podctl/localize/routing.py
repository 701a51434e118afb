"""Destination-based routing over a planned fat tree: the subnet manager's tables, or a model of them.

Both the simulator and the localizer need to know which switch-to-switch cables carry the
traffic between two nodes on one rail. InfiniBand forwards by destination: every switch holds a
linear forwarding table (LFT) that maps a destination LID to one output port, whatever the
source. `Router.next_hop(switch, destination, rail)` is that table, and a route is the walk
from the source leaf through it.

Where the tables come from:

- the subnet manager's own, read from a dump of them (`ibroute` for every switch,
  `dump_lfts.sh`, OpenSM's `opensm-lfts.dump`; `podctl.ibfabric.lft` places them on the plan):
  `Router(plan, forwarding=...)`. That is how the pod routes, and test selection then crosses
  the cables the pod's traffic really takes;
- else (and for any switch or destination a dump lacks), a model of ftree/up-down routing:
  climb while the destination's leaf is not beneath, then descend; among equal-cost links the
  choice is a digit of the destination's index in a mixed radix, one digit position per switch
  tier and direction (a leaf going up, a spine going up, a core going down, ...), which spreads
  destinations over every uplink the way ftree's LID-modulo assignment does. Because the choice
  depends on the switch and the destination only, the model is itself a set of forwarding
  tables (`podctl fabric topology --format lfts` prints them). The destinations' index is
  their position in `order`: the order the subnet manager numbers them (LIDs are handed out
  in discovery order), the plan's host order unless told.

A table that sends a destination round in a loop, or out of a port with no planned cable, is a
`RoutingError` naming the switch, port and destination.

Cables are named by their index in `plan.cables` (an int): the routes of a thousand-node pod
are hashed millions of times, and a dataclass hashes slowly. `Router.cables[i]` is the Cable.

Pure: the same plan and tables always give the same routes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from podctl.derive.topology import Cable, FabricPlan

TIERS = ("leaf", "spine", "core")
# switch name -> (host, rail) -> output port: the subnet manager's tables, placed on the plan
Forwarding = Mapping[str, Mapping[tuple[str, int], int]]


class RoutingError(ValueError):
    """Forwarding that cannot be followed on the plan; the message names the switch, port and destination."""


class Router:
    """Routes of one FabricPlan; memoized, so repeated queries are cheap."""

    def __init__(self, plan: FabricPlan, forwarding: Forwarding | None = None, order: Sequence[str] = ()) -> None:
        self.plan = plan
        self.forwarding = forwarding or {}
        self.rails = max(c.lower.port for c in plan.cables_in("node-leaf"))
        self.hosts: tuple[str, ...] = tuple(h for su in plan.scalable_units for h in su)
        known, ordered = set(self.hosts), set(order)
        numbered = [h for h in order if h in known] + [h for h in self.hosts if h not in ordered]
        self.index = {h: i for i, h in enumerate(numbered)}
        self._leaf_of = {(c.lower.device, c.lower.port): c.upper.device for c in plan.cables_in("node-leaf")}
        self.cables: tuple[Cable, ...] = plan.cables
        self.cable_id: dict[Cable, int] = {c: i for i, c in enumerate(plan.cables)}
        self._tier = {s.name: TIERS.index(s.tier) for s in plan.switches}
        self._at: dict[tuple[str, int], Cable] = {}  # (switch, port) -> the cable plugged in there
        self._up: dict[str, list[Cable]] = {}
        self._down: dict[str, list[Cable]] = {}
        for cable in plan.cables:
            self._at[(cable.upper.device, cable.upper.port)] = cable
            if cable.tier == "node-leaf":
                continue
            self._at[(cable.lower.device, cable.lower.port)] = cable
            self._up.setdefault(cable.lower.device, []).append(cable)
            self._down.setdefault(cable.upper.device, []).append(cable)
        for cables in self._up.values():
            cables.sort(key=lambda c: c.lower.port)
        for cables in self._down.values():
            cables.sort(key=lambda c: c.upper.port)
        self._pairs: dict[tuple[str, str, int], frozenset[int]] = {}
        # The leaves beneath each switch, tier by tier from the bottom.
        self._beneath: dict[str, frozenset[str]] = {s.name: frozenset((s.name,)) for s in plan.switches_in("leaf")}
        for tier in ("spine", "core"):
            for switch in plan.switches_in(tier):
                below: set[str] = set()
                for cable in self._down.get(switch.name, ()):
                    below |= self._beneath.get(cable.lower.device, frozenset())
                self._beneath[switch.name] = frozenset(below)
        # Leaves reachable by going up then down from each switch: on a
        # three-tier fabric with a short last block, some spine planes exist
        # only in the full blocks and cannot reach the short one.
        self._reach: dict[str, frozenset[str]] = {}
        for tier in ("core", "spine", "leaf"):
            for switch in plan.switches_in(tier):
                reach = set(self._beneath[switch.name])
                for cable in self._up.get(switch.name, ()):
                    reach |= self._reach[cable.upper.device]
                self._reach[switch.name] = frozenset(reach)
        self._stride = self._strides()
        self._max_hops = 2 * len(TIERS)
        self._routes: dict[tuple[str, str], tuple[int, ...]] = {}
        self._hops: dict[tuple[str, str, bool], list[Cable]] = {}
        self._users: dict[int, dict[int, dict[str, frozenset[str]]]] = {}
        self.modelled: set[str] = set()  # switches a route crossed that have no table
        # Destinations some table routes: a switch with a table but no entry for one of them drops its traffic.
        self._routed = {dst for table in self.forwarding.values() for dst in table}

    def _strides(self) -> dict[tuple[int, bool], int]:
        """The place value of each (tier, going up) digit: the product of the radices before it."""
        radix: dict[tuple[int, bool], int] = {}
        for switch, ups in self._up.items():
            key = (self._tier[switch], True)
            radix[key] = max(radix.get(key, 1), len(ups))
        for switch, downs in self._down.items():
            per_child: dict[str, int] = {}
            for cable in downs:
                per_child[cable.lower.device] = per_child.get(cable.lower.device, 0) + 1
            key = (self._tier[switch], False)
            radix[key] = max(radix.get(key, 1), *per_child.values())
        positions = [(t, True) for t in range(len(TIERS))] + [(t, False) for t in reversed(range(len(TIERS)))]
        stride, place = {}, 1
        for position in positions:
            stride[position] = place
            place *= radix.get(position, 1)
        return stride

    def leaf(self, host: str, rail: int) -> str:
        return self._leaf_of[(host, rail)]

    def next_hop(self, here: str, dst: str, rail: int) -> Cable:
        """The cable switch `here` forwards traffic for `dst`'s HCA on `rail` out of."""
        table = self.forwarding.get(here)
        port = table.get((dst, rail)) if table is not None else None
        if port is not None:
            cable = self._at.get((here, port))
            if cable is None:
                raise RoutingError(
                    f"{here} forwards {dst} (rail {rail}) out of port {port}, which has no planned cable"
                )
            return cable
        if table is not None and (dst, rail) in self._routed:
            raise RoutingError(f"{here} has no entry for {dst} (rail {rail}): the switch would drop its traffic")
        if self.forwarding:
            self.modelled.add(here)
        return self._modelled_hop(here, dst, rail)

    def _modelled_hop(self, here: str, dst: str, rail: int) -> Cable:
        dst_leaf = self._leaf_of[(dst, rail)]
        if here == dst_leaf:
            return self._at[(here, self.plan.leaf_port(dst, rail).port)]
        up = dst_leaf not in self._beneath[here]
        choices = self._choices(here, dst_leaf, up)
        if not choices:
            raise RoutingError(f"no route from {here} to {dst} on rail {rail}")
        pick = (self.index[dst] // self._stride[(self._tier[here], up)]) % len(choices)
        return choices[pick]

    def route(self, src_leaf: str, dst: str, rail: int) -> tuple[int, ...]:
        """Switch-to-switch cables (ids) from `src_leaf` to `dst` on `rail` (empty on the same leaf)."""
        key = (src_leaf, dst)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        dst_leaf = self._leaf_of[(dst, rail)]
        path: list[int] = []
        here = src_leaf
        visited = [here]
        while True:
            cable = self.next_hop(here, dst, rail)
            if cable.tier == "node-leaf":
                if cable.lower.device != dst or cable.lower.port != rail:
                    raise RoutingError(
                        f"{here} forwards {dst} (rail {rail}) out of port {cable.upper.port}, to "
                        f"{cable.lower.device} rail {cable.lower.port}"
                    )
                break
            path.append(self.cable_id[cable])
            here = cable.upper.device if cable.lower.device == here else cable.lower.device
            visited.append(here)
            if len(path) > self._max_hops:
                raise RoutingError(
                    f"the route from {src_leaf} to {dst} (rail {rail}) loops: {' -> '.join(visited[:5])} -> ..."
                )
        assert here == dst_leaf
        result = tuple(path)
        self._routes[key] = result
        return result

    def _choices(self, here: str, dst_leaf: str, up: bool) -> list[Cable]:
        # Equal-cost next hops depend on the switch and the destination leaf
        # only, so they are worked out once per such pair.
        key = (here, dst_leaf, up)
        cached = self._hops.get(key)
        if cached is not None:
            return cached
        if up:
            ups = self._up.get(here, [])
            choices = [c for c in ups if dst_leaf in self._beneath[c.upper.device]] or [
                c for c in ups if dst_leaf in self._reach[c.upper.device]
            ]
        else:
            choices = [c for c in self._down[here] if dst_leaf in self._beneath[c.lower.device]]
        self._hops[key] = choices
        return choices

    def pair_cables(self, a: str, b: str, rail: int) -> frozenset[int]:
        """Cables (ids) that traffic both ways between `a` and `b` on `rail` uses."""
        key = (a, b, rail)
        cached = self._pairs.get(key)
        if cached is None:
            cached = frozenset(self.route(self.leaf(a, rail), b, rail)) | frozenset(
                self.route(self.leaf(b, rail), a, rail)
            )
            self._pairs[key] = self._pairs[(b, a, rail)] = cached
        return cached

    def users(self, rail: int) -> dict[int, dict[str, frozenset[str]]]:
        """For every switch cable of `rail`: source leaf -> destinations routed over it."""
        index = self._users.get(rail)
        if index is not None:
            return index
        building: dict[int, dict[str, set[str]]] = {}
        leaves = sorted({self._leaf_of[(h, rail)] for h in self.hosts})
        for src in leaves:
            for dst in self.hosts:
                for cable in self.route(src, dst, rail):
                    building.setdefault(cable, {}).setdefault(src, set()).add(dst)
        index = {c: {s: frozenset(d) for s, d in by.items()} for c, by in building.items()}
        self._users[rail] = index
        return index

    def group_crosses(self, nodes: Iterable[str], cable: int, rail: int) -> bool:
        """Whether an all-to-all over `nodes` on `rail` sends traffic over `cable`."""
        users = self.users(rail).get(cable)
        if not users:
            return False
        members = set(nodes)
        sources = {self.leaf(n, rail) for n in members}
        return any(src in sources and not dsts.isdisjoint(members) for src, dsts in users.items())

    def tables(self, switches: Iterable[str] | None = None) -> dict[str, dict[tuple[str, int], int]]:
        """The forwarding tables this router follows, for every switch and every destination of its rail
        (what a subnet manager would program): switch -> (host, rail) -> port."""
        rail_of: dict[str, set[int]] = {}
        for (_host, rail), leaf in self._leaf_of.items():
            rail_of.setdefault(leaf, set()).add(rail)
        out: dict[str, dict[tuple[str, int], int]] = {}
        for switch in switches if switches is not None else (s.name for s in self.plan.switches):
            rails = self._rails_below(switch, rail_of)
            table = out.setdefault(switch, {})
            for rail in sorted(rails):
                for dst in self.hosts:
                    if self._leaf_of[(dst, rail)] not in self._reach[switch]:
                        continue
                    cable = self.next_hop(switch, dst, rail)
                    table[(dst, rail)] = cable.upper.port if cable.upper.device == switch else cable.lower.port
        return out

    def _rails_below(self, switch: str, rail_of: Mapping[str, set[int]]) -> set[int]:
        return {rail for leaf in self._beneath[switch] for rail in rail_of.get(leaf, ())}
