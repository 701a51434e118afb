"""The localizer against the simulated fabric: names what is broken, accuses nothing else."""

from __future__ import annotations

import math
import random

import pytest

from podctl.localize.localize import Result, localize
from podctl.localize.schedule import Test
from podctl.localize.simulate import Fault, SimulatedFabric, random_faults


def run(setup, faults):
    fabric, plan, router = setup
    sim = SimulatedFabric(plan, faults, fabric.rate, router)
    return sim, localize(plan, sim, 0.9 * sim.rate_gbps, router)


def test_a_healthy_fabric_takes_one_round(h100_127):
    sim, diagnosis = run(h100_127, [])
    assert diagnosis.healthy and diagnosis.rounds_used == 1 and sim.rounds == 1


def test_slow_node_is_a_node_fault(h100_127):
    _, diagnosis = run(h100_127, [Fault("slow-node", node="dgx070")])
    assert diagnosis.bad_nodes == ("dgx070",)
    assert diagnosis.bad_links == () and diagnosis.suspects == ()


def test_dead_hca_port_is_a_link_fault_on_its_rail(h100_127):
    fabric, plan, router = h100_127
    cable = next(c for c in plan.cables_in("node-leaf") if c.lower.device == "dgx005" and c.lower.port == 3)
    _, diagnosis = run(h100_127, [Fault("dead-port", cable=cable)])
    assert diagnosis.bad_nodes == ()
    assert diagnosis.bad_links == (("dgx005 mlx5_2", "ib-leaf-su01-r3[5]"),)


def test_slow_leaf_spine_cable_is_named_with_both_ends(h100_127):
    fabric, plan, router = h100_127
    cable = plan.cables_in("leaf-spine")[300]
    _, diagnosis = run(h100_127, [Fault("slow-link", cable=cable)])
    assert diagnosis.bad_cables == (cable,)
    assert diagnosis.bad_links == (
        (f"{cable.lower.device}[{cable.lower.port}]", f"{cable.upper.device}[{cable.upper.port}]"),
    )
    assert diagnosis.bad_nodes == ()


def test_spine_core_cable_on_three_tiers(three_tier):
    fabric, plan, router = three_tier
    users = router.users(1)
    cable_id = next(i for i in sorted(users) if router.cables[i].tier == "spine-core")
    cable = router.cables[cable_id]
    _, diagnosis = run(three_tier, [Fault("dead-port", cable=cable)])
    assert diagnosis.bad_cables == (cable,) and diagnosis.bad_nodes == ()


def test_a_cable_no_route_crosses_cannot_show_and_is_not_guessed(a100_140):
    # The 140-node A100 pod is one block of a three-tier tree: its cores carry no traffic.
    fabric, plan, router = a100_140
    used = {i for r in range(1, fabric.rails + 1) for i in router.users(r)}
    unused = [c for i, c in enumerate(plan.cables) if c.tier != "node-leaf" and i not in used]
    assert {c.tier for c in unused} == {"spine-core"}
    sim, diagnosis = run(a100_140, [Fault("dead-port", cable=unused[0])])
    assert diagnosis.healthy and sim.rounds == 1


def test_the_all_nodes_group_sees_a_slow_cable_only_if_some_pair_crosses_it(h100_127):
    fabric, plan, router = h100_127
    cable = plan.cables_in("leaf-spine")[0]
    sim = SimulatedFabric(plan, [Fault("slow-link", cable=cable)], fabric.rate, router)
    one_su = plan.scalable_units[0]
    figures = sim.run_round([Test(router.hosts)]) + sim.run_round([Test(tuple(one_su))])
    assert figures[0].bandwidth == pytest.approx(200.0)  # half of NDR's 400
    assert figures[1].bandwidth == pytest.approx(400.0)  # inside an SU the spine is not used


@pytest.mark.parametrize("setup,k,placements", [("h100_127", 1, 25), ("h100_127", 4, 25), ("three_tier", 2, 25)])
def test_random_placements_bound_and_zero_false_accusations(setup, k, placements, request):
    fabric, plan, router = request.getfixturevalue(setup)
    rng = random.Random(f"test-{setup}-{k}")
    bound = k * math.ceil(math.log2(len(router.hosts))) + 2
    named = visible = 0
    for _ in range(placements):
        faults = random_faults(plan, k, rng)
        sim, diagnosis = run((fabric, plan, router), faults)
        assert diagnosis.rounds_used - 1 <= bound
        true_nodes = {f.node for f in faults if f.node}
        true_cables = {f.cable for f in faults if f.cable}
        assert set(diagnosis.bad_nodes) <= true_nodes, faults
        assert set(diagnosis.bad_cables) <= true_cables, faults
        assert diagnosis.suspects == () and diagnosis.unexplained == 0, faults
        named += len(diagnosis.bad_nodes) + len(diagnosis.bad_cables)
        for fault in faults:
            alone = SimulatedFabric(plan, [fault], fabric.rate, router)
            visible += alone.run_round([Test(router.hosts)])[0].bandwidth < 0.9 * alone.rate_gbps
    assert named == visible


class PairInteraction:
    """A fault outside the model: any test holding both nodes falls short, each is fine alone."""

    def __init__(self, rate: float, pair: set[str]) -> None:
        self.rate, self.pair, self.rounds = rate, pair, 0

    def run_round(self, tests):
        self.rounds += 1
        results = []
        for test in tests:
            figure = self.rate / 2 if self.pair <= set(test.nodes) else self.rate
            rails = (figure,) * 8 if test.per_rail else None
            results.append(Result(test, figure, rails))
        return results


def test_evidence_that_forces_no_one_accuses_no_one(h100_127):
    fabric, plan, router = h100_127
    tester = PairInteraction(400.0, {"dgx003", "dgx004"})
    diagnosis = localize(plan, tester, 360.0, router)
    assert diagnosis.bad_nodes == () and diagnosis.bad_links == ()
    assert not diagnosis.healthy and diagnosis.unexplained >= 1
    assert diagnosis.rounds_used == tester.rounds


@pytest.mark.parametrize("nodes", [2, 3, 4])  # one SU (of 4)
@pytest.mark.parametrize("bad", [0, 1, -1])
def test_tiny_pods_without_a_known_good_partner_still_name_the_slow_node(nodes, bad):
    """A one-SU pod of 3 (the sim's) splits into a single and a pair: no half
    passes, so suspects are paired with each other until one pair clears."""
    from podctl.derive.topology import plan_fabric
    from podctl.localize.routing import Router
    from tests.helpers.fabrics import small_fabric

    fabric = small_fabric(nodes)
    plan = plan_fabric(fabric)
    setup = (fabric, plan, Router(plan))
    host = fabric.nodes[bad]
    _, diagnosis = run(setup, [Fault("slow-node", node=host)])
    if nodes == 2:
        # Two nodes and no third to tell them apart: nothing is forced, no one is accused.
        assert diagnosis.bad_nodes == () and not diagnosis.healthy
        return
    assert diagnosis.bad_nodes == (host,)
    assert diagnosis.bad_links == () and diagnosis.suspects == ()
    assert diagnosis.rounds_used - 1 <= math.ceil(math.log2(nodes)) + 2


def test_hcas_are_named_as_the_profile_names_them(h100_127):
    from podctl.derive.facts import hca_names
    from podctl.derive.site import load_site
    from podctl.localize.localize import link_ends
    from tests.helpers.repo import REPO

    fabric, plan, router = h100_127
    names = hca_names(load_site(REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"), "compute")
    cable = next(c for c in plan.cables_in("node-leaf") if c.lower.device == "dgx005" and c.lower.port == 3)
    assert link_ends(cable) == ("dgx005 mlx5_2", "ib-leaf-su01-r3[5]")  # without names: rail r is mlx5_<r-1>
    assert link_ends(cable, names) == ("dgx005 mlx5_4", "ib-leaf-su01-r3[5]")  # DGX H100: GPU 2's HCA
    sim = SimulatedFabric(plan, [Fault("dead-port", cable=cable)], fabric.rate, router)
    diagnosis = localize(plan, sim, 0.9 * sim.rate_gbps, router, hca_names=names)
    assert diagnosis.bad_links == (("dgx005 mlx5_4", "ib-leaf-su01-r3[5]"),)


def test_when_every_node_is_slow_the_fallback_gives_up_in_about_log2_n_rounds():
    from podctl.derive.topology import plan_fabric
    from podctl.localize.routing import Router
    from tests.helpers.fabrics import small_fabric

    fabric = small_fabric(32)
    plan = plan_fabric(fabric)
    setup = (fabric, plan, Router(plan))
    _, diagnosis = run(setup, [Fault("slow-node", node=h) for h in fabric.nodes])
    assert not diagnosis.healthy and diagnosis.bad_nodes == ()
    assert diagnosis.rounds_used <= 1 + 2 * (math.ceil(math.log2(32)) + 2)


def run_with_counters(setup, faults):
    fabric, plan, router = setup
    sim = SimulatedFabric(plan, faults, fabric.rate, router)
    return sim, localize(plan, sim, 0.9 * sim.rate_gbps, router, port_evidence=sim.port_evidence())


def test_a_cable_no_route_crosses_is_named_on_its_port_counters(a100_140):
    fabric, plan, router = a100_140
    used = {i for r in range(1, fabric.rails + 1) for i in router.users(r)}
    unused = next(c for i, c in enumerate(plan.cables) if c.tier != "node-leaf" and i not in used)
    sim, diagnosis = run_with_counters(a100_140, [Fault("dead-port", cable=unused)])
    assert diagnosis.bad_cables == (unused,) and diagnosis.bad_nodes == () and sim.rounds == 1
    assert diagnosis.counter_evidence == (
        (f"{unused.lower.device}[{unused.lower.port}]", f"{unused.upper.device}[{unused.upper.port}]",
         "port state Down (physical: Polling)"),
    )  # fmt: skip


def test_counters_explain_their_cable_and_traffic_still_finds_the_slow_node(h100_127):
    fabric, plan, router = h100_127
    cable = plan.cables_in("leaf-spine")[300]
    _, diagnosis = run_with_counters(h100_127, [Fault("slow-link", cable=cable), Fault("slow-node", node="dgx070")])
    assert diagnosis.bad_nodes == ("dgx070",) and diagnosis.bad_cables == (cable,)
    assert diagnosis.suspects == () and diagnosis.unexplained == 0


@pytest.mark.parametrize("setup,k", [("h100_127", 2), ("three_tier", 4), ("a100_140", 3)])
def test_with_counters_every_fault_is_named_and_nothing_else(setup, k, request):
    fabric, plan, router = request.getfixturevalue(setup)
    rng = random.Random(f"counters-{setup}-{k}")
    bound = k * math.ceil(math.log2(len(router.hosts))) + 2
    for _ in range(20):
        faults = random_faults(plan, k, rng)
        _, diagnosis = run_with_counters((fabric, plan, router), faults)
        assert set(diagnosis.bad_nodes) == {f.node for f in faults if f.node}, faults
        assert set(diagnosis.bad_cables) == {f.cable for f in faults if f.cable}, faults
        assert diagnosis.rounds_used - 1 <= bound and diagnosis.unexplained == 0
