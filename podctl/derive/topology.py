"""Fabric planning: the switches and cables of a rail-optimized fat tree.

`plan_fabric` turns a declared `Fabric` into a `FabricPlan` in the shape of
NVIDIA's DGX SuperPOD reference architectures: nodes are grouped into
scalable units (SUs), each SU has one leaf switch per rail, and the leaves
are joined by one spine tier (two tiers) or by rail-grouped spines and a
core tier (three tiers). A fabric that runs OpenSM's ftree gets a tree ftree
accepts wherever one exists (see plan_fabric and routing_advice). Everything
downstream that needs to know where a cable goes (cable maps, Slurm topology,
fabric validation) reads the plan instead of re-deriving it.

Pure: no I/O, and the same `Fabric` always gives an identical plan.

Why one module of this size: two-tier and three-tier planning share the unit,
leaf and port arithmetic, and the plan's invariants are checked over both; the
reader follows one cable from node to core in one file.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from podctl.core.errors import PodctlError
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Fabric

SWITCH_TIERS: tuple[str, ...] = ("leaf", "spine", "core")
# The engines that route only what OpenSM's ftree accepts as a fat tree; a fabric that names no
# engine (None) runs the one its plan calls for, ftree where it can.
FTREE_ENGINES = (None, "ftree", "ar_ftree")
CABLE_TIERS: tuple[str, ...] = ("node-leaf", "leaf-spine", "spine-core")


class TopologyError(PodctlError):
    """The declared fabric cannot be built as asked; the message says what to change."""


@dataclass(frozen=True, slots=True)
class Switch:
    name: str
    tier: str  # one of SWITCH_TIERS
    radix: int
    su: int | None  # leaves only
    rail: int | None  # leaves, and spines of a three-tier fabric
    block: int | None  # three tiers: the block of consecutive SUs a leaf or spine serves
    index: int  # 1-based ordinal within its tier, in plan order
    # Three tiers: the spine position j within its block; spine j of every
    # block and rail forms one plane. A core carries its plane when it serves
    # one plane only (per-plane rule) and None when it serves several.
    plane: int | None = None
    # Three tiers, spines and cores: the core group. Every spine of a group
    # reaches every core of that group and no other core. Grouped planes put
    # several consecutive planes in one group; the per-plane rule makes each
    # plane its own group (group == plane).
    group: int | None = None


@dataclass(frozen=True, slots=True)
class Port:
    device: str  # a hostname or a switch name
    port: int  # node: rail number 1..rails (HCA index + 1); switch: 1..radix


@dataclass(frozen=True, slots=True)
class Cable:
    tier: str  # one of CABLE_TIERS
    lower: Port
    upper: Port
    rate: str


@dataclass(frozen=True)
class FabricPlan:
    fabric: str
    tiers: int
    switches: tuple[Switch, ...]
    cables: tuple[Cable, ...]
    scalable_units: tuple[tuple[str, ...], ...]  # hostnames per SU, in order
    # Three tiers: the spine and core switches of the other layout (see plan_fabric): of the
    # block-filling one this plan replaced for ftree, or of the cheapest symmetric one this
    # block-filling plan stands instead of (the site runs another engine). None: there is none.
    filling_switches: int | None = None
    symmetric_switches: int | None = None
    _node_ports: dict[tuple[str, int], Port] = field(init=False, repr=False, compare=False)
    _su_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Lookups are indexed once so that per-host queries over a
        # thousand-node pod stay O(1).
        node_ports = {(c.lower.device, c.lower.port): c.upper for c in self.cables if c.tier == "node-leaf"}
        su_of = {host: number for number, hosts in enumerate(self.scalable_units, start=1) for host in hosts}
        object.__setattr__(self, "_node_ports", node_ports)
        object.__setattr__(self, "_su_of", su_of)

    def switches_in(self, tier: str) -> tuple[Switch, ...]:
        _check_tier(tier, SWITCH_TIERS)
        return tuple(s for s in self.switches if s.tier == tier)

    def cables_in(self, tier: str) -> tuple[Cable, ...]:
        _check_tier(tier, CABLE_TIERS)
        return tuple(c for c in self.cables if c.tier == tier)

    def leaf_port(self, host: str, rail: int) -> Port:
        """The leaf port that `host`'s rail `rail` (1-based) is cabled to."""
        try:
            return self._node_ports[(host, rail)]
        except KeyError:
            if host not in self._su_of:
                raise KeyError(f"{host!r} is not attached to fabric {self.fabric!r}") from None
            raise KeyError(f"fabric {self.fabric!r} has no rail {rail} (rails are numbered from 1)") from None

    def su_of(self, host: str) -> int:
        """The 1-based scalable unit that `host` belongs to."""
        try:
            return self._su_of[host]
        except KeyError:
            raise KeyError(f"{host!r} is not attached to fabric {self.fabric!r}") from None

    def counts(self) -> dict[str, dict[str, int]]:
        """Switches per tier and cables per tier; absent tiers count 0."""
        switches = dict.fromkeys(SWITCH_TIERS, 0)
        for switch in self.switches:
            switches[switch.tier] += 1
        cables = dict.fromkeys(CABLE_TIERS, 0)
        for cable in self.cables:
            cables[cable.tier] += 1
        return {"switches": switches, "cables": cables}

    def bisection_ratio(self) -> dict[str, float]:
        """Per switch tier that has uplinks: uplinks / downlinks in use on its worst switch.

        1.0 or more is non-blocking. All links of a fabric run at one rate, so
        link counts stand for capacity. The worst switch, not the tier
        average, is what bounds an adversarial traffic pattern.
        """
        down: dict[str, int] = {}
        up: dict[str, int] = {}
        for cable in self.cables:
            down[cable.upper.device] = down.get(cable.upper.device, 0) + 1
            if cable.tier != "node-leaf":
                up[cable.lower.device] = up.get(cable.lower.device, 0) + 1
        ratios: dict[str, float] = {}
        for switch in self.switches:
            used_down = down.get(switch.name, 0)
            if switch.name not in up or not used_down:
                continue
            ratio = up[switch.name] / used_down
            ratios[switch.tier] = min(ratio, ratios.get(switch.tier, ratio))
        return ratios


def _check_tier(tier: str, known: tuple[str, ...]) -> None:
    if tier not in known:
        raise ValueError(f"unknown tier {tier!r}; known tiers: {', '.join(known)}")


def _smallest_divisor_at_least(n: int, bound: int) -> int | None:
    for d in range(max(1, bound), n + 1):
        if n % d == 0:
            return d
    return None


def _width(count: int) -> int:
    # Zero-padding to the widest number keeps names sorting in plan order.
    return max(2, len(str(count)))


def _check_fabric(fabric: Fabric) -> None:
    where = f"fabric {fabric.name!r}"
    if not fabric.nodes:
        raise TopologyError(f"{where} has no nodes attached; attach nodes or remove it")
    repeated = sorted(host for host, n in Counter(fabric.nodes).items() if n > 1)
    if repeated:
        raise TopologyError(f"{where} lists {', '.join(repeated)} more than once; each node is cabled once")
    if fabric.rails < 1:
        raise TopologyError(f"{where}: rails is {fabric.rails}; a node needs at least one rail")
    if fabric.scalable_unit_size < 1:
        raise TopologyError(f"{where}: scalable_unit_size is {fabric.scalable_unit_size}; it must be at least 1")
    if fabric.tiers not in (None, 2, 3):
        raise TopologyError(f"{where}: tiers is {fabric.tiers}; podctl plans 2 or 3 tiers (or auto)")
    if fabric.leaf_down_ports + fabric.leaf_up_ports > fabric.radix:
        raise TopologyError(
            f"{where}: leaf_down_ports {fabric.leaf_down_ports} + leaf_up_ports "
            f"{fabric.leaf_up_ports} exceed the {fabric.radix}-port {fabric.switch_model}; "
            f"lower one so that they sum to at most {fabric.radix}"
        )
    if fabric.leaf_up_ports < 1:
        raise TopologyError(
            f"{where}: leaf_up_ports is {fabric.leaf_up_ports}; leaves need uplinks "
            f"to reach each other (the even split is {fabric.radix // 2})"
        )
    per_leaf = min(fabric.scalable_unit_size, len(fabric.nodes))
    if per_leaf > fabric.leaf_down_ports:
        raise TopologyError(
            f"{where}: a scalable unit puts {per_leaf} nodes on each leaf but "
            f"leaf_down_ports is {fabric.leaf_down_ports}; lower scalable_unit_size to "
            f"{fabric.leaf_down_ports} or raise leaf_down_ports"
        )


def _two_tier_spines(fabric: Fabric, leaves: int) -> int | None:
    """Spines needed to join `leaves` leaves directly, or None if no spine count fits.

    Spine counts that divide the leaf uplinks give every leaf the same number
    of links to every spine, which is what fat-tree routing (ftree, up/down)
    balances over.
    """
    uplinks = fabric.leaf_up_ports
    return _smallest_divisor_at_least(uplinks, math.ceil(leaves * uplinks / fabric.radix))


class _Planner:
    """Accumulates switches and cables; one instance per `plan_fabric` call."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.prefix = fabric.switch_prefix
        self.rate = fabric.rate
        self.switches: list[Switch] = []
        self.cables: list[Cable] = []
        self.ordinal = dict.fromkeys(SWITCH_TIERS, 0)

    def add_switch(
        self,
        name: str,
        tier: str,
        *,
        su: int | None = None,
        rail: int | None = None,
        block: int | None = None,
        plane: int | None = None,
        group: int | None = None,
    ) -> Switch:
        self.ordinal[tier] += 1
        switch = Switch(name, tier, self.fabric.radix, su, rail, block, self.ordinal[tier], plane, group)
        self.switches.append(switch)
        return switch

    def cable(self, tier: str, lower: str, lower_port: int, upper: str, upper_port: int) -> None:
        self.cables.append(Cable(tier, Port(lower, lower_port), Port(upper, upper_port), self.rate))


def plan_fabric(fabric: Fabric) -> FabricPlan:
    """Lay out the switches and cables of `fabric` as a rail-optimized fat tree.

    Raises TopologyError when the declared switches cannot hold the nodes.
    """
    _check_fabric(fabric)
    size = fabric.scalable_unit_size
    sus = tuple(fabric.nodes[start : start + size] for start in range(0, len(fabric.nodes), size))
    leaves = len(sus) * fabric.rails

    spines_two_tier = _two_tier_spines(fabric, leaves)
    if fabric.tiers == 2 and spines_two_tier is None:
        raise TopologyError(
            f"fabric {fabric.name!r}: two tiers cannot join {leaves} leaves "
            f"({len(sus)} SUs x {fabric.rails} rails): a {fabric.radix}-port spine "
            f"reaches at most {fabric.radix} leaves; three tiers are needed, set "
            f"tiers: 3 (or auto), or attach fewer nodes"
        )
    tiers = fabric.tiers or (2 if spines_two_tier is not None else 3)

    planner = _Planner(fabric)
    if tiers == 2:
        assert spines_two_tier is not None
        _plan_two_tiers(planner, _plan_leaves(planner, sus, None), spines_two_tier)
        return FabricPlan(fabric.name, tiers, tuple(planner.switches), tuple(planner.cables), sus)

    # Blocks filled in SU order, as many SUs a block as a spine's down-ports take: the fewest
    # blocks, and the reference architectures' counts. When the SUs do not fill the blocks
    # evenly, OpenSM's ftree refuses the tree (see _EqualBlocks); a site that runs ftree then
    # gets the cheapest layout of equal blocks instead, and one that runs another engine (or a
    # pod that splits into no equal blocks) keeps this one: updn routes it (routing_advice).
    block_of_su = _block_of_su(fabric, len(sus))
    _plan_three_tiers(planner, _plan_leaves(planner, sus, block_of_su), len(sus), block_of_su)
    filling = FabricPlan(fabric.name, tiers, tuple(planner.switches), tuple(planner.cables), sus)
    if not fat_tree_asymmetries(filling):
        return filling
    layouts = _equal_blocks(fabric, len(sus))
    if not layouts:
        return filling
    layout = min(layouts, key=_EqualBlocks.preference)
    spines_cores = sum(s.tier != "leaf" for s in filling.switches)
    if fabric.routing_engine not in FTREE_ENGINES:
        return replace(filling, symmetric_switches=layout.switches)
    planner = _Planner(fabric)
    per_block = len(sus) // layout.blocks
    block_of_su = [su // per_block + 1 for su in range(len(sus))]
    _plan_equal_blocks(planner, _plan_leaves(planner, sus, block_of_su), layout)
    return FabricPlan(
        fabric.name, tiers, tuple(planner.switches), tuple(planner.cables), sus, filling_switches=spines_cores
    )


def _block_of_su(fabric: Fabric, su_count: int) -> list[int]:
    # A block is as many consecutive SUs as half a spine's ports can take,
    # since three-tier spines keep the other half for core uplinks.
    per_block = fabric.radix // 2
    return [su // per_block + 1 for su in range(su_count)]


def _plan_leaves(
    planner: _Planner,
    sus: tuple[tuple[str, ...], ...],
    block_of_su: list[int] | None,
) -> list[list[str]]:
    """Leaves and node-leaf cables; returns leaf names indexed [su][rail], 0-based."""
    fabric = planner.fabric
    su_w = _width(len(sus))
    rail_w = len(str(fabric.rails))
    names: list[list[str]] = []
    for su, hosts in enumerate(sus, start=1):
        block = block_of_su[su - 1] if block_of_su is not None else None
        row = []
        for rail in range(1, fabric.rails + 1):
            name = f"{planner.prefix}-leaf-su{su:0{su_w}d}-r{rail:0{rail_w}d}"
            planner.add_switch(name, "leaf", su=su, rail=rail, block=block)
            row.append(name)
        names.append(row)
        # Down-port = position in the SU, so a node's port is the same on every rail.
        for position, host in enumerate(hosts, start=1):
            for rail in range(1, fabric.rails + 1):
                planner.cable("node-leaf", host, rail, row[rail - 1], position)
    return names


def _plan_two_tiers(planner: _Planner, leaf_names: list[list[str]], spine_count: int) -> None:
    fabric = planner.fabric
    down = fabric.leaf_down_ports
    uplinks = fabric.leaf_up_ports
    per_pair = uplinks // spine_count
    spine_w = _width(spine_count)
    spines = [
        planner.add_switch(f"{planner.prefix}-spine-{i:0{spine_w}d}", "spine").name for i in range(1, spine_count + 1)
    ]
    leaf_order = [name for row in leaf_names for name in row]
    for leaf_index, leaf in enumerate(leaf_order):
        # Consecutive leaf up-ports go to the same spine, so the links of one
        # leaf-spine pair share a cage (twin-port transceivers) where they can.
        for q in range(uplinks):
            spine, link = divmod(q, per_pair)
            planner.cable("leaf-spine", leaf, down + 1 + q, spines[spine], leaf_index * per_pair + link + 1)


@dataclass
class _Spine:
    name: str
    uplinks: int


@dataclass(frozen=True)
class _EqualBlocks:
    """A three-tier layout that OpenSM's ftree routes as a fat tree.

    ftree (opensm/osm_ucast_ftree.c, fabric_validate_topology) refuses a tree unless every
    switch of a tier has as many up-port groups (one group: the links to one switch above) as
    every other, with as many ports in each, and the same for down-port groups on every tier
    but the leaves (ERR AB09 to AB0C); it then falls back to minhop. So:

    - the SUs split into `blocks` blocks of equal size; each rail of a block has `spines`
      spines, each joined to every leaf of that rail and block by the same number of links;
    - the spines, listed plane by plane (spine j of every rail and block is plane j), split
      into core groups of `group_size` consecutive spines, whole planes; each group has its own
      cores, and every spine of a group sends `links_per_core` links to each core of the group.
      A group holds a spine of every rail and block, so each core reaches every leaf.
    """

    blocks: int
    spines: int  # per rail of each block
    uplinks: int  # per spine: what comes down goes up (non-blocking)
    group_size: int
    links_per_core: int
    spine_count: int
    core_count: int

    @property
    def switches(self) -> int:
        return self.spine_count + self.core_count

    def preference(self) -> tuple[int, int, int, int]:
        # The fewest switches; then the fewest blocks (the more SUs a block holds, the more
        # traffic turns at a spine instead of crossing a core); one link per core (the most
        # distinct paths) on a tie.
        return (self.switches, self.blocks, self.spine_count, self.links_per_core)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _equal_blocks(fabric: Fabric, su_count: int) -> list[_EqualBlocks]:
    """Every layout of equal blocks (see _EqualBlocks) that these switches can build."""
    radix, up, rails = fabric.radix, fabric.leaf_up_ports, fabric.rails
    spine_down = radix // 2
    layouts = []
    for blocks in _divisors(su_count):
        per_block = su_count // blocks
        per_plane = rails * blocks  # one spine per rail and block
        if per_block > spine_down or per_plane > radix:
            continue
        for spines in _divisors(up):
            uplinks = per_block * (up // spines)
            if uplinks > spine_down:
                continue
            spine_count = rails * blocks * spines
            for links in _divisors(uplinks):
                for group_size in _divisors(spine_count):
                    # Whole planes a group: a group that cut a plane would hold one more spine of
                    # some blocks' rails than of others', and ftree, which sends a destination
                    # down every spine of its group, loads those leaves' up-ports unevenly (at
                    # 42 SUs 293 to 447 routes on up-ports that whole planes load 335 each).
                    if group_size % per_plane or group_size * links > radix:
                        continue
                    cores = spine_count // group_size * (uplinks // links)
                    layouts.append(_EqualBlocks(blocks, spines, uplinks, group_size, links, spine_count, cores))
    return layouts


def _plan_equal_blocks(planner: _Planner, leaf_names: list[list[str]], layout: _EqualBlocks) -> None:
    fabric = planner.fabric
    spine_down = fabric.radix // 2
    leaf_down, up = fabric.leaf_down_ports, fabric.leaf_up_ports
    per_pair = up // layout.spines
    per_block = len(leaf_names) // layout.blocks
    per_plane = fabric.rails * layout.blocks
    rail_w, block_w, spine_w = len(str(fabric.rails)), len(str(layout.blocks)), _width(up)

    def group_of(rail: int, block: int, j: int) -> int:
        # The spine's place in plane order: plane j, then rail, then block.
        position = (j - 1) * per_plane + (rail - 1) * layout.blocks + (block - 1)
        return position // layout.group_size + 1

    in_plane_order: dict[tuple[int, int, int], str] = {}
    for rail in range(1, fabric.rails + 1):
        for block in range(1, layout.blocks + 1):
            names = []
            for j in range(1, layout.spines + 1):
                name = f"{planner.prefix}-spine-r{rail:0{rail_w}d}-b{block:0{block_w}d}-{j:0{spine_w}d}"
                planner.add_switch(name, "spine", rail=rail, block=block, plane=j, group=group_of(rail, block, j))
                names.append(name)
                in_plane_order[(j, rail, block)] = name
            for leaf_index in range(per_block):
                leaf = leaf_names[(block - 1) * per_block + leaf_index][rail - 1]
                for q in range(up):
                    spine, link = divmod(q, per_pair)
                    planner.cable("leaf-spine", leaf, leaf_down + 1 + q, names[spine], leaf_index * per_pair + link + 1)

    spines = [in_plane_order[key] for key in sorted(in_plane_order)]
    groups = len(spines) // layout.group_size
    per_group = layout.uplinks // layout.links_per_core
    one_plane = layout.group_size == per_plane
    group_w, core_w = _width(groups), _width(per_group)
    for group in range(1, groups + 1):
        members = spines[(group - 1) * layout.group_size : group * layout.group_size]
        if one_plane:
            # A group that is one plane keeps the plane's name, as the per-plane rule does.
            names = [
                planner.add_switch(
                    f"{planner.prefix}-core-{group:0{spine_w}d}-{k:0{core_w}d}", "core", plane=group, group=group
                ).name
                for k in range(1, per_group + 1)
            ]
        else:
            names = [
                planner.add_switch(
                    f"{planner.prefix}-core-g{group:0{group_w}d}-{k:0{core_w}d}", "core", group=group
                ).name
                for k in range(1, per_group + 1)
            ]
        for position, spine in enumerate(members):
            for core, name in enumerate(names):
                for link in range(layout.links_per_core):
                    planner.cable(
                        "spine-core",
                        spine,
                        spine_down + 1 + core * layout.links_per_core + link,
                        name,
                        position * layout.links_per_core + link + 1,
                    )


def _plan_three_tiers(planner: _Planner, leaf_names: list[list[str]], su_count: int, block_of_su: list[int]) -> None:
    fabric = planner.fabric
    spine_down = fabric.radix // 2
    leaf_down = fabric.leaf_down_ports
    uplinks = fabric.leaf_up_ports
    blocks: dict[int, list[int]] = {}
    for su, block in enumerate(block_of_su):
        blocks.setdefault(block, []).append(su)
    rail_w = len(str(fabric.rails))
    block_w = len(str(len(blocks)))
    spine_w = _width(uplinks)

    # Spines per rail of each block: the same for every rail.
    spines_in_block: dict[int, int] = {}
    for block, block_sus in blocks.items():
        count = _smallest_divisor_at_least(uplinks, math.ceil(len(block_sus) * uplinks / spine_down))
        # len(block_sus) <= spine_down, so `uplinks` itself always qualifies.
        assert count is not None
        spines_in_block[block] = count
    planes_per_group = _grouped_planes(fabric, blocks, spines_in_block)

    planes: dict[int, list[_Spine]] = {}
    for rail in range(1, fabric.rails + 1):
        for block, block_sus in blocks.items():
            in_block = len(block_sus)
            spine_count = spines_in_block[block]
            per_pair = uplinks // spine_count
            names = []
            for j in range(1, spine_count + 1):
                name = f"{planner.prefix}-spine-r{rail:0{rail_w}d}-b{block:0{block_w}d}-{j:0{spine_w}d}"
                core_group = j if planes_per_group is None else (j - 1) // planes_per_group + 1
                planner.add_switch(name, "spine", rail=rail, block=block, plane=j, group=core_group)
                names.append(name)
                # Each spine sends up what comes down (non-blocking);
                # _plan_core_group may add uplinks to a short block's spines.
                planes.setdefault(j, []).append(_Spine(name, in_block * per_pair))
            for leaf_index, su in enumerate(block_sus):
                leaf = leaf_names[su][rail - 1]
                for q in range(uplinks):
                    spine, link = divmod(q, per_pair)
                    planner.cable(
                        "leaf-spine",
                        leaf,
                        leaf_down + 1 + q,
                        names[spine],
                        leaf_index * per_pair + link + 1,
                    )

    if planes_per_group is not None:
        _plan_grouped_cores(planner, planes, planes_per_group, spine_down)
        return
    for j in sorted(planes):
        _plan_core_group(planner, j, planes[j], spine_down, su_count)


def _grouped_planes(fabric: Fabric, blocks: dict[int, list[int]], spines_in_block: dict[int, int]) -> int | None:
    """Planes per core group under the grouped-planes rule, or None for the per-plane rule.

    Grouped planes (NVIDIA's SuperPOD core groups): when every spine has the
    same u uplinks and every plane the same p spines (rails x blocks), and p
    divides the radix, g = radix // p consecutive planes share one group of
    u cores, and each spine sends exactly one link to each core of its group.
    A full group fills every core port (g * p = radix), which is the fewest
    cores the spine uplinks allow, so it is never worse than the per-plane rule.

    A short last group (the plane count is not a multiple of g) keeps the
    same shape: u cores, each with one link from each spine of its fewer
    planes. Since one link per core means u cores per group whichever planes
    are put together, consecutive planes are as good as any other grouping.
    The short group's cores are only partly used, and the per-plane rule can
    then need fewer cores (a single plane of 2 spines on 8-port switches: 4
    cores of 2 links against 1 core of 8); so the grouped rule is used only
    when it needs no more cores than the per-plane rule would.
    """
    radix = fabric.radix
    uplinks = {len(block_sus) * (fabric.leaf_up_ports // spines_in_block[block]) for block, block_sus in blocks.items()}
    if len(uplinks) != 1 or len(set(spines_in_block.values())) != 1:
        return None  # uneven spines or uneven planes: per-plane rule
    (u,) = uplinks
    planes = next(iter(spines_in_block.values()))
    per_plane = fabric.rails * len(blocks)
    if radix % per_plane:
        return None
    g = radix // per_plane
    grouped = math.ceil(planes / g) * u
    # What _plan_core_group would use for these planes: with every spine at u
    # uplinks none is short, so its count is the smallest divisor of u that
    # holds a plane's uplinks (per_plane <= radix, so u itself qualifies).
    per_plane_cores = _smallest_divisor_at_least(u, math.ceil(per_plane * u / radix))
    assert per_plane_cores is not None
    if grouped > planes * per_plane_cores:
        return None
    return g


def _plan_grouped_cores(
    planner: _Planner, planes: dict[int, list[_Spine]], planes_per_group: int, spine_down: int
) -> None:
    """Cores of the grouped-planes rule, and the cables from the spines to them.

    Core k of a group takes uplink k of every spine of the group's planes, on
    core ports numbered in plan order of those spines.
    """
    order = sorted(planes)
    starts = range(0, len(order), planes_per_group)
    group_w = _width(len(starts))
    for group, start in enumerate(starts, start=1):
        spines = [s for j in order[start : start + planes_per_group] for s in planes[j]]
        cores = spines[0].uplinks
        assert all(s.uplinks == cores for s in spines)
        core_w = _width(cores)
        names = [
            planner.add_switch(f"{planner.prefix}-core-g{group:0{group_w}d}-{k:0{core_w}d}", "core", group=group).name
            for k in range(1, cores + 1)
        ]
        for position, spine in enumerate(spines, start=1):
            for m in range(cores):
                planner.cable("spine-core", spine.name, spine_down + 1 + m, names[m], position)


def _plan_core_group(planner: _Planner, plane: int, spines: list[_Spine], spine_down: int, su_count: int) -> None:
    """Per-plane rule: cores of one plane, and the cables from that plane's spines to them.

    Used when the grouped-planes rule (see _grouped_planes) does not apply.
    """
    fabric = planner.fabric
    radix = fabric.radix
    spine_up = radix - spine_down
    cores = math.ceil(sum(s.uplinks for s in spines) / radix)
    # Every spine must reach every core of its plane, or two spines of the
    # plane may share no core and the tree stops being a fat tree. Only the
    # spines of a short last block can fall short (they carry fewer leaves);
    # they get extra uplinks, which may in turn call for another core.
    while cores <= spine_up and any(s.uplinks < cores for s in spines):
        for spine in spines:
            spine.uplinks = max(spine.uplinks, cores)
        cores = math.ceil(sum(s.uplinks for s in spines) / radix)
    if cores > spine_up:
        most_nodes = (radix // fabric.rails) * spine_down * min(fabric.scalable_unit_size, fabric.leaf_down_ports)
        raise TopologyError(
            f"fabric {fabric.name!r}: {len(fabric.nodes)} nodes ({su_count} SUs) exceed "
            f"what three tiers of {radix}-port switches can join: spine plane {plane} "
            f"needs {cores} core switches but a spine has only {spine_up} up-ports; a "
            f"full three-tier tree of these switches holds {most_nodes} nodes with "
            f"{fabric.rails} rails. Split the nodes over more fabrics or use "
            f"higher-radix switches"
        )
    even = _smallest_divisor_at_least(math.gcd(*(s.uplinks for s in spines)), cores)
    if even is not None:
        cores = even

    plane_w, core_w = _width(fabric.leaf_up_ports), _width(cores)
    names = [
        planner.add_switch(
            f"{planner.prefix}-core-{plane:0{plane_w}d}-{k:0{core_w}d}",
            "core",
            plane=plane,
            group=plane,
        ).name
        for k in range(1, cores + 1)
    ]
    next_port = [1] * cores
    cursor = 0
    for spine in spines:
        for m in range(spine.uplinks):
            if even is not None:
                # Consecutive uplinks to the same core, as on the leaves.
                core = m // (spine.uplinks // cores)
            else:
                # No even split exists; a running round-robin keeps every
                # core within one link of the others.
                core = cursor % cores
                cursor += 1
            planner.cable("spine-core", spine.name, spine_down + 1 + m, names[core], next_port[core])
            next_port[core] += 1


@dataclass(frozen=True)
class RoutingAdvice:
    """The OpenSM routing engine a plan calls for, and why."""

    engine: str  # "ftree" or "updn"
    reason: str


def fat_tree_asymmetries(plan: FabricPlan) -> list[str]:
    """Why OpenSM's ftree would refuse `plan` as a fat tree: empty when it accepts it.

    A model of ftree's topology check (opensm/osm_ucast_ftree.c, fabric_validate_topology):
    on each tier every switch must have as many up-port groups as the others, and every
    group as many ports (a group is the links to one switch); on every tier but the leaves
    (where nodes may be missing) the same holds for down-port groups. OpenSM compares only
    the first down-port group of a switch; here every group counts, so the model refuses
    no less than OpenSM does. The real check is OpenSM itself: bench/fabric_bench.py runs it.
    """
    up: dict[str, Counter[str]] = {s.name: Counter() for s in plan.switches}
    down: dict[str, Counter[str]] = {s.name: Counter() for s in plan.switches}
    for cable in plan.cables:
        if cable.tier != "node-leaf":
            up[cable.lower.device][cable.upper.device] += 1
            down[cable.upper.device][cable.lower.device] += 1
    problems = []
    for tier in SWITCH_TIERS:
        switches = plan.switches_in(tier)
        sides = [("up", up)] + ([("down", down)] if tier != "leaf" else [])
        for side, groups in sides:
            for what, measure in (
                ("port groups", lambda name, groups=groups: {len(groups[name])}),
                ("links in a port group", lambda name, groups=groups: set(groups[name].values())),
            ):
                seen: dict[int, str] = {}
                for switch in switches:
                    for value in sorted(measure(switch.name)):
                        seen.setdefault(value, switch.name)
                if len(seen) > 1:
                    (low, low_name), (high, high_name) = min(seen.items()), max(seen.items())
                    problems.append(
                        f"{tier} switches differ in {side}ward {what}: {high_name} has {high}, {low_name} {low}"
                    )
    return problems


def root_switches(plan: FabricPlan) -> tuple[Switch, ...]:
    """The top tier: the roots up/down routing (updn) must be given on a fat tree."""
    return plan.switches_in("core" if plan.tiers == 3 else "spine")


def routing_advice(plan: FabricPlan) -> RoutingAdvice:
    """The routing engine OpenSM should run on `plan`: ftree where it accepts the tree, else updn
    with the top tier as its roots."""
    problems = fat_tree_asymmetries(plan)
    sus = len(plan.scalable_units)
    spines_cores = sum(s.tier != "leaf" for s in plan.switches)
    if not problems:
        reason = "every switch of a tier has the same port groups as the others: OpenSM's ftree routes it as a fat tree"
        if plan.filling_switches is not None:
            reason += (
                f"; {sus} SUs in equal blocks take {spines_cores} spine and core switches, "
                f"{spines_cores - plan.filling_switches} more than filling blocks in order, which ftree refuses "
                "(routing_engine: updn plans those)"
            )
        return RoutingAdvice("ftree", reason)
    leaves = plan.switches_in("leaf")
    rails = len({leaf.rail for leaf in leaves})
    blocks = Counter(leaf.block for leaf in leaves if leaf.block is not None)
    why = problems[0]
    if len({n // rails for n in blocks.values()}) > 1:
        sizes = " + ".join(str(n // rails) for _, n in sorted(blocks.items()))
        why = f"{sus} SUs fill spine blocks of {sizes} SUs, so {why}"
    if plan.symmetric_switches is not None:
        cost = (
            f"equal blocks for ftree would take {plan.symmetric_switches} spine and core switches instead of "
            f"{spines_cores} (routing_engine: ftree plans them)"
        )
    elif plan.tiers == 3:
        cost = f"{sus} SUs split into no equal blocks that {plan.switches[0].radix}-port switches can join"
    else:
        cost = "no even layout of these switches was found"
    top = "core" if plan.tiers == 3 else "spine"
    roots = len(root_switches(plan))
    return RoutingAdvice(
        "updn",
        f"{why}: OpenSM's ftree refuses such a tree (ERR AB09 to AB0C) and falls back to minhop; updn routes "
        f"every path up, then down, given the {roots} {top} switches as its roots (root_guid_file; left to "
        f"find its own, it picks others on this tree and sends routes down and up again). {cost[0].upper()}{cost[1:]}",
    )


def slurm_topology_conf(plan: FabricPlan, scheduled: Collection[str] | None = None) -> str:
    """topology.conf for Slurm's topology/tree plugin.

    topology/tree wants every node under exactly one leaf, which a
    rail-optimized fabric does not have: a node hangs off one leaf per rail.
    Each SU stands in as one Slurm switch instead, since its nodes are one
    hop apart on every rail; the tiers above become one switch per block
    and one on top. `scheduled`, when given, names the hosts Slurm schedules;
    others cabled to the fabric (a head node on spare ports) are left out.
    """
    su_w = _width(len(plan.scalable_units))
    su_names = [f"su{su:0{su_w}d}" for su in range(1, len(plan.scalable_units) + 1)]
    lines = [
        f"# Generated by podctl from the declared fabric {plan.fabric!r}; "
        "change the site file and regenerate rather than editing this.",
        "# Each scalable unit is one switch here: its nodes are one leaf hop apart on every rail.",
    ]
    # An SU left with no scheduled host would be a switch without nodes,
    # which slurmctld rejects: it is left out.
    listed: set[str] = set()
    for name, hosts in zip(su_names, plan.scalable_units):
        kept = [h for h in hosts if scheduled is None or h in scheduled]
        folded = fold_hostlist(kept) if kept else ""
        if folded:
            lines.append(f"SwitchName={name} Nodes={folded}")
            listed.add(name)
    if listed and plan.tiers == 2:
        lines.append(f"SwitchName=spine Switches={fold_hostlist(sorted(listed))}")
    elif listed:
        block_of = {leaf.su: leaf.block for leaf in plan.switches_in("leaf")}
        members: dict[int, list[str]] = {}
        for su, name in enumerate(su_names, start=1):
            block = block_of[su]
            assert block is not None
            if name in listed:
                members.setdefault(block, []).append(name)
        block_w = _width(max(b for b in block_of.values() if b is not None))
        block_names = []
        for block, sus in sorted(members.items()):
            name = f"block{block:0{block_w}d}"
            block_names.append(name)
            lines.append(f"SwitchName={name} Switches={fold_hostlist(sus)}")
        lines.append(f"SwitchName=core Switches={fold_hostlist(block_names)}")
    return "\n".join(lines) + "\n"


__all__ = [
    "CABLE_TIERS",
    "SWITCH_TIERS",
    "Cable",
    "FabricPlan",
    "Port",
    "RoutingAdvice",
    "Switch",
    "TopologyError",
    "fat_tree_asymmetries",
    "plan_fabric",
    "root_switches",
    "routing_advice",
    "slurm_topology_conf",
]


# The GUIDs podctl gives planned devices in what it writes as a fabric's tools would show it (`podctl
# fabric topology`, the sim pod's ibsim network file): NVIDIA's OUI and 40 bits of the name's hash.
NVIDIA_OUI = 0xB83FD2


def name_guid(name: str) -> int:
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:5], "big")
    return (NVIDIA_OUI << 40) | digest
