"""The platform role's vars files (one per supported release) against podctl.core.platforms, the one
table: the same releases, codenames and Slurm, and the role's interface."""

from __future__ import annotations

import pytest
import yaml

from podctl.core import platforms
from podctl.core.assets import roles_dir

pytestmark = pytest.mark.deploy

ROLE = roles_dir() / "platform"


def vars_files() -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text())["podctl_platform"] for p in sorted((ROLE / "vars").glob("*.yml"))}


def test_one_vars_file_per_supported_platform_and_no_other() -> None:
    assert sorted(vars_files()) == sorted(p.key for p in platforms.SUPPORTED)


@pytest.mark.parametrize("platform", platforms.SUPPORTED, ids=lambda p: p.key)
def test_a_vars_file_says_what_the_table_says(platform: platforms.Platform) -> None:
    found = vars_files()[platform.key]
    assert (found["distribution"], found["release"], found["codename"]) == (
        platform.distribution,
        platform.release,
        platform.codename,
    )
    assert found["slurm"] == str(platform.slurm)
    assert isinstance(found["python_packages"], dict)
    pid_files = found["slurm_pid_files"]
    assert sorted(pid_files) == ["slurmctld", "slurmd", "slurmdbd"]
    assert all(path.startswith("/run/") and path.endswith(".pid") for path in pid_files.values())
    # The daemons of the slurm account a packaged unit starts as root (the slurm role runs them as
    # slurm from the start), each with its pid file in a runtime directory of its own.
    as_root = found["slurm_units_started_as_root"]
    assert isinstance(as_root, list) and set(as_root) <= {"slurmctld", "slurmdbd"}
    assert all(pid_files[unit] == f"/run/{unit}/{unit}.pid" for unit in ("slurmctld", "slurmdbd"))


def test_the_roles_interface_is_declared() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    assert sorted(defaults) == sorted(specs["argument_specs"]["main"]["options"])


def test_every_role_that_reads_podctl_platform_depends_on_the_platform_role() -> None:
    for role in sorted(p for p in roles_dir().iterdir() if p.is_dir() and p.name != "platform"):
        text = "\n".join(f.read_text() for f in role.rglob("*.yml") if "molecule" not in f.parts)
        if "podctl_platform." in text:
            meta = yaml.safe_load((role / "meta" / "main.yml").read_text())
            assert {"role": "podctl.pod.platform"} in (meta.get("dependencies") or []), role.name
