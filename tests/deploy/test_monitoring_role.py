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

from podctl.assets import roles_dir

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
