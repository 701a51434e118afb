"""Each role's interface: defaults/main.yml and meta/argument_specs.yml name the same inputs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from podctl.core.assets import roles_dir
from podctl.runtime import converged

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


def _tasks(node: object) -> Iterator[dict]:
    """Every task of a task file, those inside blocks included."""
    for task in node if isinstance(node, list) else []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _tasks(task.get(key))


def test_no_role_writes_a_file_under_no_log() -> None:
    """Ansible censors a no_log task's result whole, its path too: a file written so would be missing
    from the deploy's record (podctl.runtime.converged), and a no-change deploy would never look at it
    again. Secrets' files are written by podctl.pod.secret_file (which returns no secret) and
    templates that hold one by `diff: false`; no_log is for tasks that read a secret or pass it on."""
    files = sorted((ROLES.parent / "playbooks").glob("*.yml")) + sorted(ROLES.glob("*/tasks/*.yml"))
    files += sorted(ROLES.glob("*/handlers/*.yml"))
    offenders = [
        f"{path.relative_to(ROLES.parent)}: {task.get('name')}"
        for path in files
        for task in _tasks(yaml.safe_load(path.read_text()))
        if task.get("no_log") not in (None, False)
        and any(key.rsplit(".", 1)[-1] in converged.FILE_ACTIONS for key in task)
    ]
    assert files and offenders == []
