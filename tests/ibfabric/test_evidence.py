"""Port counters and link state placed on the plan's cables (podctl.ibfabric.evidence), from a
real ibqueryerrors report (tests/data/fabric/SOURCES.md) and a node's sysfs record."""

from __future__ import annotations

import pytest

from podctl.ibfabric.counters import parse_ibqueryerrors
from podctl.ibfabric.evidence import hca_port_evidence, over_threshold, place_counters
from podctl.ibfabric.topofile import guid_key
from podctl.localize.routing import Router
from tests.helpers.repo import REPO

DATA = REPO / "tests" / "data" / "fabric"


@pytest.fixture(scope="module")
def h100_127():
    from podctl.derive.site import load_site
    from podctl.derive.topology import plan_fabric

    fabric = load_site(REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml").fabrics["compute"]
    plan = plan_fabric(fabric)
    return fabric, plan, Router(plan)


SWITCH_GUID = guid_key(0x2C903006E29B0)  # "MF0;ys23ib4:SX6036/U1" in the mail


def _unquoted(name: str) -> str:
    return "\n".join(line.removeprefix("> ").removeprefix(">") for line in (DATA / name).read_text().splitlines())


def test_a_real_report_lands_on_the_cables_of_the_switch_it_names(h100_127):
    _, plan, _ = h100_127
    counters = parse_ibqueryerrors(_unquoted("ibqueryerrors-fdr-sx6036-mailquoted.txt"), "mail")
    placed = place_counters(plan, counters, names_by_guid={SWITCH_GUID: "ib-leaf-su01-r1"})
    # By hand from the file: ports 1-8 of the switch each have LinkDownedCounter > 0 (8, 5, 5, 8,
    # 2, 9, 2, 9), ports 5 and 7 also SymbolErrorCounter 65535; port 0 only PortXmitWait; the HCAs only
    # VL15Dropped and PortXmitWait, which are no evidence of a bad cable.
    ports = {e.cable.upper.port: e.what for e in placed.evidence}
    assert sorted(ports) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert ports[5] == (
        "SymbolErrorCounter 65535 (threshold 10), LinkDownedCounter 2 (threshold 0) at ib-leaf-su01-r1[5]"
    )
    assert ports[3] == "LinkDownedCounter 5 (threshold 0) at ib-leaf-su01-r1[3]"
    # Leaf ports 1-8 are the down-links of the first eight nodes on rail 1.
    assert {e.cable.lower.device for e in placed.evidence} == {f"dgx{i:03d}" for i in range(1, 9)}
    # Its `port ALL` line sums the ports' lines below it (LinkErrorRecoveryCounter 15 = 8 + 7,
    # LinkDownedCounter 48 = the eight ports'): counted once, on the ports, not listed again.
    assert placed.unplaced == ()


def test_a_port_all_line_without_the_ports_lines_is_listed_not_guessed(h100_127):
    _, plan, _ = h100_127
    text = _unquoted("ibqueryerrors-fdr-sx6036-mailquoted.txt")
    alone = "\n".join(line for line in text.splitlines() if "0x2c903006e29b0 port " not in line or "port ALL" in line)
    placed = place_counters(plan, parse_ibqueryerrors(alone, "mail"), names_by_guid={SWITCH_GUID: "ib-leaf-su01-r1"})
    assert placed.evidence == ()
    assert placed.unplaced == (
        "MF0;ys23ib4:SX6036/U1 port ALL (mail:7): LinkErrorRecoveryCounter 15 (threshold 10), "
        "LinkDownedCounter 48 (threshold 0): counted over all ports together, not one cable",
    )


def test_without_a_name_for_its_device_a_port_is_listed_not_guessed(h100_127):
    _, plan, _ = h100_127
    counters = parse_ibqueryerrors(_unquoted("ibqueryerrors-fdr-sx6036-mailquoted.txt"), "mail")
    placed = place_counters(plan, counters)
    assert placed.evidence == ()
    assert len(placed.unplaced) == 8 and all("no planned cable" in u for u in placed.unplaced)


def test_a_nodes_own_hca_record_names_its_cable(h100_127):
    _, plan, _ = h100_127
    ports = [
        {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 400.0,
         "counters": {"symbol_error": 0, "link_downed": 0, "port_xmit_data": 123456789}},
        {"device": "mlx5_2", "port": 1, "state": "DOWN", "phys_state": "Polling", "rate_gbps": 10.0, "counters": {}},
        {"device": "mlx5_3", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 200.0,
         "counters": {"symbol_error": 11, "link_downed": 1}},
        {"device": "mlx5_9", "port": 1, "state": "DOWN", "phys_state": "Disabled", "rate_gbps": None},
    ]  # fmt: skip
    placed = hca_port_evidence(plan, "dgx005", ports, rate_gbps=400)
    by_rail = {e.cable.lower.port: e.what for e in placed.evidence}
    assert by_rail == {
        3: "port state DOWN (physical: Polling) at dgx005 mlx5_2",
        4: "rate 200 Gb/s of 400, SymbolErrorCounter 11 (threshold 10), LinkDownedCounter 1 (threshold 0) "
        "at dgx005 mlx5_3",
    }
    assert placed.unplaced == (
        "dgx005 mlx5_9 port 1: port state DOWN (physical: Disabled): not an HCA of the plan's fabric",
    )


@pytest.mark.parametrize(
    ("counters", "found"),
    [
        ({"SymbolErrorCounter": 10, "LinkDownedCounter": 0, "PortXmitWait": 10**9}, []),
        ({"SymbolErrorCounter": 11}, ["SymbolErrorCounter 11 (threshold 10)"]),
        ({"LinkDownedCounter": 1, "VL15Dropped": 500}, ["LinkDownedCounter 1 (threshold 0)"]),
    ],
)
def test_thresholds(counters, found):
    assert over_threshold(counters) == found


def test_the_evidence_feeds_the_localizer(h100_127):
    from podctl.localize.localize import localize
    from podctl.localize.simulate import SimulatedFabric

    fabric, plan, router = h100_127
    counters = parse_ibqueryerrors(_unquoted("ibqueryerrors-fdr-sx6036-mailquoted.txt"), "mail")
    placed = place_counters(plan, counters, names_by_guid={SWITCH_GUID: "ib-leaf-su01-r1"})
    sim = SimulatedFabric(plan, [], fabric.rate, router)
    diagnosis = localize(plan, sim, 0.9 * sim.rate_gbps, router, port_evidence=placed.evidence)
    assert len(diagnosis.bad_cables) == 8 and diagnosis.bad_nodes == () and sim.rounds == 1
