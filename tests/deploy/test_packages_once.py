"""Each role asks apt for its packages only when one is missing, by the package facts read once per
run (playbooks/packages.yml, podctl.pod.not_installed)."""

from __future__ import annotations

import pytest
import yaml

from podctl.assets import roles_dir

from ..roles import filter_plugin

pytestmark = pytest.mark.deploy

# dpkg-query --show --showformat='${db:Status-Abbrev} ${Package}\n' as Debian 12's dpkg prints it:
# installed (ii), removed with its configuration left (rc), unpacked but not configured (iU).
DPKG_QUERY = ["ii  munge", "ii  slurmd", "rc  slurmctld", "iU  slurmdbd", "ii  libc6"]


def test_only_installed_packages_count_as_installed() -> None:
    plugin = filter_plugin("not_installed")
    installed = plugin.dpkg_installed(DPKG_QUERY)
    assert installed == ["libc6", "munge", "slurmd"]
    assert plugin.not_installed(["munge", "slurmd"], installed) == []
    assert plugin.not_installed(["munge", "slurmctld", "slurmdbd"], installed) == ["slurmctld", "slurmdbd"]
    # A version or a release is apt's to judge; without the list every package is apt's too.
    assert plugin.not_installed(["munge=0.5.14", "slurmd/bookworm"], installed) == ["munge=0.5.14", "slurmd/bookworm"]
    assert plugin.not_installed(["munge"], None) == ["munge"]


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
        assert any(
            "podctl.pod.not_installed(podctl_installed_packages | default(none))" in str(c) for c in conditions
        ), (path, task["name"])
