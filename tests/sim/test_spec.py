"""From the sim site to podman arguments (no podman)."""

from __future__ import annotations

import dataclasses
import ipaddress
from pathlib import Path

import pytest

from podctl.core import platforms
from podctl.derive.site import load_site
from podctl.sim import spec as sp
from podctl.sim.errors import SimError

REPO = Path(__file__).resolve().parents[2]
SIM_SITE = REPO / "inventory" / "sim" / "site.yaml"


@pytest.fixture(scope="module")
def site():
    return load_site(SIM_SITE)


@pytest.fixture
def pod(site, tmp_path):
    return sp.pod_spec(site, SIM_SITE, None, tmp_path / "mounts")


def test_whole_site(pod):
    assert pod.pod == "sim"
    assert pod.network == "podctl-sim"
    assert str(pod.subnet) == "10.89.0.0/24" and str(pod.gateway) == "10.89.0.1"
    assert [n.hostname for n in pod.nodes] == ["head01", "node01", "node02", "node03"]
    assert [str(n.address) for n in pod.nodes] == ["10.89.0.10", "10.89.0.11", "10.89.0.12", "10.89.0.13"]
    assert not pod.subset
    assert pod.labels == {"io.podctl.pod": "sim", "io.podctl.site": str(SIM_SITE.resolve())}


def test_subset_by_hostlist_keeps_site_order(site):
    assert sp.select_nodes(site, "node[03,01]") == ("node01", "node03")
    assert sp.select_nodes(site, None) == ("head01", "node01", "node02", "node03")


def test_unknown_hosts_are_an_error_naming_them(site):
    with pytest.raises(SimError) as err:
        sp.select_nodes(site, "node[02-05]")
    message = str(err.value)
    assert "node[04-05]" in message
    assert "head01,node[01-03]" in message


def test_bad_hostlist_syntax(site):
    with pytest.raises(SimError, match="not a valid hostlist"):
        sp.select_nodes(site, "node[01-")


def test_network_create_args(pod):
    assert sp.network_create_args(pod) == [
        "network",
        "create",
        "--subnet",
        "10.89.0.0/24",
        "--gateway",
        "10.89.0.1",
        "--label",
        "io.podctl.pod=sim",
        "--label",
        f"io.podctl.site={SIM_SITE.resolve()}",
        "podctl-sim",
    ]


def test_create_args(pod, tmp_path):
    node = pod.nodes[1]
    args = sp.create_args(pod, node, "localhost/podctl-sim-node:abc", "ssh-ed25519 AAAA key")
    joined = " ".join(args)
    assert args[0] == "create" and args[-2:] == ["localhost/podctl-sim-node:abc", "/sbin/init"]
    for expected in (
        "--name podctl-sim-node01",
        "--hostname node01",
        "--network podctl-sim",
        "--ip 10.89.0.11",
        "--mac-address 02:50:0a:59:00:0b",
        "--systemd=always",
        "--label io.podctl.pod=sim",
        "--label io.podctl.node=node01",
        "--label io.podctl.address=10.89.0.11",
        "--label io.podctl.platform=debian-13",
        f"--volume {tmp_path / 'mounts' / 'home'}:/home/shared:rw",
        f"--volume {tmp_path / 'mounts' / 'scratch'}:/scratch:rw",
        "--no-hosts",
        "--cap-add SYS_NICE",
        "--cap-add NET_ADMIN",  # the monitoring role's nftables rules, in the node's own namespace
        "--ulimit nofile=1024:1024",
    ):
        assert expected in joined
    assert "SYS_TIME" not in joined and "SYS_ADMIN" not in joined
    assert sp.spec_label(args)


def test_spec_label_changes_with_key_image_and_site(pod, site, tmp_path):
    node = pod.nodes[0]
    base = sp.spec_label(sp.create_args(pod, node, "img:a", "key1"))
    assert base == sp.spec_label(sp.create_args(pod, node, "img:a", "key1"))
    assert base != sp.spec_label(sp.create_args(pod, node, "img:b", "key1"))
    assert base != sp.spec_label(sp.create_args(pod, node, "img:a", "key2"))
    moved = dataclasses.replace(pod, domain="other.internal")
    assert base != sp.spec_label(sp.create_args(moved, node, "img:a", "key1"))


def test_a_changed_platform_is_a_changed_container(pod):
    # Even from the same image reference (a retagged image is used by id), the node's release is
    # part of its spec: `up` after a group's os changes recreates its nodes.
    node = pod.nodes[1]
    older = dataclasses.replace(node, platform=platforms.by_key("debian-12"))
    assert sp.spec_label(sp.create_args(pod, node, "img", "k")) != sp.spec_label(sp.create_args(pod, older, "img", "k"))
    assert "io.podctl.platform=debian-12" in sp.create_args(pod, older, "img", "k")


def test_the_pod_needs_the_images_of_its_chosen_nodes_releases(site, tmp_path):
    # (check refuses such a site for Slurm's version rule; the sim itself does not mind.)
    bookworm = platforms.by_key("debian-12")
    nodes = tuple(dataclasses.replace(n, platform=bookworm) if n.hostname == "node01" else n for n in site.nodes)
    mixed = dataclasses.replace(site, nodes=nodes)
    whole = sp.pod_spec(mixed, SIM_SITE, None, tmp_path)
    assert [p.key for p in whole.platforms] == ["debian-13", "debian-12"]
    assert {n.hostname: n.platform.key for n in whole.nodes}["node01"] == "debian-12"
    assert [p.key for p in sp.pod_spec(mixed, SIM_SITE, "head01", tmp_path).platforms] == ["debian-13"]
    assert [p.key for p in sp.pod_spec(site, SIM_SITE, None, tmp_path).platforms] == ["debian-13"]


def test_a_node_added_to_the_site_elsewhere_keeps_every_running_node(site, tmp_path):
    # Day 2: a copy of the site with a fourth compute node, saved under another name.
    grown_path = tmp_path / "site-4.yaml"
    grown_path.write_text(SIM_SITE.read_text().replace("node[01-03]", "node[01-04]"))
    grown = sp.pod_spec(load_site(grown_path), grown_path, None, tmp_path)
    before = sp.pod_spec(site, SIM_SITE, None, tmp_path)
    assert [n.hostname for n in grown.nodes][-1] == "node04"
    for old in before.nodes:
        new = next(n for n in grown.nodes if n.hostname == old.hostname)
        assert sp.spec_label(sp.create_args(grown, new, "i", "k")) == sp.spec_label(
            sp.create_args(before, old, "i", "k")
        )


def test_a_subset_gives_the_same_containers_as_the_whole_pod(site, tmp_path):
    whole = sp.pod_spec(site, SIM_SITE, None, tmp_path)
    part = sp.pod_spec(site, SIM_SITE, "node02", tmp_path)
    assert part.subset
    node = part.nodes[0]
    assert sp.create_args(part, node, "i", "k") == sp.create_args(whole, node, "i", "k")


def test_mounts_only_into_their_clients(site, tmp_path):
    storage = tuple(dataclasses.replace(m, clients=("head01",)) for m in site.storage)
    limited = dataclasses.replace(site, storage=storage)
    pod = sp.pod_spec(limited, SIM_SITE, None, tmp_path)
    assert "--volume" in sp.create_args(pod, pod.nodes[0], "i", "k")
    assert "--volume" not in sp.create_args(pod, pod.nodes[1], "i", "k")


def test_hosts_file_puts_the_fqdn_first(pod):
    hosts = sp.hosts_file(pod)
    assert "10.89.0.10\thead01.sim.podctl.internal head01\n" in hosts
    assert hosts.startswith("127.0.0.1\tlocalhost\n")


def test_node_mac_is_derived_from_the_address():
    assert sp.node_mac(ipaddress.IPv4Address("10.89.0.13")) == "02:50:0a:59:00:0d"


def test_gateway_address_on_a_node_is_refused(site, tmp_path):
    nodes = (dataclasses.replace(site.nodes[0], address=ipaddress.IPv4Address("10.89.0.1")), *site.nodes[1:])
    broken = dataclasses.replace(site, nodes=nodes, _by_name={})
    with pytest.raises(SimError, match="management gateway"):
        sp.pod_spec(broken, SIM_SITE, None, tmp_path)


def test_pod_name_must_suit_podman():
    with pytest.raises(SimError, match="cannot name podman containers"):
        sp.validate_pod_name("my pod")


def test_ssh_config_names_every_node(pod, tmp_path):
    text = sp.ssh_config(pod, tmp_path / "id_ed25519", tmp_path / "known_hosts")
    assert "Host node03 node03.sim.podctl.internal\n  HostName 10.89.0.13" in text
    assert f"IdentityFile {tmp_path / 'id_ed25519'}" in text
