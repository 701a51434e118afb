"""Each role's interface: defaults/main.yml and meta/argument_specs.yml name the same inputs."""

from __future__ import annotations

import pytest
import yaml

from podctl.assets import roles_dir

pytestmark = pytest.mark.deploy

ROLES = roles_dir()
MINE = ["os", "fabric", "storage", "validation_tools"]
# validation_tools installs files and starts nothing: its last step checks them, and it has no handlers.
STEPS = {"validation_tools": ["Preflight", "Install", "Configure", "Verify"]}
WITHOUT_HANDLERS = {"validation_tools"}


@pytest.mark.parametrize("role", MINE)
def test_defaults_match_argument_specs(role: str) -> None:
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    assert all(name.startswith(f"podctl_{role}_") for name in defaults)


@pytest.mark.parametrize("role", MINE)
def test_main_is_a_table_of_contents(role: str) -> None:
    tasks = yaml.safe_load((ROLES / role / "tasks" / "main.yml").read_text())
    assert [t["name"] for t in tasks] == STEPS.get(role, ["Preflight", "Install", "Configure", "Service"])
    for task in tasks:
        included = task["ansible.builtin.import_tasks"]
        assert (ROLES / role / "tasks" / included).is_file()
        assert role in task["tags"]


@pytest.mark.parametrize("role", [r for r in MINE if r not in WITHOUT_HANDLERS])
def test_handlers_listen(role: str) -> None:
    handlers = yaml.safe_load((ROLES / role / "handlers" / "main.yml").read_text())
    assert handlers and all("listen" in h for h in handlers)
