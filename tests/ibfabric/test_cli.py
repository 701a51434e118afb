"""`podctl fabric check`: exit 0 clean, 1 findings, 2 usage/config errors; text and JSON."""

from __future__ import annotations

import json

from click.testing import CliRunner

from podctl.cli import main
from podctl.ibfabric import corrupt
from podctl.ibfabric.formats import End, write_iblinkinfo, write_ibnetdiscover


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_clean_fabric_exits_0(planned, tmp_path):
    site, _, _, topo = planned("h100-127")
    (tmp_path / "topo").write_text(write_ibnetdiscover(topo))
    (tmp_path / "links").write_text(write_iblinkinfo(topo))
    result = invoke("fabric", "check", site, "--ibnetdiscover", tmp_path / "topo", "--iblinkinfo", tmp_path / "links")
    assert result.exit_code == 0, result.output
    assert result.output.count("2040 cables planned, 2040 links found; matches the plan") == 2


def test_findings_exit_1_and_json_lists_them(planned, tmp_path):
    site, _, _, topo = planned("h100-127")
    (tmp_path / "topo").write_text(write_ibnetdiscover(corrupt.drop_cable(topo, End("dgx005 mlx5_4", 1))))
    text = invoke("fabric", "check", site, "--ibnetdiscover", tmp_path / "topo")
    assert text.exit_code == 1
    assert text.output.splitlines()[0] == "MISSING            ib-leaf-su01-r3[5] <-> dgx005 mlx5_4"
    result = invoke("fabric", "check", site, "--ibnetdiscover", tmp_path / "topo", "-o", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["ok"] is False
    (report,) = data["reports"]
    assert report["counts"] == {"missing": 1}
    assert report["findings"] == [
        {
            "kind": "missing",
            "label": "ib-leaf-su01-r3[5]",  # the cable's label in `podctl plan --cables`
            "end_a": "ib-leaf-su01-r3[5]",
            "end_b": "dgx005 mlx5_4",
            "expected": "ib-leaf-su01-r3[5]",
            "found": None,
        }
    ]


def test_usage_and_input_errors_exit_2(planned, tmp_path):
    site = planned("sim")[0]
    result = invoke("fabric", "check", site)
    assert result.exit_code == 2 and "--ibnetdiscover FILE" in result.output
    result = invoke("fabric", "check", site, "--ibnetdiscover", tmp_path / "absent")
    assert result.exit_code == 2 and "absent: no such file" in result.output
    bad = tmp_path / "bad"
    bad.write_text("Switch: 0xaa leaf:\n  1 1[  ] ==( garbage\n")
    result = invoke("fabric", "check", site, "--iblinkinfo", bad)
    assert result.exit_code == 2 and f"{bad}:2: not iblinkinfo output" in result.output
    result = invoke("fabric", "check", site, "--iblinkinfo", bad, "--fabric", "nope")
    assert result.exit_code == 2 and "no fabric 'nope'" in result.output


def test_topology_command_prints_what_check_accepts(planned, tmp_path):
    site = planned("sim")[0]
    result = invoke("fabric", "topology", site, "--format", "iblinkinfo")
    assert result.exit_code == 0 and result.output.startswith("Switch: 0x")
    (tmp_path / "links").write_text(result.output)
    assert invoke("fabric", "check", site, "--iblinkinfo", tmp_path / "links").exit_code == 0


def test_schedule_lists_rounds_that_cover_the_pod(planned):
    site = planned("h100-127")[0]
    result = invoke("fabric", "schedule", site, "-o", "json")
    assert result.exit_code == 0
    rounds = {r["name"]: r["tests"] for r in json.loads(result.output)}
    assert [len(t["nodes"]) for t in rounds["all-nodes"]] == [127]
    assert sum(len(t["nodes"]) for t in rounds["pairs-cross-1"]) == 126
    assert all(t["per_rail"] for t in rounds["pairs-cross-1"])


def test_counters_usage_and_input_errors_exit_2(planned, tmp_path):
    site = planned("h100-127")[0]
    result = invoke("fabric", "counters", site)
    assert result.exit_code == 2 and "--ibqueryerrors FILE and/or --perfquery FILE" in result.output
    result = invoke("fabric", "counters", site, "--ibqueryerrors", tmp_path / "absent")
    assert result.exit_code == 2 and "absent: no such file" in result.output
    bad = tmp_path / "bad"
    bad.write_text('Errors for 0x1 "leaf"\n   GUID 0x1 port 1: [SymbolErrorCounter = 5]\n')
    result = invoke("fabric", "counters", site, "--ibqueryerrors", bad)
    assert result.exit_code == 2 and f"{bad}:2: not ibqueryerrors output" in result.output
    result = invoke("fabric", "counters", site, "--ibqueryerrors", bad, "--anchors", bad)
    assert result.exit_code == 2 and "give --ibnetdiscover too" in result.output


def test_counters_name_the_cable_and_say_when_a_port_is_named_by_lid_alone(planned, tmp_path):
    site = planned("h100-127")[0]
    report = tmp_path / "qe"
    report.write_text(
        'Errors for 0xb83fd2000000aaaa "ib-leaf-su01-r3"\n'
        "   GUID 0xb83fd2000000aaaa port 5: [SymbolErrorCounter == 11] [LinkDownedCounter == 0]\n"
        "   GUID 0xb83fd2000000aaaa port 6: [SymbolErrorCounter == 10]\n"
    )
    result = invoke("fabric", "counters", site, "--ibqueryerrors", report)
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == (
        "COUNTERS  ib-leaf-su01-r3[5] <-> dgx005 mlx5_4 (node dgx005, rail 3): "
        "SymbolErrorCounter 11 (threshold 10) at ib-leaf-su01-r3[5]"
    )
    perf = tmp_path / "pq"
    perf.write_text("# Port counters: Lid 7 port 5 (CapMask: 0x1300)\nPortSelect:......5\nLinkDownedCounter:....2\n")
    result = invoke("fabric", "counters", site, "--perfquery", perf)
    assert (
        result.exit_code == 1
        and "UNPLACED  lid 7 port 5" in result.output
        and "give the fabric's ibnetdiscover" in result.output
    )
    clean = tmp_path / "clean"
    clean.write_text(
        "\n## Summary: 3 nodes checked, 0 bad nodes found\n##          9 ports checked, 0 ports have errors beyond threshold\n"
    )
    result = invoke("fabric", "counters", site, "--ibqueryerrors", clean, "-o", "json")
    assert result.exit_code == 0 and json.loads(result.output)["ok"] is True
