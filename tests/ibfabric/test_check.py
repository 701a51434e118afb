"""The cabling check: clean when cabled as planned; each known corruption gives its exact finding."""

from __future__ import annotations

import pytest

from podctl.ibfabric import corrupt
from podctl.ibfabric.check import CableFinding, check_cabling
from podctl.ibfabric.formats import End, parse_iblinkinfo, parse_ibnetdiscover, write_iblinkinfo, write_ibnetdiscover

HCA = End("dgx005 mlx5_4", 1)  # rail 3 of a DGX H100: the HCA next to GPU 2
LEAF = End("ib-leaf-su01-r3", 5)


def through(fmt, topo):
    """The topology as the tool would print it, read back: the check sees only what the tools show."""
    if fmt == "ibnetdiscover":
        return parse_ibnetdiscover(write_ibnetdiscover(topo))
    return parse_iblinkinfo(write_iblinkinfo(topo))


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "iblinkinfo"])
@pytest.mark.parametrize("site", ["sim", "h100-127", "a100-140"])
def test_cabled_as_planned_is_clean(site, fmt, planned, names):
    _, _, plan, topo = planned(site)
    report = check_cabling(plan, through(fmt, topo), hca_names=names(site))
    assert report.ok and report.findings == ()
    assert report.links_found == report.cables_planned == len(plan.cables)


CASES = {
    "drop an HCA cable": (
        lambda t: corrupt.drop_cable(t, HCA),
        [CableFinding("missing", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "ib-leaf-su01-r3[5]", None)],
    ),
    "swap two HCA cables on a leaf": (
        lambda t: corrupt.swap_ports(t, LEAF, End("ib-leaf-su01-r3", 6)),
        [
            CableFinding(
                "wrong-port", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "ib-leaf-su01-r3[5]", "ib-leaf-su01-r3[6]"
            ),
            CableFinding(
                "wrong-port", "ib-leaf-su01-r3[6]", "dgx006 mlx5_4", "ib-leaf-su01-r3[6]", "ib-leaf-su01-r3[5]"
            ),
        ],
    ),
    "move an HCA cable to another rail's leaf": (
        lambda t: corrupt.move_cable(t, LEAF, End("ib-leaf-su04-r4", 32)),
        [
            CableFinding(
                "wrong-switch", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "ib-leaf-su01-r3[5]", "ib-leaf-su04-r4[32]"
            )
        ],
    ),
    "swap two uplinks at a spine": (
        lambda t: corrupt.swap_ports(t, End("ib-spine-01", 1), End("ib-spine-01", 2)),
        [
            CableFinding("wrong-port", "ib-spine-01[1]", "ib-leaf-su01-r1[33]", "ib-spine-01[1]", "ib-spine-01[2]"),
            CableFinding("wrong-port", "ib-spine-01[2]", "ib-leaf-su01-r1[34]", "ib-spine-01[2]", "ib-spine-01[1]"),
        ],
    ),
    "downgrade a link to 2x": (
        lambda t: corrupt.set_rate(t, HCA, width="2x"),
        [CableFinding("wrong-width", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "4xNDR", "2xNDR")],
    ),
    "downgrade a link to HDR": (
        lambda t: corrupt.set_rate(t, End("ib-leaf-su02-r8", 40), speed="HDR"),
        [CableFinding("wrong-speed", "ib-spine-04[32]", "ib-leaf-su02-r8[40]", "4xNDR", "4xHDR")],
    ),
    "a link at 2x HDR": (
        lambda t: corrupt.set_rate(t, HCA, width="2x", speed="HDR"),
        [CableFinding("wrong-width-and-speed", "ib-leaf-su01-r3[5]", "dgx005 mlx5_4", "4xNDR", "2xHDR")],
    ),
    "an unknown host on a free leaf port": (
        lambda t: corrupt.add_device(t, "rogue01 mlx5_0", "ca", End("ib-leaf-su04-r1", 32)),
        [CableFinding("unexpected-device", "ib-leaf-su04-r1[32]", "rogue01 mlx5_0", None, "rogue01 mlx5_0")],
    ),
    "an unknown switch on a free leaf port": (
        lambda t: corrupt.add_device(t, "lab-switch", "switch", End("ib-leaf-su04-r2", 32)),
        [CableFinding("unexpected-device", "ib-leaf-su04-r2[32]", "lab-switch[1]", None, "lab-switch")],
    ),
    "a cable between two free ports of known switches": (
        lambda t: _extra_link(t),
        [CableFinding("unexpected-link", "ib-leaf-su04-r5[32]", "ib-leaf-su04-r6[32]", None, "4xNDR")],
    ),
}


def _extra_link(topo):
    from podctl.ibfabric.formats import Link

    out = corrupt.set_rate(topo, HCA)  # a copy
    out.links.append(Link(End("ib-leaf-su04-r5", 32), End("ib-leaf-su04-r6", 32), "4x", "NDR"))
    return out


@pytest.mark.parametrize("fmt", ["ibnetdiscover", "iblinkinfo"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_corruption_gives_its_exact_finding(case, fmt, planned, names):
    _, _, plan, topo = planned("h100-127")
    damage, expected = CASES[case]
    report = check_cabling(plan, through(fmt, damage(topo)), hca_names=names("h100-127"))
    assert sorted(report.findings, key=lambda f: f.end_a) == expected
    assert not report.ok


def test_rendered_lines_name_both_ends(planned, names):
    _, _, plan, topo = planned("h100-127")
    report = check_cabling(
        plan,
        corrupt.move_cable(corrupt.drop_cable(topo, End("dgx010 mlx5_0", 1)), LEAF, End("ib-leaf-su04-r4", 32)),
        hca_names=names("h100-127"),
    )
    lines = sorted(f.render() for f in report.findings)
    assert lines == [
        "MISSING            ib-leaf-su01-r1[10] <-> dgx010 mlx5_0",
        "WRONG-SWITCH       ib-leaf-su01-r3[5] <-> dgx005 mlx5_4: found at ib-leaf-su04-r4[32]",
    ]
    assert report.counts() == {"missing": 1, "wrong-switch": 1}


def test_a_profile_names_its_hcas_in_the_findings(tmp_path):
    from click.testing import CliRunner

    from podctl.cli import main
    from podctl.derive.facts import hca_names
    from podctl.derive.site import load_site
    from podctl.derive.topology import plan_fabric
    from podctl.ibfabric.formats import parse_ibnetdiscover, topology_from_plan
    from tests.helpers.repo import SIM_SITE

    profile = (
        "profiles:\n  lab:\n    compute_hcas: { count: 2, rate: HDR, names: [mlx5_7, ibp24s0] }\n"
        "    cpu_cores: 2\n    memory_gib: 2\n    emulated: true\n\nnodes:\n"
    )
    text = SIM_SITE.read_text().replace("\nnodes:\n", "\n" + profile, 1)
    text = text.replace("hosts: node[01-03]\n    profile: sim\n", "hosts: node[01-03]\n    profile: lab\n")
    (tmp_path / "site.yaml").write_text(text)
    site = load_site(tmp_path / "site.yaml")
    names = hca_names(site, "compute")
    assert names["node02"] == ("mlx5_7", "ibp24s0")
    plan = plan_fabric(site.fabrics["compute"])
    topo = topology_from_plan(plan, "HDR", names)
    assert topo.named("node02 ibp24s0") and not topo.named("node02 mlx5_1")
    report = check_cabling(plan, corrupt.drop_cable(topo, End("node02 ibp24s0", 1)), hca_names=names)
    assert [f.render(align=False) for f in report.findings] == ["MISSING ib-leaf-su01-r2[2] <-> node02 ibp24s0"]
    # The same through the commands: `fabric topology` writes the names that `fabric check` expects.
    written = CliRunner().invoke(main, ["fabric", "topology", str(tmp_path / "site.yaml")])
    assert written.exit_code == 0 and '"node02 ibp24s0"' in written.output
    damaged = corrupt.drop_cable(parse_ibnetdiscover(written.output), End("node02 mlx5_7", 1))
    (tmp_path / "topo").write_text(write_ibnetdiscover(damaged))
    checked = CliRunner().invoke(
        main, ["fabric", "check", str(tmp_path / "site.yaml"), "--ibnetdiscover", str(tmp_path / "topo")]
    )
    assert (
        checked.exit_code == 1
        and checked.output.splitlines()[0] == "MISSING            ib-leaf-su01-r1[2] <-> node02 mlx5_7"
    )
