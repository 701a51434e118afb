"""Each role asks apt for its packages only when one is missing, by the package facts read once per
run (playbooks/packages.yml, podctl.pod.not_installed)."""

from __future__ import annotations

import pytest
import yaml

from podctl.assets import roles_dir

from ..roles import filter_plugin

pytestmark = pytest.mark.deploy

FACTS = {"packages": {"munge": [{"version": "0.5.15"}], "slurmd": [{"version": "22.05.8"}]}}


def test_only_the_missing_packages_count() -> None:
    not_installed = filter_plugin("not_installed").not_installed
    assert not_installed(["munge", "slurmd"], FACTS) == []
    assert not_installed(["munge", "slurmctld"], FACTS) == ["slurmctld"]
    # A version or a release is apt's to judge; without package facts every package is apt's too.
    assert not_installed(["munge=0.5.14", "slurmd/bookworm"], FACTS) == ["munge=0.5.14", "slurmd/bookworm"]
    assert not_installed(["munge"], {}) == ["munge"] and not_installed(["munge"], None) == ["munge"]


def test_every_apt_task_of_every_role_asks_apt_only_for_what_is_missing() -> None:
    tasks = []
    for path in roles_dir().glob("*/tasks/*.yml"):
        for task in yaml.safe_load(path.read_text()) or []:
            if isinstance(task, dict) and "ansible.builtin.apt" in task:
                tasks.append((path, task))
    assert len(tasks) >= 7
    for path, task in tasks:
        when = task.get("when", [])
        conditions = when if isinstance(when, list) else [when]
        assert any("podctl.pod.not_installed(ansible_facts)" in str(c) for c in conditions), (path, task["name"])
