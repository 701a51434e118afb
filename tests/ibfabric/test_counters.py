"""Port counters from perfquery, ibqueryerrors and sysfs: each corpus sample, figures checked by hand."""

from __future__ import annotations

import json
import shutil

import pytest

from podctl.ibfabric.counters import (
    ERROR_COUNTERS,
    parse_ibqueryerrors,
    parse_perfquery,
    read_ibqueryerrors,
    read_perfquery,
    read_sysfs_counters,
)
from podctl.ibfabric.formats import CablingError
from tests.helpers.repo import REPO

DATA = REPO / "tests" / "data" / "fabric"
EXPECTED = json.loads((DATA / "expected.json").read_text())
NAMED = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
)


def test_the_error_counters_are_the_iba_ones():
    assert set(NAMED) < set(ERROR_COUNTERS) and "PortXmitWait" not in ERROR_COUNTERS


@pytest.mark.parametrize(
    "name",
    [
        "perfquery-x-switch-port-errors-osc.txt",
        "perfquery-x-edr-switch-2ports-osc.txt",
        "perfquery-E-rcv-error-details-edr-osc.txt",
    ],
)
def test_perfquery_files(name):
    expected = EXPECTED[name]
    counters = read_perfquery(str(DATA / name))
    assert len(counters.ports) == expected["records"] and not counters.warnings
    nonzero = {}
    for port in counters.ports:
        nonzero.update(port.nonzero_errors)
    assert nonzero == expected["nonzero_error_counters"]


def test_perfquery_extended_record_read_whole():
    name = "perfquery-x-switch-port-errors-osc.txt"
    (port,) = read_perfquery(str(DATA / name), node="0x506b4b03005c2740").ports
    assert (port.node, port.port, port.source) == ("0x506b4b03005c2740", 1, f"{DATA / name}:1")
    assert (
        len(port.counters) == 25 and port.counters["CounterSelect"] == 0 and port.counters["PortXmitWait"] == 41864608
    )
    assert port.counters["PortXmitData"] == 178791657177235
    assert port.errors == dict.fromkeys(NAMED, 0) | {
        "LinkDownedCounter": 1,
        "PortXmitDiscards": 20046,
        "PortRcvSwitchRelayErrors": 7,
    }
    two = read_perfquery(str(DATA / "perfquery-x-edr-switch-2ports-osc.txt")).ports
    assert [(p.node, p.port, p.counters["PortXmitWait"]) for p in two] == [
        ("lid 1719", 1, 22730501),
        ("lid 1719", 2, 36510964),
    ]
    (details,) = read_perfquery(str(DATA / "perfquery-E-rcv-error-details-edr-osc.txt")).ports
    assert details.errors == dict.fromkeys(
        [
            "PortLocalPhysicalErrors",
            "PortMalformedPktErrors",
            "PortBufferOverrunErrors",
            "PortDLIDMappingErrors",
            "PortVLMappingErrors",
            "PortLoopingErrors",
        ],
        0,
    )


def test_ibqueryerrors_as_mailed_is_refused_and_reads_once_unquoted():
    name = "ibqueryerrors-fdr-sx6036-mailquoted.txt"
    text = (DATA / name).read_text()
    with pytest.raises(CablingError, match=rf"{name}:1: not ibqueryerrors output: .*remove the mail quoting first"):
        read_ibqueryerrors(str(DATA / name))
    expected = EXPECTED[name]
    counters = parse_ibqueryerrors(
        "\n".join(line.removeprefix("> ").removeprefix(">") for line in text.splitlines()), name
    )
    assert counters.summary == expected["summary"]
    assert len(counters.ports) == expected["guid_port_lines"] == 15
    assert sum(p.port is None for p in counters.ports) == expected["port_all_lines"]
    assert len({p.desc for p in counters.ports}) == expected["nodes_with_errors"]
    switch = {p.port: p.counters for p in counters.ports if p.node == "0x0002c903006e29b0"}
    assert switch[None] == {
        "LinkErrorRecoveryCounter": 15,
        "LinkDownedCounter": 48,
        "PortRcvSwitchRelayErrors": 2461,
        "PortXmitDiscards": 15854,
        "VL15Dropped": 5,
        "PortXmitWait": 4294967295,
    }
    assert switch[5] == {
        "SymbolErrorCounter": 65535,
        "LinkErrorRecoveryCounter": 8,
        "LinkDownedCounter": 2,
        "PortRcvSwitchRelayErrors": 149,
        "PortXmitDiscards": 649,
        "PortXmitWait": 84704351,
    }
    assert switch[0] == {"PortXmitWait": 76959324} and set(switch) == {None, *range(9)}
    hca = [p for p in counters.ports if p.desc == "dl380g7 mlx4_0"]
    assert [(p.node, p.port, p.nonzero_errors) for p in hca] == [
        ("0x7cfe900300179b31", 1, {"VL15Dropped": 14}),
        ("0x7cfe900300179b32", 2, {}),
    ]
    assert counters.nonzero_errors()[("0x0002c903006e29b0", 7)] == {
        "SymbolErrorCounter": 65535,
        "LinkErrorRecoveryCounter": 7,
        "LinkDownedCounter": 2,
        "PortRcvSwitchRelayErrors": 1,
    }


def test_sysfs_counters_of_an_h100_node():
    name = "sysfs-class-infiniband-h100-gpud/"
    counters = read_sysfs_counters(str(DATA / name))
    expected = EXPECTED[name]
    assert len(counters.ports) == expected["devices"] == 9
    assert all(len(p.counters) == 21 and p.port == 1 and p.guid is None for p in counters.ports)
    assert {p.node: p.counters["PortRcvErrors"] for p in counters.ports} == {
        d: expected["nonzero_error_counters"]["*/ports/1/counters/port_rcv_errors"]
        for d in ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_bond_0")
    }
    assert counters.nonzero_errors()[("mlx5_1", 1)]["LinkDownedCounter"] == 255
    # expected.json lists two non-zero counters; the files hold two more, on every device (checked with grep):
    # excessive_buffer_overrun_errors 15, and port_rcv_switch_relay_errors 1 (2 on mlx5_1).
    assert {k: v["ExcessiveBufferOverrunErrors"] for k, v in counters.nonzero_errors().items()} == {
        (p.node, 1): 15 for p in counters.ports
    }
    assert {k[0]: v["PortRcvSwitchRelayErrors"] for k, v in counters.nonzero_errors().items()} == {
        p.node: 2 if p.node == "mlx5_1" else 1 for p in counters.ports
    }
    assert {k: set(v) for k, v in counters.nonzero_errors().items()} == {
        (p.node, 1): {"PortRcvErrors", "ExcessiveBufferOverrunErrors", "PortRcvSwitchRelayErrors"}
        | ({"LinkDownedCounter"} if p.node == "mlx5_1" else set())
        for p in counters.ports
    }


def test_sysfs_node_guid_and_bad_files(tmp_path):
    root = tmp_path / "infiniband"
    shutil.copytree(DATA / "sysfs-class-infiniband-h100-gpud" / "mlx5_0", root / "mlx5_0")
    (root / "mlx5_0" / "node_guid").write_text("e09d:7303:007a:4bd8\n")
    (port,) = read_sysfs_counters(str(root)).ports
    assert port.guid == 0xE09D7303007A4BD8
    bad = root / "mlx5_0" / "ports" / "1" / "counters" / "symbol_error"
    bad.write_text("N/A\n")
    with pytest.raises(CablingError, match=rf"{bad}:1: 'N/A' is not a counter value"):
        read_sysfs_counters(str(root))
    with pytest.raises(CablingError, match="no such folder"):
        read_sysfs_counters(str(tmp_path / "absent"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SymbolErrorCounter:.......0\n", r"^pq:1: a counter before any '# Port counters"),
        (
            "# Port counters: Lid 3 port 1\nSymbolErrorCounter: lots\n",
            r"^pq:2: not perfquery output: 'SymbolErrorCounter: lots'",
        ),
    ],
)
def test_bad_perfquery_lines_name_file_and_line(text, message):
    with pytest.raises(CablingError, match=message):
        parse_perfquery(text, "pq")


def test_stderr_in_perfquery_and_ibqueryerrors_is_skipped_with_a_warning():
    counters = parse_perfquery(
        "ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (Lid 3)\n"
        "# Port counters: Lid 3 port 255 (CapMask: 0x1400)\nLinkDownedCounter:........2\n",
        "pq",
    )
    assert counters.warnings[0].startswith("pq:1: skipped a message the tools write to stderr")
    assert [(p.node, p.port, p.errors) for p in counters.ports] == [("lid 3", None, {"LinkDownedCounter": 2})]
    # A port line pasted without its "Errors for" header (as in tests/data/ibcounters/ibqueryerrors-ucx-1.txt)
    # still names its port by GUID.
    (alone,) = parse_ibqueryerrors("   GUID 0x1 port 1: [LinkDownedCounter == 1]\n", "q").ports
    assert (alone.node, alone.port, alone.desc, dict(alone.counters)) == (
        "0x0000000000000001",
        1,
        "",
        {"LinkDownedCounter": 1},
    )
