"""The naming layer: built-in and site patterns for node descriptions, and GUID anchors."""

from __future__ import annotations

import pytest

from podctl.ibfabric.formats import CablingError
from podctl.ibfabric.identity import (
    HcaClaim,
    Naming,
    NamingError,
    is_factory_default,
    node_anchors,
    parse_anchors,
    parse_guid,
    read_anchors,
    write_anchors,
)

NAMING = Naming()


@pytest.mark.parametrize(
    ("desc", "name"),
    [
        ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", "A09-P1-IBLEAF-04-04"),
        ("MF0;switch-de779e:SX6012/U1", "switch-de779e"),
        ("MF0;d32-03-1:MQM8700/U1", "d32-03-1"),
        ("ib-leaf-su01-r3", "ib-leaf-su01-r3"),  # podctl's own names
        (" 5FB0406-spine-IB02 ", "5FB0406-spine-IB02"),  # ibnetdiscover -p keeps the spaces
        ("Quantum Mellanox Technologies", "Quantum Mellanox Technologies"),  # no planned switch has that name
        ("", None),
    ],
)
def test_switch_names(desc, name):
    assert NAMING.switch_name(desc) == name


@pytest.mark.parametrize(
    ("desc", "claim"),
    [
        ("a06-p1-dgx-02-c01 HCA-6", HcaClaim("a06-p1-dgx-02-c01", number=6)),
        ("CPUGL12 HCA-6", HcaClaim("CPUGL12", number=6)),
        ("a08-p1-dgx-04-c01 mlx5_5", HcaClaim("a08-p1-dgx-04-c01", "mlx5_5")),
        ("node02 ibp24s0", HcaClaim("node02", "ibp24s0")),
        ("MT4129 ConnectX7   Mellanox Technologies", None),
        ("Mellanox Technologies Aggregation Node", None),
        ("MT23108 InfiniHost", None),
        ("just-a-host", None),
        ("x" * 300 + " mlx5_0", None),  # longer than any node description
    ],
)
def test_hca_claims(desc, claim):
    assert NAMING.hca_claim(desc) == claim


def test_factory_defaults():
    assert all(
        map(
            is_factory_default,
            [
                "Quantum-2 Mellanox Technologies",
                "SwitchIB Mellanox Technologies",
                "MT43132 Mellanox Technologies",
                "ISR9024 Voltaire",
                "MT4129 ConnectX7",
            ],
        )
    )
    assert not any(map(is_factory_default, ["dgx005 HCA-1", "MF0;sw1:MQM9700/U1", "MTX001 mlx5_0"]))


def test_site_patterns_come_first_and_name_their_groups():
    naming = Naming(
        switch=[r"(?P<name>leaf\d+)\.ib"], hca=[r"(?P<host>\w+)-port(?P<n>\d+)", r"(?P<host>\w+)/(?P<hca>\w+)"]
    )
    assert naming.switch_name("leaf7.ib") == "leaf7"
    assert naming.switch_name("MF0;x:y/U1") == "x"  # the built-in ones still apply
    assert naming.hca_claim("gpu1-port3") == HcaClaim("gpu1", number=3)
    assert naming.hca_claim("gpu1/mlx5_4") == HcaClaim("gpu1", "mlx5_4")
    assert naming.hca_claim("gpu1 HCA-2") == HcaClaim("gpu1", number=2)
    assert Naming(switch=("a(?P<name>b)",)) == Naming(switch=["a(?P<name>b)"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"switch": ["(?P<name>unclosed"]},
            r"naming switch pattern 1 '\(\?P<name>unclosed': not a regular expression: "
            r"missing \), unterminated subpattern at position 0",
        ),
        (
            {"switch": [r"MF0;(\w+)"]},
            r"naming switch pattern 1 .*: needs the named group\(s\) name, e.g. \(\?P<name>...\)",
        ),
        ({"hca": [r"(?P<hca>\w+)"]}, r"naming hca pattern 1 .*: needs the named group\(s\) host"),
        ({"hca": [r"(?P<host>\w+) (?P<rail>\d)"]}, r"unknown named group\(s\) rail; known: hca, host, n"),
        (
            {"hca": [r"(?P<host>\w+)", r"(?P<host>\w+) (?P<hca>\w+) (?P<n>\d)"]},
            r"naming hca pattern 2 .*: give \(\?P<hca>...\) "
            r"or \(\?P<n>...\), not both",
        ),
    ],
)
def test_bad_site_patterns_are_clear_errors(kwargs, message):
    with pytest.raises(NamingError, match=message):
        Naming(**kwargs)


@pytest.mark.parametrize(
    ("text", "guid"),
    [
        ("0xe09d7303007a4bd8", 0xE09D7303007A4BD8),
        ("2c903003421b2", 0x2C903003421B2),  # without leading zeros, as ibnetdiscover prints port GUIDs
        ("e09d:7303:007a:4bd8", 0xE09D7303007A4BD8),  # sysfs node_guid
        ("fe80:0000:0000:0000:e09d:7303:007a:4bd8", 0xE09D7303007A4BD8),  # sysfs ports/1/gids/0
        ("fe80::e09d:7303:7a:4bd8", 0xE09D7303007A4BD8),
        ("0x", None),
        ("0x1234567890abcdef0", None),
        ("nothex", None),
        ("1:2:3", None),
    ],
)
def test_guid_forms(text, guid):
    assert parse_guid(text) == guid


def test_anchors_file_round_trip(tmp_path):
    anchors = {("dgx005", 3): 0xE09D7303007A4BD8, ("dgx005", 1): 0x1, ("dgx010", 8): 0xB83FD20300DA1138}
    text = write_anchors(anchors)
    assert text.startswith("# podctl anchors") and "dgx005 1 0x0000000000000001\n" in text
    path = tmp_path / "anchors.txt"
    path.write_text(text + "dgx011 2 fe80:0000:0000:0000:e09d:7303:007a:4bd9  # read from gids/0\n")
    assert read_anchors(str(path)) == {**anchors, ("dgx011", 2): 0xE09D7303007A4BD9}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dgx005 3\n", r"^a.txt:1: expected 'HOST RAIL GUID', found 2 field\(s\): 'dgx005 3'"),
        ("# c\ndgx005 three 0x1\n", r"^a.txt:2: rail 'three' is not a rail number"),
        ("dgx005 0 0x1\n", r"^a.txt:1: rail '0' is not a rail number"),
        ("dgx005 3 0xzz\n", r"^a.txt:1: '0xzz' is not a GUID"),
        ("dgx005 3 0x1\n\ndgx005 3 0x2\n", r"^a.txt:3: dgx005 rail 3 again \(first at line 1\)"),
        ("dgx005 3 0x1\ndgx006 3 1\n", r"^a.txt:2: GUID 0x0000000000000001 is also dgx005 rail 3 \(line 1\)"),
    ],
)
def test_bad_anchor_lines_name_file_and_line(text, message):
    with pytest.raises(CablingError, match=message):
        parse_anchors(text, "a.txt")


def test_an_absent_anchors_file_says_what_to_write(tmp_path):
    with pytest.raises(CablingError, match="absent: no such file; write one 'HOST RAIL GUID' line per HCA"):
        read_anchors(str(tmp_path / "absent"))


def test_what_a_node_reads_becomes_its_anchors():
    read = {"mlx5_0": parse_guid("fe80:0000:0000:0000:e09d:7303:007a:4bd8"), "mlx5_4": 0x2, "mlx5_1": 0x3}
    assert node_anchors("dgx005", ("mlx5_0", "mlx5_3", "mlx5_4"), read) == {
        ("dgx005", 1): 0xE09D7303007A4BD8,
        ("dgx005", 3): 0x2,
    }
