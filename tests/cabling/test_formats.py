"""ibnetdiscover and iblinkinfo: what podctl writes, it reads back; bad input names its line."""

from __future__ import annotations

import pytest

from podctl.cabling.formats import (
    CablingError,
    End,
    parse_iblinkinfo,
    parse_ibnetdiscover,
    write_iblinkinfo,
    write_ibnetdiscover,
)


def cables(topo):
    return sorted((tuple(sorted((link.a, link.b))), link.rate) for link in topo.links)


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
    assert any(line.startswith("[5]\t\"H-") and line.endswith("4xNDR") for line in hca_lines)
    assert any(line.startswith('Ca\t1 "H-') for line in hca_lines)


def test_iblinkinfo_prints_lane_speed_and_down_ports(planned):
    _, _, _, topo = planned("h100-127")
    text = write_iblinkinfo(topo)
    assert "Switch: 0x" in text
    assert '==(  4X         106.25 Gbps Active/  LinkUp)==>' in text
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
    assert (link.a, link.b, link.rate) == (
        End("MT47396 Infiniscale-III Mellanox Technologies", 1), End("localhost HCA-1", 1), "4xSDR"
    )


def test_unparsable_ibnetdiscover_line_is_named():
    text = 'Switch\t8 "S-00000000000000aa"\t\t# "leaf" enhanced port 0 lid 1 lmc 0\n[1] what is this\n'
    with pytest.raises(CablingError, match=r"^topo.txt:2: not ibnetdiscover topology output"):
        parse_ibnetdiscover(text, "topo.txt")


def test_dangling_guid_is_named():
    text = 'Switch\t8 "S-00000000000000aa"\t\t# "leaf" lid 1 lmc 0\n[1]\t"S-00000000000000bb"[3]\t\t# "x" lid 2 4xNDR\n'
    with pytest.raises(CablingError, match=r"topo.txt:2: port 1 leads to GUID 0xbb"):
        parse_ibnetdiscover(text, "topo.txt")


def test_unparsable_iblinkinfo_line_is_named():
    text = "Switch: 0x00000000000000aa leaf:\n           1    1[  ] ==( 4X 106.25 Gbps\n"
    with pytest.raises(CablingError, match=r"^links.txt:2: not iblinkinfo output"):
        parse_iblinkinfo(text, "links.txt")


def test_unknown_lane_speed_is_named():
    text = 'Switch: 0xaa leaf:\n 1 1[  ] ==( 4X 77.0 Gbps Active/  LinkUp)==> 2 1[  ] "h mlx5_0" ( )\n'
    with pytest.raises(CablingError, match=r"links.txt:2: unknown lane speed 77.0"):
        parse_iblinkinfo(text, "links.txt")
