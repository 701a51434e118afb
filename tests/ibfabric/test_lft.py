"""The subnet manager's forwarding tables: real ibroute output read, tables placed on the plan, routes followed."""

from __future__ import annotations

import json
import random
import re

import pytest

from podctl.derive.facts import hca_names
from podctl.ibfabric.check import check_cabling
from podctl.ibfabric.ibnetdiscover import parse_ibnetdiscover, write_ibnetdiscover
from podctl.ibfabric.lft import Destination, check_routes, parse_lfts, place_forwarding, write_lfts
from podctl.ibfabric.topofile import CablingError
from podctl.localize.localize import localize
from podctl.localize.routing import Router, RoutingError
from podctl.localize.simulate import Fault, SimulatedFabric, random_faults
from tests.helpers.repo import REPO

DATA = REPO / "tests" / "data" / "fabric"
H100 = REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"


@pytest.fixture(scope="module")
def h100(planned):
    """The 127-node DGX H100 pod: fabric, plan, its planned topology and the profile's HCA names."""
    from podctl.derive.site import load_site

    _, fabric, plan, topo = planned("h100-127")
    return fabric, plan, topo, hca_names(load_site(H100), "compute")


def _published(name: str, mark: str) -> str:
    """A sample the author pasted into source comments: the lines without the comment mark and without the
    author's own `...` cut marks (tests/data/fabric/SOURCES.md)."""
    lines = [line.split(mark, 1)[1] for line in (DATA / name).read_text().splitlines()]
    return "\n".join(line for line in lines if line.strip() != "...") + "\n"


def test_two_ibroute_runs_from_ibsim_read_port_by_port():
    lfts = parse_lfts((DATA / "ibroute-ibsim-2switch-ibwarn-blog.txt").read_text(), "blog")
    one, two = lfts.switches
    assert (one.guid, one.lid, one.desc) == (0x200000, 1, "Switch1")
    assert one.out == {1: 0, 2: 1, 3: 3, 5: 3}  # by hand from the file
    assert two.out == {1: 4, 2: 4, 3: 0, 5: 1}
    assert lfts.dest[2] == Destination("Channel Adapter", 0x100001, "Hca1")
    assert lfts.dest[3] == Destination("Switch", 0x200001, "Switch2")
    # the two `ibwarn: ... sim_connect` lines were stderr, skipped with a warning each
    assert [w.split(": ", 1)[0] for w in lfts.warnings] == ["blog:1", "blog:11"]


def test_a_rail_optimized_lab_fabric_names_hosts_and_hcas():
    lfts = parse_lfts((DATA / "ibroute-ibsim-helix-a-head12-ncp-ain-lab.txt").read_text(), "lab")
    (leaf,) = lfts.switches
    assert (leaf.lid, leaf.desc, len(leaf.out)) == (4, "hxa-su1-leaf-r1", 8)
    assert leaf.out[4] == 0  # the switch itself
    assert leaf.out[5] == 1 and lfts.dest[5].desc == "hxa-gpu01 mlx5_0"  # rail 1 of gpu01, on this leaf
    assert leaf.out[8] == 34 and lfts.dest[8].desc == "hxa-gpu01 mlx5_1"  # rail 2: up to a spine
    assert not lfts.warnings  # cut by `head -12`: no trailer, nothing to compare


def test_a_qlogic_table_and_a_voltaire_lmc2_table_from_real_fabrics():
    qlogic = parse_lfts(_published("ibroute-qlogic-commented-llnl-opensm-smt.txt", "//"), "qlogic")
    (core,) = qlogic.switches
    assert (core.guid, core.lid, core.desc) == (0x00066A00EC002EEC, 17, "ibcore1 L109")
    assert len(core.out) == 10 and core.out[0x0148] == 29 and qlogic.dest[0x0148].desc == "hype229 qib0"
    # 171 counted by the tool, 10 kept by the author: said, not hidden
    assert any("counted 171 LIDs" in w and "10 entries were read" in w for w in qlogic.warnings)

    voltaire = parse_lfts(_published("dump-lfts-voltaire-lmc2-commented-llnl-piu.txt", "#"), "voltaire")
    (switch,) = voltaire.switches
    assert (switch.lid, switch.desc, len(switch.out)) == (11, "ISR9024D Voltaire", 16)
    paths = [lid for lid, d in voltaire.dest.items() if d.extra_path]
    assert paths == [0x405, 0x406, 0x407]  # LMC 2: the port's three extra LIDs, each on its own port
    assert [switch.out[lid] for lid in (0x404, *paths)] == [1, 2, 3, 4]
    assert voltaire.dest[0x404] == Destination("Channel Adapter", 0x0002C9020024D3E1, "minos703")


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("dump-lfts-voltaire-lmc2-commented-llnl-piu.txt", "starts with '#': remove the comment marks"),
        ("ibroute-qlogic-commented-llnl-opensm-smt.txt", "start with '//': remove the comment marks"),
    ],
)
def test_the_samples_as_pasted_are_refused_with_what_to_do(name, hint):
    with pytest.raises(CablingError) as err:
        parse_lfts((DATA / name).read_text(), name)
    assert f"{name}:1: not ibroute output" in str(err.value) and hint in str(err.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no forwarding table found"),
        ("0x0001 001 : (Channel Adapter portguid 0x1: 'a mlx5_0')\n", "outside any switch's table"),
        ("Unicast lids [0x0-0x1] of switch Lid 1 guid 0x2 (s):\n0x0000 001\n", "not a unicast LID"),
        ("Unicast lids [0x0-0x1] of switch Lid 1 guid 0x2 (s):\n0xc000 001\n", "not a unicast LID"),
        ("Unicast lids [0x0-0x1] of switch Lid 1 guid 0x2 (s):\n0x0001 256\n", "past the largest switch port"),
        ("Unicast lids [0x0-0x1] of switch Lid 1 guid 0x2 (s):\n0x0001 001\n0x0001 002\n", "appears twice"),
        ("Unicast lids [0x0-0x1] of switch Lid 1 guid 0x2 (s):\nhello\n", "2: not ibroute output"),
        ("x" * 70000, "not ibroute output"),
    ],
)
def test_what_is_not_a_forwarding_table_is_an_error_naming_the_line(text, says):
    with pytest.raises(CablingError, match=says):
        parse_lfts(text, "f")


def test_model_tables_written_as_a_dump_read_back_route_exactly_as_the_model(h100):
    fabric, plan, topo, names = h100
    model = Router(plan)
    text = write_lfts(topo, model.tables(), plan, names)
    placed = place_forwarding(plan, parse_lfts(text, "dump"), hca_names=names)
    assert not placed.unplaced and len(placed.forwarding) == len(plan.switches)
    told = Router(plan, forwarding=placed.forwarding)
    for rail in range(1, model.rails + 1):
        assert told.users(rail) == model.users(rail)
    assert not told.modelled


def test_destinations_are_placed_by_port_guid_where_descriptions_name_no_rail(h100):
    """Real HCAs often describe themselves `<host> HCA-<n>`: the ibnetdiscover dump's GUIDs place them."""
    fabric, plan, topo, names = h100
    model = Router(plan)
    text = write_lfts(topo, model.tables(), plan, names)
    renamed = text
    for device in topo.devices.values():
        if device.kind == "ca":
            host, hca = device.desc.split(" ", 1)
            renamed = renamed.replace(f"'{device.desc}'", f"'{host} HCA-{int(hca.removeprefix('mlx5_')) + 1}'")
    alone = place_forwarding(plan, parse_lfts(renamed, "dump"), hca_names=names)
    assert alone.destinations == 0 and any("names no rail" in u for u in alone.unplaced)
    with pytest.raises(CablingError, match="route no destination that is an HCA of the plan"):
        check_routes(plan, alone)  # 48 tables, none of them usable: not "every route followed"
    report = check_cabling(plan, parse_ibnetdiscover(write_ibnetdiscover(topo), "topo"), hca_names=names)
    placed = place_forwarding(plan, parse_lfts(renamed, "dump"), hca_names=names, names_by_guid=report.names)
    assert not placed.unplaced
    assert Router(plan, forwarding=placed.forwarding).users(2) == model.users(2)


def test_a_table_the_plan_has_no_switch_for_is_listed_not_guessed(h100):
    fabric, plan, topo, names = h100
    text = write_lfts(topo, Router(plan).tables(), plan, names).replace("ib-spine-01)", "spine-nobody-knows)", 1)
    placed = place_forwarding(plan, parse_lfts(text, "dump"), hca_names=names)
    assert len(placed.forwarding) == len(plan.switches) - 1
    assert any("'spine-nobody-knows'" in u and "no switch of the plan" in u for u in placed.unplaced)


def test_a_loop_or_a_port_without_a_cable_in_the_tables_is_a_routing_error(h100):
    fabric, plan, topo, names = h100
    model = Router(plan)
    tables = model.tables()
    src, dst = plan.scalable_units[0][0], plan.scalable_units[2][0]
    leaf = model.leaf(src, 1)
    up = model.cables[model.route(leaf, dst, 1)[0]]
    spine = up.upper.device
    looping = {**tables, spine: {**tables[spine], (dst, 1): up.upper.port}}  # straight back down
    with pytest.raises(RoutingError, match="loops"):
        Router(plan, forwarding=looping).route(leaf, dst, 1)
    nowhere = {**tables, leaf: {**tables[leaf], (dst, 1): 65}}  # past the leaf's 64 ports
    with pytest.raises(RoutingError, match="port 65, which has no planned cable"):
        Router(plan, forwarding=nowhere).route(leaf, dst, 1)


def test_a_switch_missing_from_the_dump_is_routed_by_the_model_and_said(h100):
    fabric, plan, topo, names = h100
    model = Router(plan)
    tables = model.tables()
    spine = next(s.name for s in plan.switches if s.tier == "spine")
    told = Router(plan, forwarding={k: v for k, v in tables.items() if k != spine})
    assert told.users(1) == model.users(1) and told.modelled == {spine}


def test_localization_on_the_subnet_managers_routes_names_what_the_model_would_misplace(h100):
    """The subnet manager numbers destinations in its own order (LIDs go out in discovery order), so its
    routes are not podctl's model. Localizing with the model's routes accuses the wrong cables; with the
    tables read from the dump, every fault is named and nothing else."""
    fabric, plan, topo, names = h100
    hosts = list(Router(plan).hosts)
    random.Random(2026).shuffle(hosts)
    fabric_routes = Router(plan, order=hosts)
    dump = write_lfts(topo, fabric_routes.tables(), plan, names)
    told = Router(plan, forwarding=place_forwarding(plan, parse_lfts(dump, "dump"), hca_names=names).forwarding)
    guessed = Router(plan)
    rng = random.Random(15)
    wrong_with_model = 0
    for _ in range(40):
        faults = random_faults(plan, 2, rng, kinds=("slow-node", "slow-link"))
        sim = SimulatedFabric(plan, faults, fabric.rate, fabric_routes)
        true = {f.node for f in faults if f.node} | {f.cable for f in faults if f.cable}
        good = localize(plan, sim, 0.9 * sim.rate_gbps, told)
        named = set(good.bad_nodes) | set(good.bad_cables)
        assert named <= true and not good.suspects
        visible = {f.node or f.cable for f in faults if _visible(plan, f, fabric.rate, fabric_routes)}
        assert visible <= named
        bad = localize(plan, sim, 0.9 * sim.rate_gbps, guessed)
        wrong_with_model += bool((set(bad.bad_nodes) | set(bad.bad_cables)) - true or bad.suspects)
    assert wrong_with_model >= 5  # the model's routes mislead; the test would not show the tables' worth otherwise


def _visible(plan, fault: Fault, rate: str, router: Router) -> bool:
    from podctl.localize.schedule import Test

    alone = SimulatedFabric(plan, [fault], rate, router)
    return alone.run_round([Test(router.hosts)])[0].bandwidth < 0.9 * alone.rate_gbps


def test_hca_names_of_the_profile_place_destinations(h100):
    fabric, plan, topo, names = h100
    model = Router(plan)
    text = write_lfts(topo, model.tables(), plan, names)
    assert "mlx5_11'" in text  # rail 8 of a DGX H100 is mlx5_11
    placed = place_forwarding(plan, parse_lfts(text, "dump"), hca_names=names)
    assert not placed.unplaced and Router(plan, forwarding=placed.forwarding).users(8) == model.users(8)


def _invoke(*args):
    from click.testing import CliRunner

    from podctl.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def test_fabric_routes_follows_a_dump_and_says_what_no_route_crosses(h100, tmp_path):
    fabric, plan, topo, names = h100
    dump = tmp_path / "lfts.txt"
    result = _invoke("fabric", "topology", H100, "--format", "lfts")
    assert result.exit_code == 0
    dump.write_text(result.output)
    result = _invoke("fabric", "routes", H100, "--lfts", dump)
    assert result.exit_code == 0, result.output
    assert "48 switch table(s) placed on the plan, 20320 route entries; 0 entries differ" in result.output
    assert "leaf-spine: 1024 of 1024 cables carry routed traffic" in result.output
    # the subnet manager numbering its destinations otherwise: other ports, every cable still crossed
    hosts = list(Router(plan).hosts)
    random.Random(3).shuffle(hosts)
    dump.write_text(write_lfts(topo, Router(plan, order=hosts).tables(), plan, names))
    out = json.loads(_invoke("fabric", "routes", H100, "--lfts", dump, "-o", "json").output)
    assert out["differ_from_model"] > 10000 and out["problem_count"] == 0
    assert out["uncrossed"]["leaf-spine"] == {"cables": 0, "of": 1024}


def test_fabric_routes_exits_1_on_a_loop_and_2_on_what_is_no_dump_of_this_fabric(h100, tmp_path):
    fabric, plan, topo, names = h100
    model = Router(plan)
    tables = model.tables()
    dst = plan.scalable_units[2][0]
    leaf = model.leaf(plan.scalable_units[0][0], 1)
    up = model.cables[model.route(leaf, dst, 1)[0]]
    tables[up.upper.device][(dst, 1)] = up.upper.port  # the spine sends it back down
    dump = tmp_path / "lfts.txt"
    dump.write_text(write_lfts(topo, tables, plan, names))
    result = _invoke("fabric", "routes", H100, "--lfts", dump)
    assert result.exit_code == 1, result.output
    assert f"route: the route from {leaf} to {dst} (rail 1) loops" in result.output
    blog = DATA / "ibroute-ibsim-2switch-ibwarn-blog.txt"
    result = _invoke("fabric", "routes", H100, "--lfts", blog)
    assert result.exit_code == 2 and "no table of the dump is one of the plan's switches" in result.output
    dump.write_text("hello\n")
    result = _invoke("fabric", "routes", H100, "--lfts", dump)
    assert result.exit_code == 2 and "lfts.txt:1: not ibroute output" in result.output


def test_validate_takes_the_tables_for_a_site_and_refuses_routes_it_cannot_follow(h100, tmp_path):
    from podctl.derive.site import load_site
    from podctl.validate.cabling import FabricCheckError, subnet_manager_routes

    fabric, plan, topo, names = h100
    site = load_site(H100)
    dump = tmp_path / "lfts.txt"
    dump.write_text(write_lfts(topo, Router(plan).tables(), plan, names))
    forwarding, notes = subnet_manager_routes(site, dump, {})
    assert len(forwarding) == 48 and "20320 route entries; localization follows them" in notes[0]
    tables = Router(plan).tables()
    leaf = next(iter(tables))
    tables[leaf] = {dst: 65 for dst in tables[leaf]}
    dump.write_text(write_lfts(topo, tables, plan, names))
    with pytest.raises(FabricCheckError, match="cannot be followed on the plan") as err:
        subnet_manager_routes(site, dump, {})
    assert "port 65, which has no planned cable" in str(err.value) and "... and" in str(err.value)
    result = _invoke("validate", "--local", "--profile", "sim", "--lfts", dump)
    assert result.exit_code == 2 and "--lfts is for a site, not --local" in result.output


def test_opensms_own_dump_quotes_the_switch_and_describes_extra_lids_like_the_base_lid(h100):
    """opensm-lfts.dump (OpenSM's dump_ucast_lfts; no published sample was found, the form is its source's):
    the header quotes the description, `N lids dumped` is the top LID, not a count, and with LMC > 0 a
    port's extra LIDs carry its description with no `path #` mark. Traffic goes to the base LID."""
    fabric, plan, topo, names = h100
    model = Router(plan)
    text = write_lfts(topo, model.tables(), plan, names)
    text = re.sub(r"\((ib-[a-z0-9-]+)\):\n", r"('\1'):\n", text)
    text = re.sub(r"\d+ valid lids dumped ", "1064 lids dumped", text)
    leaf = model.leaf("dgx001", 1)
    base = next(line for line in text.splitlines() if line.endswith("'dgx001 mlx5_0')"))
    guid = base.split("portguid ")[1].split(":")[0]
    extra = f"0x0600 002 : (Channel Adapter portguid {guid}: 'dgx001 mlx5_0')"
    assert text.index(f"('{leaf}')") < text.index(base)  # the first table: dgx001's leaf on rail 1
    text = text.replace(base, f"{base}\n{extra}", 1)  # after the base LID, as OpenSM prints by LID
    assert "('ib-leaf-su01-r1'):" in text and extra in text
    lfts = parse_lfts(text, "opensm-lfts.dump")
    assert not lfts.warnings  # the top LID is no count to compare
    placed = place_forwarding(plan, lfts, hca_names=names)
    assert len(placed.forwarding) == 48 and placed.forwarding[leaf][("dgx001", 1)] == 1  # the base LID's port
    assert not check_routes(plan, placed).problem_count


def test_a_table_with_no_entry_for_a_node_others_route_drops_it(h100):
    fabric, plan, topo, names = h100
    model = Router(plan)
    tables = model.tables()
    leaf, dst = model.leaf("dgx001", 1), plan.scalable_units[1][0]
    del tables[leaf][(dst, 1)]
    with pytest.raises(RoutingError, match=f"{leaf} has no entry for {dst} \\(rail 1\\): the switch would drop"):
        Router(plan, forwarding=tables).route(leaf, dst, 1)


def test_a_bare_entry_first_does_not_hide_the_description_a_later_table_gives():
    text = (
        "Unicast lids [0x0-0x3] of switch Lid 1 guid 0x1 (s1):\n0x0003 001\n1 valid lids dumped\n"
        "Unicast lids [0x0-0x3] of switch Lid 2 guid 0x2 (s2):\n"
        "0x0003 002 : (Channel Adapter portguid 0x33: 'dgx001 mlx5_0')\n1 valid lids dumped\n"
        "Unicast lids [0x0-0x3] of switch Lid 4 guid 0x4 (s4):\n"
        "0x0003 003 : (Channel Adapter portguid 0x33: 'dgx001 mlx5_0')\n1 valid lids dumped\n"
    )
    lfts = parse_lfts(text, "f")
    assert lfts.dest[3] == Destination("Channel Adapter", 0x33, "dgx001 mlx5_0")
    assert [t.port(3) for t in lfts.switches] == [1, 2, 3]


def test_headers_that_would_take_gigabytes_of_tables_are_refused():
    block = "Unicast lids [0x0-0xbfff] of switch Lid 1 guid 0x{n:x} (s):\n0xbfff 001\n"
    text = "".join(block.format(n=n + 1) for n in range(3000))  # 200 KB of text, 3000 x 48 KiB of tables
    with pytest.raises(CablingError, match="far beyond what a dump of this length holds"):
        parse_lfts(text, "f")


def test_switch_names_match_the_plan_whatever_their_case_and_echo_lines_are_skipped(h100):
    fabric, plan, topo, names = h100
    text = write_lfts(topo, Router(plan).tables(), plan, names).replace("(ib-leaf-su01-r1):", "(IB-LEAF-SU01-R1):")
    placed = place_forwarding(plan, parse_lfts("# dump_lfts.sh\n" + text, "dump"), hca_names=names)
    assert "ib-leaf-su01-r1" in placed.forwarding and not placed.unplaced
