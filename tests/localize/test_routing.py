"""Routes follow the fat tree: up to the lowest common tier, then down; destination-based."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("fixture", ["h100_127", "three_tier"])
def test_every_route_climbs_then_descends_to_the_destination_leaf(fixture, request):
    fabric, plan, router = request.getfixturevalue(fixture)
    tier_rank = {"leaf": 0, "spine": 1, "core": 2}
    tier_of = {s.name: s.tier for s in plan.switches}
    hosts = router.hosts
    for rail in range(1, fabric.rails + 1):
        for src in hosts[:: max(1, len(hosts) // 9)]:
            src_leaf = router.leaf(src, rail)
            for dst in hosts[:: max(1, len(hosts) // 7)]:
                path = [router.cables[i] for i in router.route(src_leaf, dst, rail)]
                if plan.su_of(src) == plan.su_of(dst):
                    assert path == []  # same SU: stays on the leaf
                    continue
                here = src_leaf
                ranks = []
                for cable in path:
                    if cable.lower.device == here:
                        here = cable.upper.device
                    else:
                        assert cable.upper.device == here, f"{src}->{dst}: path is not connected"
                        here = cable.lower.device
                    ranks.append(tier_rank[tier_of[here]])
                assert here == router.leaf(dst, rail)
                peak = ranks.index(max(ranks))
                assert ranks[: peak + 1] == sorted(ranks[: peak + 1])  # only up, then only down
                assert ranks[peak:] == sorted(ranks[peak:], reverse=True)


def test_routes_depend_on_the_destination_not_the_source_node(h100_127):
    fabric, plan, router = h100_127
    su1, su3 = plan.scalable_units[0], plan.scalable_units[2]
    # Two sources on the same leaf reach one destination the same way.
    a = router.pair_cables(su1[0], su3[5], 1) & set(router.route(router.leaf(su1[0], 1), su3[5], 1))
    b = router.route(router.leaf(su1[7], 1), su3[5], 1)
    assert set(b) == a and len(b) == 2


def test_destinations_spread_over_every_uplink_of_a_leaf(h100_127):
    fabric, plan, router = h100_127
    leaf = router.leaf(plan.scalable_units[0][0], 3)
    first_hops = {router.route(leaf, dst, 3)[0] for su in plan.scalable_units[1:] for dst in su}
    assert len(first_hops) == fabric.leaf_up_ports
