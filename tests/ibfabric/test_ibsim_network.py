"""ibsim's network file without ibsim: the limits it needs, faults cabled into it, devices found by name.
(tests/ibfabric/test_real_tools.py runs ibsim on such files.)"""

from __future__ import annotations

import pytest

from podctl.ibfabric.formats import parse_ibnetdiscover
from podctl.ibfabric.ibsim import IbsimError, network_from_plan, network_limits, node_ids, set_link_rate, swap_cables
from podctl.ibfabric.ibsim.install import DEFAULT_NODES, DEFAULT_PORTS, DEFAULT_SWITCHES, Limits
from podctl.ibfabric.topofile import End, port_map


@pytest.fixture(scope="module")
def network(planned, names):
    _, fabric, plan, _ = planned("h100-127")
    return plan, network_from_plan(plan, fabric.rate, names("h100-127"))


def test_the_limits_are_counted_from_the_file_and_never_below_ibsims_own(network) -> None:
    plan, text = network
    # 48 switches and 1,016 HCAs fit ibsim's defaults: it is started with them.
    assert network_limits(text) == Limits(DEFAULT_NODES, DEFAULT_SWITCHES, DEFAULT_PORTS)
    # Past them, exactly what the file holds: every node, every switch, each switch's ports and its port 0.
    many = "\n".join([text] + [f'Switch\t64 "S-{i:016x}"\t\t# "extra-{i}"' for i in range(300)])
    many += "\n" + "\n".join(f'Ca\t2 "H-{i:016x}"\t\t# "extra-ca-{i}"' for i in range(2000))
    hcas = len(plan.cables_in("node-leaf"))
    switches = len(plan.switches) + 300
    assert network_limits(many) == Limits(
        switches + hcas + 2000, switches, sum(s.radix + 1 for s in plan.switches) + 300 * 65 + hcas + 2000 * 2
    )


def test_devices_are_found_by_description(network) -> None:
    _, text = network
    ids = node_ids(text)
    topo = parse_ibnetdiscover(text)
    leaf = topo.named("ib-leaf-su01-r1")[0]
    hca = topo.named("dgx001 mlx5_0")[0]
    assert ids["ib-leaf-su01-r1"] == f"S-{leaf.guid:016x}" and ids["dgx001 mlx5_0"] == f"H-{hca.guid:016x}"


def _far(text: str, device: str, port: int) -> tuple[str, str]:
    topo = parse_ibnetdiscover(text)
    far, link = port_map(topo)[topo.resolve(End(device, port)).device][port]
    return topo.desc(far), link.rate


def test_swapped_cables_and_a_slow_link_are_cabled_into_the_file(network) -> None:
    _, text = network
    assert _far(text, "ib-leaf-su01-r1", 3) == ("dgx003 mlx5_0", "4xNDR")
    swapped = swap_cables(text, ("ib-leaf-su01-r1", 3), ("ib-leaf-su01-r1", 7))
    assert _far(swapped, "ib-leaf-su01-r1", 3) == ("dgx007 mlx5_0", "4xNDR")
    assert _far(swapped, "ib-leaf-su01-r1", 7) == ("dgx003 mlx5_0", "4xNDR")
    narrow = set_link_rate(swapped, ("dgx005 mlx5_0", 1), width="2x")
    assert _far(narrow, "ib-leaf-su01-r1", 5) == ("dgx005 mlx5_0", "2xNDR")
    slow = set_link_rate(narrow, ("ib-leaf-su01-r1", 40), speed="HDR")
    assert _far(slow, "ib-leaf-su01-r1", 40)[1] == "4xHDR"
    # Both ends of each cable say the same rate: ibsim trains a link to what both ends allow.
    assert slow.count("2xNDR") == 2 and slow.count("4xHDR") == 2


def test_faults_at_unknown_ports_or_rates_ibsim_cannot_train_are_refused(network) -> None:
    _, text = network
    with pytest.raises(IbsimError, match=r"swap \('ib-leaf-su09-r1', 3\)"):
        swap_cables(text, ("ib-leaf-su09-r1", 3), ("ib-leaf-su01-r1", 7))
    with pytest.raises(IbsimError, match="link width '3x'"):
        set_link_rate(text, ("dgx005 mlx5_0", 1), width="3x")
    with pytest.raises(IbsimError, match="link speed 'XDR'"):
        set_link_rate(text, ("dgx005 mlx5_0", 1), speed="XDR")
