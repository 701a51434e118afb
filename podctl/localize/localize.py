"""Adaptive localization: from "the all-nodes test fell short" to named nodes and cables.

The evidence is kept as sets of *elements* — a node, or a cable of the plan
(a node-leaf cable stands for the HCA, its cable and the leaf port). Every
test uses a known set of elements: its nodes, their node-leaf cables on the
rails it runs on and, between SUs, the switch cables that `Router` says its
traffic crosses. A test that passes clears all of them; a test that falls
short holds at least one bad element among those not yet cleared. An element
is accused only when a failing test has no other uncleared element left, so
an accusation is forced by the evidence (zero false accusations under the
model). The one further rule is parsimony for nodes: a node whose pair test
fails on every rail, against a cleared partner over cleared paths, is
accused as a node rather than as one bad cable per rail.

The search, in rounds of node-disjoint tests:

1. the all-nodes test (round 1); if it passes, nothing is wrong;
2. nodes: every SU as a group (its traffic stays on the SU's leaves, so
   spine faults cannot show), then binary splitting of every failing group
   at once, halves tested side by side; a half of one node is paired with a
   node already cleared in the same SU, and measured per rail to tell a node
   (slow on every rail) from its cable on one rail;
3. links between switches: when step 2 named something, one all-to-all over
   the cleared nodes says whether anything is left; then cross-SU matchings
   of cleared nodes, measured per rail, until every switch cable is cleared
   or sits in a failing test; then, for each failing test with several
   candidate cables, one pair per candidate routed over that cable and over
   cleared cables only.

`Localizer.resolve` starts instead from rounds measured already (the pod suite's pairwise
rounds): their failing tests' uncleared nodes go to step 2 as single nodes, then step 3
without its all-nodes check (an all-nodes figure is what could not be trusted there).

Steps 2 and 3 each run their tests for every fault at once, so the rounds grow
with log2 of the SU size and a few fixed steps, not with k.

Traffic cannot see every cable: a cable no route crosses (the leaf uplinks of a one-SU pod,
spine-core cables the subnet manager's routes never take) carries no test. Port counters can:
`PortEvidence` (a port down, trained below its width or speed, or counting errors; from
ibqueryerrors/perfquery or an HCA's sysfs counters, attributed to the plan's cable) names a
cable directly, and a failing test it explains needs no other culprit.

Why one module of this size: `Localizer` is one search over one evidence state (what is
cleared, what each failing test still holds); its steps read and narrow that state in turn, and
the zero-false-accusation argument above is checked by reading them together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from podctl.core.model import HcaNames, hca_name
from podctl.derive.topology import Cable, FabricPlan
from podctl.localize.routing import Router
from podctl.localize.schedule import Test, cross_su_matching

Element = str | int  # a hostname, or a cable of the plan by its Router id


@dataclass(frozen=True, slots=True)
class Result:
    test: Test
    bandwidth: float  # Gb/s per rail, the slowest rail's; 0.0 when the test failed outright
    rail_bandwidth: tuple[float, ...] | None = None  # per rail, for per_rail pair tests


class Tester(Protocol):
    """Runs one round of node-disjoint tests. The pod implements it with NCCL over Slurm."""

    def run_round(self, tests: Sequence[Test]) -> list[Result]: ...


def link_ends(cable: Cable, hca_names: HcaNames | None = None) -> tuple[str, str]:
    """Both ends of a cable as people read them off a fabric: `dgx005 mlx5_4`, `ib-leaf-su01-r3[5]`.

    `hca_names` (podctl.derive.facts.hca_names) says what each node calls its HCAs; without it rail r is mlx5_<r-1>.
    """
    if cable.tier == "node-leaf":
        lower = f"{cable.lower.device} {hca_name(cable.lower.device, cable.lower.port, hca_names)}"
    else:
        lower = f"{cable.lower.device}[{cable.lower.port}]"
    return lower, f"{cable.upper.device}[{cable.upper.port}]"


@dataclass(frozen=True, slots=True)
class PortEvidence:
    """What a cable's port counters or link state say against it: `what`, e.g.
    "port state Down", "width 2X of 4X", "SymbolErrorCounter 1234 (threshold 10)"."""

    cable: Cable
    what: str


@dataclass(frozen=True)
class Diagnosis:
    bad_nodes: tuple[str, ...]
    bad_links: tuple[tuple[str, str], ...]  # (end_a, end_b), see link_ends
    rounds_used: int  # rounds the search ran: run() counts its all-nodes round; resolve() not the rounds given
    tests_run: int
    bad_cables: tuple[Cable, ...] = ()  # the plan's cables behind bad_links
    suspects: tuple[str, ...] = ()  # elements of failing tests that nothing accused explains
    unexplained: int = 0  # failing tests that no accusation explains (suspects list their candidates)
    # (end_a, end_b, what) for each cable named on its port counters rather than (only) by traffic
    counter_evidence: tuple[tuple[str, str, str], ...] = ()

    @property
    def healthy(self) -> bool:
        return not (self.bad_nodes or self.bad_links or self.suspects or self.unexplained)


@dataclass
class _Evidence:
    cleared: set[Element] = field(default_factory=set)
    failing: list[frozenset[Element]] = field(default_factory=list)
    # pair tests that failed on every rail: (nodes, one element set per rail)
    all_rails_failing: list[tuple[tuple[str, ...], list[frozenset[Element]]]] = field(default_factory=list)
    undetermined: list[Test] = field(default_factory=list)  # failing tests whose cables are not enumerated


class Localizer:
    def __init__(
        self,
        plan: FabricPlan,
        tester: Tester,
        threshold: float,
        router: Router | None = None,
        max_cover_rounds: int = 4,
        max_resolve_rounds: int = 4,
        hosts: Sequence[str] | None = None,
        hca_names: HcaNames | None = None,
        port_evidence: Sequence[PortEvidence] = (),
    ) -> None:
        self.plan = plan
        self.tester = tester
        self.hca_names = hca_names  # how the diagnosis names HCAs, see link_ends
        self.threshold = threshold
        self.router = router or Router(plan)
        self.rails = self.router.rails
        self.max_cover_rounds = max_cover_rounds
        self.max_resolve_rounds = max_resolve_rounds
        # The nodes under test: all of the fabric's, or those left after
        # exclusions (a node out for repair is neither tested nor a partner).
        wanted = set(self.router.hosts if hosts is None else hosts)
        self.hosts = tuple(h for h in self.router.hosts if h in wanted)
        self.units = [[h for h in su if h in wanted] for su in plan.scalable_units]
        self.su_of = {h: plan.su_of(h) for h in self.hosts}
        cables = self.router.cables
        self.node_leaf = {(c.lower.device, c.lower.port): i for i, c in enumerate(cables) if c.tier == "node-leaf"}
        self.leaf_cable_host = {i: host for (host, _), i in self.node_leaf.items()}
        switch_rail = {s.name: s.rail for s in plan.switches}
        self.rail_of = {i: switch_rail[c.lower.device] for i, c in enumerate(cables) if c.tier != "node-leaf"}
        # Switch cables that some route crosses; the others no traffic test can see.
        self.switch_cables = frozenset(i for r in range(1, self.rails + 1) for i in self.router.users(r))
        self._leaf_hosts: dict[str, list[str]] = {}
        for host in self.hosts:
            for rail in range(1, self.rails + 1):
                self._leaf_hosts.setdefault(self.router.leaf(host, rail), []).append(host)
        # Cables their counters name: accused on that evidence, and explaining the tests they are in.
        self.counter_bad: dict[int, str] = {}
        for item in port_evidence:
            cid = self.router.cable_id.get(item.cable)
            if cid is not None:
                self.counter_bad[cid] = "; ".join(filter(None, (self.counter_bad.get(cid), item.what)))
        self.evidence = _Evidence()
        self.rounds = 0
        self.tests = 0
        self.tried_pairs: set[frozenset[str]] = set()
        self.fallback_rounds = 0

    # -- evidence ---------------------------------------------------------

    def _run(self, tests: Sequence[Test]) -> list[Result]:
        self.rounds += 1
        self.tests += len(tests)
        results = self.tester.run_round(list(tests))
        for result in results:
            self._record(result)
        return results

    def _passed(self, figure: float) -> bool:
        return figure >= self.threshold

    def _hca(self, nodes: Sequence[str], rails: Sequence[int]) -> set[Element]:
        return {self.node_leaf[(n, r)] for n in nodes for r in rails}

    def _pair_elements(self, a: str, b: str, rail: int) -> frozenset[Element]:
        return frozenset({a, b, *self._hca((a, b), (rail,))}) | self.router.pair_cables(a, b, rail)

    def _record(self, result: Result) -> None:
        test = result.test
        ev = self.evidence
        rails = (test.rail,) if test.rail else tuple(range(1, self.rails + 1))
        if test.per_rail and result.rail_bandwidth is not None:
            a, b = test.nodes
            sets = [self._pair_elements(a, b, r) for r in rails]
            failed = []
            for elements, figure in zip(sets, result.rail_bandwidth):
                if self._passed(figure):
                    ev.cleared |= elements
                else:
                    ev.failing.append(elements)
                    failed.append(elements)
            if len(failed) == len(sets) and len(sets) > 1:
                ev.all_rails_failing.append((test.nodes, sets))
            return
        elements: set[Element] = set(test.nodes) | self._hca(test.nodes, rails)
        determined = len({self.su_of[n] for n in test.nodes}) == 1
        if not determined and len(test.nodes) == 2:
            a, b = test.nodes
            for r in rails:
                elements |= self.router.pair_cables(a, b, r)
            determined = True
        if self._passed(result.bandwidth):
            # An undetermined group that passes clears its cables too; they are
            # just not enumerated (the nodes are what later steps need).
            ev.cleared |= elements
        elif determined:
            ev.failing.append(frozenset(elements))
        else:
            ev.undetermined.append(test)

    def _good(self, host: str) -> bool:
        cleared = self.evidence.cleared
        return host in cleared and all(self.node_leaf[(host, r)] in cleared for r in range(1, self.rails + 1))

    def _accused(self) -> set[Element]:
        ev = self.evidence
        accused: set[Element] = set(self.counter_bad)
        for elements in ev.failing:
            left = elements - ev.cleared
            if len(left) == 1:
                accused |= left
        for nodes, sets in ev.all_rails_failing:
            for node in nodes:
                if node in ev.cleared:
                    continue
                if all(s - ev.cleared <= {node, self.node_leaf[(node, r)]} for r, s in enumerate(sets, start=1)):
                    accused.add(node)
        # A node accused as a node explains its own cables' failures; do not
        # accuse those cables too unless a test forced them separately.
        return accused

    def _unexplained(self, accused: set[Element]) -> list[frozenset[Element]]:
        ev = self.evidence
        bad_nodes = {e for e in accused if isinstance(e, str)}
        left = []
        for elements in ev.failing:
            rest = elements - ev.cleared
            if rest & accused:
                continue
            if any(self.leaf_cable_host.get(e) in bad_nodes for e in rest if isinstance(e, int)):
                continue
            left.append(rest)
        return left

    # -- the search -------------------------------------------------------

    def run(self) -> Diagnosis:
        first = self._run([Test(self.hosts)])
        if self._passed(first[0].bandwidth):
            return self._diagnosis()
        self._nodes()
        if sum(1 for su in self.units if su) > 1:
            self._links()
        return self._diagnosis()

    def _partner(self, host: str, used: set[str]) -> str | None:
        su = self.units[self.su_of[host] - 1]
        for candidate in su:
            if candidate != host and candidate not in used and self._good(candidate):
                return candidate
        for candidate in self.hosts:
            if candidate != host and candidate not in used and self._good(candidate):
                return candidate
        return None

    def resolve(self, measured: Sequence[Sequence[Result]]) -> Diagnosis:
        """Localize from rounds measured already (the pod suite's pairwise rounds), not from an
        all-nodes test. Their results are the evidence; the nodes of every failing test that no
        passing test cleared are each tried against a cleared partner, per rail, as step 2 does
        with a half of one node; then step 3 between SUs, without its all-nodes check. For a
        pair that fails where the all-nodes test passed: on a sim pod that test's figure is
        scaled for co-hosted nodes and can hide a slow one; pairs never are.

        The measured rounds are not counted in rounds_used and tests_run: those are the rounds
        this search ran itself."""
        for results in measured:
            for result in results:
                self._record(result)
                if len(result.test.nodes) == 2:
                    self.tried_pairs.add(frozenset(result.test.nodes))
        failing = [r.test for results in measured for r in results if not self._passed(r.bandwidth)]
        if failing:
            order = {h: i for i, h in enumerate(self.hosts)}
            suspects = {n for test in failing for n in test.nodes if n in order and not self._good(n)}
            self._split([], sorted(suspects, key=order.__getitem__))
            if sum(1 for su in self.units if su) > 1:
                self._links(check_rest=False)
        return self._diagnosis()

    def _nodes(self) -> None:
        units = [su for su in self.units if su]
        groups: list[tuple[str, ...]] = []
        singles: list[str] = []
        if len(units) == 1:
            groups = [tuple(units[0])]
        else:
            su_tests = [Test(tuple(su)) for su in units if len(su) >= 2]
            singles = [su[0] for su in units if len(su) == 1]
            for result in self._run(su_tests):
                if not self._passed(result.bandwidth):
                    groups.append(result.test.nodes)
        self._split(groups, singles)

    def _split(self, groups: list[tuple[str, ...]], singles: list[str]) -> None:
        """Halve every failing group at once, and pair every single node with a cleared partner
        (measured per rail), until nothing is left to split."""
        while groups or singles:
            tests: list[Test] = []
            candidates = list(singles)
            for group in groups:
                half = len(group) // 2
                for part in (group[:half], group[half:]):
                    if len(part) >= 2:
                        tests.append(Test(part))
                    else:
                        candidates.extend(part)
            used = {n for t in tests for n in t.nodes} | set(candidates)
            deferred = []
            for host in candidates:
                partner = self._partner(host, used)
                if partner is None:
                    deferred.append(host)
                    continue
                used.add(partner)
                tests.append(Test((host, partner), per_rail=True))
            tests.extend(self._untried_pairs(deferred, {n for t in tests for n in t.nodes}))
            if not tests:
                break
            results = self._run(tests)
            groups = [r.test.nodes for r in results if not r.test.per_rail and not self._passed(r.bandwidth)]
            accused = self._accused()
            singles = [h for h in deferred if not self._good(h) and h not in accused]

    def _untried_pairs(self, hosts: list[str], busy: set[str]) -> list[Test]:
        """Pairs among hosts that have no cleared partner yet (small pods, or every node suspect).

        Without a known-good node nothing can be accused, so two suspects are
        tested together, each pair once, the least-suspected hosts first: the
        first pair that passes yields known-good partners, and a pair that fails
        on every rail accuses its other node as soon as one of them is cleared.
        At most about log2(N) such rounds: when no pair passes by then, the
        problem is pod-wide (every node slow, a bound set too high), and trying
        every pair would take O(N) rounds to say only that.
        """
        if self.fallback_rounds >= math.ceil(math.log2(max(2, len(self.hosts)))) + 1:
            return []
        failures = {h: sum(h in elements for elements in self.evidence.failing) for h in hosts}
        order = sorted((h for h in hosts if h not in busy), key=lambda h: failures[h])
        tests: list[Test] = []
        taken: set[str] = set()
        for i, a in enumerate(order):
            if a in taken:
                continue
            for b in order[i + 1 :]:
                if b not in taken and frozenset((a, b)) not in self.tried_pairs:
                    self.tried_pairs.add(frozenset((a, b)))
                    taken |= {a, b}
                    tests.append(Test((a, b), per_rail=True))
                    break
        self.fallback_rounds += bool(tests)
        return tests

    def _open_cables(self) -> set[int]:
        ev = self.evidence
        in_failing: set[Element] = set()
        for elements in ev.failing:
            in_failing |= elements
        return set(self.switch_cables - ev.cleared - in_failing)

    def _links(self, check_rest: bool = True) -> None:
        good_units = [[h for h in su if self._good(h)] for su in self.units]
        good = tuple(h for su in good_units for h in su)
        if len(good) < 2:
            return
        if check_rest and (self._accused() or self.evidence.failing):
            # Something was found already: does anything remain among the rest?
            rest = self._run([Test(good)])
            if self._passed(rest[0].bandwidth):
                return
        # A matching first (it covers most leaf-spine cables at once), then
        # rounds aimed at the cables still open, until none is left.
        self._run(cross_su_matching(good_units, 0))
        unreachable: set[int] = set()
        for _ in range(self.max_cover_rounds - 1):
            open_cables = sorted(self._open_cables() - unreachable)
            if not open_cables:
                break
            tests: list[Test] = []
            used: set[str] = set()
            covered: set[int] = set()
            for cable in open_cables:
                if cable in covered:
                    continue
                test = self._pair_over(cable, used, decisive=False)
                if test is None:
                    # No cleared pair routes over it at all (or all such
                    # nodes are busy this round: then try again next round).
                    if self._pair_over(cable, set(), decisive=False) is None:
                        unreachable.add(cable)
                    continue
                tests.append(test)
                used.update(test.nodes)
                a, b = test.nodes
                for rail in range(1, self.rails + 1):
                    covered |= self.router.pair_cables(a, b, rail)
            if not tests:
                break
            self._run(tests)
        for _ in range(self.max_resolve_rounds):
            accused = self._accused()
            ambiguous = [rest for rest in self._unexplained(accused) if len(rest) > 1]
            if not ambiguous:
                break
            tests: list[Test] = []
            used: set[str] = set()
            for rest in ambiguous:
                for cable in sorted(e for e in rest if isinstance(e, int) and e in self.rail_of):
                    # Best a pair whose failure would name the cable; failing
                    # that, one that crosses no other candidate, so that a pass
                    # clears it and a failure narrows the candidates.
                    test = self._pair_over(cable, used, decisive=True) or self._pair_over(
                        cable, used, decisive=False, avoid=rest - {cable}
                    )
                    if test is not None:
                        tests.append(test)
                        used.update(test.nodes)
            if not tests:
                break
            self._run(tests)

    def _pair_over(
        self, cable: int, used: set[str], decisive: bool, budget: int = 200, avoid: frozenset[Element] = frozenset()
    ) -> Test | None:
        """A pair of cleared nodes whose paths on the cable's rail cross `cable`.

        decisive: and cross no other uncleared cable, so that a failure names it.
        avoid: cables the pair must not cross.
        """
        rail = self.rail_of[cable]
        assert rail is not None
        cleared = self.evidence.cleared
        users = self.router.users(rail).get(cable, {})
        tried = 0
        for src_leaf, dsts in users.items():
            for a in self._hosts_on(src_leaf, rail):
                if a in used or not self._good(a):
                    continue
                for b in dsts:
                    if b in used or b == a or not self._good(b):
                        continue
                    if not decisive and not avoid:
                        return Test((a, b), per_rail=True)
                    tried += 1
                    crossed = self.router.pair_cables(a, b, rail)
                    if decisive and crossed - cleared == {cable}:
                        return Test((a, b), per_rail=True)
                    if not decisive and crossed.isdisjoint(avoid):
                        return Test((a, b), per_rail=True)
                    if tried >= budget:
                        return None
        return None

    def _hosts_on(self, leaf: str, rail: int) -> list[str]:
        return self._leaf_hosts.get(leaf, [])

    def _explains(self, accused: set[Element], test: Test) -> bool:
        """Whether an accused element lies on a failing test whose cables were not enumerated."""
        members = set(test.nodes)
        rails = (test.rail,) if test.rail else tuple(range(1, self.rails + 1))
        for element in accused:
            if isinstance(element, str) or element in self.leaf_cable_host:
                host = element if isinstance(element, str) else self.leaf_cable_host[element]
                if host in members:
                    return True
            elif self.rail_of[element] in rails and self.router.group_crosses(members, element, self.rail_of[element]):
                return True
        return False

    def _ends(self, cable: Cable) -> tuple[str, str]:
        return link_ends(cable, self.hca_names)

    def _diagnosis(self) -> Diagnosis:
        accused = self._accused()
        bad_nodes = sorted(e for e in accused if isinstance(e, str))
        bad_cables = sorted(
            (
                self.router.cables[e]
                for e in accused
                if isinstance(e, int) and (self.leaf_cable_host.get(e) not in bad_nodes or e in self.counter_bad)
            ),
            key=self._ends,
        )
        unexplained = self._unexplained(accused)
        suspects: set[str] = set()
        for rest in unexplained:
            for e in rest:
                suspects.add(e if isinstance(e, str) else " <-> ".join(self._ends(self.router.cables[e])))
        undetermined = sum(not self._explains(accused, test) for test in self.evidence.undetermined)
        return Diagnosis(
            bad_nodes=tuple(bad_nodes),
            bad_links=tuple(self._ends(c) for c in bad_cables),
            rounds_used=self.rounds,
            tests_run=self.tests,
            bad_cables=tuple(bad_cables),
            suspects=tuple(sorted(suspects)),
            unexplained=len(unexplained) + undetermined,
            counter_evidence=tuple(
                (*self._ends(self.router.cables[cid]), what)
                for cid, what in sorted(
                    self.counter_bad.items(), key=lambda item: self._ends(self.router.cables[item[0]])
                )
            ),
        )


def localize(
    plan: FabricPlan,
    tester: Tester,
    threshold: float,
    router: Router | None = None,
    hosts: Sequence[str] | None = None,
    hca_names: HcaNames | None = None,
    port_evidence: Sequence[PortEvidence] = (),
) -> Diagnosis:
    """Run the all-nodes test over `hosts` (default: every node of the fabric) and,
    if it falls short, name the bad nodes and cables (HCAs as `hca_names` calls them);
    cables with `port_evidence` are named on it, crossed by traffic or not."""
    return Localizer(
        plan, tester, threshold, router, hosts=hosts, hca_names=hca_names, port_evidence=port_evidence
    ).run()
