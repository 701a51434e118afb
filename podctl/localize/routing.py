"""Deterministic up/down routing over a planned fat tree.

Both the simulator and the localizer need to know which switch-to-switch
cables carry the traffic between two nodes on one rail. On a real pod that
comes from the subnet manager's forwarding tables (`ibtracert`, or the LFTs
that `dump_fts` prints); here it is modelled the way ftree/up-down routing
behaves: destination-based, so the path from a source leaf to a destination
node depends on the destination only, climbing to the lowest switch tier that
reaches the destination's leaf and descending from there. Among equal-cost
links the choice is the destination's index taken digit by digit in mixed
radix (one digit per hop), which spreads destinations over every uplink the
way ftree's LID-modulo assignment does.

Cables are named by their index in `plan.cables` (an int): the routes of a
thousand-node pod are hashed millions of times, and a dataclass hashes
slowly. `Router.cables[i]` is the Cable.

Pure: the same plan always gives the same routes.
"""

from __future__ import annotations

from collections.abc import Iterable

from podctl.topology import Cable, FabricPlan


class Router:
    """Routes of one FabricPlan; memoized, so repeated queries are cheap."""

    def __init__(self, plan: FabricPlan) -> None:
        self.plan = plan
        self.rails = max(c.lower.port for c in plan.cables_in("node-leaf"))
        self.hosts: tuple[str, ...] = tuple(h for su in plan.scalable_units for h in su)
        self.index = {h: i for i, h in enumerate(self.hosts)}
        self._leaf_of = {(c.lower.device, c.lower.port): c.upper.device for c in plan.cables_in("node-leaf")}
        self.cables: tuple[Cable, ...] = plan.cables
        self.cable_id: dict[Cable, int] = {c: i for i, c in enumerate(plan.cables)}
        self._up: dict[str, list[Cable]] = {}
        self._down: dict[str, list[Cable]] = {}
        for cable in plan.cables:
            if cable.tier == "node-leaf":
                continue
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
        self._routes: dict[tuple[str, str], tuple[int, ...]] = {}
        self._hops: dict[tuple[str, str, bool], list[Cable]] = {}
        self._users: dict[int, dict[int, dict[str, frozenset[str]]]] = {}

    def leaf(self, host: str, rail: int) -> str:
        return self._leaf_of[(host, rail)]

    def route(self, src_leaf: str, dst: str, rail: int) -> tuple[int, ...]:
        """Switch-to-switch cables (ids) from `src_leaf` to `dst` on `rail` (empty on the same leaf)."""
        key = (src_leaf, dst)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        dst_leaf = self._leaf_of[(dst, rail)]
        digits = self.index[dst]
        path: list[Cable] = []
        here = src_leaf
        while dst_leaf not in self._beneath[here]:
            choices = self._choices(here, dst_leaf, up=True)
            if not choices:
                raise ValueError(f"no route from {src_leaf} to {dst} on rail {rail}")
            digits, pick = divmod(digits, len(choices))
            path.append(choices[pick])
            here = choices[pick].upper.device
        while here != dst_leaf:
            choices = self._choices(here, dst_leaf, up=False)
            digits, pick = divmod(digits, len(choices))
            path.append(choices[pick])
            here = choices[pick].lower.device
        result = tuple(self.cable_id[c] for c in path)
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
