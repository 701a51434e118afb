"""ibnetdiscover and iblinkinfo: what podctl writes, it reads back; bad input names its line."""

from __future__ import annotations

import pytest

from podctl.ibfabric.formats import (
    CablingError,
    End,
    parse_iblinkinfo,
    parse_ibnetdiscover,
    write_iblinkinfo,
    write_ibnetdiscover,
)


def cables(topo):
    """Each cable as (both ends by description and port, rate): keys differ between the formats, names do not."""
    return sorted(
        (tuple(sorted(((topo.desc(link.a), link.a.port), (topo.desc(link.b), link.b.port)))), link.rate)
        for link in topo.links
    )


@pytest.mark.parametrize("site", ["sim", "h100-127", "a100-140"])
def test_round_trip_through_both_formats(site, planned):
    _, _, plan, topo = planned(site)
    assert len(topo.links) == len(plan.cables)
    for write, parse in ((write_ibnetdiscover, parse_ibnetdiscover), (write_iblinkinfo, parse_iblinkinfo)):
        back = parse(write(topo))
        assert cables(back) == cables(topo)


def test_ibnetdiscover_shows_each_cable_from_both_ends_in_the_documented_shape(planned):
    _, _, _, topo = planned("h100-127")
    text = write_ibnetdiscover(topo)
    switch = next(line for line in text.splitlines() if line.startswith("Switch") and '"ib-leaf-su01-r3"' in line)
    assert switch.startswith('Switch\t64 "S-') and switch.endswith("lmc 0")
    hca_lines = [line for line in text.splitlines() if '"dgx005 mlx5_4"' in line]
    assert any(line.startswith('[5]\t"H-') and line.endswith("4xNDR") for line in hca_lines)
    assert any(line.startswith('Ca\t1 "H-') for line in hca_lines)


def test_iblinkinfo_prints_lane_speed_and_down_ports(planned):
    _, _, _, topo = planned("h100-127")
    text = write_iblinkinfo(topo)
    assert "Switch: 0x" in text
    assert "==(  4X         106.25 Gbps Active/  LinkUp)==>" in text
    assert "Down/ Polling" in text  # dgx128 does not exist: its leaf ports are dark
    a100 = write_iblinkinfo(planned("a100-140")[3])
    assert " 53.125 Gbps Active" in a100


def test_parses_real_world_iblinkinfo_lines():
    text = (
        "Switch: 0x0002c90200482d08 MT47396 Infiniscale-III Mellanox Technologies:\n"
        '           1    1[  ] ==( 4X      2.5 Gbps Active/  LinkUp)==>      2    1[  ] "localhost HCA-1" ( )\n'
        '           1    2[  ] ==(                Down/ Polling)==>             [  ] "" ( )\n'
    )
    topo = parse_iblinkinfo(text)
    (link,) = topo.links
    # The switch by its GUID; the HCA, which has no block here, by its LID and description.
    assert (link.a, link.b, link.rate) == (End("0x0002c90200482d08", 1), End("lid 2 localhost HCA-1", 1), "4xSDR")
    assert (topo.desc(link.a), topo.desc(link.b)) == (
        "MT47396 Infiniscale-III Mellanox Technologies",
        "localhost HCA-1",
    )


def test_unparsable_ibnetdiscover_line_is_named():
    text = 'Switch\t8 "S-00000000000000aa"\t\t# "leaf" enhanced port 0 lid 1 lmc 0\n[1] what is this\n'
    with pytest.raises(CablingError, match=r"^topo.txt:2: not ibnetdiscover topology output"):
        parse_ibnetdiscover(text, "topo.txt")


def test_a_far_end_without_a_block_is_taken_from_its_port_line_with_a_warning():
    # A file cut short: the far switch has no block. Its port line says what it is.
    text = 'Switch\t8 "S-00000000000000aa"\t\t# "leaf" lid 1 lmc 0\n[1]\t"S-00000000000000bb"[3]\t\t# "x" lid 2 4xNDR\n'
    topo = parse_ibnetdiscover(text, "topo.txt")
    (link,) = topo.links
    assert (link.a, link.b, link.rate) == (End("0x00000000000000aa", 1), End("0x00000000000000bb", 3), "4xNDR")
    far = topo.devices["0x00000000000000bb"]
    assert (far.desc, far.kind, far.lid) == ("x", "switch", 2)
    (warning,) = topo.warnings
    assert (
        warning.startswith("topo.txt:2: 1 device(s) appear only at the far end of port lines")
        and "cut short" in warning
    )


def test_unparsable_iblinkinfo_line_is_named():
    text = "Switch: 0x00000000000000aa leaf:\n           1    1[  ] ==( 4X 106.25 Gbps\n"
    with pytest.raises(CablingError, match=r"^links.txt:2: not iblinkinfo output"):
        parse_iblinkinfo(text, "links.txt")


def test_unknown_lane_speed_is_named():
    text = 'Switch: 0xaa leaf:\n 1 1[  ] ==( 4X 77.0 Gbps Active/  LinkUp)==> 2 1[  ] "h mlx5_0" ( )\n'
    with pytest.raises(CablingError, match=r"links.txt:2: unknown lane speed 77.0"):
        parse_iblinkinfo(text, "links.txt")


# ibnetdiscover -g on a chassis switch, in the shape infiniband-diags' ibnetdiscover.c prints it (out_chassis,
# out_ids, out_switch, out_switch_port with "[ext N]"). No public sample exists (SOURCES.md).
GROUPED_CHASSIS = """\
#
# Topology file: generated on Tue Jun  5 14:15:10 2007
#
# Initiated from node 0008f10403960558 port 0008f10403960559

Chassis 1 (guid 0x8f104004121f7)

# Spine Nodes
vendid=0x8f1
devid=0x5a06
sysimgguid=0x8f104004121f7\t\t# Chassis 1 (ISR9288)
switchguid=0x8f104004121f6(8f104004121f6)\t# ISR9288/ISR9096 Voltaire sFB-12D Spine 1 Chip 1
Switch\t24 "S-0008f104004121f6"\t\t# "ISR9288/ISR9096 Voltaire sFB-12D" base port 0 lid 9 lmc 0
[1]\t"S-0008f10400410015"[1]\t\t# "SW-6IB4 Voltaire" lid 3 4xSDR

# Line Nodes
vendid=0x8f1
devid=0x5a05
switchguid=0x8f10400410015(8f10400410015)\t# ISR9288/ISR9096 Voltaire sLB-24D Line 1 Chip 1
Switch\t8 "S-0008f10400410015"\t\t# "SW-6IB4 Voltaire" base port 0 lid 3 lmc 0
[1]\t"S-0008f104004121f6"[1]\t\t# "ISR9288/ISR9096 Voltaire sFB-12D" lid 9 4xSDR
[6][ext 7]\t"H-0008f10403960984"[1](8f10403960985) \t\t# "MT23108 InfiniHost Mellanox Technologies" lid 16 4xSDR

Non-Chassis Nodes

vendid=0x2c9
devid=0x5a44
caguid=0x8f10403960984
Ca\t2 "H-0008f10403960984"\t\t# "MT23108 InfiniHost Mellanox Technologies"
[1](8f10403960985) \t"S-0008f10400410015"[6][ext 7] \t\t# lid 16 lmc 1 "SW-6IB4 Voltaire" lid 3 4xSDR
"""


def test_grouped_output_of_a_chassis_reads_like_the_plain_one():
    topo = parse_ibnetdiscover(GROUPED_CHASSIS, "g.txt")
    assert not topo.warnings
    assert sorted((topo.desc(k.a), k.a.port, topo.desc(k.b), k.b.port, len(k.lines)) for k in topo.links) == [
        ("ISR9288/ISR9096 Voltaire sFB-12D", 1, "SW-6IB4 Voltaire", 1, 2),
        ("SW-6IB4 Voltaire", 6, "MT23108 InfiniHost Mellanox Technologies", 1, 2),
    ]
    assert topo.devices["0x0008f10403960984"].port_guids == {1: 0x8F10403960985}


def test_stderr_lines_anywhere_are_skipped_with_a_warning_but_mail_quoting_is_refused():
    text = GROUPED_CHASSIS.replace(
        "Non-Chassis Nodes\n", "Non-Chassis Nodes\nibwarn: [3067] _do_madrpc: recv failed: Connection timed out\n"
    )
    topo = parse_ibnetdiscover(text, "g.txt")
    (warning,) = topo.warnings
    assert warning == (
        "g.txt:25: skipped a message the tools write to stderr, not ibnetdiscover output: "
        "'ibwarn: [3067] _do_madrpc: recv failed: Connection timed out'"
    )
    quoted = "".join(f"> {line}" for line in GROUPED_CHASSIS.splitlines(keepends=True))
    with pytest.raises(
        CablingError, match=r"^g.txt:1: not ibnetdiscover topology output: '> #'.*remove the mail quoting"
    ):
        parse_ibnetdiscover(quoted, "g.txt")
    links = 'Switch: 0xaa leaf:\nsrc/ibnetdisc.c:421; something odd\n 1 1[  ] ==( 4X 106.25 Gbps Active/  LinkUp)==> 2 1[  ] "h mlx5_0" ( )\n'
    topo = parse_iblinkinfo(links, "l.txt")
    assert len(topo.links) == 1 and topo.warnings[0].startswith("l.txt:2: skipped")


def test_a_device_described_twice_is_refused():
    text = 'Switch\t8 "S-aa"\t\t# "leaf" lid 1 lmc 0\n\nSwitch\t8 "S-00aa"\t\t# "leaf" lid 1 lmc 0\n'
    with pytest.raises(CablingError, match=r"^t:3: a second block for GUID 00aa \(the first is at line 1\)"):
        parse_ibnetdiscover(text, "t")
