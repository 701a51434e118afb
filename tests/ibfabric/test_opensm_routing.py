"""The real OpenSM routing the plans podctl makes, on a simulated fabric (ibsim), and what its own
tables say (podctl.ibfabric.balance, `podctl fabric routes`).

Starts Debian's ibsim and OpenSM (`make fabric-setup`) through podctl.ibfabric.ibsim: the network
file is what `podctl fabric topology` prints, OpenSM routes it once (`opensm -o`) and writes its
tables (opensm-lfts.dump), which these tests read. Seconds each; the large pods (16 to 64 SUs)
are bench/fabric_bench.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from podctl.cli import main
from podctl.derive.facts import Facts, hca_names
from podctl.derive.init import render_site
from podctl.derive.site import load_site
from podctl.derive.topology import FabricPlan
from podctl.ibfabric.balance import route_balance
from podctl.ibfabric.ibsim import IbsimError, RoutingRun, SimulatedFabric, find_install, network_from_plan, route
from podctl.ibfabric.ibsim.install import need_tools
from podctl.ibfabric.lft import Lfts, place_forwarding, read_lfts
from podctl.ibfabric.topofile import name_guid
from tests.helpers.repo import SIM_SITE, cannot_run_here
from tests.helpers.roles import render_templates

pytestmark = pytest.mark.fabric


@pytest.fixture(scope="module")
def tools() -> None:
    try:
        find_install()
        need_tools("opensm", "ibnetdiscover")
    except IbsimError as exc:
        cannot_run_here(str(exc))


def _site(tmp: Path, profile: str, sus: int) -> Path:
    path = tmp / f"{profile}-{sus}.yaml"
    path.write_text(render_site(profile, sus, None, "pod", "site.schema.json"))
    return path


def _routed(
    site_file: Path, engine: str, work: Path, config: Path | None = None
) -> tuple[FabricPlan, RoutingRun, Lfts]:
    site = load_site(site_file)
    plan = Facts(site).plans["compute"]
    network = network_from_plan(plan, site.fabrics["compute"].rate, hca_names(site, "compute"))
    with SimulatedFabric.start(network, work) as fabric:
        run = route(fabric, engine, dumps=True, config=config)
    assert run.lfts_dump is not None
    return plan, run, read_lfts(str(run.lfts_dump))


@pytest.mark.parametrize("sus", [1, 4])
def test_ftree_routes_reference_pods_as_fat_trees_and_spreads_every_up_port_evenly(
    tools: None, tmp_path: Path, sus: int
) -> None:
    site_file = _site(tmp_path, "dgx-h100", sus)
    site = load_site(site_file)
    assert Facts(site).routing["compute"].engine == "ftree"
    plan, run, lfts = _routed(site_file, "ftree", tmp_path / "fabric")
    assert (run.used, run.fell_back, run.errors) == ("ftree", False, ())

    placed = place_forwarding(plan, lfts, hca_names(site, "compute"))
    balance = route_balance(plan, lfts, placed.tables)
    assert balance.no_table == ()
    hcas = len(plan.cables_in("node-leaf"))
    assert balance.destinations == hcas
    # A leaf sends every HCA not beneath it up; ftree spreads them evenly over its 32 up-ports.
    (leaf,) = balance.tiers
    assert leaf.tier == "leaf" and leaf.up_ports == 32 * len(plan.switches_in("leaf"))
    assert leaf.fewest == leaf.most == (hcas - 32) // 32
    assert balance.turns.entries == 0 and not balance.credit_loop_risk
    # ftree leaves one spine's LID unrouted from another (a fat tree joins them only through a
    # leaf); no route of these tables turns down then up.
    assert balance.switch_turns.entries == 0


def test_minhop_routes_spine_to_spine_through_a_leaf(tools: None, tmp_path: Path) -> None:
    # The engine OpenSM falls back to: the pod's traffic still climbs then descends, but a spine's
    # route to another spine's own LID goes down to a leaf and up again. Counted apart, it is no
    # credit-loop risk for the pod's traffic.
    site_file = _site(tmp_path, "dgx-h100", 4)
    plan, run, lfts = _routed(site_file, "minhop", tmp_path / "fabric")
    assert run.used == "minhop"
    placed = place_forwarding(plan, lfts, hca_names(load_site(site_file), "compute"))
    balance = route_balance(plan, lfts, placed.tables)
    assert balance.turns.entries == 0
    spines = len(plan.switches_in("spine"))
    assert balance.switch_turns.lids == spines
    assert balance.switch_turns.entries == spines * (spines - 1)
    example = balance.switch_turns.examples[0]
    assert re.fullmatch(r"ib-spine-\d\d", example.above) and re.fullmatch(r"ib-leaf-su\d\d-r\d", example.at)


def test_fabric_routes_follows_the_sms_tables_and_names_a_route_that_turns_down_then_up(
    tools: None, tmp_path: Path
) -> None:
    site_file = _site(tmp_path, "dgx-h100", 4)
    plan, run, lfts = _routed(site_file, "ftree", tmp_path / "fabric")
    assert run.lfts_dump is not None
    dump = run.lfts_dump.read_text()

    result = CliRunner().invoke(main, ["fabric", "routes", str(site_file), "--lfts", str(run.lfts_dump)])
    assert result.exit_code == 0, result.output
    assert "routes followed on the subnet manager's tables for 48 of 48 switches; none on podctl's model" in (
        result.output
    )
    assert "leaf: 1024 up-ports on 32 switches carry 31 to 31 routes each" in result.output
    # OpenSM numbers destinations in its own order: its tables and podctl's model differ, and the
    # tables are what was followed.
    differ = int(re.search(r"(\d+) entries differ from podctl's model", result.output)[1])  # type: ignore[index]
    assert 0.15 < differ / (48 * 1024) < 0.35

    # Without one switch's table, the model stands in there, and the output says so.
    blocks = re.split(r"(?m)^(?=Unicast lids)", dump)
    spine = next(b for b in blocks if b and "('ib-spine-07')" in b.splitlines()[0])
    cut = tmp_path / "cut.dump"
    cut.write_text(dump.replace(spine, ""))
    result = CliRunner().invoke(main, ["fabric", "routes", str(site_file), "--lfts", str(cut)])
    assert result.exit_code == 0, result.output
    assert "for 47 of 48 switches, on podctl's model for 1" in result.output
    assert "1 switch(es) of the plan have no table in the dump, not counted: ib-spine-07" in result.output

    # A spine that sends an HCA's LID down to a leaf that does not hold it: that leaf sends it up
    # again. fabric routes follows it (the route still arrives) and fails on the risk.
    hca = next(d for d in lfts.dest.items() if d[1].kind == "Channel Adapter" and "dgx128 mlx5_0" == d[1].desc)
    lid = hca[0]
    spine1 = next(b for b in blocks if b and "('ib-spine-01')" in b.splitlines()[0])
    leaf_port = plan.leaf_port("dgx001", 1)  # ib-leaf-su01-r1; dgx128 mlx5_0 is on ib-leaf-su04-r1
    down = next(
        c.upper.port
        for c in plan.cables_in("leaf-spine")
        if c.upper.device == "ib-spine-01" and c.lower.device == leaf_port.device
    )
    entry = re.compile(rf"(?m)^0x{lid:04x} (\d{{3}})")
    turned = entry.sub(f"0x{lid:04x} {down:03d}", spine1, count=1)
    bad = tmp_path / "turn.dump"
    bad.write_text(dump.replace(spine1, turned))
    result = CliRunner().invoke(main, ["fabric", "routes", str(site_file), "--lfts", str(bad)])
    assert result.exit_code == 1, result.output
    assert "credit-loop risk: 1 table entries for 1 HCA LID(s) send a route down, then up again:" in result.output
    assert f"ib-spine-01 sends LID {lid} (dgx128 mlx5_0) down to ib-leaf-su01-r1, which sends it up again" in (
        result.output
    )


def _uneven_sim_site(tmp: Path) -> Path:
    # The sim site's 8-port switches with 17 nodes: 5 SUs of 4 on 2 rails. A spine block takes 4
    # SUs and a core spans 8 / 2 = 4 blocks, so 5 SUs (prime) make no equal blocks: the plan
    # fills blocks of 4 and 1 SU, like a dgx-h100 pod of 37 SUs or a dgx-a100 pod of 23.
    text = SIM_SITE.read_text().replace("node[01-03]", "node[01-17]").replace("    routing_engine: ftree\n", "")
    text = text.replace("wheels: ../../.cache/validation-wheels", f"wheels: {SIM_SITE.parents[2] / '.cache'}")
    path = tmp / "uneven.yaml"
    path.write_text(text)
    return path


def test_an_uneven_plan_is_refused_by_ftree_and_routed_by_updn_from_its_cores(tools: None, tmp_path: Path) -> None:
    # podctl's model says ftree refuses the tree, and the real OpenSM agrees (ERR AB0x, then
    # minhop). The fabric role renders updn, the engine the plan calls for; given the cores the
    # inventory names as its roots (by the GUIDs the simulated fabric gives them), updn routes
    # every path up, then down.
    site_file = _uneven_sim_site(tmp_path)
    site = load_site(site_file)
    advice = Facts(site).routing["compute"]
    assert advice.engine == "updn" and advice.reason.startswith("5 SUs fill spine blocks of 4 + 1 SUs")

    plan, run, lfts = _routed(site_file, "ftree", tmp_path / "ftree")
    assert run.fell_back and run.used == "minhop"
    assert any(re.match(r"ERR AB0[9ABC]: Different number of", e) for e in run.errors), run.errors

    conf = render_templates(site_file, "fabric", "head01", {"opensm.conf": "opensm.conf.j2"}, tmp_path)["opensm.conf"]
    (engine,) = re.findall(r"(?m)^routing_engine (\S+)$", conf)
    assert engine == "updn"
    inventory = yaml.safe_load((tmp_path / "inventory" / "group_vars" / "all" / "podctl.yml").read_text())
    roots = inventory["podctl_fabrics"]["compute"]["root_switches"]
    assert roots == [s.name for s in plan.switches_in("core")]
    guids = tmp_path / "roots.guids"
    guids.write_text("".join(f"0x{name_guid(name):016x}\n" for name in roots))
    config = tmp_path / "opensm.conf"
    config.write_text(f"root_guid_file {guids}\n")

    plan, run, lfts = _routed(site_file, engine, tmp_path / "updn", config)
    assert (run.used, run.fell_back) == ("updn", False)
    balance = route_balance(plan, lfts, place_forwarding(plan, lfts, hca_names(site, "compute")).tables)
    assert balance.turns.entries == 0 and balance.no_table == ()
