"""Each role asks apt for its packages only when one is missing, by the package facts read once per
run (playbooks/packages.yml, podctl.pod.not_installed)."""

from __future__ import annotations

import pytest
import yaml

from podctl.core.assets import roles_dir
from tests.helpers.roles import filter_plugin

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


def _task_files() -> list[tuple[str, list]]:
    return [
        (str(path.relative_to(roles_dir())), yaml.safe_load(path.read_text()) or [])
        for path in sorted(roles_dir().glob("*/tasks/*.yml"))
    ]


def test_the_guarded_apt_task_is_written_once_in_common() -> None:
    """apt is asked in one task of the collection (roles/_common), and only for what is missing."""
    apt = [(path, task) for path, tasks in _task_files() for task in tasks if "ansible.builtin.apt" in task]
    assert [path for path, _ in apt] == ["_common/tasks/packages.yml"], apt
    ((_, task),) = apt
    assert task["when"] == (
        "podctl_common_packages | podctl.pod.not_installed(podctl_installed_packages | default(none)) | length > 0"
    )
    assert task["ansible.builtin.apt"]["name"] == "{{ podctl_common_packages }}"


def test_every_role_installs_its_packages_through_common() -> None:
    imports = [
        (path, task)
        for path, tasks in _task_files()
        for task in tasks
        if isinstance(task, dict) and "ansible.builtin.import_role" in task
    ]
    roles = {path.split("/")[0] for path, _ in imports}
    assert roles == {"os", "fabric", "storage", "slurm", "monitoring", "validation_tools"}, roles
    assert len(imports) >= 12
    specs = yaml.safe_load((roles_dir() / "_common" / "meta" / "argument_specs.yml").read_text())
    declared = set(specs["argument_specs"]["packages"]["options"])
    for path, task in imports:
        assert task["ansible.builtin.import_role"] == {"name": "podctl.pod._common", "tasks_from": "packages"}, path
        given = set(task.get("vars", {}))
        assert "podctl_common_packages" in given and given <= declared, (path, task["name"], given - declared)
