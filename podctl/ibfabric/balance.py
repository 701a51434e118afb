"""How the subnet manager's own forwarding tables spread the routes, and where they turn down then up.

Read on the tables a dump holds (podctl.ibfabric.lft), placed on the plan, never on podctl's
model of routing: OpenSM's ftree numbers destinations by LID, which podctl's model cannot know
(a fifth of the entries differ at 4 SUs), and a subnet manager that fell back to another
engine (ftree refuses an uneven tree and routes with minhop) routes otherwise again.

- Balance: every switch forwards each destination out of one port. Counting the HCA
  destinations each up-port carries shows how evenly a switch spreads its traffic upward; per
  switch tier, the fewest and the most routes on any up-port, and the switch whose up-ports
  differ most. ftree gives every up-port of a tier nearly the same count.
- Credit-loop risk: a route that comes down to a switch and goes up again. Routes that only
  climb, then descend, cannot close a cycle of buffer dependencies; a turn upward after coming
  down can. A destination-based table says it directly: a switch that sends a LID down to a
  switch below it that sends the same LID up. Routes to HCAs carry the pod's traffic; routes to
  switches' own LIDs carry management traffic only, and on a fat tree one switch of the top
  tier reaches another only through a tier below (updn and minhop route them so; ftree leaves
  them out), so they are counted apart.

A switch of the plan that has no table in the dump is listed and not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from podctl.derive.topology import FabricPlan
from podctl.ibfabric.lft import NO_PORT, Lfts, SwitchTable

TIERS = ("leaf", "spine", "core")
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class TierBalance:
    tier: str
    switches: int  # with a table and up-ports
    up_ports: int
    fewest: int  # HCA destinations forwarded out of the least used up-port of the tier
    most: int
    mean: float
    worst: str  # the switch whose own up-ports differ most
    worst_fewest: int
    worst_most: int

    def render(self) -> str:
        return (
            f"{self.tier}: {self.up_ports} up-ports on {self.switches} switches carry {self.fewest} to {self.most} "
            f"routes each (mean {self.mean:.1f}); most uneven: {self.worst}, {self.worst_fewest} to {self.worst_most}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "switches": self.switches,
            "up_ports": self.up_ports,
            "routes_per_up_port": {"min": self.fewest, "max": self.most, "mean": round(self.mean, 2)},
            "most_uneven_switch": {"switch": self.worst, "min": self.worst_fewest, "max": self.worst_most},
        }


@dataclass(frozen=True)
class Turn:
    """A route that turns up again after coming down: `above` sends LID `lid` down to `at`, which sends it up."""

    above: str
    at: str
    up_to: str
    lid: int
    destination: str

    def render(self) -> str:
        return (
            f"{self.above} sends LID {self.lid} ({self.destination}) down to {self.at}, "
            f"which sends it up again to {self.up_to}"
        )


@dataclass(frozen=True)
class Turns:
    """Table entries whose route turns up after coming down: (switch, LID) pairs, and their LIDs."""

    entries: int = 0
    lids: int = 0
    examples: tuple[Turn, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {"entries": self.entries, "lids": self.lids, "examples": [t.render() for t in self.examples]}


@dataclass(frozen=True)
class Balance:
    source: str  # where the tables come from
    destinations: int  # HCA LIDs counted
    tiers: tuple[TierBalance, ...]
    turns: Turns  # routes to HCAs that turn up after coming down: the credit-loop risk
    switch_turns: Turns  # the same for routes to switches' own LIDs (management traffic)
    no_table: tuple[str, ...]  # switches of the plan the dump has no table for: not counted

    @property
    def credit_loop_risk(self) -> bool:
        return self.turns.entries > 0

    def lines(self) -> list[str]:
        out = [f"balance, on {self.source} ({self.destinations} HCA destinations):"]
        out += [f"  {tier.render()}" for tier in self.tiers]
        if self.turns.entries:
            out.append(
                f"  credit-loop risk: {self.turns.entries} table entries for {self.turns.lids} HCA LID(s) send "
                "a route down, then up again:"
            )
            out += [f"    {turn.render()}" for turn in self.turns.examples]
        else:
            out.append("  no route to an HCA turns up after coming down: no credit-loop risk from the pod's traffic")
        if self.switch_turns.entries:
            out.append(
                f"  {self.switch_turns.entries} entries for {self.switch_turns.lids} switch LID(s) (management "
                f"traffic) go down, then up, e.g. {self.switch_turns.examples[0].render()}"
            )
        if self.no_table:
            shown = ", ".join(self.no_table[:MAX_EXAMPLES]) + (" ..." if len(self.no_table) > MAX_EXAMPLES else "")
            out.append(f"  {len(self.no_table)} switch(es) of the plan have no table in the dump, not counted: {shown}")
        return out

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "destinations": self.destinations,
            "tiers": {tier.tier: tier.as_dict() for tier in self.tiers},
            "credit_loop_risk": self.turns.as_dict(),
            "switch_lid_turns": self.switch_turns.as_dict(),
            "switches_without_table": list(self.no_table),
        }


def _ports(plan: FabricPlan) -> tuple[dict[str, dict[int, str]], dict[str, dict[int, str]]]:
    """Per switch: up-port -> the switch above, and down-port -> the switch below."""
    up: dict[str, dict[int, str]] = {}
    down: dict[str, dict[int, str]] = {}
    for cable in plan.cables:
        if cable.tier == "node-leaf":
            continue
        up.setdefault(cable.lower.device, {})[cable.lower.port] = cable.upper.device
        down.setdefault(cable.upper.device, {})[cable.upper.port] = cable.lower.device
    return up, down


def _describe(lfts: Lfts, lid: int) -> str:
    dest = lfts.dest.get(lid)
    if dest is None or not dest.desc:
        return f"{dest.kind or 'a port'}" if dest is not None else "a port"
    return dest.desc


def route_balance(plan: FabricPlan, lfts: Lfts, tables: Mapping[str, SwitchTable]) -> Balance:
    """The balance of the dump `lfts`, its `tables` placed on `plan` (switch name -> table, as
    podctl.ibfabric.lft.place_forwarding places them), and the routes that turn down then up."""
    up, down = _ports(plan)
    # LIDs that are no HCA's base LID: switches (their own LID is their table's), routers, LMC's extra LIDs.
    not_hca = {lid for lid, d in lfts.dest.items() if d.kind in ("Switch", "Router") or d.extra_path}
    not_hca |= {t.lid for t in lfts.switches if t.lid is not None}
    hca_lids = len(set(lfts.dest) - not_hca)

    tiers: list[TierBalance] = []
    for tier in TIERS:
        counts: list[int] = []
        worst: tuple[int, str, int, int] | None = None
        switches = 0
        for switch in plan.switches_in(tier):
            table = tables.get(switch.name)
            ports = up.get(switch.name)
            if table is None or not ports:
                continue
            switches += 1
            # A C-speed count over every LID, less the LIDs that are no HCA's.
            excess = Counter(table.port(lid) for lid in not_hca)
            mine = [table.ports.count(port) - excess[port] for port in ports]
            counts += mine
            spread = max(mine) - min(mine)
            if worst is None or spread > worst[0]:
                worst = (spread, switch.name, min(mine), max(mine))
        if counts and worst is not None:
            tiers.append(
                TierBalance(
                    tier, switches, len(counts), min(counts), max(counts), sum(counts) / len(counts), *worst[1:]
                )
            )

    # Down, then up: `above` forwards a LID out of a down-port to switch `at`, and `at` forwards it up.
    entries = {True: 0, False: 0}  # to an HCA's LID or not
    lids: dict[bool, set[int]] = {True: set(), False: set()}
    examples: dict[bool, list[Turn]] = {True: [], False: []}
    up_mask = {name: bytes(1 if p in ports else 0 for p in range(256)) for name, ports in up.items()}
    for above, children in down.items():
        table = tables.get(above)
        if table is None:
            continue
        child_at: list[str | None] = [None] * 256
        for port, child in children.items():
            if child in tables and child in up_mask:
                child_at[port] = child
        if not any(child_at):
            continue
        for lid, port in enumerate(table.ports):
            child = child_at[port]
            if child is None:
                continue
            out = tables[child].port(lid)
            if out != NO_PORT and up_mask[child][out]:
                hca = lid not in not_hca
                entries[hca] += 1
                lids[hca].add(lid)
                if len(examples[hca]) < MAX_EXAMPLES:
                    examples[hca].append(Turn(above, child, up[child][out], lid, _describe(lfts, lid)))
    no_table = tuple(s.name for s in plan.switches if s.name not in tables)
    turns = {hca: Turns(entries[hca], len(lids[hca]), tuple(examples[hca])) for hca in (True, False)}
    return Balance(
        f"the subnet manager's tables ({lfts.source})", hca_lids, tuple(tiers), turns[True], turns[False], no_table
    )


__all__ = ["Balance", "TierBalance", "Turn", "Turns", "route_balance"]
