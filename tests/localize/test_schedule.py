"""Round planning: node-disjoint rounds, matchings that cover every node and cross spines."""

from __future__ import annotations

import pytest

from podctl.derive.topology import plan_fabric
from podctl.localize.schedule import Round, Test, cross_su_matching, plan_rounds
from tests.helpers.fabrics import small_fabric


def test_a_round_rejects_a_node_in_two_tests():
    with pytest.raises(ValueError, match="n001 is in two tests"):
        Round("bad", (Test(("n001", "n002")), Test(("n001", "n003"))))


def test_per_rail_figures_are_for_pairs_only():
    with pytest.raises(ValueError, match="pairs only"):
        Test(("a", "b", "c"), per_rail=True)


def test_standard_schedule_of_the_127_node_pod(h100_127):
    fabric, plan, router = h100_127
    rounds = {r.name: r for r in plan_rounds(plan)}
    assert list(rounds)[:2] == ["all-nodes", "scalable-units"]
    assert rounds["all-nodes"].tests == (Test(router.hosts),)
    assert [len(t.nodes) for t in rounds["scalable-units"].tests] == [32, 32, 32, 31]
    assert {t.rail for t in rounds["leaves-rail-5"].tests} == {5}
    hosts = set(router.hosts)
    for name in ("pairs-cross-1", "pairs-cross-2", "pairs-intra-leaf"):
        tests = rounds[name].tests
        covered = {n for t in tests for n in t.nodes}
        assert len(hosts - covered) == 1  # 127 nodes: one sits out
    # The node that sits out is not the same in both cross rounds.
    out = [hosts - {n for t in rounds[f"pairs-cross-{i}"].tests for n in t.nodes} for i in (1, 2)]
    assert out[0] != out[1]
    for test in rounds["pairs-cross-1"].tests:
        a, b = test.nodes
        assert plan.su_of(a) != plan.su_of(b)
        assert router.pair_cables(a, b, 1)  # the pair's traffic crosses spines
    for test in rounds["pairs-intra-leaf"].tests[:-1]:
        a, b = test.nodes
        assert plan.su_of(a) == plan.su_of(b)


def test_cross_pairs_span_blocks_on_a_three_tier_fabric():
    plan = plan_fabric(small_fabric(40))
    block = {s.su: s.block for s in plan.switches_in("leaf")}
    tests = cross_su_matching(plan.scalable_units, 0)
    crossing = [t for t in tests if block[plan.su_of(t.nodes[0])] != block[plan.su_of(t.nodes[1])]]
    assert len(crossing) >= len(tests) // 2
