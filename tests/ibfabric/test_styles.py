"""The cabling check against dumps named the way real fabrics are named.

No public dump matches a site plan, so these take podctl's own dump of a planned pod and rename its
devices in the real styles (tests/data/fabric/SOURCES.md): switches `MF0;<name>:<model>/U1` or a factory
description that all share, HCAs `<host> HCA-<n>` (numbers that skip, host names in capitals) or a
factory description with GUID anchors. A fault is made in the planned topology first, then the whole is
written, renamed and parsed: the check must find nothing on the healthy fabric and exactly the fault
on the damaged one, named as the plan names things.
"""

from __future__ import annotations

import re

import pytest

from podctl.ibfabric import corrupt
from podctl.ibfabric.check import CableFinding, check_cabling
from podctl.ibfabric.formats import (
    Device,
    End,
    Link,
    parse_iblinkinfo,
    parse_ibnetdiscover,
    write_iblinkinfo,
    write_ibnetdiscover,
)
from podctl.ibfabric.identity import Naming

QUANTUM2 = "Quantum-2 Mellanox Technologies"
CX7 = "MT4129 ConnectX7   Mellanox Technologies"
SHARP = "Mellanox Technologies Aggregation Node"


def _hca_n(desc: str) -> str:
    """'dgx005 mlx5_4' -> 'dgx005 HCA-5': numbered in device order, so a DGX H100's rails skip numbers."""
    host, hca = desc.split(" ")
    number = int(hca.removeprefix("mlx5_")) + 1
    return f"{host.upper() if number % 2 else host} HCA-{number}"


def vendor(desc: str, kind: str) -> str:
    return f"MF0;{desc}:MQM9790/U1" if kind == "switch" else _hca_n(desc)


def factory(desc: str, kind: str) -> str:
    return QUANTUM2 if kind == "switch" else CX7


def mixed(desc: str, kind: str) -> str:
    """MF0 leaves, factory spines; HCAs by rail: factory (anchored), HCA-n, and podctl's own names."""
    if kind == "switch":
        return f"MF0;{desc}:MQM9790/U1" if "leaf" in desc else QUANTUM2
    rail_hca = desc.split(" ")[1]
    return CX7 if rail_hca in ("mlx5_0", "mlx5_3", "mlx5_4") else _hca_n(desc) if rail_hca == "mlx5_5" else desc


def vendor_switches_factory(desc: str, kind: str) -> str:
    """Every switch on its factory description, HCAs as `<host> HCA-<n>`, no anchors: rails by landing and order."""
    return QUANTUM2 if kind == "switch" else _hca_n(desc)


STYLES = {
    "vendor": (vendor, False),
    "factory": (factory, True),
    "mixed": (mixed, True),
    "hca-n-factory-switches": (vendor_switches_factory, False),
}


def restyle(text: str, fmt: str, style) -> str:
    """The dump with each node description renamed (SHARP nodes keep theirs); GUIDs, ports and rates untouched."""

    def rename(desc, kind):
        return desc if desc == SHARP else style(desc, kind)

    kinds = {}
    for match in re.finditer(r'^(Switch|Ca)\t\d+ "[SH]-[0-9a-f]+"\t\t# "([^"]*)"', text, re.M):
        kinds[match.group(2)] = "switch" if match.group(1) == "Switch" else "ca"
    for match in re.finditer(r"^(Switch: 0x[0-9a-f]+|CA:) (.*):$", text, re.M):
        kinds[match.group(2)] = "switch" if match.group(1).startswith("Switch") else "ca"
    text = re.sub(
        r'"([^"]*)"',
        lambda m: f'"{rename(m.group(1), kinds[m.group(1)])}"' if m.group(1) in kinds else m.group(0),
        text,
    )
    return re.sub(
        r"^(Switch: 0x[0-9a-f]+|CA:) (.*):$",
        lambda m: f"{m.group(1)} {rename(m.group(2), kinds[m.group(2)])}:",
        text,
        flags=re.M,
    )


def anchors_of(topo, hca_names):
    """(host, rail) -> port GUID, as podctl would read them on the nodes."""
    by_desc = {d.desc: d for d in topo.devices.values() if d.kind == "ca"}
    return {
        (host, rail): by_desc[f"{host} {hca}"].port_guids[1]
        for host, names in hca_names.items()
        for rail, hca in enumerate(names, start=1)
        if f"{host} {hca}" in by_desc
    }


def with_sharp(topo):
    """A SHARP aggregation node on port 65 of every 64-port switch, as on Quantum-2."""
    out = topo
    for switch in [d for d in topo.devices.values() if d.kind == "switch"]:
        out = corrupt.add_device(out, SHARP, "ca", End(switch.key, 65))
        out.devices[switch.key].nports = 65
    return out


def check(style, fmt, topo, plan, hca_names, naming=None):
    """The check of `topo` written as `fmt` and renamed in `style` (a name in STYLES, or (rename, anchored))."""
    rename, anchored = STYLES[style] if isinstance(style, str) else style
    write, parse = (
        (write_ibnetdiscover, parse_ibnetdiscover) if fmt == "ibnetdiscover" else (write_iblinkinfo, parse_iblinkinfo)
    )
    parsed = parse(restyle(write(topo), fmt, rename), f"{style}.{fmt}")
    return check_cabling(
        plan, parsed, hca_names=hca_names, naming=naming, anchors=anchors_of(topo, hca_names) if anchored else None
    )


@pytest.fixture(scope="module")
def h100(planned, names):
    _, _, plan, topo = planned("h100-127")
    return plan, with_sharp(topo), names("h100-127")


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "iblinkinfo"])
@pytest.mark.parametrize("style", list(STYLES))
def test_a_healthy_fabric_in_each_naming_style_matches_the_plan(style, fmt, h100):
    plan, topo, hca_names = h100
    report = check(style, fmt, topo, plan, hca_names)
    assert report.findings == () and report.warnings == ()
    assert report.links_found == report.cables_planned == 2040
    assert report.identified["internal"] == len(plan.switches) == 32 + 16 and "unknown" not in report.identified


def test_how_devices_were_identified_in_the_factory_style(h100):
    plan, topo, hca_names = h100
    report = check("factory", "ibnetdiscover", topo, plan, hca_names)
    # HCAs by anchor, leaves by the HCAs on their node ports, spines by the leaves.
    assert report.identified == {"anchor": 1016, "neighbours": 32 + 16, "internal": 48}
    report = check("hca-n-factory-switches", "ibnetdiscover", topo, plan, hca_names)
    assert report.identified == {"order": 1016, "neighbours": 48, "internal": 48}


LEAF = "ib-leaf-su01-r3"
FAULTS = {
    "two HCA cables swapped on a leaf": (
        lambda t: corrupt.swap_ports(t, End(LEAF, 5), End(LEAF, 6)),
        [
            CableFinding(
                "wrong-port", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "ib-leaf-su01-r3[5]", "ib-leaf-su01-r3[6]"
            ),
            CableFinding(
                "wrong-port", "ib-leaf-su01-r3[6]", "dgx006 mlx5_4", "ib-leaf-su01-r3[6]", "ib-leaf-su01-r3[5]"
            ),
        ],
    ),
    "an HCA cable on another rail's leaf": (
        lambda t: corrupt.move_cable(t, End(LEAF, 5), End("ib-leaf-su04-r4", 32)),
        [
            CableFinding(
                "wrong-switch", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "ib-leaf-su01-r3[5]", "ib-leaf-su04-r4[32]"
            )
        ],
    ),
    "a dropped HCA cable": (
        lambda t: corrupt.drop_cable(t, End(LEAF, 5)),
        [CableFinding("missing", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "ib-leaf-su01-r3[5]", None)],
    ),
    "two uplinks swapped at a spine": (
        lambda t: corrupt.swap_ports(t, End("ib-spine-01", 1), End("ib-spine-01", 2)),
        [
            CableFinding("wrong-port", "ib-spine-01[1]", "ib-leaf-su01-r1[33]", "ib-spine-01[1]", "ib-spine-01[2]"),
            CableFinding("wrong-port", "ib-spine-01[2]", "ib-leaf-su01-r1[34]", "ib-spine-01[2]", "ib-spine-01[1]"),
        ],
    ),
    "a leaf uplink at HDR": (
        lambda t: corrupt.set_rate(t, End("ib-leaf-su02-r8", 40), speed="HDR"),
        [CableFinding("wrong-speed", "ib-spine-04[32]", "ib-leaf-su02-r8[40]", "4xNDR", "4xHDR")],
    ),
}


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "iblinkinfo"])
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_found_exactly_whatever_the_names(fault, style, fmt, h100):
    plan, topo, hca_names = h100
    damage, expected = FAULTS[fault]
    report = check(style, fmt, damage(topo), plan, hca_names)
    assert sorted(report.findings, key=lambda f: f.end_a) == expected
    assert report.warnings == ()


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "iblinkinfo"])
def test_unknown_switches_with_one_factory_description_are_named_apart_by_guid(fmt, h100):
    plan, topo, hca_names = h100
    damaged = corrupt.add_device(topo, "lab switch", "switch", End("ib-leaf-su04-r2", 32))
    damaged = corrupt.add_device(damaged, "lab switch", "switch", End("ib-leaf-su04-r3", 32))
    strangers = sorted(d.guid for d in damaged.devices.values() if d.desc == "lab switch")
    report = check("factory", fmt, damaged, plan, hca_names)
    expected = [
        CableFinding(
            "unexpected-device",
            "ib-leaf-su04-r2[32]",
            f"{QUANTUM2} (0x{guid:016x})[1]",
            None,
            f"{QUANTUM2} (0x{guid:016x})",
        )
        for guid in strangers
    ]
    found = sorted(report.findings, key=lambda f: f.end_a)
    assert len(found) == 2 and {f.end_b for f in found} == {e.end_b for e in expected}
    assert [f.end_a for f in found] == ["ib-leaf-su04-r2[32]", "ib-leaf-su04-r3[32]"]
    assert (
        found[0].render().startswith("UNEXPECTED-DEVICE  ib-leaf-su04-r2[32] <-> Quantum-2 Mellanox Technologies (0x")
    )


def test_a_leaf_whose_neighbours_disagree_is_reported_not_guessed(h100):
    plan, topo, hca_names = h100
    # Half of two factory-named leaves' node cables and half of their uplinks trade places: each leaf
    # has 32 votes for itself and 32 for the other, so neither can be told; their cables are reported
    # against their GUIDs.
    damaged = topo
    for port in [*range(1, 17), *range(33, 49)]:
        damaged = corrupt.swap_ports(damaged, End("ib-leaf-su01-r3", port), End("ib-leaf-su01-r4", port))
    report = check("factory", "ibnetdiscover", damaged, plan, hca_names)
    disputes = [w for w in report.warnings if "left unknown" in w]
    assert len(disputes) == 2
    assert all(
        f"switch '{QUANTUM2}' (0x" in w
        and "do not agree on which planned switch it is: ib-leaf-su01-r" in w
        and "(32)" in w
        for w in disputes
    )
    assert report.counts() == {"missing": 64, "wrong-switch": 64, "unexpected-device": 64}
    assert all(f.found.startswith(f"{QUANTUM2} (0x") for f in report.findings if f.kind != "missing")
    # With its uplinks in place, a leaf with half its node cables swapped is still told by its spines.
    damaged = topo
    for port in range(1, 17):
        damaged = corrupt.swap_ports(damaged, End("ib-leaf-su01-r3", port), End("ib-leaf-su01-r4", port))
    report = check("factory", "ibnetdiscover", damaged, plan, hca_names)
    assert report.counts() == {"wrong-switch": 32} and report.warnings == ()


def test_a_description_two_devices_claim_goes_to_neither(planned, names):
    _, _, plan, topo = planned("h100-127")
    damaged = corrupt.add_device(topo, "dgx005 mlx5_4", "ca", End("ib-leaf-su04-r1", 32))
    report = check_cabling(plan, parse_ibnetdiscover(write_ibnetdiscover(damaged)), hca_names=names("h100-127"))
    (warning,) = report.warnings
    assert warning.startswith("2 devices are described as dgx005 mlx5_4: 'dgx005 mlx5_4' (0x")
    kinds = sorted((f.kind, f.end_a, f.end_b.split(" (0x")[0]) for f in report.findings)
    assert kinds == [
        ("missing", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4"),
        ("unexpected-device", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4"),
        ("unexpected-device", "ib-leaf-su04-r1[32]", "dgx005 mlx5_4"),
    ]


def test_three_tiers_of_factory_switches_are_named_from_the_anchored_hcas_up(planned, names):
    _, _, plan, topo = planned("a100-140")
    hca_names = names("a100-140")
    assert plan.tiers == 3
    report = check("factory", "ibnetdiscover", topo, plan, hca_names)
    assert report.findings == () and report.identified["neighbours"] == len(plan.switches)
    core = plan.cables_in("spine-core")[0].upper.device
    first, second = [End(c.upper.device, c.upper.port) for c in plan.cables_in("spine-core") if c.upper.device == core][
        :2
    ]
    damaged = corrupt.swap_ports(topo, first, second)
    report = check("factory", "ibnetdiscover", damaged, plan, hca_names)
    assert [f.kind for f in report.findings] == ["wrong-port", "wrong-port"]


def test_site_patterns_name_devices_the_built_in_ones_do_not(h100):
    plan, topo, hca_names = h100

    def site_style(desc, kind):
        if kind == "switch":
            return f"sw {desc} QM9790"
        return "{}.cluster.local/{}".format(*desc.split(" "))

    naming = Naming(switch=[r"sw (?P<name>\S+) QM9790"], hca=[r"(?P<host>[^./]+)\.cluster\.local/(?P<hca>\S+)"])
    report = check((site_style, False), "ibnetdiscover", topo, plan, hca_names, naming)
    assert report.findings == () and report.identified == {"description": 1016 + 48, "internal": 48}
    unnamed = check((site_style, False), "ibnetdiscover", topo, plan, hca_names)
    assert unnamed.identified["unknown"] == 1016 + 48 and len(unnamed.findings) == 2040 + 2040


def test_anchors_win_over_a_wrong_description(planned, names):
    _, _, plan, topo = planned("h100-127")
    hca_names = names("h100-127")
    anchors = anchors_of(topo, hca_names)
    # dgx005's rail-3 HCA says it is dgx006's: the anchors know better, and say so.
    text = write_ibnetdiscover(topo).replace('"dgx005 mlx5_4"', '"dgx006 mlx5_4"')
    report = check_cabling(plan, parse_ibnetdiscover(text), hca_names=hca_names, anchors=anchors)
    assert report.findings == ()
    (warning,) = report.warnings
    assert warning.startswith("'dgx006 mlx5_4' (0x") and warning.endswith("its GUID is anchored as dgx005 mlx5_4")


def test_links_to_a_device_the_file_names_only_by_description_still_resolve():
    topo = corrupt.add_device(corrupt.set_rate(_tiny(), End("leaf", 1)), "h2 mlx5_0", "ca", End("leaf", 2))
    text = write_ibnetdiscover(topo)
    assert '"h2 mlx5_0"' in text and text.count("4xNDR") == 4


def _tiny():
    from podctl.ibfabric.formats import Topology

    topo = Topology()
    topo.add(Device("leaf", "switch", 4, 0xA))
    topo.add(Device("h1 mlx5_0", "ca", 1, 0xB))
    topo.links.append(Link(End("leaf", 1), End("h1 mlx5_0", 1), "4x", "NDR"))
    return topo
