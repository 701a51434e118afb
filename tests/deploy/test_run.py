from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from podctl.core.assets import playbooks_dir
from podctl.deploy.run import DeployRequest, FailureThreshold, new_run_dir, prepare, scrub_env
from podctl.derive.site import load_site
from podctl.runtime.ansible import ansible_settings

pytestmark = pytest.mark.deploy

REPO = Path(__file__).resolve().parents[2]


def test_run_dir_names(tmp_path: Path) -> None:
    now = datetime(2026, 11, 29, 19, 47, 20, tzinfo=UTC)
    first = new_run_dir(tmp_path / "runs", now)
    second = new_run_dir(tmp_path / "runs", now)
    assert first.name == "20261129T194720Z-deploy"
    assert second.name == "20261129T194720Z-1-deploy"


@pytest.mark.parametrize(
    ("percent", "hosts", "failed", "stop"),
    [
        (100, 4, 4, False),  # the default never stops a run
        (50, 4, 2, False),
        (50, 4, 3, True),
        (0, 4, 1, True),
        (0, 4, 0, False),
    ],
)
def test_failure_threshold(percent: float, hosts: int, failed: int, stop: bool) -> None:
    threshold = FailureThreshold(percent, hosts)
    assert threshold.exceeded(failed) is stop
    assert (threshold.reason is not None) is stop


def test_scrub_env() -> None:
    env = scrub_env(
        {
            "ANSIBLE_PIPELINING": "True",
            "AWS_SECRET_ACCESS_KEY": "x",
            "GITHUB_TOKEN": "y",
            "ANSIBLE_VAULT_PASSWORD": "z",
            "ANSIBLE_PRIVATE_KEY_FILE": "/k",
            "PATH": "/bin",
        }
    )
    assert env == {
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_VAULT_PASSWORD": "<redacted>",
        "ANSIBLE_PRIVATE_KEY_FILE": "/k",
        "PATH": "/bin",
    }


def test_prepare_writes_inventory_playbook_and_settings(tmp_path: Path) -> None:
    site = load_site(REPO / "inventory" / "sim" / "site.yaml")
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    settings = ansible_settings(
        hosts=4,
        fast=True,
        fact_cache_dir=tmp_path / "cache",
        roles_path=tmp_path,
        private_key=key,
    )
    request = DeployRequest(
        site=site,
        playbooks_dir=playbooks_dir(),
        stages=["os", "storage"],
        hosts=[n.hostname for n in site.nodes],
        limited=False,
        settings=settings,
        runs_dir=tmp_path / "runs",
        check=False,
        diff=False,
        max_fail_percent=100,
    )
    run_dir, playbook = prepare(request)
    assert run_dir.parent == tmp_path / "runs"
    assert (run_dir / "inventory" / "hosts.yml").is_file()
    assert (run_dir / "inventory" / "host_vars" / "node01.yml").is_file()
    assert "os.yml" in playbook.read_text() and "fabric.yml" not in playbook.read_text()
    saved = json.loads((run_dir / "settings.json").read_text())
    assert saved["stages"] == ["os", "storage"] and saved["forks"] == 4
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert "PRIVATE KEY" not in path.read_text(), path
