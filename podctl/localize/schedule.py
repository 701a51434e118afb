"""Rounds of concurrent fabric tests, planned from a FabricPlan.

A round is one batch of tests that run at the same time; no two tests of a
round share a node, so a slow test cannot be blamed on a neighbour competing
for the same HCA. The standard schedule is

- one all-nodes test (the certification figure; when it falls short,
  `podctl.localize.localize` takes over);
- one round of scalable-unit groups: every node of an SU on every rail,
  which is all nodes of each of the SU's leaves and nothing above them;
- one round per rail of the same groups restricted to that rail (rail-aligned:
  all nodes of one leaf);
- pairwise rounds: perfect matchings that pair SU i with SU i + m/2 (so that
  on a three-tier fabric the pairs cross blocks and cores) at rotating
  positions, and one matching of neighbours inside each leaf.

Every pairwise round covers every node (one node sits out when the count is odd,
a different one in each round).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from podctl.derive.topology import FabricPlan


@dataclass(frozen=True, slots=True)
class Test:
    """One test: an NCCL all-to-all over `nodes`, or ib_write_bw for a pair.

    `rail` restricts the test to one rail (1-based; NCCL_IB_HCA names that
    rail's HCA, `podctl.core.model.hca_name`: mlx5_<rail-1> unless the profile's
    `compute_hcas.names` says otherwise); None uses every rail. `per_rail` (pairs only) asks for one figure per
    rail, from concurrent per-HCA runs, instead of one for the whole test.
    """

    __test__ = False  # not a pytest test class, despite the name

    nodes: tuple[str, ...]
    rail: int | None = None
    per_rail: bool = False

    def __post_init__(self) -> None:
        if len(self.nodes) < 2:
            raise ValueError(f"a test needs at least two nodes, got {self.nodes}")
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError(f"a test lists a node twice: {self.nodes}")
        if self.per_rail and len(self.nodes) != 2:
            raise ValueError("per-rail figures are measured for pairs only")


@dataclass(frozen=True, slots=True)
class Round:
    name: str
    tests: tuple[Test, ...]

    def __post_init__(self) -> None:
        check_disjoint(self.tests)


def check_disjoint(tests: Sequence[Test]) -> None:
    seen: set[str] = set()
    for test in tests:
        for node in test.nodes:
            if node in seen:
                raise ValueError(f"{node} is in two tests of one round")
            seen.add(node)


def cross_su_matching(units: Sequence[Sequence[str]], offset: int, per_rail: bool = True) -> tuple[Test, ...]:
    """Pairs across scalable units: SU i with SU i + m/2, partners rotating with `offset`.

    `units` are the hosts of each SU (hosts may be left out, e.g. known-bad
    ones). Hosts left without a partner (uneven SUs, and with an odd SU
    count the whole last SU, whose pairs then stay on its leaves) are paired
    among themselves in order.
    """
    units = [list(u) for u in units if u]
    m = len(units)
    pairs: list[tuple[str, str]] = []
    left: list[str] = []
    half = m // 2
    for i in range(half):
        # Rotating both sides (by different amounts) changes the partners and,
        # with uneven SUs, which node is left over.
        x, y = _rotate(units[i], offset), _rotate(units[i + half], 2 * offset)
        pairs.extend(zip(x, y))
        left.extend(x[len(y) :])
        left.extend(y[len(x) :])
    if m % 2:
        left.extend(units[-1])
    if left:
        # Rotate which leftover sits out, so that successive rounds cover every node.
        rotation = offset % len(left)
        left = left[rotation:] + left[:rotation]
    pairs.extend(zip(left[0::2], left[1::2]))
    return tuple(Test((a, b), per_rail=per_rail) for a, b in pairs)


def _rotate(items: list[str], by: int) -> list[str]:
    shift = by % len(items)
    return items[shift:] + items[:shift]


def intra_leaf_matching(units: Sequence[Sequence[str]], per_rail: bool = True) -> tuple[Test, ...]:
    """Neighbours inside each SU: their traffic stays on the SU's leaves."""
    pairs: list[tuple[str, str]] = []
    left: list[str] = []
    for unit in units:
        unit = list(unit)
        pairs.extend(zip(unit[0::2], unit[1::2]))
        if len(unit) % 2:
            left.append(unit[-1])
    pairs.extend(zip(left[0::2], left[1::2]))
    return tuple(Test((a, b), per_rail=per_rail) for a, b in pairs)


def plan_rounds(plan: FabricPlan, cross_rounds: int = 2, rails: int | None = None) -> tuple[Round, ...]:
    """The standard schedule for `plan` (see the module docstring)."""
    hosts = tuple(h for su in plan.scalable_units for h in su)
    rail_count = rails or max(c.lower.port for c in plan.cables_in("node-leaf"))
    rounds = [Round("all-nodes", (Test(hosts),))]
    groups = tuple(Test(tuple(su)) for su in plan.scalable_units if len(su) >= 2)
    if len(plan.scalable_units) > 1 and groups:
        rounds.append(Round("scalable-units", groups))
    for rail in range(1, rail_count + 1):
        rail_groups = tuple(Test(t.nodes, rail=rail) for t in groups)
        if rail_groups:
            rounds.append(Round(f"leaves-rail-{rail}", rail_groups))
    if len(plan.scalable_units) > 1:
        for offset in range(cross_rounds):
            rounds.append(Round(f"pairs-cross-{offset + 1}", cross_su_matching(plan.scalable_units, offset)))
    rounds.append(Round("pairs-intra-leaf", intra_leaf_matching(plan.scalable_units)))
    return tuple(rounds)
