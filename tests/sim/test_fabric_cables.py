"""The sim pod's fabric without containers: the cables `podctl sim fault` names, as the network
file names their ends, and the facts the fabric role reads (podctl.derive.facts: where ibsim is served,
where each SM attaches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from podctl.derive import facts
from podctl.derive.emulated import EMULATED_SM_SERVICE, UMAD2SIM_PROGRAM, emulated_attachments, emulated_host_facts
from podctl.derive.inventory import render
from podctl.derive.site import load_site
from podctl.derive.topology import name_guid
from podctl.ibfabric.emulated import network
from podctl.ibfabric.ibsim import node_ids
from podctl.sim import fabric
from podctl.sim.errors import SimError
from tests.helpers.repo import SIM_SITE


@pytest.fixture(scope="module")
def site():  # type: ignore[no-untyped-def]
    return load_site(SIM_SITE)


def test_every_planned_cable_is_named_by_both_ends_as_the_network_file_names_them(site) -> None:  # type: ignore[no-untyped-def]
    cables = fabric.pod_cables(site)
    ids = node_ids(network(site))
    # 3 nodes x 2 rails, and 4 up-links from each of the 2 leaves.
    assert len(cables) == 14 and sum(c.node is not None for c in cables) == 6
    for cable in cables:
        assert cable.switch[0] in ids and cable.lower[0] in ids, cable
    node02 = fabric.find_cable(cables, "node02:2")
    assert (node02.switch, node02.lower, node02.rail) == (("ib-leaf-su01-r2", 2), ("node02 mlx5_1", 1), 2)
    assert node02.describe() == "ib-leaf-su01-r2[2] <-> node02 mlx5_1 (node node02, rail 2)"
    # Either end of a switch cable names it; a node cable's switch end too.
    up = fabric.find_cable(cables, "ib-leaf-su01-r1[5]")
    assert up == fabric.find_cable(cables, "ib-spine-01[1]")
    assert up.describe() == "ib-spine-01[1] <-> ib-leaf-su01-r1[5]"
    assert fabric.find_cable(cables, "ib-leaf-su01-r2[2]") == node02


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("node09:1", "no planned cable"),
        ("ib-leaf-su01-r1[4]", "no planned cable"),  # a free port
        ("node01", "name a cable by one end"),
        ("ib-leaf[1];reboot", "name a cable by one end"),
    ],
)
def test_a_cable_that_is_not_planned_is_refused_by_name(site, text: str, says: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SimError, match=says):
        fabric.find_cable(fabric.pod_cables(site), text)


def test_cables_written_by_sim_up_read_back(site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path))
    with pytest.raises(SimError, match="podctl sim up"):
        fabric.read_cables("nopod")
    folder = fabric.fabric_dir("nopod")
    folder.mkdir(parents=True)
    fabric._write_cables(folder, fabric.pod_cables(site))
    assert fabric.read_cables("nopod") == fabric.pod_cables(site)


def test_the_sm_host_without_an_hca_attaches_at_a_switch_and_only_a_sim_pod_says_so(site) -> None:  # type: ignore[no-untyped-def]
    assert emulated_attachments(site) == {"head01": "ib-leaf-su01-r1"}
    derived = facts.Facts(site)
    assert emulated_host_facts(derived, "node01") is None
    assert emulated_host_facts(derived, "head01") == {
        "fabric": "compute",
        "attach": "ib-leaf-su01-r1",
        "client_program": UMAD2SIM_PROGRAM,
        "service": EMULATED_SM_SERVICE,
        "root_guids": [],  # ftree finds its own roots
    }
    assert "podctl_emulated_fabric:\n  attach: ib-leaf-su01-r1" in render(site, sim=True)["host_vars/head01.yml"]
    # A site file cannot claim it: only the sim's own record makes the inventory say so.
    assert "podctl_emulated_fabric: null" in render(site, sim=False)["host_vars/head01.yml"]


def test_an_sm_host_on_the_fabric_attaches_at_its_rail_1_hca(tmp_path: Path) -> None:
    text = SIM_SITE.read_text().replace("subnet_managers: head01", "subnet_managers: node02")
    (tmp_path / "site.yaml").write_text(text.replace("../../.cache", str(SIM_SITE.parents[2] / ".cache")))
    site = load_site(tmp_path / "site.yaml")
    assert emulated_attachments(site) == {"node02": "node02 mlx5_0"}


def test_updn_gets_its_roots_by_the_guids_the_emulated_fabric_gives_them(tmp_path: Path) -> None:
    text = SIM_SITE.read_text().replace("routing_engine: ftree", "routing_engine: updn")
    (tmp_path / "site.yaml").write_text(text.replace("../../.cache", str(SIM_SITE.parents[2] / ".cache")))
    site = load_site(tmp_path / "site.yaml")
    found = emulated_host_facts(facts.Facts(site), "head01")
    assert found is not None and found["root_guids"] == [f"0x{name_guid('ib-spine-01'):016x}"]
    # The same GUID the network file gives that switch: what ibsim and OpenSM see.
    assert f"switchguid=0x{name_guid('ib-spine-01'):016x}" in network(site)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--width", "1x"], "--width and --speed say how far --degrade"),
        (["node01", "--unplug", "node01:1"], "fabric faults name cables, not NODES"),
        (["--unplug", "node01:1", "--clear"], "fabric faults name cables, not NODES"),
        (["--kill"], "give NODES for a node fault, or a fabric fault"),
    ],
)
def test_fault_arguments_that_mix_node_and_fabric_faults_are_refused_before_anything_runs(
    args: list[str], says: str
) -> None:
    from click.testing import CliRunner

    from podctl.sim.cli import sim

    result = CliRunner().invoke(sim, ["fault", "--pod", "nopod", *args])
    assert result.exit_code == 2 and says in result.output, result.output
