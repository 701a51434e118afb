"""The cable schedule: one row per planned cable, the list a cabling crew or vendor works from.

Each row names both ends (the lower one: a node's HCA with its rail, or a switch's up-port; the
upper one: a switch port), the tier, the speed and a label. The label is the cable's upper end,
`switch[port]`: each switch port takes one cable, so the label is unique in the pod, a cable keeps
it for as long as it is not moved, and `podctl fabric check` names a wrong cable by the same text
(its first end). Rows come in the plan's order: nodes to leaves, then leaves to spines, then
spines to cores.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from podctl.core.model import HcaNames
from podctl.derive.topology import Cable, FabricPlan
from podctl.ibfabric.topofile import hca_name

# Every planned link is four lanes wide (podctl.ibfabric.topofile.topology_from_plan).
WIDTH = "4x"
COLUMNS = ("label", "fabric", "tier", "lower_device", "lower_port", "rail", "upper_device", "upper_port", "speed")


@dataclass(frozen=True)
class CableRow:
    label: str
    fabric: str
    tier: str  # node-leaf, leaf-spine, spine-core
    lower_device: str  # a node, or the switch whose up-port this is
    lower_port: str  # the node's HCA (mlx5_0), or the switch's port number
    rail: int | None  # node-leaf cables: the rail (1-based) the HCA serves
    upper_device: str  # a switch
    upper_port: int
    speed: str  # 4xNDR


def cable_label(cable: Cable) -> str:
    """The cable's label: its upper end as `podctl fabric check` writes it, `switch[port]`."""
    return f"{cable.upper.device}[{cable.upper.port}]"


def schedule(plan: FabricPlan, hca_names: HcaNames | None = None) -> list[CableRow]:
    """One row per cable of `plan`, HCAs named as the site names them."""
    rows = []
    for cable in plan.cables:
        node = cable.tier == "node-leaf"
        rows.append(
            CableRow(
                label=cable_label(cable),
                fabric=plan.fabric,
                tier=cable.tier,
                lower_device=cable.lower.device,
                lower_port=hca_name(cable.lower.device, cable.lower.port, hca_names) if node else str(cable.lower.port),
                rail=cable.lower.port if node else None,
                upper_device=cable.upper.device,
                upper_port=cable.upper.port,
                speed=f"{WIDTH}{cable.rate}",
            )
        )
    return rows


def as_csv(rows: Iterable[CableRow]) -> str:
    """The rows as CSV, a header line first; a cable with no rail has an empty rail field."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(["" if value is None else value for value in asdict(row).values()])
    return out.getvalue()


def as_records(rows: Iterable[CableRow]) -> list[dict[str, object]]:
    return [asdict(row) for row in rows]


@dataclass(frozen=True)
class CableChanges:
    """What a change of the site does to the cables: each cable is known by its lower end (a node's
    rail, or a switch's up-port), which is what stays put in the rack; a cable whose lower end lands
    on another switch port is moved."""

    added: tuple[CableRow, ...]
    removed: tuple[CableRow, ...]
    moved: tuple[tuple[CableRow, CableRow], ...]  # (as it is cabled now, as the new plan has it)

    def as_dict(self) -> dict[str, object]:
        return {
            "added": as_records(self.added),
            "removed": as_records(self.removed),
            "moved": [{"from": asdict(old), "to": asdict(new)} for old, new in self.moved],
        }


def _lower_end(row: CableRow) -> tuple[str, str, str]:
    return (row.fabric, row.lower_device, str(row.rail) if row.rail is not None else f"port {row.lower_port}")


def compare(old: Iterable[CableRow], new: Iterable[CableRow]) -> CableChanges:
    """The cables `new` adds, removes and moves against `old` (both schedules of every fabric)."""
    before = {_lower_end(row): row for row in old}
    after = {_lower_end(row): row for row in new}
    return CableChanges(
        added=tuple(row for key, row in after.items() if key not in before),
        removed=tuple(row for key, row in before.items() if key not in after),
        moved=tuple(
            (before[key], row)
            for key, row in after.items()
            if key in before
            and (before[key].upper_device, before[key].upper_port) != (row.upper_device, row.upper_port)
        ),
    )


def describe(row: CableRow) -> str:
    """A cable in a line: its lower end (node and HCA, or switch[port]) and its label."""
    lower = f"{row.lower_device} {row.lower_port}" if row.rail is not None else f"{row.lower_device}[{row.lower_port}]"
    return f"{lower} -> {row.label}"
