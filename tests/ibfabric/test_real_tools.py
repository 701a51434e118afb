"""The fabric tier: the site's fat tree in ibsim, routed by the real OpenSM, read by the real
infiniband-diags, and every fault named by its cable through `podctl fabric check | counters | routes`.

Components started: ibsim (podctl's build of Debian 13's 0.12, which brings NDR links up as
4xNDR; `make fabric-setup`), Debian's OpenSM (`opensm -o`, and two OpenSMs that stay: master and
standby) and infiniband-diags (ibnetdiscover, iblinkinfo, iblinkinfo -l, dump_lfts.sh, ibqueryerrors,
perfquery). Every file the commands read was printed by those tools in this test run, into the
test's temporary folder (tests/data/fabric holds published output only).

Two sizes: one scalable unit of 32 DGX H100 (`podctl init`), and the 127-node 4-SU example. At
each, one fabric cabled as planned is read healthy, then given counters that count and two cables
pulled through ibsim's console; a second fabric is cabled with two cables swapped, one that trains
at 2x and one at HDR. Which cables the faults land on is drawn from PODCTL_FABRIC_SEED (a fixed
seed unless set): any seed must pass.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from podctl.cli import main
from podctl.core.model import hca_name
from podctl.derive.facts import hca_names
from podctl.derive.site import load_site
from podctl.derive.topology import Cable, plan_fabric
from podctl.ibfabric.formats import read_topology
from podctl.ibfabric.ibsim import (
    IbsimError,
    Install,
    SimulatedFabric,
    find_install,
    network_from_plan,
    route,
    set_link_rate,
    start_sm,
    swap_cables,
)
from podctl.ibfabric.ibsim.install import need_tools
from podctl.ibfabric.topofile import planned_ends
from tests.helpers.repo import REPO, cannot_run_here

pytestmark = pytest.mark.fabric

SEED = int(os.environ.get("PODCTL_FABRIC_SEED", "32"))
TOOLS = ("opensm", "ibnetdiscover", "iblinkinfo", "dump_fts", "dump_lfts", "ibqueryerrors", "perfquery")


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def install() -> Install:
    try:
        found = find_install(need_ndr=True)
        need_tools(*TOOLS)
    except IbsimError as exc:
        cannot_run_here(f"the fabric tier needs ibsim, OpenSM and infiniband-diags: {exc}")
    return found


@dataclass
class World:
    """One size: its site, plan, the faults drawn for it and every file the tools printed."""

    site: Path
    plan: object
    names: dict
    work: Path
    files: dict[str, Path] = field(default_factory=dict)
    faults: dict[str, object] = field(default_factory=dict)
    routed: dict[str, object] = field(default_factory=dict)

    def save(self, name: str, text: str) -> Path:
        self.files[name] = path = self.work / name
        path.write_text(text)
        return path


def _site(size: str, folder: Path) -> Path:
    if size == "4su":
        return REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"
    path = folder / "site-1su.yaml"
    result = invoke("init", "--profile", "dgx-h100", "--scalable-units", "1", "-o", path)
    assert result.exit_code == 0, result.output
    return path


def _ends(cable: Cable, names) -> tuple[str, str]:
    """(upper, lower) as the commands print them: `ib-leaf-su01-r1[5]`, `dgx005 mlx5_0`."""
    upper, lower = planned_ends(cable, names)
    return str(upper), str(lower)


def _lower(cable: Cable, names) -> tuple[str, int]:
    """The cable's lower end as a device description and port: the HCA, or the leaf's up-port."""
    if cable.tier == "node-leaf":
        return f"{cable.lower.device} {hca_name(cable.lower.device, cable.lower.port, names)}", 1
    return cable.lower.device, cable.lower.port


@pytest.fixture(scope="module", params=["1su", "4su"])
def world(request, install: Install, tmp_path_factory) -> World:
    """The tools' output of both fabrics of one size, healthy and faulty; the faults drawn for it."""
    size = request.param
    work = tmp_path_factory.mktemp(f"fabric-{size}")
    site = _site(size, work)
    loaded = load_site(site)
    fabric = loaded.fabrics["compute"]
    plan = plan_fabric(fabric)
    names = hca_names(loaded, "compute")
    w = World(site, plan, names, work)
    rng = random.Random(f"{SEED}-{size}")
    node_leaf, leaf_spine = list(plan.cables_in("node-leaf")), list(plan.cables_in("leaf-spine"))
    rng.shuffle(node_leaf)
    rng.shuffle(leaf_spine)
    leaf = node_leaf[0].upper.device
    on_leaf = [c for c in node_leaf if c.upper.device == leaf]
    swapped = on_leaf[:2]
    others = [c for c in node_leaf if c.upper.device != leaf]
    w.faults = {
        "counted": [leaf_spine[0], others[0]],  # SymbolErrorCounter 500 at the leaf's up-port; LinkDowned 1 at an HCA
        "under_threshold": others[1],  # SymbolErrorCounter 5: under validate's threshold of 10
        "unplugged": [others[2], leaf_spine[1]],
        "swapped": swapped,
        "narrow": others[3],  # trains at 2x
        "slow": leaf_spine[2],  # trains at HDR
    }
    network = network_from_plan(plan, fabric.rate, names)

    with SimulatedFabric.start(network, work / "healthy", install) as sim:
        w.routed["healthy"] = route(sim, "ftree")
        w.save("ibnetdiscover", sim.ibnetdiscover())
        w.save("iblinkinfo", sim.iblinkinfo())
        w.save("iblinkinfo-l", sim.iblinkinfo(one_line=True))
        w.save("dump_lfts", sim.dump_lfts())
        w.save("ibqueryerrors", sim.ibqueryerrors())
        # Counters that count, read as a pod's are: ibqueryerrors over the fabric, perfquery per port.
        spine_cable, hca_cable = w.faults["counted"]
        sim.set_counter(*_lower(spine_cable, names), "SymbolErrorCounter", 500)
        sim.set_counter(*_lower(hca_cable, names), "LinkDownedCounter", 1)
        sim.set_counter(*_lower(w.faults["under_threshold"], names), "SymbolErrorCounter", 5)
        w.save("ibqueryerrors-counting", sim.ibqueryerrors())
        lids = {d.desc: d.lid for d in read_topology(str(w.files["ibnetdiscover"]), "ibnetdiscover").devices.values()}
        w.save(
            "perfquery",
            "".join(
                sim.perfquery(lids[device], port) + sim.perfquery(lids[device], port, extended=True)
                for device, port in (_lower(c, names) for c in (spine_cable, hca_cable, w.faults["under_threshold"]))
            ),
        )
        # Two cables pulled out of the running fabric, then the subnet manager sweeps again.
        for cable in w.faults["unplugged"]:
            sim.unplug(*_lower(cable, names))
        w.save("ibnetdiscover-unplugged", sim.ibnetdiscover())
        w.save("iblinkinfo-unplugged", sim.iblinkinfo())
        w.save("iblinkinfo-l-unplugged", sim.iblinkinfo(one_line=True))
        w.routed["unplugged"] = route(sim, "ftree", name="route-unplugged")
        w.save("dump_lfts-unplugged", sim.dump_lfts())

    a, b = (c.upper for c in swapped)
    faulty = swap_cables(network, (a.device, a.port), (b.device, b.port))
    faulty = set_link_rate(faulty, _lower(w.faults["narrow"], names), width="2x")
    faulty = set_link_rate(faulty, _lower(w.faults["slow"], names), speed="HDR")
    with SimulatedFabric.start(faulty, work / "faulty", install) as sim:
        w.routed["faulty"] = route(sim, "ftree")
        w.save("ibnetdiscover-faulty", sim.ibnetdiscover())
        w.save("iblinkinfo-faulty", sim.iblinkinfo())
        w.save("iblinkinfo-l-faulty", sim.iblinkinfo(one_line=True))
        w.save("dump_lfts-faulty", sim.dump_lfts())
    return w


def _findings(w: World, *sources: str) -> set[tuple[str, str, str]]:
    """What `fabric check` names from each tool's output; every tool must name the same."""
    per_source = []
    for source in sources:
        option = "--ibnetdiscover" if source.startswith("ibnetdiscover") else "--iblinkinfo"
        result = invoke("fabric", "check", w.site, option, w.files[source], "-o", "json")
        assert result.exit_code in (0, 1), result.output
        (report,) = json.loads(result.output)["reports"]
        assert result.exit_code == (1 if report["findings"] else 0)
        per_source.append({(f["kind"], f["end_a"], f["end_b"]) for f in report["findings"]})
    assert all(found == per_source[0] for found in per_source), per_source
    return per_source[0]


def test_opensm_routes_the_plan_as_a_fat_tree_and_every_link_comes_up_4x_ndr(world: World) -> None:
    routed = world.routed["healthy"]
    assert routed.used == "ftree" and not routed.fell_back, routed.summary()
    topo = read_topology(str(world.files["iblinkinfo"]), "iblinkinfo")
    assert len(topo.links) == len(world.plan.cables)
    assert {link.rate for link in topo.links} == {"4xNDR"}


def test_a_healthy_fabric_names_nothing(world: World) -> None:
    assert _findings(world, "ibnetdiscover", "iblinkinfo", "iblinkinfo-l") == set()
    counters = invoke("fabric", "counters", world.site, "--ibqueryerrors", world.files["ibqueryerrors"])
    assert counters.exit_code == 0, counters.output
    assert "no port past a threshold" in counters.output
    # dump_lfts.sh as rdma-core ships it, its deprecation warning appended: read, not refused.
    lfts = world.files["dump_lfts"]
    assert "*** WARNING ***: this command has been replaced by dump_fts" in lfts.read_text()
    routes = invoke("fabric", "routes", world.site, "--lfts", lfts, "--ibnetdiscover", world.files["ibnetdiscover"])
    assert routes.exit_code == 0, routes.output
    assert "route:" not in routes.output and "not placed" not in routes.output and "not dumped" not in routes.output


def test_counters_that_count_are_named_by_their_cables_with_the_node_and_rail(world: World) -> None:
    expected = []
    spine_cable, hca_cable = world.faults["counted"]
    for cable in (spine_cable, hca_cable):
        upper, lower = _ends(cable, world.names)
        where = f" (node {cable.lower.device}, rail {cable.lower.port})" if cable.tier == "node-leaf" else ""
        expected.append(f"COUNTERS  {upper} <-> {lower}{where}")
    for source in ("--ibqueryerrors", "--perfquery"):
        name = "ibqueryerrors-counting" if source == "--ibqueryerrors" else "perfquery"
        result = invoke(
            "fabric", "counters", world.site, source, world.files[name], "--ibnetdiscover", world.files["ibnetdiscover"]
        )
        assert result.exit_code == 1, result.output
        named = sorted(line.split(":", 1)[0] for line in result.output.splitlines() if line.startswith("COUNTERS"))
        assert named == sorted(expected), result.output
        # The switch's `port ALL` line is counted once, on its port; the count of 5 is under the threshold.
        assert "UNPLACED" not in result.output
        assert "SymbolErrorCounter 500 (threshold 10)" in result.output
        assert "LinkDownedCounter 1 (threshold 0)" in result.output


def test_unplugged_cables_are_named_by_check_and_the_unplugged_hca_by_routes(world: World) -> None:
    expected = {("missing", *_ends(cable, world.names)) for cable in world.faults["unplugged"]}
    # iblinkinfo -l too: the pulled cables' switch ports print Down with no far end, a line the
    # healthy fabric's output never has (and the unplugged HCA prints nothing at all).
    assert _findings(world, "ibnetdiscover-unplugged", "iblinkinfo-unplugged", "iblinkinfo-l-unplugged") == expected
    # A leaf with one up-port fewer than the others is no fat tree to ftree: OpenSM falls back to minhop.
    routed = world.routed["unplugged"]
    assert routed.used == "minhop" and routed.fell_back, routed.summary()
    assert any(
        error.startswith("ERR AB0B: Different number of ports in an upward port group") for error in routed.errors
    )
    hca_cable = world.faults["unplugged"][0]
    host, rail = hca_cable.lower.device, hca_cable.lower.port
    result = invoke(
        "fabric", "routes", world.site, "--lfts", world.files["dump_lfts-unplugged"],
        "--ibnetdiscover", world.files["ibnetdiscover-unplugged"], "-o", "json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert report["unrouted"] == [{"host": host, "rail": rail}]
    assert report["problems"] == [
        f"no table routes {host} {hca_name(host, rail, world.names)} (rail {rail}, its cable at "
        f"{hca_cable.upper.device}[{hca_cable.upper.port}]): the subnet manager gave its port no LID; is the port "
        "down or its cable out?"
    ]


def test_swapped_cables_and_links_that_train_low_are_named_by_their_cables(world: World) -> None:
    (a, b), narrow, slow = world.faults["swapped"], world.faults["narrow"], world.faults["slow"]
    expected = {
        ("wrong-port", *_ends(a, world.names)),
        ("wrong-port", *_ends(b, world.names)),
        ("wrong-width", *_ends(narrow, world.names)),
        ("wrong-speed", *_ends(slow, world.names)),
    }
    # iblinkinfo -l too: the narrow and the slow link's width and speed columns, read as 2X and 53.125.
    assert _findings(world, "ibnetdiscover-faulty", "iblinkinfo-faulty", "iblinkinfo-l-faulty") == expected
    # The subnet manager routes the cables as they are: each swapped HCA's traffic lands on the other.
    result = invoke(
        "fabric", "routes", world.site, "--lfts", world.files["dump_lfts-faulty"],
        "--ibnetdiscover", world.files["ibnetdiscover-faulty"], "-o", "json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    problems = json.loads(result.output)["problems"]
    assert sorted(problems) == sorted(
        f"{one.upper.device} forwards {one.lower.device} (rail {one.lower.port}) out of port {other.upper.port}, "
        f"to {other.lower.device} rail {other.lower.port}"
        for one, other in ((a, b), (b, a))
    )


def test_the_top_lid_ibroute_leaves_out_is_named_with_its_port_and_switches(install: Install, tmp_path) -> None:
    """2 SU of 61 nodes: 24 switches and 488 HCAs take LIDs 1-512, and 512 is a multiple of 64."""
    site = tmp_path / "site.yaml"
    assert invoke("init", "--profile", "dgx-h100", "--scalable-units", "2", "--nodes", "61", "-o", site).exit_code == 0
    loaded = load_site(site)
    plan = plan_fabric(loaded.fabrics["compute"])
    names = hca_names(loaded, "compute")
    with SimulatedFabric.start(network_from_plan(plan, "NDR", names), tmp_path / "f", install) as sim:
        routed = route(sim, "ftree", dumps=True)
        (tmp_path / "ibnetdiscover").write_text(sim.ibnetdiscover())
        (tmp_path / "dump_lfts").write_text(sim.dump_lfts())
    devices = read_topology(str(tmp_path / "ibnetdiscover"), "ibnetdiscover").devices.values()
    top = max(devices, key=lambda d: d.lid or 0)
    assert top.lid == 512, "the fabric's LIDs no longer end at a multiple of 64: the test must be rebuilt"
    result = invoke(
        "fabric", "routes", site, "--lfts", tmp_path / "dump_lfts", "--ibnetdiscover", tmp_path / "ibnetdiscover",
        "-o", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (missing,) = json.loads(result.output)["missing_top_lids"]
    assert missing["lid"] == 512 and missing["owner"] == top.desc
    assert sorted(missing["switches"]) == sorted(s.name for s in plan.switches)
    text = invoke(
        "fabric", "routes", site, "--lfts", tmp_path / "dump_lfts", "--ibnetdiscover", tmp_path / "ibnetdiscover"
    )
    assert (
        f"not dumped: LID 512 (0x200, {top.desc}) is missing from {len(plan.switches)} switch table(s)" in text.output
    )
    # OpenSM's own dump of the same tables has the entry: nothing is missing there.
    own = invoke("fabric", "routes", site, "--lfts", routed.lfts_dump, "-o", "json")
    assert own.exit_code == 0 and json.loads(own.output)["missing_top_lids"] == []


def test_a_standby_subnet_manager_takes_over_when_the_master_stops(install: Install, tmp_path) -> None:
    """Two OpenSMs at two HCAs of one fabric: the higher priority is master, the other standby, and
    the standby becomes master when the master stops (polled every second here, not every 10 s)."""
    site = tmp_path / "site.yaml"
    assert invoke("init", "--profile", "dgx-h100", "--scalable-units", "1", "-o", site).exit_code == 0
    loaded = load_site(site)
    plan = plan_fabric(loaded.fabrics["compute"])
    config = tmp_path / "opensm.conf"
    config.write_text("sminfo_polling_timeout 1000\npolling_retry_number 2\n")
    with SimulatedFabric.start(
        network_from_plan(plan, "NDR", hca_names(loaded, "compute")), tmp_path / "f", install
    ) as sim:
        master = start_sm(sim, "ftree", priority=10, config=config, sim_host="dgx001 mlx5_0", name="sm-a")
        assert master.state == "MASTER" and master.wait_routed(60) == "ftree"
        standby = start_sm(sim, "ftree", priority=5, config=config, sim_host="dgx002 mlx5_0", name="sm-b")
        assert standby.state == "STANDBY"
        master.stop()
        assert standby.routing()[0] is None  # a standby routes nothing
        assert standby.wait_state(("MASTER",), 60) == "MASTER"
        assert standby.wait_routed(60) == "ftree"  # the new master swept the fabric and routed it
