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


H100 = REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"


def _resized(tmp_path, site, old: str, new: str):  # type: ignore[no-untyped-def]
    text = site.read_text()
    assert text.count(old) == 4, old  # the group, both fabrics, the partition
    path = tmp_path / f"{site.stem}-{new}.yaml"
    path.write_text(text.replace(old, new))
    return path


def _rows(path) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(main, ["plan", str(path), "--cables", "-o", "csv"])
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.output)))


def _against(path, old) -> dict:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(main, ["plan", str(path), "--against", str(old), "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_four_more_a100_nodes_add_exactly_the_new_cables_and_move_none(tmp_path) -> None:
    grown = _resized(tmp_path, A100, "dgx[001-140]", "dgx[001-144]")
    before, after = _rows(A100), _rows(grown)
    changes = _against(grown, A100)
    new_labels = {row["label"] for row in after} - {row["label"] for row in before}
    assert {row["label"] for row in changes["added"]} == new_labels
    assert len(changes["added"]) == len(after) - len(before)
    # Four nodes' 8 compute and 2 storage rails, the rest the new unit's leaves' uplinks.
    assert sum(row["tier"] == "node-leaf" for row in changes["added"]) == 40
    assert changes["moved"] == [] and changes["removed"] == []
    text = CliRunner().invoke(main, ["plan", str(grown), "--against", str(A100)]).output
    assert text.splitlines()[-1] == f"{len(new_labels)} cable(s) added, 0 removed, 0 moved"


def test_four_fewer_nodes_free_their_ports_and_move_nothing_else(tmp_path) -> None:
    shrunk = _resized(tmp_path, A100, "dgx[001-140]", "dgx[001-136]")
    changes = _against(shrunk, A100)
    assert changes["added"] == [] and changes["moved"] == []
    assert {row["lower_device"] for row in changes["removed"]} == {f"dgx{n:03d}" for n in range(137, 141)}
    assert len(changes["removed"]) == 40


def test_a_growth_that_moves_cables_names_each_and_check_against_fails_under_strict(tmp_path) -> None:
    # The 127-node H100 example has a unit with a free slot: four more nodes make a fifth unit,
    # and today's plan re-spreads the leaves' uplinks over the spines (issue 45's finding).
    grown = _resized(tmp_path, H100, "dgx[001-127]", "dgx[001-131]")
    changes = _against(grown, H100)
    assert changes["moved"], "the H100 example's growth moved no cable"
    assert all(move["from"]["tier"] != "node-leaf" for move in changes["moved"])
    first = changes["moved"][0]
    result = CliRunner().invoke(main, ["check", str(grown), "--against", str(H100), "--strict"])
    assert result.exit_code == 1, result.output
    assert (
        f"warning: the change moves a cable that exists: {first['from']['lower_device']}[{first['from']['lower_port']}]"
        f" -> {first['from']['label']}, to {first['to']['label']}"
    ) in result.output
    assert result.output.count("moves a cable that exists") == len(changes["moved"])
    assert CliRunner().invoke(main, ["check", str(grown), "--against", str(H100)]).exit_code == 0
