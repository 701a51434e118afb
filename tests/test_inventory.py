"""The rendered Ansible inventory: content, determinism, atomic writes, and real Ansible accepting it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from podctl.core.errors import PodctlError
from podctl.derive.facts import Facts
from podctl.derive.inventory import _host_vars, _site_vars, render, write_inventory
from podctl.derive.site import check_site_text, load_site
from tests.helpers.repo import REPO, SIM_SITE

EXAMPLES = sorted((REPO / "inventory").rglob("*.yaml"))


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_inventory_is_byte_identical_between_runs(path: Path, tmp_path: Path) -> None:
    site = load_site(path)
    write_inventory(site, tmp_path / "a")
    write_inventory(load_site(path), tmp_path / "b")
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    write_inventory(site, tmp_path / "a")  # rewriting in place changes nothing either
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_rendered_yaml_reads_back_as_the_facts(path: Path) -> None:
    site = load_site(path)
    facts = Facts(site)
    files = render(site, facts)
    assert yaml.safe_load(files["group_vars/all/podctl.yml"]) == _site_vars(site, facts, {})
    for node in site.nodes[:40]:
        assert yaml.safe_load(files[f"host_vars/{node.hostname}.yml"]) == _host_vars(site, facts, node.hostname)


def test_sim_inventory_facts() -> None:
    site = load_site(SIM_SITE)
    files = render(site)
    hosts = yaml.safe_load(files["hosts.yml"])["all"]["children"]
    assert set(hosts["compute"]["hosts"]) == {"node01", "node02", "node03"}
    assert set(hosts["role_controller"]["hosts"]) == {"head01"}
    node01 = yaml.safe_load(files["host_vars/node01.yml"])
    assert node01["ansible_host"] == "10.89.0.11"
    assert node01["podctl_ipoib_interfaces"] == [
        {"rail": 1, "interface": "ib0", "address": "172.30.0.1/24"},
        {"rail": 2, "interface": "ib1", "address": "172.30.1.1/24"},
    ]
    assert node01["podctl_hca_map"] == [
        {"fabric": "compute", "rail": 1, "hca": "mlx5_0", "switch": "ib-leaf-su01-r1", "port": 1},
        {"fabric": "compute", "rail": 2, "hca": "mlx5_1", "switch": "ib-leaf-su01-r2", "port": 1},
    ]
    site_vars = yaml.safe_load(files["group_vars/all/podctl.yml"])
    slurm = site_vars["podctl_slurm"]
    assert slurm["nodes"] == [
        {
            "names": "node[01-03]",
            "cpus": 2,
            "sockets": 1,
            "cores_per_socket": 2,
            "threads_per_core": 1,
            "real_memory_mb": 1843,
            "gpus": 0,
            "gpu_type": "",
            "gres": [],
        }
    ]
    assert "SwitchName=su01 Nodes=node[01-03]" in slurm["topology_conf"]
    assert site_vars["podctl_monitoring"]["targets"]["node"] == [
        "head01:9100",
        "node01:9100",
        "node02:9100",
        "node03:9100",
    ]
    assert site_vars["podctl_ntp_servers"] == ["10.89.0.10"]


def test_topology_conf_leaves_out_hosts_slurm_does_not_schedule() -> None:
    # With no explicit fabric node list, the head node (sim profile, 2 HCAs) is cabled too.
    text = SIM_SITE.read_text().replace("    nodes: node[01-03]\n    subnet_managers", "    subnet_managers")
    result = check_site_text(text, "attached-head.yaml")
    assert result.site is not None and "head01" in result.site.fabrics["compute"].nodes
    conf = Facts(result.site).slurm_topology_conf
    assert "head01" not in conf
    assert "SwitchName=su01 Nodes=node[01-03]\n" in conf


def test_write_refuses_a_folder_that_is_not_an_inventory(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(PodctlError, match="not a podctl inventory"):
        write_inventory(load_site(SIM_SITE), tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_a_failed_write_leaves_the_previous_inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = load_site(SIM_SITE)
    write_inventory(site, tmp_path / "inv")
    before = _tree(tmp_path / "inv")

    def boom(*args: object, **kwargs: object) -> dict[str, str]:
        files = render(site)
        files["host_vars/zz-last.yml"] = None  # type: ignore[assignment]  # writing None fails midway
        return files

    monkeypatch.setattr("podctl.derive.inventory.render", boom)
    with pytest.raises(TypeError):
        write_inventory(site, tmp_path / "inv")
    assert _tree(tmp_path / "inv") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inv"]


@pytest.mark.ansible
def test_ansible_inventory_accepts_it(tmp_path: Path) -> None:
    exe = shutil.which("ansible-inventory") or str(Path(__import__("sys").executable).parent / "ansible-inventory")
    if not Path(exe).exists():
        pytest.fail("ansible-inventory is not installed: install podctl[deploy]")
    site = load_site(SIM_SITE)
    write_inventory(site, tmp_path / "inv")
    # Ansible's own warnings are judged, not a library's Python warning at import (cryptography 51
    # deprecates the DSA that ansible-core's ssh-agent support still imports).
    env = {**os.environ, "PYTHONWARNINGS": "ignore:DSA is deprecated"}
    graph = subprocess.run(
        [exe, "-i", str(tmp_path / "inv"), "--graph"], capture_output=True, text=True, check=True, env=env
    )
    for host in ("head01", "node01", "node02", "node03"):
        assert host in graph.stdout
    assert "@role_controller" in graph.stdout and "@compute" in graph.stdout
    listed = subprocess.run(
        [exe, "-i", str(tmp_path / "inv"), "--host", "node02"], capture_output=True, text=True, check=True
    )
    host = json.loads(listed.stdout)
    assert host["ansible_host"] == "10.89.0.12"
    assert host["podctl_site_name"] == "sim"  # group_vars/all reached the host
    assert "Warning" not in graph.stderr and "WARNING" not in graph.stderr, graph.stderr


def test_validation_tools_vars() -> None:
    site_vars = yaml.safe_load(render(load_site(SIM_SITE))["group_vars/all/podctl.yml"])
    assert site_vars["podctl_validation_tools"] == {
        "path": "/opt/podctl-validation",
        "exec": "/usr/local/sbin/podctl-validation-exec",
        "index_url": None,
        "packages": ["torch", "numpy"],
        "wheels": str(REPO / ".cache" / "validation-wheels"),
        "source": str(REPO / "validation"),
    }


@pytest.mark.parametrize("name", ["..", ".", "-lead", "trail-", "dgx01.pod", "x" * 64, "node_01", ""])
def test_the_renderer_refuses_a_node_that_is_not_a_host_name(name: str, tmp_path: Path) -> None:
    # The loader reports such a name with its YAML path (tests/data/invalid-hostname.yaml); a model
    # built another way must still not decide which files the inventory writes.
    import dataclasses

    site = load_site(SIM_SITE)
    bad = dataclasses.replace(site.nodes[-1], hostname=name)
    site = dataclasses.replace(site, nodes=(*site.nodes[:-1], bad))
    with pytest.raises(PodctlError, match="not a host name"):
        write_inventory(site, tmp_path / "inventory")
    assert not (tmp_path / "inventory").exists()


@pytest.mark.parametrize("name", ["a", "0", "dgx-h100-001", "x" * 63, "NODE01", "9node"])
def test_rfc_1123_labels_are_host_names(name: str) -> None:
    from podctl.core.hostlist import is_hostname

    assert is_hostname(name)


def _monitoring_vars(site_path: Path) -> dict:
    return yaml.safe_load(render(load_site(site_path))["group_vars/all/podctl.yml"])["podctl_monitoring"]


def test_monitoring_vars_say_where_prometheus_listens_how_it_is_named_and_where_its_password_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from podctl.derive.facts import duration_s

    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path / "state"))
    login = ("listen_address", "web_host", "web_scheme", "tls", "password_file", "prometheus_address")
    sim = _monitoring_vars(SIM_SITE)
    password = str(tmp_path / "state" / "sites" / "sim" / "monitoring-password")
    assert [sim[k] for k in login] == ["10.89.0.10", "10.89.0.10", "http", None, password, "10.89.0.10"]
    assert sim["scrape_interval_s"] == 15 and sim["query_program"] == "/usr/local/lib/podctl/podctl-monitoring-get"
    # listen: localhost binds the loopback address; the exporters' firewall still names the host's address.
    local = tmp_path / "local.yaml"
    local.write_text(
        SIM_SITE.read_text().replace("  alert_rules: true\n", "  alert_rules: true\n  listen: localhost\n")
    )
    assert [_monitoring_vars(local)[k] for k in login][:3] == ["127.0.0.1", "127.0.0.1", "http"]
    assert _monitoring_vars(local)["prometheus_address"] == "10.89.0.10"
    # With the site's certificate, clients name the host as the certificate does (tests/data/tls).
    every = _monitoring_vars(REPO / "tests" / "data" / "valid-every-field.yaml")
    assert [every[k] for k in login][:3] == ["10.20.0.5", "mgmt01.lab.example.com", "https"]
    assert every["tls"] == {
        "cert": str(REPO / "tests" / "data" / "tls" / "mgmt01.crt"),
        "key": str(REPO / "tests" / "data" / "tls" / "mgmt01.key"),
    }
    assert [duration_s(t) for t in ("500ms", "15s", "2m", "1h")] == [0.5, 15, 120, 3600]
