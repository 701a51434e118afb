"""Cabling findings as certification runs: each laid at the node or switch a technician would fix."""

from __future__ import annotations

import pytest

from podctl.ibfabric import corrupt
from podctl.ibfabric.formats import CablingError, End, Link, write_iblinkinfo, write_ibnetdiscover
from podctl.validate.cabling import cabling_runs
from podctl.validate.judge import judge
from podctl.validate.report import write_report

HCA = End("dgx005 mlx5_4", 1)  # rail 3 of a DGX H100
LEAF = End("ib-leaf-su01-r3", 5)


def _extra_link(topo):
    out = corrupt.set_rate(topo, HCA)  # a copy
    out.links.append(Link(End("ib-leaf-su04-r5", 32), End("ib-leaf-su04-r6", 32), "4x", "NDR"))
    return out


def _wrong_hca(topo):
    """dgx005's rail-1 leaf port cabled to its storage HCA (mlx5_1) instead of mlx5_0."""
    dropped = corrupt.drop_cable(topo, End("dgx005 mlx5_0", 1))
    return corrupt.add_device(dropped, "dgx005 mlx5_1", "ca", End("ib-leaf-su01-r1", 5))


# damage -> {(scope, node): messages of its findings}
CASES = {
    "drop an HCA cable": (
        lambda t: corrupt.drop_cable(t, HCA),
        {("node", "dgx005"): ["MISSING ib-leaf-su01-r3[5] <-> dgx005 mlx5_4"]},
    ),
    "swap two HCA cables on a leaf": (
        lambda t: corrupt.swap_ports(t, LEAF, End("ib-leaf-su01-r3", 6)),
        {
            ("node", "dgx005"): ["WRONG-PORT ib-leaf-su01-r3[5] <-> dgx005 mlx5_4: found at ib-leaf-su01-r3[6]"],
            ("node", "dgx006"): ["WRONG-PORT ib-leaf-su01-r3[6] <-> dgx006 mlx5_4: found at ib-leaf-su01-r3[5]"],
        },
    ),
    "move an HCA cable to another rail's leaf": (
        lambda t: corrupt.move_cable(t, LEAF, End("ib-leaf-su04-r4", 32)),
        {("node", "dgx005"): ["WRONG-SWITCH ib-leaf-su01-r3[5] <-> dgx005 mlx5_4: found at ib-leaf-su04-r4[32]"]},
    ),
    "an HCA link at 2x": (
        lambda t: corrupt.set_rate(t, HCA, width="2x"),
        {("node", "dgx005"): ["WRONG-WIDTH ib-leaf-su01-r3[5] <-> dgx005 mlx5_4: expected 4xNDR, found 2xNDR"]},
    ),
    "a node cabled on the wrong HCA": (
        _wrong_hca,
        {
            ("node", "dgx005"): [
                "MISSING ib-leaf-su01-r1[5] <-> dgx005 mlx5_0",
                "UNEXPECTED-DEVICE ib-leaf-su01-r1[5] <-> dgx005 mlx5_1",
            ]
        },
    ),
    "swap two uplinks at a spine": (
        lambda t: corrupt.swap_ports(t, End("ib-spine-01", 1), End("ib-spine-01", 2)),
        {
            ("fabric", "ib-leaf-su01-r1"): [
                "WRONG-PORT ib-spine-01[1] <-> ib-leaf-su01-r1[33]: found at ib-spine-01[2]",
                "WRONG-PORT ib-spine-01[2] <-> ib-leaf-su01-r1[34]: found at ib-spine-01[1]",
            ]
        },
    ),
    "a leaf-spine link at HDR": (
        lambda t: corrupt.set_rate(t, End("ib-leaf-su02-r8", 40), speed="HDR"),
        {
            ("fabric", "ib-leaf-su02-r8"): [
                "WRONG-SPEED ib-spine-04[32] <-> ib-leaf-su02-r8[40]: expected 4xNDR, found 4xHDR"
            ]
        },
    ),
    "an unknown host on a free leaf port": (
        lambda t: corrupt.add_device(t, "rogue01 mlx5_0", "ca", End("ib-leaf-su04-r1", 32)),
        {("fabric", "ib-leaf-su04-r1"): ["UNEXPECTED-DEVICE ib-leaf-su04-r1[32] <-> rogue01 mlx5_0"]},
    ),
    "an unknown switch on a free leaf port": (
        lambda t: corrupt.add_device(t, "lab-switch", "switch", End("ib-leaf-su04-r2", 32)),
        {("fabric", "ib-leaf-su04-r2"): ["UNEXPECTED-DEVICE ib-leaf-su04-r2[32] <-> lab-switch[1]"]},
    ),
    "a cable between two free leaf ports": (
        _extra_link,
        {("fabric", "ib-leaf-su04-r5"): ["UNEXPECTED-LINK ib-leaf-su04-r5[32] <-> ib-leaf-su04-r6[32]"]},
    ),
}


def _write(tmp_path, topo, fmt="ibnetdiscover"):
    path = tmp_path / f"{fmt}.txt"
    path.write_text(write_ibnetdiscover(topo) if fmt == "ibnetdiscover" else write_iblinkinfo(topo))
    return path


@pytest.mark.parametrize("site", ["sim", "h100-127", "a100-140"])
def test_a_clean_fabric_is_one_passing_fabric_run(site, tmp_path, planned, loaded):
    _, _, plan, topo = planned(site)
    (run,) = cabling_runs(loaded(site), _write(tmp_path, topo), _write(tmp_path, topo, "iblinkinfo"))
    assert (run.check, run.scope, run.node, run.status) == ("cabling", "fabric", "fabric", "pass")
    assert run.envelope["details"]["cables_planned"] == len(plan.cables)
    assert list(run.envelope["details"]["links_found"].values()) == [len(plan.cables)] * 2
    (finding,) = run.envelope["findings"]
    assert finding["severity"] == "info" and finding["message"].endswith("matches the plan")


def test_no_tool_output_no_runs(loaded):
    assert cabling_runs(loaded("sim"), None, None) == []


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "iblinkinfo"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_corruption_fails_the_element_at_fault(case, fmt, tmp_path, planned, loaded):
    _, _, _, topo = planned("h100-127")
    damage, expected = CASES[case]
    path = _write(tmp_path, damage(topo), fmt)
    runs = cabling_runs(loaded("h100-127"), *((path, None) if fmt == "ibnetdiscover" else (None, path)))
    got = {(r.scope, r.node): sorted(f["message"] for f in r.envelope["findings"]) for r in runs}
    assert got == expected
    for run in runs:
        assert run.status == "fail" and run.envelope["check"] == "cabling" and run.envelope["host"] == run.node
        assert all(f["severity"] == "error" for f in run.envelope["findings"])
        assert len(run.envelope["details"]["cables"]) == len(run.envelope["findings"])


def test_a_cable_both_tools_show_is_one_row_seen_in_both(tmp_path, planned, loaded):
    _, _, _, topo = planned("h100-127")
    damaged = corrupt.drop_cable(topo, HCA)
    (run,) = cabling_runs(loaded("h100-127"), _write(tmp_path, damaged), _write(tmp_path, damaged, "iblinkinfo"))
    (cable,) = run.envelope["details"]["cables"]
    assert (cable["kind"], cable["end_a"], cable["end_b"]) == ("missing", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4")
    assert cable["sources"] == [str(tmp_path / "ibnetdiscover.txt"), str(tmp_path / "iblinkinfo.txt")]
    assert run.envelope["findings"] == [
        {"severity": "error", "message": "MISSING ib-leaf-su01-r3[5] <-> dgx005 mlx5_4", "device": "mlx5_4"}
    ]


def test_unreadable_or_unparsable_output_is_a_user_error_with_file_and_line(tmp_path, loaded):
    with pytest.raises(CablingError, match="absent: no such file"):
        cabling_runs(loaded("sim"), tmp_path / "absent", None)
    bad = tmp_path / "bad"
    bad.write_text("Switch: 0xaa leaf:\n  1 1[  ] ==( garbage\n")
    with pytest.raises(CablingError, match=f"{bad}:2: not iblinkinfo output"):
        cabling_runs(loaded("sim"), None, bad)


def test_cabling_faults_fail_certification_and_show_in_the_report(tmp_path, planned, loaded):
    _, _, _, topo = planned("h100-127")
    damaged = corrupt.set_rate(corrupt.drop_cable(topo, HCA), End("ib-leaf-su02-r8", 40), speed="HDR")
    runs = cabling_runs(loaded("h100-127"), _write(tmp_path, damaged), None)
    cert = judge("pod", {"dgx005": [], "dgx006": []}, runs)
    assert not cert.certified
    assert cert.failures == {
        "dgx005": ["cabling: MISSING ib-leaf-su01-r3[5] <-> dgx005 mlx5_4"],
        "ib-leaf-su02-r8": [
            "cabling: WRONG-SPEED ib-spine-04[32] <-> ib-leaf-su02-r8[40]: expected 4xNDR, found 4xHDR"
        ],
    }
    paths = write_report(tmp_path / "report", cert, runs, {"started": "now", "podctl": "0", "suites": ["cabling"]})
    page = paths["html"].read_text()
    cabling = page[page.index("<h2>Cabling</h2>") :]
    assert "2040 cables planned" in cabling
    assert "<td class=fail>dgx005</td><td>ib-leaf-su01-r3[5]</td><td>dgx005 mlx5_4</td><td>missing</td>" in cabling
    assert (
        "<td class=fail>ib-leaf-su02-r8 (switch)</td><td>ib-spine-04[32]</td><td>ib-leaf-su02-r8[40]</td>"
        "<td>wrong-speed: expected 4xNDR, found 4xHDR</td>" in cabling
    )
    assert 'classname="cabling.fabric" name="ib-leaf-su02-r8"' in paths["junit"].read_text()


def test_a_clean_fabric_certifies_and_says_so_in_the_report(tmp_path, planned, loaded):
    _, _, _, topo = planned("sim")
    runs = cabling_runs(loaded("sim"), _write(tmp_path, topo), None)
    cert = judge("sim", {"node01": []}, runs)
    assert cert.certified
    page = write_report(tmp_path / "report", cert, runs, {"suites": []})["html"].read_text()
    assert "Every cable matches the plan." in page[page.index("<h2>Cabling</h2>") :]
