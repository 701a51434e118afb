"""Localizing from the pod suite's pairwise rounds, when the all-nodes test passed (Localizer.resolve).

The case it is for: on a sim pod of many co-hosted nodes the all-nodes job's figure is scaled
to the sim's reference density, and the scaled figure can pass with a slow node in the ring
(16 sim nodes, bench/results/2026-12-02-cost-bench-16.json). Here `MaskedFabric` reads every
group test as healthy and answers pairs from the fabric model, so only the pairs carry the fault.
"""

from __future__ import annotations

import random

import pytest

from podctl.localize.localize import Localizer, Result
from podctl.localize.schedule import Test
from podctl.localize.simulate import Fault, SimulatedFabric, random_faults
from podctl.validate.nccl import pairwise_rounds


class MaskedFabric(SimulatedFabric):
    def _run(self, test: Test) -> Result:
        if len(test.nodes) > 2:
            return Result(test, self.rate_gbps, None)
        return super()._run(test)


def resolve(setup, faults):
    fabric, plan, router = setup
    sim = MaskedFabric(plan, faults, fabric.rate, router)
    hosts = [h for su in plan.scalable_units for h in su]
    threshold = 0.9 * sim.rate_gbps
    assert sim.run_round([Test(tuple(hosts))])[0].bandwidth >= threshold  # round 1 passes: the fault is hidden
    measured = [sim.run_round(tests) for _, tests in pairwise_rounds(plan, hosts)]
    searched_from = sim.rounds
    diagnosis = Localizer(plan, sim, threshold, router).resolve(measured)
    assert diagnosis.rounds_used == sim.rounds - searched_from  # its own rounds, not the pairs'
    return diagnosis


def named(diagnosis):
    return set(diagnosis.bad_nodes) | set(diagnosis.bad_cables)


def test_no_slow_pair_takes_no_round(h100_127):
    diagnosis = resolve(h100_127, [])
    assert diagnosis.healthy and diagnosis.rounds_used == 0


def test_a_slow_node_behind_a_passing_all_nodes_test_is_named(h100_127):
    diagnosis = resolve(h100_127, [Fault("slow-node", node="dgx070")])
    assert diagnosis.bad_nodes == ("dgx070",) and diagnosis.bad_links == () and diagnosis.suspects == ()


def test_a_dead_hca_port_is_named_on_its_rail(h100_127):
    _, plan, _ = h100_127
    cable = next(c for c in plan.cables_in("node-leaf") if c.lower.device == "dgx005" and c.lower.port == 3)
    diagnosis = resolve(h100_127, [Fault("dead-port", cable=cable)])
    assert diagnosis.bad_nodes == () and diagnosis.bad_links == (("dgx005 mlx5_2", "ib-leaf-su01-r3[5]"),)


def test_a_slow_switch_cable_a_cross_su_pair_crosses_is_named_with_both_ends(h100_127):
    # Step 3 runs without its all-nodes check: that check is a group test, the kind that hid the fault.
    _, plan, router = h100_127
    hosts = [h for su in plan.scalable_units for h in su]
    crossed = {c for _, tests in pairwise_rounds(plan, hosts) for t in tests for c in router.pair_cables(*t.nodes, 1)}
    cable = router.cables[min(c for c in crossed if router.cables[c].tier == "leaf-spine")]
    diagnosis = resolve(h100_127, [Fault("slow-link", cable=cable)])
    assert diagnosis.bad_cables == (cable,) and diagnosis.bad_nodes == () and diagnosis.suspects == ()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_random_faults_zero_false_accusations_and_every_node_fault_named(h100_127, k):
    _, plan, _ = h100_127
    rng = random.Random(20261202 + k)
    for _ in range(15):
        faults = random_faults(plan, k, rng)
        diagnosis = resolve(h100_127, faults)
        injected = {f.node for f in faults if f.node} | {f.cable for f in faults if f.cable}
        assert named(diagnosis) <= injected, (faults, diagnosis)
        # Every node is in a pair, so a slow node (or its HCA) always shows and is always named.
        on_nodes = {f.node for f in faults if f.node} | {
            f.cable for f in faults if f.cable and f.cable.tier == "node-leaf"
        }
        assert on_nodes <= named(diagnosis), (faults, diagnosis)
