"""The cable schedule (`podctl plan SITE --cables`): one row per planned cable, labels the fabric check uses."""

from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner

from podctl.cli import main
from podctl.derive.facts import Facts, hca_names
from podctl.ibfabric import corrupt
from podctl.ibfabric.check import check_cabling
from podctl.ibfabric.formats import End
from podctl.ibfabric.schedule import COLUMNS, schedule
from tests.helpers.repo import REPO

A100 = REPO / "inventory" / "examples" / "dgx-a100-superpod-140.yaml"


def _cables(*args: str) -> str:
    result = CliRunner().invoke(main, ["plan", str(A100), "--cables", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_140_node_schedule_has_a_row_per_planned_cable_each_with_its_own_label(loaded) -> None:
    site = loaded("a100-140")
    plans = Facts(site).plans
    total = sum(len(plan.cables) for plan in plans.values())
    rows = list(csv.DictReader(io.StringIO(_cables("-o", "csv"))))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == total == 3920
    assert len({row["label"] for row in rows}) == total
    # A node's cable: the node's HCA of that rail, as the profile names it, to the leaf of that rail.
    first = rows[0]
    assert (first["fabric"], first["tier"], first["lower_device"], first["rail"]) == (
        "compute",
        "node-leaf",
        "dgx001",
        "1",
    )
    assert first["lower_port"] == hca_names(site, "compute")["dgx001"][0]
    assert first["label"] == f"{first['upper_device']}[{first['upper_port']}]" and first["speed"] == "4xHDR"
    # A switch's cable: the lower switch's up-port, and no rail.
    spine = next(row for row in rows if row["tier"] == "leaf-spine")
    assert spine["rail"] == "" and spine["lower_port"].isdigit()
    assert {row["fabric"] for row in rows} == set(plans)
    records = json.loads(_cables("-o", "json"))["cables"]
    assert [r["label"] for r in records] == [row["label"] for row in rows]
    assert _cables().splitlines()[-1] == f"{total} cable(s) in {len(plans)} fabric(s)"


def test_csv_is_only_the_schedules_form() -> None:
    result = CliRunner().invoke(main, ["plan", str(A100), "-o", "csv"])
    assert result.exit_code == 2 and "add --cables" in result.output


def test_the_fabric_check_names_a_wrong_cable_by_its_label_in_the_schedule(planned, names) -> None:
    _, _, plan, topo = planned("h100-127")
    rows = {row.label: row for row in schedule(plan, names("h100-127"))}
    damaged = corrupt.move_cable(
        corrupt.drop_cable(topo, End("dgx010 mlx5_0", 1)), End("ib-leaf-su01-r3", 5), End("ib-leaf-su04-r4", 32)
    )
    report = check_cabling(plan, damaged, hca_names=names("h100-127"))
    labelled = {f.label: f for f in report.findings}
    assert set(labelled) == {"ib-leaf-su01-r1[10]", "ib-leaf-su01-r3[5]"}
    for label, finding in labelled.items():
        row = rows[label]
        assert finding.end_b == f"{row.lower_device} {row.lower_port}", (finding, row)
        assert finding.as_dict()["label"] == label
