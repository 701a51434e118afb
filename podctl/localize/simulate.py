"""A fabric model that runs tests: the stand-in for NCCL over Slurm.

Model (documented so that its limits are plain):

- Every rail of a healthy node reaches the fabric's link rate (Gb/s per rail).
- A group test is an all-to-all over its nodes (alltoall_perf), so it uses
  the path between every two members on every rail it runs on; a pair test
  sends both ways. Its figure is the slowest rail's, and a rail runs at the
  rate of the slowest member node and the slowest cable its paths cross.
- Inside one SU traffic stays on the leaf of each rail; between SUs it
  climbs to spines (and cores) along `Router`'s destination-based routes, so
  a slow leaf-spine cable only slows the pairs routed over it.
- A dead port is a link that is down: a test whose paths cross it fails
  outright (figure 0).
- Contention between concurrent tests is not modelled: the fat tree is
  non-blocking and tests of a round share no node.
- Port counters (`port_evidence`): a cable that is slow is slow for a physical
  reason its ports record: it trained at a lower width (half the lanes: half
  the rate) or it counts symbol errors and link retries; a dead port is in
  state Down. Which of the first two a slow cable shows is drawn from the
  fault's place (deterministic). A slow node shows nothing in the fabric's
  counters: only traffic finds it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from podctl.core.model import IB_RATES_GBPS
from podctl.derive.topology import Cable, FabricPlan
from podctl.localize.localize import PortEvidence, Result
from podctl.localize.routing import Router
from podctl.localize.schedule import Test, check_disjoint

SLOW_FACTOR = 0.5
FAULT_KINDS = ("slow-node", "slow-link", "dead-port")


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # one of FAULT_KINDS
    node: str | None = None  # slow-node
    cable: Cable | None = None  # slow-link, dead-port: any cable of the plan
    factor: float = SLOW_FACTOR

    def describe(self) -> str:
        if self.node is not None:
            return f"{self.kind} {self.node}"
        assert self.cable is not None
        return f"{self.kind} {self.cable.lower.device}[{self.cable.lower.port}]<->{self.cable.upper.device}[{self.cable.upper.port}]"


class SimulatedFabric:
    """The fabric with its faults: runs tests (the localizer's Tester) and reports port counters."""

    def __init__(self, plan: FabricPlan, faults: Sequence[Fault], rate: str, router: Router | None = None) -> None:
        self.plan = plan
        self.router = router or Router(plan)
        self.rate_gbps = float(IB_RATES_GBPS[rate])
        self.faults = tuple(faults)
        self._slow_nodes = {f.node: (0.0 if f.kind == "dead-port" else f.factor) for f in faults if f.node}
        self._hca: dict[tuple[str, int], float] = {}
        self._cables: dict[int, float] = {}  # by Router cable id
        self._rail_of: dict[int, int] = {}
        switch_rail = {s.name: s.rail for s in plan.switches}
        for fault in faults:
            if fault.cable is None:
                continue
            factor = 0.0 if fault.kind == "dead-port" else fault.factor
            if fault.cable.tier == "node-leaf":
                self._hca[(fault.cable.lower.device, fault.cable.lower.port)] = factor
            else:
                cable_id = self.router.cable_id[fault.cable]
                self._cables[cable_id] = factor
                rail = switch_rail[fault.cable.lower.device]
                assert rail is not None
                self._rail_of[cable_id] = rail
        self.rounds = 0
        self.tests = 0

    def port_evidence(self) -> list[PortEvidence]:
        """What the ports of the faulty cables record (see the module docstring)."""
        out = []
        for fault in self.faults:
            if fault.cable is None:
                continue
            if fault.kind == "dead-port":
                out.append(PortEvidence(fault.cable, "port state Down (physical: Polling)"))
            elif (fault.cable.lower.port + fault.cable.upper.port) % 2:
                out.append(PortEvidence(fault.cable, "width 2X of 4X"))
            else:
                out.append(
                    PortEvidence(fault.cable, "SymbolErrorCounter 4821, LinkErrorRecoveryCounter 37 (threshold 10)")
                )
        return out

    def run_round(self, tests: Sequence[Test]) -> list[Result]:
        check_disjoint(tests)
        self.rounds += 1
        self.tests += len(tests)
        return [self._run(test) for test in tests]

    def _run(self, test: Test) -> Result:
        rails = (test.rail,) if test.rail else tuple(range(1, self.router.rails + 1))
        node_factor = min((self._slow_nodes.get(n, 1.0) for n in test.nodes), default=1.0)
        figures = []
        for rail in rails:
            factor = node_factor
            for node in test.nodes:
                factor = min(factor, self._hca.get((node, rail), 1.0))
            for cable, cable_factor in self._cables.items():
                if cable_factor < factor and self._rail_of[cable] == rail and self._crosses(test, cable, rail):
                    factor = cable_factor
            figures.append(self.rate_gbps * factor)
        return Result(test, min(figures), tuple(figures) if test.per_rail else None)

    def _crosses(self, test: Test, cable: int, rail: int) -> bool:
        if len(test.nodes) == 2:
            a, b = test.nodes
            return cable in self.router.pair_cables(a, b, rail)
        return self.router.group_crosses(test.nodes, cable, rail)


def random_faults(plan: FabricPlan, k: int, rng: random.Random, kinds: Sequence[str] = FAULT_KINDS) -> list[Fault]:
    """k faults at distinct places: nodes, node-leaf cables or switch cables, of mixed kinds."""
    hosts = [h for su in plan.scalable_units for h in su]
    links = list(plan.cables)
    faults: list[Fault] = []
    used_nodes: set[str] = set()
    used_cables: set[Cable] = set()
    while len(faults) < k:
        kind = rng.choice(list(kinds))
        if kind == "slow-node":
            node = rng.choice(hosts)
            if node in used_nodes:
                continue
            used_nodes.add(node)
            faults.append(Fault(kind, node=node))
        else:
            cable = rng.choice(links)
            if cable in used_cables or cable.lower.device in used_nodes:
                continue
            used_cables.add(cable)
            if cable.tier == "node-leaf":
                # One fault per node: a node-leaf cable fault on top of a slow
                # node (or on a second rail) could never be told apart.
                used_nodes.add(cable.lower.device)
            faults.append(Fault(kind, cable=cable))
    return faults
