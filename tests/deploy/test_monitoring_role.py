"""The monitoring role's interface, the files it renders and its DCGM
hardware gate, without a pod (the pod test is tests/deploy/test_slurm_pod.py).

Starts: ansible-playbook on localhost (connection local): it renders the
role's templates from the sim site's inventory into a temporary directory,
and runs the role's DCGM step alone (tag monitoring_dcgm), which on a host
without GPUs is only the hardware gate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podctl.core.assets import collections_path, roles_dir
from tests.helpers.roles import bcrypt_filter

pytestmark = pytest.mark.deploy

REPO = Path(__file__).resolve().parents[2]
ROLE = roles_dir() / "monitoring"
SIM_SITE = REPO / "inventory" / "sim" / "site.yaml"
PODCTL = str(Path(sys.executable).parent / "podctl")
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
TEMPLATES = {
    "prometheus.yml": "prometheus.yml.j2",
    "podctl.rules.yml": "podctl.rules.yml.j2",
    "alertmanager.yml": "alertmanager.yml.j2",
    "prometheus.default": "prometheus.default.j2",
}


def test_defaults_match_argument_specs() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    options = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    assert all(name.startswith("podctl_monitoring_") for name in defaults)
    private = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert all(name.startswith("_podctl_monitoring_") for name in private)


def test_every_handler_listens() -> None:
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    assert handlers and all(h["listen"].startswith("podctl_monitoring | ") for h in handlers)


def _handlers_run(tmp_path: Path, notified: list[str]) -> list[str]:
    """The names of the role's handlers that act when `notified` are notified in one run: the real
    handlers file under ansible-playbook, each systemd call replaced by a debug line that names
    the unit and the state, the rest (when, register, listen, order) as written."""
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    for handler in handlers:
        call = handler.pop("ansible.builtin.systemd_service", None)
        if call is not None:
            handler["ansible.builtin.debug"] = {"msg": f"{call['name']} {call['state']}"}
        handler.pop("become", None)
    (tmp_path / "handlers.yml").write_text(yaml.safe_dump(handlers))
    play = {
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {"_podctl_monitoring_is_server": True},
        "tasks": [{"name": "notify", "ansible.builtin.debug": {"msg": "x"}, "changed_when": True, "notify": notified}],
        "handlers": [{"ansible.builtin.import_tasks": str(tmp_path / "handlers.yml")}],
    }
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOCALHOST_WARNING": "false"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    return [t["task"]["name"] for t in tasks[1:] if not t["hosts"]["localhost"].get("skipped")]


@pytest.mark.ansible
def test_a_restart_is_never_followed_by_a_reload_of_the_same_daemon_in_one_run(tmp_path: Path) -> None:
    arguments = [
        "podctl_monitoring | prometheus arguments changed",
        "podctl_monitoring | alertmanager arguments changed",
    ]
    config = ["podctl_monitoring | prometheus config changed", "podctl_monitoring | alertmanager config changed"]
    # Arguments and configuration changed together: the restart alone, which reads both.
    assert _handlers_run(tmp_path, arguments + config) == ["Restart Prometheus", "Restart Alertmanager"]
    # The configuration alone: the reload alone.
    assert _handlers_run(tmp_path, config) == ["Reload Prometheus", "Reload Alertmanager"]


def test_one_slurm_exporter_file_per_choice() -> None:
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    for choice in spec["podctl_monitoring_slurm_exporter_source"]["choices"]:
        assert (ROLE / "tasks" / f"slurm_exporter_{choice}.yml").is_file()


def run_local(tmp_path: Path, play: dict, extra: dict, *args: str) -> subprocess.CompletedProcess[str]:
    inventory = tmp_path / "inventory"
    if not inventory.exists():
        subprocess.run([PODCTL, "inventory", str(SIM_SITE), "-o", str(inventory)], check=True, capture_output=True)
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "head01", "connection": "local", "gather_facts": False, **play}]))
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    env = {
        **os.environ,
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_ROLES_PATH": str(ROLE.parent),
        # The collection's own modules (podctl.pod.secret_file, root_tree) beside the roles.
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path()),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
    }
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(inventory), "-e", f"@{extra_file}", *args, str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def render(tmp_path: Path, extra: dict) -> dict[str, str]:
    out = tmp_path / "out"
    out.mkdir()
    run_local(
        tmp_path,
        {
            "name": "Render",
            "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
            "tasks": [
                {
                    "name": "Render",
                    "ansible.builtin.template": {
                        "src": f"{ROLE}/templates/{{{{ item.value }}}}",
                        "dest": f"{out}/{{{{ item.key }}}}",
                        "mode": "0644",
                    },
                    "loop": "{{ lookup('ansible.builtin.dict', templates) }}",
                }
            ],
        },
        {"templates": TEMPLATES, **extra},
    )
    return {name: (out / name).read_text() for name in TEMPLATES}


@pytest.mark.ansible
def test_prometheus_scrapes_the_site_targets_with_its_interval_and_retention(tmp_path: Path) -> None:
    files = render(tmp_path, {})
    config = yaml.safe_load(files["prometheus.yml"])
    assert config["global"]["scrape_interval"] == "15s"
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert jobs["node"] == ["head01:9100", "node01:9100", "node02:9100", "node03:9100"]
    assert jobs["slurm"] == ["head01:9341"]
    assert "dcgm" not in jobs
    assert "--storage.tsdb.retention.time=7d" in files["prometheus.default"]

    rules = {r["alert"]: r for g in yaml.safe_load(files["podctl.rules.yml"])["groups"] for r in g["rules"]}
    assert rules["NodeDown"]["expr"] == 'up{job="node"} == 0'
    assert rules["NodeDown"]["for"] == "1m"
    assert "{{ $labels.instance }}" in rules["NodeDown"]["annotations"]["summary"]
    assert "GpuXidError" not in rules

    receivers = yaml.safe_load(files["alertmanager.yml"])["receivers"]
    assert receivers == [{"name": "podctl"}]


@pytest.mark.ansible
def test_dcgm_without_gpus_is_one_hardware_gate(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    subprocess.run([PODCTL, "inventory", str(SIM_SITE), "-o", str(inventory)], check=True, capture_output=True)
    site_vars = yaml.safe_load((inventory / "group_vars" / "all" / "podctl.yml").read_text())
    site_vars["podctl_monitoring"]["exporters"].append("dcgm")
    site_vars["podctl_monitoring"]["targets"]["dcgm"] = []
    proc = run_local(
        tmp_path,
        {"name": "DCGM step", "roles": [{"role": "monitoring"}]},
        {"podctl_monitoring": site_vars["podctl_monitoring"]},
        "--tags",
        "monitoring_dcgm",
    )
    assert "TASK [monitoring : Hardware gate | DCGM exporter]" in proc.stdout
    assert '"msg": "skipped: no GPU"' in proc.stdout
    assert "DCGM | packages" not in proc.stdout


# -- the login and the exporters' firewall -------------------------------------------------------

DATA = REPO / "tests" / "data"
LOGIN_FILES = {
    "prometheus.yml": "prometheus.yml.j2",
    "prometheus.default": "prometheus.default.j2",
    "prometheus-alertmanager.default": "prometheus-alertmanager.default.j2",
    "podctl-web.yml": "podctl-web.yml.j2",
    "podctl-monitoring-get": "podctl-monitoring-get.j2",
}
EXPORTER_FILES = {
    "prometheus-node-exporter.default": "prometheus-node-exporter.default.j2",
    "podctl-slurm-exporter.service": "podctl-slurm-exporter.service.j2",
    "podctl-monitoring.nft": "podctl-monitoring.nft.j2",
}
# Ports the exporters' rules must never name: SSH, Slurm (slurmctld, slurmd, slurmdbd), NFS and
# its portmapper, MariaDB.
NEVER_FILTERED = {22, 111, 2049, 3306, 6817, 6818, 6819}


def web_users() -> dict[str, str]:
    """The web config's users as the role hashes them, for throwaway passwords."""
    plugin = bcrypt_filter()
    return {"podctl": plugin.bcrypt_hash("p" * 32), "prometheus": plugin.bcrypt_hash("q" * 32)}


def test_the_login_hash_is_bcrypt_the_same_on_every_run_and_refuses_what_bcrypt_cannot_take() -> None:
    import bcrypt
    from ansible.errors import AnsibleFilterError

    plugin = bcrypt_filter()
    first, again, other = plugin.bcrypt_hash("A" * 32), plugin.bcrypt_hash("A" * 32), plugin.bcrypt_hash("B" * 32)
    assert first == again and first.startswith("$2b$10$") and len(first) == 60
    assert bcrypt.checkpw(b"A" * 32, first.encode()) and not bcrypt.checkpw(b"B" * 32, first.encode())
    assert other[:29] != first[:29]  # another password, another salt
    for bad in ("", None, "x" * 73):
        with pytest.raises(AnsibleFilterError):
            plugin.bcrypt_hash(bad)


@pytest.mark.ansible
def test_prometheus_and_alertmanager_listen_on_the_management_address_behind_their_login(tmp_path: Path) -> None:
    from tests.helpers.roles import render_templates

    files = render_templates(
        SIM_SITE, "monitoring", "head01", LOGIN_FILES, tmp_path, {"__podctl_monitoring_web_users": web_users()}
    )
    web = "--web.config.file=/etc/prometheus/podctl-web.yml"
    assert "--web.listen-address=10.89.0.10:9090 " + web in files["prometheus.default"]
    assert "--web.listen-address=10.89.0.10:9093 " + web in files["prometheus-alertmanager.default"]
    config = yaml.safe_load(files["prometheus.yml"])
    login = {"username": "prometheus", "password_file": "/etc/prometheus/podctl-prometheus.password"}
    (alertmanagers,) = config["alerting"]["alertmanagers"]
    assert alertmanagers["basic_auth"] == login and alertmanagers["scheme"] == "http"
    assert alertmanagers["static_configs"] == [{"targets": ["10.89.0.10:9093"]}]
    (itself,) = [job for job in config["scrape_configs"] if job["job_name"] == "prometheus"]
    assert itself["basic_auth"] == login and itself["static_configs"] == [{"targets": ["10.89.0.10:9090"]}]
    assert "tls_config" not in itself
    assert yaml.safe_load(files["podctl-web.yml"]) == {"basic_auth_users": web_users()}
    assert 'URLS = {\n    "prometheus": "http://10.89.0.10:9090",' in files["podctl-monitoring-get"]
    assert "CERTIFICATE = None" in files["podctl-monitoring-get"]


@pytest.mark.ansible
def test_with_listen_localhost_they_bind_the_loopback_address(tmp_path: Path) -> None:
    from tests.helpers.roles import render_templates

    site = tmp_path / "site.yaml"
    site.write_text(SIM_SITE.read_text().replace("  alert_rules: true\n", "  alert_rules: true\n  listen: localhost\n"))
    files = render_templates(
        site, "monitoring", "head01", LOGIN_FILES, tmp_path, {"__podctl_monitoring_web_users": web_users()}
    )
    assert "--web.listen-address=127.0.0.1:9090 " in files["prometheus.default"]
    assert "--web.listen-address=127.0.0.1:9093 " in files["prometheus-alertmanager.default"]
    config = yaml.safe_load(files["prometheus.yml"])
    assert config["alerting"]["alertmanagers"][0]["static_configs"] == [{"targets": ["127.0.0.1:9093"]}]
    # The exporters still bind the management address: Prometheus scrapes them from there.
    node = render_templates(site, "monitoring", "head01", EXPORTER_FILES, tmp_path)
    assert "--web.listen-address=10.89.0.10:9100 " in node["prometheus-node-exporter.default"]


@pytest.mark.ansible
def test_with_the_sites_certificate_clients_pin_it_and_name_the_host_it_serves(tmp_path: Path) -> None:
    from tests.helpers.roles import render_templates

    site = DATA / "valid-every-field.yaml"
    files = render_templates(
        site, "monitoring", "mgmt01", LOGIN_FILES, tmp_path, {"__podctl_monitoring_web_users": web_users()}
    )
    assert "--web.listen-address=10.20.0.5:9090 " in files["prometheus.default"]
    config = yaml.safe_load(files["prometheus.yml"])
    (itself,) = [job for job in config["scrape_configs"] if job["job_name"] == "prometheus"]
    assert itself["scheme"] == "https" and itself["tls_config"] == {"ca_file": "/etc/prometheus/podctl-web.crt"}
    assert itself["static_configs"] == [{"targets": ["mgmt01.lab.example.com:9090"]}]
    assert config["alerting"]["alertmanagers"][0]["scheme"] == "https"
    assert yaml.safe_load(files["podctl-web.yml"])["tls_server_config"] == {
        "cert_file": "/etc/prometheus/podctl-web.crt",
        "key_file": "/etc/prometheus/podctl-web.key",
    }
    assert '"prometheus": "https://mgmt01.lab.example.com:9090"' in files["podctl-monitoring-get"]
    assert 'CERTIFICATE = "/etc/prometheus/podctl-web.crt"' in files["podctl-monitoring-get"]


def _filtered_ports(rules: str, chain: str) -> set[int]:
    import re

    body = rules[rules.index(f"chain {chain} {{") :]
    ports = re.search(r"tcp dport \{ ([0-9, ]+) \}", body[: body.index("}\n") + 2])
    assert ports, body
    return {int(p) for p in ports[1].split(",")}


@pytest.mark.ansible
def test_exporters_bind_the_management_address_and_answer_the_prometheus_host_alone(tmp_path: Path) -> None:
    from tests.helpers.roles import render_templates

    head = render_templates(SIM_SITE, "monitoring", "head01", EXPORTER_FILES, tmp_path)
    node = render_templates(SIM_SITE, "monitoring", "node02", EXPORTER_FILES, tmp_path)
    assert "--web.listen-address=10.89.0.12:9100 " in node["prometheus-node-exporter.default"]
    assert "--listen-address 10.89.0.10 --listen-port 9341 --cache-seconds 15" in head["podctl-slurm-exporter.service"]
    # Each host's input rules name the ports of its own exporters, and accept the Prometheus host
    # and the host itself; its output rules keep every exporter port from its unprivileged users.
    assert _filtered_ports(head["podctl-monitoring.nft"], "input") == {9100, 9341}
    assert _filtered_ports(node["podctl-monitoring.nft"], "input") == {9100}
    for rules in (head["podctl-monitoring.nft"], node["podctl-monitoring.nft"]):
        assert _filtered_ports(rules, "output") == {9100, 9341, 9400}
        assert "ip saddr 10.89.0.10 accept" in rules and 'iif "lo" accept' in rules
        assert "meta skuid != { 0, 902 }" in rules
        # Nothing else is filtered: no other port, no policy but accept, no flush of other tables.
        assert not NEVER_FILTERED & (_filtered_ports(rules, "input") | _filtered_ports(rules, "output"))
        assert rules.count("policy accept;") == 2 and "policy drop" not in rules and "flush" not in rules
        assert [line.split()[0] for line in rules.splitlines() if line.strip().startswith(("tcp", "ip", "udp"))] == [
            "tcp",
            "ip",
            "tcp",
        ]
