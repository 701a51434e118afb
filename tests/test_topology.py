"""Fabric planning against NVIDIA's published DGX SuperPOD counts, and its invariants."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import replace

import pytest
from ClusterShell.NodeSet import NodeSet
from hypothesis import given, settings
from hypothesis import strategies as st

from podctl.core.errors import PodctlError
from podctl.core.model import Fabric
from podctl.derive.topology import (
    CABLE_TIERS,
    SWITCH_TIERS,
    FabricPlan,
    Port,
    TopologyError,
    fat_tree_asymmetries,
    plan_fabric,
    routing_advice,
    slurm_topology_conf,
)


def make_fabric(
    nodes: int,
    *,
    su_size: int = 32,
    radix: int = 64,
    down: int | None = None,
    up: int | None = None,
    rails: int = 8,
    tiers: int | None = None,
    rate: str = "NDR",
    model: str = "QM9700",
    prefix: str = "ib",
    host: str = "dgx{:04d}",
    engine: str | None = "ftree",
) -> Fabric:
    return Fabric(
        name="compute",
        type="infiniband",
        rate=rate,
        switch_model=model,
        radix=radix,
        scalable_unit_size=su_size,
        tiers=tiers,
        leaf_down_ports=radix // 2 if down is None else down,
        leaf_up_ports=radix - radix // 2 if up is None else up,
        rails=rails,
        nodes=tuple(host.format(i) for i in range(1, nodes + 1)),
        subnet_managers=(),
        routing_engine=engine,
        switch_prefix=prefix,
    )


def ndr(nodes: int, tiers: int | None = None) -> Fabric:
    """QM9700 (64 x NDR), 32-node SUs, 8 rails: the H100/B200 SuperPOD fabric."""
    return make_fabric(nodes, tiers=tiers)


def hdr(nodes: int, tiers: int | None = None) -> Fabric:
    """QM8790 (40 x HDR), 20-node SUs, 8 rails: the A100 SuperPOD fabric."""
    return make_fabric(nodes, su_size=20, radix=40, rate="HDR", model="QM8790", tiers=tiers)


def sim(tiers: int | None = None) -> Fabric:
    return make_fabric(
        3,
        su_size=4,
        radix=8,
        rails=2,
        rate="HDR",
        model="sim-switch-8",
        prefix="sim",
        host="node{:02d}",
        tiers=tiers,
    )


def flat_counts(plan: FabricPlan) -> dict[str, int]:
    counts = plan.counts()
    return {**counts["switches"], **counts["cables"]}


RANK = {"leaf": 1, "spine": 2, "core": 3}
CABLE_ENDS = {"node-leaf": (0, 1), "leaf-spine": (1, 2), "spine-core": (2, 3)}


def assert_invariants(fabric: Fabric, plan: FabricPlan) -> None:
    switches = {s.name: s for s in plan.switches}
    assert len(switches) == len(plan.switches), "switch names are unique"
    assert plan.tiers in (2, 3)
    tiers_present = {s.tier for s in plan.switches}
    assert tiers_present == ({"leaf", "spine"} if plan.tiers == 2 else set(SWITCH_TIERS))

    used: set[Port] = set()
    node_rails: Counter[tuple[str, int]] = Counter()
    down: Counter[str] = Counter()
    up: Counter[str] = Counter()
    links: dict[str, Counter[str]] = defaultdict(Counter)
    spine_down = fabric.radix // 2
    for cable in plan.cables:
        assert cable.rate == fabric.rate
        low_rank, up_rank = CABLE_ENDS[cable.tier]
        upper = switches[cable.upper.device]
        assert RANK[upper.tier] == up_rank
        assert 1 <= cable.upper.port <= upper.radix
        assert cable.upper not in used, f"{cable.upper} cabled twice"
        used.add(cable.upper)
        down[upper.name] += 1
        if low_rank == 0:
            host, rail = cable.lower.device, cable.lower.port
            assert host not in switches
            assert 1 <= rail <= fabric.rails
            node_rails[(host, rail)] += 1
            # Leaf (s, r) carries only rail r, only of SU s, at the node's SU position.
            assert upper.rail == rail
            assert upper.su == plan.su_of(host)
            position = plan.scalable_units[upper.su - 1].index(host) + 1
            assert cable.upper.port == position <= fabric.leaf_down_ports
            continue
        lower = switches[cable.lower.device]
        assert RANK[lower.tier] == low_rank
        assert 1 <= cable.lower.port <= lower.radix
        assert cable.lower not in used, f"{cable.lower} cabled twice"
        used.add(cable.lower)
        up[lower.name] += 1
        links[lower.name][upper.name] += 1
        if cable.tier == "leaf-spine":
            assert cable.lower.port > fabric.leaf_down_ports
            if plan.tiers == 3:
                assert cable.upper.port <= spine_down
                assert (upper.rail, upper.block) == (lower.rail, lower.block)
        else:
            assert cable.lower.port > spine_down
            assert upper.group == lower.group is not None
            # A per-plane core carries its plane; a grouped core serves several.
            assert upper.plane in (lower.plane, None)

    assert node_rails == {(h, r): 1 for h in fabric.nodes for r in range(1, fabric.rails + 1)}
    assert all(down[s.name] or up[s.name] for s in plan.switches), "no idle switch"
    top = "spine" if plan.tiers == 2 else "core"
    assert not any(up[s.name] for s in plan.switches_in(top))

    # Fat-tree regularity: a leaf spreads its uplinks evenly over every spine it
    # may use, and a spine reaches every core of its core group.
    spines_for: dict[tuple[int | None, int | None], set[str]] = defaultdict(set)
    for spine in plan.switches_in("spine"):
        spines_for[(spine.rail, spine.block)].add(spine.name)
    for leaf in plan.switches_in("leaf"):
        assert up[leaf.name] == fabric.leaf_up_ports
        if plan.tiers == 2:
            reachable = spines_for[(None, None)]
        else:
            reachable = spines_for[(leaf.rail, leaf.block)]
        assert set(links[leaf.name]) == reachable
        assert len(set(links[leaf.name].values())) == 1
    if plan.tiers == 3:
        cores_of_group: dict[int | None, set[str]] = defaultdict(set)
        for core in plan.switches_in("core"):
            cores_of_group[core.group].add(core.name)
        grouped = {core.plane is None for core in plan.switches_in("core")}
        assert len(grouped) == 1, "one core rule per fabric"
        for spine in plan.switches_in("spine"):
            assert set(links[spine.name]) == cores_of_group[spine.group]
            if grouped == {False}:
                assert spine.group == spine.plane
            if len({s.block for s in plan.switches_in("spine")}) == 1 or grouped == {True}:
                # One block, or several planes a group: as many links from a spine to each core of its group.
                assert len(set(links[spine.name].values())) == 1

    per_leaf = min(fabric.scalable_unit_size, len(fabric.nodes))
    if fabric.leaf_up_ports >= per_leaf:
        for switch in plan.switches:
            if up[switch.name]:
                assert up[switch.name] >= down[switch.name], f"{switch.name} is blocking"
        assert all(r >= 1.0 for r in plan.bisection_ratio().values())

    counts = plan.counts()
    assert counts["switches"] == {t: sum(s.tier == t for s in plan.switches) for t in SWITCH_TIERS}
    assert counts["cables"] == {t: sum(c.tier == t for c in plan.cables) for t in CABLE_TIERS}
    assert sum(counts["cables"].values()) == len(plan.cables)
    assert counts["cables"]["node-leaf"] == len(fabric.nodes) * fabric.rails

    assert tuple(h for su in plan.scalable_units for h in su) == fabric.nodes
    assert all(len(su) == fabric.scalable_unit_size for su in plan.scalable_units[:-1])


# -- NVIDIA's published counts -------------------------------------------------------


# DGX SuperPOD H100 RA, Table 4. NVIDIA's node-leaf column adds 4 UFM cables per
# SU row; those are not compute nodes, so nodes * 8 here.
@pytest.mark.parametrize(
    ("nodes", "leaf", "spine", "node_leaf", "leaf_spine"),
    [
        (31, 8, 4, 248, 256),
        (63, 16, 8, 504, 512),
        (95, 24, 16, 760, 768),
        (127, 32, 16, 1016, 1024),
    ],
)
def test_h100_reference_architecture(nodes: int, leaf: int, spine: int, node_leaf: int, leaf_spine: int) -> None:
    plan = plan_fabric(ndr(nodes))
    assert plan.tiers == 2
    assert flat_counts(plan) == {
        "leaf": leaf,
        "spine": spine,
        "core": 0,
        "node-leaf": node_leaf,
        "leaf-spine": leaf_spine,
        "spine-core": 0,
    }


# DGX SuperPOD B200 RA, "Larger DGX SuperPOD component counts".
@pytest.mark.parametrize(
    ("sus", "tiers", "leaf", "spine", "core", "per_tier"),
    [
        (2, 2, 16, 8, 0, 512),
        (4, 2, 32, 16, 0, 1024),
        (8, 2, 64, 32, 0, 2048),
        (16, 3, 128, 128, 64, 4096),
        (32, 3, 256, 256, 128, 8192),
        (64, 3, 512, 512, 256, 16384),
    ],
)
def test_b200_reference_architecture(sus: int, tiers: int, leaf: int, spine: int, core: int, per_tier: int) -> None:
    plan = plan_fabric(ndr(sus * 32))
    assert plan.tiers == tiers
    assert flat_counts(plan) == {
        "leaf": leaf,
        "spine": spine,
        "core": core,
        "node-leaf": per_tier,
        "leaf-spine": per_tier,
        "spine-core": per_tier if tiers == 3 else 0,
    }


@pytest.mark.parametrize(
    ("sus", "planes", "per_plane", "groups"),
    [
        # One block: 16 SUs -> 16 spines per rail, 2 links per leaf-spine pair;
        # 32 SUs -> 32 spines per rail, 1 link. Every spine has 32 uplinks.
        (16, 16, 8, 2),
        (32, 32, 8, 4),
        # Two full blocks of 32 SUs: a plane holds 8 rails x 2 blocks.
        (64, 32, 16, 4 * 2),
    ],
)
def test_b200_cores_are_grouped_planes(sus: int, planes: int, per_plane: int, groups: int) -> None:
    # g = 64 / per_plane planes share a group of u = 32 cores, each core taking
    # one link from each of the group's 64 spines: groups * 32 cores.
    fabric = ndr(sus * 32)
    plan = plan_fabric(fabric)
    spines = plan.switches_in("spine")
    g = 64 // per_plane
    assert Counter(s.plane for s in spines) == {j: per_plane for j in range(1, planes + 1)}
    assert all(s.group == (s.plane - 1) // g + 1 for s in spines)
    cores = plan.switches_in("core")
    assert Counter(c.group for c in cores) == {k: 32 for k in range(1, groups + 1)}
    load = Counter(c.upper.device for c in plan.cables_in("spine-core"))
    assert {load[c.name] for c in cores} == {64}
    assert_invariants(fabric, plan)


def test_dgx_a100_superpod() -> None:
    # 140 nodes = 7 SUs of 20 on 40-port HDR switches, leaves 20 down / 20 up.
    # Leaves: 7 SUs x 8 rails = 56. Two tiers would need a spine per uplink
    # (S = 20) each reaching all 56 leaves, but a spine has 40 ports: three tiers.
    # Spines: 20 down-ports each, so a rail's 7 leaves fit one block;
    #   G = smallest divisor of 20 with G * 20 >= 7 * 20 -> 10 per rail, 80 in all;
    #   each leaf sends 20 / 10 = 2 links to each of its rail's 10 spines,
    #   so a spine has 7 * 2 = 14 links down and 14 up.
    # Cores (grouped planes): plane j holds spine j of the 8 rails, p = 8 spines,
    #   all with u = 14 uplinks. 40 % 8 == 0, so g = 40 / 8 = 5 consecutive planes
    #   form a core group: planes 1-5 and 6-10, 40 spines each (5 planes x 8 rails).
    #   A group has u = 14 cores; each spine sends one link to each of them, so
    #   each core takes one link from each of its group's 40 spines: 40 of 40 ports.
    #   2 groups * 14 = 28 cores, as in NVIDIA's A100 SuperPOD design.
    #   (The per-plane rule gave 7 cores per plane, 2 links from each spine,
    #   16 of 40 ports used: 10 * 7 = 70 cores.)
    # Cables: 140 * 8 = 1120; 56 * 20 = 1120; 80 * 14 = 28 * 40 = 1120.
    plan = plan_fabric(hdr(140))
    assert plan.tiers == 3
    assert flat_counts(plan) == {
        "leaf": 56,
        "spine": 80,
        "core": 28,
        "node-leaf": 1120,
        "leaf-spine": 1120,
        "spine-core": 1120,
    }
    spines = plan.switches_in("spine")
    cores = plan.switches_in("core")
    assert Counter(s.rail for s in spines) == {r: 10 for r in range(1, 9)}
    assert {s.plane: s.group for s in spines} == {j: 1 if j <= 5 else 2 for j in range(1, 11)}
    assert Counter(c.group for c in cores) == {1: 14, 2: 14}
    assert all(c.plane is None for c in cores)
    assert [c.name for c in cores] == [f"ib-core-g{g:02d}-{k:02d}" for g in (1, 2) for k in range(1, 15)]
    spine_group = {s.name: s.group for s in spines}
    feeders: dict[str, Counter[int]] = defaultdict(Counter)
    for cable in plan.cables_in("spine-core"):
        feeders[cable.upper.device][spine_group[cable.lower.device]] += 1
    assert {c.name: feeders[c.name] for c in cores} == {c.name: Counter({c.group: 40}) for c in cores}
    core_ports = Counter(c.upper for c in plan.cables_in("spine-core"))
    assert set(core_ports) == {Port(c.name, q) for c in cores for q in range(1, 41)}
    assert_invariants(hdr(140), plan)

    with pytest.raises(TopologyError, match="three tiers are needed"):
        plan_fabric(hdr(140, tiers=2))


def test_eos_scale() -> None:
    # 1,344 nodes = 42 SUs of 32 on 64-port NDR switches, 8 rails: 336 leaves, three tiers.
    # Filling blocks of 32 SUs (a spine's 32 down-ports) gives blocks of 32 and 10 SUs: 384
    # spines and 176 cores (560), but a short block's leaves and spines have other port groups
    # than a full block's, which OpenSM's ftree refuses (ERR AB09). The site runs ftree, so the
    # cheapest layout of equal blocks instead:
    #   3 blocks of 14 SUs: the smallest divisor G of 32 with 14 * (32 / G) <= 32 is 16, so 16
    #     spines per rail and block, 2 links from each leaf, 28 down and 28 up: 384 spines.
    #     A plane (spine j of every rail and block) holds 8 x 3 = 24 spines; a core group is
    #     whole planes, as many as fit a core's 64 ports: 2 planes, 48 spines. Each of the 8
    #     groups has 28 cores with one link from each of its 48 spines: 224 cores, 608 in all.
    #   (2 blocks of 21 SUs take 32 spines per rail and block, 512 + 168 = 680; groups of 64
    #   spines that cut a plane would take 168 cores, but ftree then loads some leaves' up-ports
    #   with 447 routes and others with 293, where whole planes give every one 335.)
    # Cables: 1344 * 8 = 10752 per tier, as before.
    fabric = ndr(1344)
    plan = plan_fabric(fabric)
    assert plan.tiers == 3
    assert flat_counts(plan) == {
        "leaf": 336,
        "spine": 384,
        "core": 224,
        "node-leaf": 10752,
        "leaf-spine": 10752,
        "spine-core": 10752,
    }
    assert plan.filling_switches == 384 + 176
    assert Counter(leaf.block for leaf in plan.switches_in("leaf")) == {1: 112, 2: 112, 3: 112}
    spines = plan.switches_in("spine")
    assert Counter((s.rail, s.block) for s in spines) == {(r, b): 16 for r in range(1, 9) for b in (1, 2, 3)}
    # Group g is planes 2g - 1 and 2g, whole.
    assert all(s.group == (s.plane + 1) // 2 for s in spines)
    cores = plan.switches_in("core")
    assert Counter(c.group for c in cores) == {g: 28 for g in range(1, 9)}
    load = Counter(c.upper.device for c in plan.cables_in("spine-core"))
    assert {load[c.name] for c in cores} == {48}
    assert plan.bisection_ratio() == {"leaf": 1.0, "spine": 1.0}
    assert fat_tree_asymmetries(plan) == []
    advice = routing_advice(plan)
    assert advice.engine == "ftree"
    assert "42 SUs in equal blocks take 608 spine and core switches, 48 more than filling blocks" in advice.reason
    assert_invariants(fabric, plan)

    # A site that runs updn keeps the block-filling plan, and is told what ftree would cost.
    filled = plan_fabric(replace(fabric, routing_engine="updn"))
    assert filled.counts()["switches"] == {"leaf": 336, "spine": 384, "core": 176}
    assert Counter(leaf.block for leaf in filled.switches_in("leaf")) == {1: 256, 2: 80}
    assert Counter(c.plane for c in filled.switches_in("core")) == {j: 7 if j <= 16 else 4 for j in range(1, 33)}
    assert filled.symmetric_switches == 608
    advice = routing_advice(filled)
    assert advice.engine == "updn"
    assert advice.reason.startswith("42 SUs fill spine blocks of 32 + 10 SUs, so leaf switches differ")
    assert "given the 176 core switches as its roots" in advice.reason
    assert "Equal blocks for ftree would take 608 spine and core switches instead of 560" in advice.reason
    assert_invariants(fabric, filled)


def test_sizes_with_no_equal_blocks_keep_the_block_filling_plan_and_call_for_updn() -> None:
    # 37 SUs (prime) split into no equal blocks of at most 32 SUs that a core can span (8 rails
    # x blocks <= 64): the plan fills a block of 32 SUs and a short one of 5, as before.
    plan = plan_fabric(ndr(37 * 32))
    assert plan.counts()["switches"] == {"leaf": 296, "spine": 320, "core": 152}
    assert Counter(leaf.block for leaf in plan.switches_in("leaf")) == {1: 256, 2: 40}
    assert (plan.filling_switches, plan.symmetric_switches) == (None, None)
    problems = fat_tree_asymmetries(plan)
    assert problems[0] == "leaf switches differ in upward port groups: ib-leaf-su01-r1 has 32, ib-leaf-su33-r1 8"
    advice = routing_advice(plan)
    assert advice.engine == "updn"
    assert "37 SUs split into no equal blocks that 64-port switches can join" in advice.reason

    # 34 SUs make 2 equal blocks of 17, but 17 leaves need 32 spines per rail and block, each
    # half used: 512 spines + 136 cores against 272 + 136. A site that runs ftree gets them,
    # and is told the price.
    plan = plan_fabric(ndr(34 * 32))
    assert plan.counts()["switches"] == {"leaf": 272, "spine": 512, "core": 136}
    assert plan.filling_switches == 408
    assert "240 more than filling blocks in order" in routing_advice(plan).reason


def test_sim_fabric() -> None:
    # 3 nodes on one 4-node SU, 2 rails: 2 leaves with 4 uplinks each; one
    # 8-port spine takes all 8 of them.
    fabric = sim()
    plan = plan_fabric(fabric)
    assert plan.tiers == 2
    assert plan.scalable_units == (("node01", "node02", "node03"),)
    assert [s.name for s in plan.switches] == ["sim-leaf-su01-r1", "sim-leaf-su01-r2", "sim-spine-01"]
    assert flat_counts(plan) == {
        "leaf": 2,
        "spine": 1,
        "core": 0,
        "node-leaf": 6,
        "leaf-spine": 8,
        "spine-core": 0,
    }
    assert plan.leaf_port("node03", 2) == Port("sim-leaf-su01-r2", 3)
    assert plan.su_of("node02") == 1
    uplinks = [(c.lower, c.upper) for c in plan.cables_in("leaf-spine")]
    assert uplinks == [
        (Port(f"sim-leaf-su01-r{rail}", 4 + q), Port("sim-spine-01", 4 * (rail - 1) + q))
        for rail in (1, 2)
        for q in range(1, 5)
    ]
    assert_invariants(fabric, plan)


def test_sim_fabric_forced_to_three_tiers() -> None:
    plan = plan_fabric(sim(tiers=3))
    assert plan.tiers == 3
    # A rail's single leaf needs one 4-down/4-up spine; both spines sit in
    # plane 1, whose 8 uplinks fill one 8-port core. Grouped planes would give
    # the lone plane a group of u = 4 cores with 2 links each, more cores than
    # the per-plane rule's 1, so the per-plane rule stays.
    assert flat_counts(plan) == {
        "leaf": 2,
        "spine": 2,
        "core": 1,
        "node-leaf": 6,
        "leaf-spine": 8,
        "spine-core": 8,
    }
    assert [s.name for s in plan.switches_in("spine")] == [
        "sim-spine-r1-b1-01",
        "sim-spine-r2-b1-01",
    ]
    assert [s.name for s in plan.switches_in("core")] == ["sim-core-01-01"]
    assert_invariants(sim(tiers=3), plan)


# -- What OpenSM's ftree accepts --------------------------------------------------------


def port_groups(plan: FabricPlan) -> dict[str, dict[str, Counter[tuple[int, frozenset[int]]]]]:
    """Per tier and side: how many switches have (n port groups, of these sizes).

    A port group is the links from a switch to one neighbour above (up) or below (down), as
    OpenSM's ftree counts them; nodes do not count, as for ftree's leaves.
    """
    up: dict[str, Counter[str]] = defaultdict(Counter)
    down: dict[str, Counter[str]] = defaultdict(Counter)
    for cable in plan.cables:
        if cable.tier != "node-leaf":
            up[cable.lower.device][cable.upper.device] += 1
            down[cable.upper.device][cable.lower.device] += 1
    out: dict[str, dict[str, Counter[tuple[int, frozenset[int]]]]] = {}
    for switch in plan.switches:
        for side, groups in (("up", up[switch.name]), ("down", down[switch.name])):
            shape = (len(groups), frozenset(groups.values()))
            out.setdefault(switch.tier, {}).setdefault(side, Counter())[shape] += 1
    return out


# The reference-architecture sizes `podctl init` offers whose SUs split into no equal blocks
# that a core can span: those keep the block-filling plan and call for updn.
UNEVEN_H100 = {37, 41, 43, 47, 53, 59, 61}
UNEVEN_A100 = {23, 29, 31, 37, 41, 43, 46, 47, 49, 53, 58, 59, 61, 62, 63}


@pytest.mark.parametrize(
    ("make", "su", "sus"),
    [(ndr, 32, n) for n in range(1, 65)] + [(hdr, 20, n) for n in range(1, 65)],
    ids=[f"dgx-h100-{n}su" for n in range(1, 65)] + [f"dgx-a100-{n}su" for n in range(1, 65)],
)
def test_every_reference_size_is_symmetric_or_calls_for_updn(make, su: int, sus: int) -> None:  # noqa: ANN001
    plan = plan_fabric(make(sus * su))
    groups = port_groups(plan)
    uneven = sus in (UNEVEN_H100 if make is ndr else UNEVEN_A100)
    # Per tier, every switch has the same port groups going up (every spine as many core
    # groups, of as many links), and the same going down but on the leaves.
    symmetric = all(
        len(groups[tier][side]) == 1
        for tier in groups
        for side in ("up", "down")
        if not (tier == "leaf" and side == "down")
    )
    assert symmetric == (not uneven)
    assert (fat_tree_asymmetries(plan) == []) == symmetric
    assert routing_advice(plan).engine == ("updn" if uneven else "ftree")
    if symmetric and plan.tiers == 3:
        # Every spine reaches every core of its group, one group per spine.
        ((ups, sizes),) = groups["spine"]["up"]
        assert len(sizes) == 1
        assert ups * next(iter(sizes)) == next(iter(groups["spine"]["down"]))[0] * next(
            iter(next(iter(groups["spine"]["down"]))[1])
        ), "a spine sends up what comes down"


# -- Invariants over ranges ------------------------------------------------------------


def _node_counts(su_size: int, sus: Iterable[int]) -> list[int]:
    # Odd SU counts get a partial last SU (one node short), even ones are full.
    return [n * su_size - (n % 2) for n in sus]


# Every count up to where two tiers stop, then each side of every block
# boundary (a block is 32 SUs on 64 ports) and a few in between.
NDR_SUS = [*range(1, 18), 23, 31, 32, 33, 40, 47, 48, 49, 57, 63, 64]
# Two tiers stop after 5 SUs, blocks are 20 SUs; 91-99 have a short last block
# whose spines need extra uplinks (see the test for 95 below).
HDR_SUS = [*range(1, 13), 19, 20, 21, 39, 40, 41, 59, 60, 61, 79, 80, 81, 91, 95, 99, 100]


@pytest.mark.parametrize("nodes", _node_counts(32, NDR_SUS))
def test_invariants_ndr(nodes: int) -> None:
    fabric = ndr(nodes)
    assert_invariants(fabric, plan_fabric(fabric))


# 100 SUs is the most a three-tier QM8790 tree takes with 8 rails (see
# test_three_tier_limits).
@pytest.mark.parametrize("nodes", _node_counts(20, HDR_SUS))
def test_invariants_hdr(nodes: int) -> None:
    fabric = hdr(nodes)
    assert_invariants(fabric, plan_fabric(fabric))


@settings(max_examples=150, deadline=None)
@given(
    radix=st.sampled_from([8, 12, 16, 36, 40, 64]),
    rails=st.integers(1, 8),
    data=st.data(),
)
def test_invariants_hold_for_any_feasible_fabric(radix: int, rails: int, data: st.DataObject) -> None:
    down = data.draw(st.integers(1, radix - 1), label="down")
    up = data.draw(st.integers(1, radix - down), label="up")
    su_size = data.draw(st.integers(1, down), label="su_size")
    # Enough SUs for several three-tier blocks on the small radixes, few
    # enough nodes to keep each example quick.
    nodes = data.draw(st.integers(1, min(su_size * 3 * radix, 600)), label="nodes")
    tiers = data.draw(st.sampled_from([None, 2, 3]), label="tiers")
    fabric = make_fabric(nodes, su_size=su_size, radix=radix, down=down, up=up, rails=rails, tiers=tiers)
    try:
        plan = plan_fabric(fabric)
    except TopologyError:
        return
    assert_invariants(fabric, plan)


def test_three_tier_limits() -> None:
    # A full three-tier tree of radix k serves k^3 / 4 ports: 8192 nodes of 8
    # rails on 64 ports, 2000 on 40 ports. One more SU does not fit.
    largest = plan_fabric(ndr(256 * 32))
    assert flat_counts(largest) == {
        "leaf": 2048,
        "spine": 2048,
        "core": 1024,
        "node-leaf": 65536,
        "leaf-spine": 65536,
        "spine-core": 65536,
    }
    with pytest.raises(TopologyError, match=r"holds 8192 nodes"):
        plan_fabric(ndr(256 * 32 + 1))
    assert plan_fabric(hdr(100 * 20)).counts()["switches"] == {"leaf": 800, "spine": 800, "core": 400}
    with pytest.raises(TopologyError, match=r"holds 2000 nodes"):
        plan_fabric(hdr(100 * 20 + 1))


def test_short_last_block_spines_get_enough_uplinks_to_reach_every_core() -> None:
    # 96 HDR SUs make no equal blocks of at most 20 SUs that a 40-port core can span, so
    # blocks fill: block 5 has 16 leaves per rail, and its 20 spines carry 16 links down.
    # Plane j then holds 32 spines with 20 up and 8 with 16: 768 uplinks need 20 cores, more
    # than 16. Those 8 spines get 20 uplinks so that every spine reaches every core of its
    # plane: 20 cores.
    fabric = hdr(96 * 20)
    plan = plan_fabric(fabric)
    cores_per_plane = Counter(c.plane for c in plan.switches_in("core"))
    assert cores_per_plane == {j: 20 for j in range(1, 21)}
    up = Counter(c.lower.device for c in plan.cables_in("spine-core"))
    short = [s for s in plan.switches_in("spine") if s.block == 5]
    assert {up[s.name] for s in short} == {20}
    assert plan.counts()["cables"]["spine-core"] == 800 * 20
    assert routing_advice(plan).engine == "updn"
    assert_invariants(fabric, plan)


def test_short_last_core_group_keeps_one_link_per_core() -> None:
    # 8-port switches, 4 rails, 3 SUs of 3 nodes, leaves 3 down / 5 up: one
    # block; 5 spines per rail, 1 link per leaf-spine pair, so u = 3 uplinks.
    # A plane holds p = 4 spines (4 rails), so g = 8 / 4 = 2 planes a group:
    # planes 1-2, 3-4 and a short last group of plane 5. Each group has u = 3
    # cores; the last group's take one link from each of its 4 spines (4 of 8
    # ports). 3 * 3 = 9 cores; the per-plane rule needs 3 per plane, 15 in all.
    fabric = make_fabric(9, su_size=3, radix=8, down=3, up=5, rails=4, tiers=3, engine="updn")
    plan = plan_fabric(fabric)
    cores = plan.switches_in("core")
    assert Counter(c.group for c in cores) == {1: 3, 2: 3, 3: 3}
    assert {s.plane: s.group for s in plan.switches_in("spine")} == {1: 1, 2: 1, 3: 2, 4: 2, 5: 3}
    load = Counter(c.upper.device for c in plan.cables_in("spine-core"))
    assert {c.name: load[c.name] for c in cores} == {c.name: 8 if c.group < 3 else 4 for c in cores}
    assert plan.counts()["cables"]["spine-core"] == 20 * 3
    # The short group's cores have half the spines of the others, which ftree refuses. A site
    # that runs ftree gets 5 groups of a plane each (4 spines), 3 cores with 1 link each: 15.
    assert fat_tree_asymmetries(plan) == [
        "core switches differ in downward port groups: ib-core-g01-01 has 8, ib-core-g03-01 4"
    ]
    assert plan.symmetric_switches == 20 + 15
    assert_invariants(fabric, plan)
    even = plan_fabric(replace(fabric, routing_engine="ftree"))
    assert Counter(c.group for c in even.switches_in("core")) == {g: 3 for g in range(1, 6)}
    assert (fat_tree_asymmetries(even), even.filling_switches) == ([], 29)
    assert_invariants(fabric, even)


@pytest.mark.parametrize("fabric", [ndr(1344), hdr(140)], ids=["per-plane", "grouped"])
def test_plan_is_deterministic(fabric: Fabric) -> None:
    first = plan_fabric(fabric)
    again = plan_fabric(fabric)
    assert first == again
    assert first.switches == again.switches and first.cables == again.cables


def test_switch_names_sort_in_plan_order() -> None:
    plan = plan_fabric(ndr(1344))
    for tier in SWITCH_TIERS:
        names = [s.name for s in plan.switches_in(tier)]
        assert names == sorted(names)
        assert [s.index for s in plan.switches_in(tier)] == list(range(1, len(names) + 1))
    assert plan.switches_in("leaf")[0].name == "ib-leaf-su01-r1"
    assert plan.switches_in("spine")[-1].name == "ib-spine-r8-b3-16"
    assert plan.switches_in("core")[-1].name == "ib-core-g08-28"


def test_many_sus_widen_names_to_keep_them_sorted() -> None:
    plan = plan_fabric(make_fabric(120, su_size=1, rails=1))
    names = [s.name for s in plan.switches_in("leaf")]
    assert names[0] == "ib-leaf-su001-r1"
    assert names == sorted(names)


def test_leaf_port_and_su_lookups() -> None:
    plan = plan_fabric(ndr(127))
    assert plan.leaf_port("dgx0001", 1) == Port("ib-leaf-su01-r1", 1)
    assert plan.leaf_port("dgx0033", 8) == Port("ib-leaf-su02-r8", 1)
    assert plan.leaf_port("dgx0127", 3) == Port("ib-leaf-su04-r3", 31)
    assert plan.su_of("dgx0032") == 1
    assert plan.su_of("dgx0033") == 2
    with pytest.raises(KeyError, match="not attached"):
        plan.leaf_port("dgx9999", 1)
    with pytest.raises(KeyError, match="no rail 9"):
        plan.leaf_port("dgx0001", 9)
    with pytest.raises(KeyError, match="not attached"):
        plan.su_of("head01")
    with pytest.raises(ValueError, match="unknown tier"):
        plan.switches_in("super-spine")


def test_oversubscribed_leaves_report_their_ratio() -> None:
    # 40 nodes per leaf sharing 24 uplinks: 0.6 of the bandwidth they can offer.
    plan = plan_fabric(make_fabric(80, su_size=40, radix=64, down=40, up=24))
    assert plan.bisection_ratio()["leaf"] == pytest.approx(24 / 40)
    # A partial SU does not hide the full one: the worst leaf counts.
    plan = plan_fabric(make_fabric(70, su_size=40, radix=64, down=40, up=24))
    assert plan.bisection_ratio()["leaf"] == pytest.approx(24 / 40)


# -- Errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fabric", "message"),
    [
        (make_fabric(64, su_size=33), r"33 nodes on each leaf but leaf_down_ports is 32"),
        (make_fabric(64, down=40, up=32), r"exceed the 64-port QM9700"),
        (make_fabric(0), r"no nodes"),
        (make_fabric(64, up=0), r"leaf_up_ports is 0"),
        (make_fabric(64, tiers=4), r"tiers is 4"),
        (ndr(9 * 32, tiers=2), r"two tiers cannot join 72 leaves .*three tiers are needed"),
    ],
)
def test_infeasible_fabrics_say_what_to_change(fabric: Fabric, message: str) -> None:
    with pytest.raises(TopologyError, match=message) as raised:
        plan_fabric(fabric)
    assert isinstance(raised.value, PodctlError)
    assert "'compute'" in str(raised.value)


def test_duplicate_nodes_are_rejected() -> None:
    fabric = make_fabric(4)
    doubled = replace(fabric, nodes=fabric.nodes + ("dgx0002",))
    with pytest.raises(TopologyError, match="dgx0002 more than once"):
        plan_fabric(doubled)


def test_auto_tiers_switch_to_three_after_eight_ndr_sus() -> None:
    assert plan_fabric(ndr(8 * 32)).tiers == 2
    assert plan_fabric(ndr(8 * 32 + 1)).tiers == 3


# -- Slurm topology.conf ---------------------------------------------------------------


def test_slurm_topology_for_sim() -> None:
    text = slurm_topology_conf(plan_fabric(sim()))
    assert text == (
        "# Generated by podctl from the declared fabric 'compute'; "
        "change the site file and regenerate rather than editing this.\n"
        "# Each scalable unit is one switch here: its nodes are one leaf hop apart on every rail.\n"
        "SwitchName=su01 Nodes=node[01-03]\n"
        "SwitchName=spine Switches=su01\n"
    )


def test_slurm_topology_for_two_sus() -> None:
    text = slurm_topology_conf(plan_fabric(ndr(64)))
    assert text.splitlines()[0].startswith("# Generated by podctl from the declared fabric")
    assert text.splitlines()[2:] == [
        "SwitchName=su01 Nodes=dgx[0001-0032]",
        "SwitchName=su02 Nodes=dgx[0033-0064]",
        "SwitchName=spine Switches=su[01-02]",
    ]


def test_slurm_topology_for_three_tiers_lists_every_node_once() -> None:
    plan = plan_fabric(ndr(1343))
    lines = [line for line in slurm_topology_conf(plan).splitlines() if not line.startswith("#")]
    seen: Counter[str] = Counter()
    parents: Counter[str] = Counter()
    for line in lines:
        fields = dict(part.split("=", 1) for part in line.split())
        if "Nodes" in fields:
            seen.update(NodeSet(fields["Nodes"]))
        else:
            parents.update(NodeSet(fields["Switches"]))
    assert seen == Counter(ndr(1343).nodes)
    assert lines[-4:] == [
        "SwitchName=block01 Switches=su[01-14]",
        "SwitchName=block02 Switches=su[15-28]",
        "SwitchName=block03 Switches=su[29-42]",
        "SwitchName=core Switches=block[01-03]",
    ]
    # Every SU and every block hangs under exactly one parent.
    assert parents == Counter([f"su{i:02d}" for i in range(1, 43)] + ["block01", "block02", "block03"])


def test_slurm_topology_leaves_out_unscheduled_hosts_and_empty_sus() -> None:
    scheduled = {f"dgx{i:04d}" for i in range(1, 33)}  # dgx0033, alone in SU 2, is not scheduled
    text = slurm_topology_conf(plan_fabric(ndr(33)), scheduled)
    assert text.splitlines()[2:] == [
        "SwitchName=su01 Nodes=dgx[0001-0032]",
        "SwitchName=spine Switches=su01",
    ]
