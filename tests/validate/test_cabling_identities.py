"""Real fabric identities at the site level: a fabric's naming templates, and HCA GUIDs read on the nodes.

The dumps here are podctl's planned fabric renamed the way a vendor's fabric
describes itself (switch names in a site template, HCAs with one shared factory
description): with the site's templates and the nodes' GUIDs, such a fabric
checks clean, and a swapped pair of cables is named.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podctl.derive.facts import Facts, hca_names
from podctl.derive.site import load_site
from podctl.ibfabric import corrupt
from podctl.ibfabric.formats import End, parse_ibnetdiscover, topology_from_plan, write_ibnetdiscover
from podctl.ibfabric.identity import write_anchors
from podctl.validate.cabling import READ_GUIDS, parse_node_guids
from tests.helpers.repo import DATA

PODCTL = str(Path(sys.executable).parent / "podctl")
FACTORY_HCA = "MT4129 ConnectX7   Mellanox Technologies"


def test_the_guids_read_on_a_node_become_its_anchors(tmp_path: Path) -> None:
    sysfs = tmp_path / "infiniband"
    for device, gid in (("mlx5_0", "fe80:0000:0000:0000:b83f:d203:0012:3456"), ("mlx5_3", "fe80::a088:c203:54:fe21")):
        (sysfs / device / "ports" / "1" / "gids").mkdir(parents=True)
        (sysfs / device / "ports" / "1" / "gids" / "0").write_text(gid + "\n")
    (sysfs / "mlx5_9").mkdir()  # an Ethernet function without port GIDs: nothing to read
    out = subprocess.run(
        ["sh", "-c", READ_GUIDS.replace("/sys/class/infiniband", str(sysfs))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert parse_node_guids(out) == {"mlx5_0": 0xB83FD20300123456, "mlx5_3": 0xA088C2030054FE21}
    assert parse_node_guids("garbage\nmlx5_0 not-a-gid\n" + "x y z\n" * 5) == {}


def _site(tmp_path: Path) -> Path:
    doc = yaml.safe_load((DATA / "valid-every-field.yaml").read_text())
    doc["fabrics"]["compute"]["naming"] = {"switch": ["{name} Quantum-2 {*}"], "hca": ["port-{n} of {host}"]}
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc))
    # The site's monitoring certificate and key, by their paths relative to the site file.
    shutil.copytree(DATA / "tls", tmp_path / "tls")
    return path


def _vendor_dump(site_path: Path, tmp_path: Path, factory_hcas: bool, swap: bool = False) -> tuple[Path, Path]:
    site = load_site(site_path)
    names = hca_names(site, "compute")
    topo = topology_from_plan(Facts(site).plans["compute"], site.fabrics["compute"].rate, names)
    if swap:
        # gpu02's two rails plugged into each other's leaf ports.
        topo = corrupt.swap_ports(topo, End("gpu02 mlx5_0", 1), End("gpu02 mlx5_3", 1))
    anchors = {}
    for device in topo.devices.values():
        if device.kind == "switch":
            device.desc = f"{device.desc} Quantum-2 Mellanox Technologies"
        else:
            host, hca = device.desc.split(" ")
            rail = names[host].index(hca) + 1
            anchors[(host, rail)] = device.guid
            device.desc = FACTORY_HCA if factory_hcas else f"port-{rail} of {host}"
    dump = tmp_path / f"ibnetdiscover-{factory_hcas}-{swap}.txt"
    dump.write_text(write_ibnetdiscover(topo))
    anchors_file = tmp_path / "anchors.txt"
    anchors_file.write_text(write_anchors(anchors))
    assert parse_ibnetdiscover(dump.read_text()).devices  # the dump reads back
    return dump, anchors_file


def _check(site: Path, dump: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PODCTL, "fabric", "check", str(site), "--ibnetdiscover", str(dump), *extra],
        capture_output=True,
        text=True,
        check=False,
    )


def test_site_templates_name_a_vendor_fabric(tmp_path: Path) -> None:
    site = _site(tmp_path)
    dump, _ = _vendor_dump(site, tmp_path, factory_hcas=False)
    ran = _check(site, dump)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "matches the plan" in ran.stdout
    # Without the templates every switch is a stranger.
    bare = tmp_path / "bare.yaml"
    bare.write_text(re.sub(r"(?m)^    naming:\n(?:      .*\n)+", "", site.read_text()))
    assert "naming" not in bare.read_text()
    assert _check(bare, dump).returncode == 1


@pytest.mark.parametrize("swap", [False, True], ids=["healthy", "two-cables-swapped"])
def test_anchors_identify_hcas_that_share_a_factory_description(tmp_path: Path, swap: bool) -> None:
    site = _site(tmp_path)
    dump, anchors = _vendor_dump(site, tmp_path, factory_hcas=True, swap=swap)
    ran = _check(site, dump, "--anchors", str(anchors))
    if not swap:
        assert ran.returncode == 0, ran.stdout + ran.stderr
        return
    assert ran.returncode == 1, ran.stdout
    wrong = [line for line in ran.stdout.splitlines() if line.startswith("WRONG-")]
    assert len(wrong) == 2 and all("gpu02" in line for line in wrong), ran.stdout
