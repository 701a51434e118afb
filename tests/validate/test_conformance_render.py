"""playbooks/render-configs.yml renders every file the roles write from a template.

The static tests parse every roles/*/tasks/*.yml: a template task added to a
role without its counterpart in that role's tasks/render.yml fails here, so
the conformance suite cannot silently stop comparing a file. The last test
runs the playbook itself (Ansible only, no node) on the sim site.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from podctl.inventory import write_inventory
from podctl.site import load_site
from podctl.validate.conformance.common import SECRET_PLACEHOLDER

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
ROLES = PLAYBOOKS / "roles"
RENDER_PLAYBOOK = PLAYBOOKS / "render-configs.yml"
TEMPLATE_MODULES = ("ansible.builtin.template", "ansible.legacy.template", "template")
RENDER_EXPR = ("{{ _podctl_render_files | default({}) | combine({_podctl_render_dest: "
               "lookup('ansible.builtin.template', _podctl_render_src)}) }}")


def _tasks(items: list[dict[str, Any]] | None) -> Iterator[dict[str, Any]]:
    for task in items or []:
        for key in ("block", "rescue", "always"):
            if key in task:
                yield from _tasks(task[key])
        yield task


def _load(path: Path) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or []


def template_tasks(role: str) -> list[tuple[str, dict[str, Any]]]:
    """(file, task) for each template task of the role's deploy (every tasks file but render.yml)."""
    found = []
    for path in sorted((ROLES / role / "tasks").glob("*.yml")):
        if path.name == "render.yml":
            continue
        for task in _tasks(_load(path)):
            module = next((m for m in TEMPLATE_MODULES if m in task), None)
            if module is not None:
                found.append((path.name, {**task, "_args": task[module]}))
    return found


def render_tasks(role: str) -> list[dict[str, Any]]:
    path = ROLES / role / "tasks" / "render.yml"
    if not path.is_file():
        return []
    return [t for t in _tasks(_load(path))
            if "_podctl_render_files" in (t.get("ansible.builtin.set_fact") or {})]


def _whens(task: dict[str, Any]) -> list[str]:
    when = task.get("when", [])
    return [str(w).strip() for w in (when if isinstance(when, list) else [when])]


ROLES_WITH_TEMPLATES = sorted({p.parent.parent.name for p in ROLES.glob("*/templates/*.j2")
                               if template_tasks(p.parent.parent.name)})


def test_the_roles_have_template_tasks() -> None:
    # Guards the parser: if it found nothing, every other test here would pass vacuously.
    assert set(ROLES_WITH_TEMPLATES) >= {"os", "fabric", "storage", "slurm", "monitoring"}
    assert sum(len(template_tasks(r)) for r in ROLES_WITH_TEMPLATES) >= 20


@pytest.mark.parametrize("role", ROLES_WITH_TEMPLATES)
def test_every_template_task_is_rendered(role: str) -> None:
    rendered = {(t["vars"]["_podctl_render_src"], t["vars"]["_podctl_render_dest"]): t for t in render_tasks(role)}
    missing = []
    for file, task in template_tasks(role):
        key = (task["_args"]["src"], task["_args"]["dest"])
        counterpart = rendered.get(key)
        if counterpart is None:
            missing.append(f"{file}: {task.get('name')} (src {key[0]}, dest {key[1]})")
            continue
        # The same items, under the same loop variable the template reads.
        assert counterpart.get("loop") == task.get("loop"), f"{file}: {task.get('name')}: loop differs in render.yml"
        assert (counterpart.get("loop_control") or {}).get("loop_var") == \
            (task.get("loop_control") or {}).get("loop_var")
        # The task's own conditions gate its counterpart too (enclosing
        # imports' conditions are restated there; see render.yml's comments).
        assert set(_whens(task)) <= set(_whens(counterpart)), \
            f"{file}: {task.get('name')}: render.yml lacks its condition(s) {_whens(task)}"
    assert not missing, f"template tasks of role {role} with no counterpart in tasks/render.yml: {missing}"


@pytest.mark.parametrize("role", ROLES_WITH_TEMPLATES)
def test_render_tasks_render_only_what_the_role_writes(role: str) -> None:
    written = {(t["_args"]["src"], t["_args"]["dest"]) for _, t in template_tasks(role)}
    for task in render_tasks(role):
        key = (task["vars"]["_podctl_render_src"], task["vars"]["_podctl_render_dest"])
        assert key in written, f"render.yml: {task['name']} renders {key}, which no template task of {role} writes"
        assert task["ansible.builtin.set_fact"]["_podctl_render_files"] == RENDER_EXPR, task["name"]
        assert "munge.key" not in key[1]
        assert "delegate_to" not in task  # set_fact runs on the controller; nothing may reach the node


@pytest.mark.parametrize("role", ROLES_WITH_TEMPLATES)
def test_secrets_are_rendered_as_the_placeholder(role: str) -> None:
    """A template task that hides its arguments (no_log) gets a secret through its
    vars: the render task must replace each of those vars by podctl_render_secret."""
    rendered = {(t["vars"]["_podctl_render_src"], t["vars"]["_podctl_render_dest"]): t for t in render_tasks(role)}
    for _, task in template_tasks(role):
        if not task.get("no_log"):
            continue
        counterpart = rendered[(task["_args"]["src"], task["_args"]["dest"])]
        for var in task.get("vars") or {}:
            assert counterpart["vars"].get(var) == "{{ podctl_render_secret }}", (task["name"], var)


def test_storage_render_selects_the_mounts_preflight_selects() -> None:
    def selection(path: Path) -> str:
        facts = [t["ansible.builtin.set_fact"] for t in _load(path) if "ansible.builtin.set_fact" in t]
        return next(f["_podctl_storage_mounts"] for f in facts if "_podctl_storage_mounts" in f)

    tasks = ROLES / "storage" / "tasks"
    assert selection(tasks / "render.yml") == selection(tasks / "preflight.yml")


def test_render_playbook_covers_each_stage_on_its_hosts() -> None:
    plays = _load(RENDER_PLAYBOOK)
    by_role = {}
    for play in plays:
        for task in play.get("tasks", []):
            include = task.get("ansible.builtin.include_role")
            if include:
                assert include["tasks_from"] == "render"
                by_role[include["name"]] = play
        assert play.get("gather_facts") is False, play["name"]
    assert sorted(by_role) == sorted(p.parent.parent.name for p in ROLES.glob("*/tasks/render.yml"))
    for role, play in by_role.items():
        stage = _load(PLAYBOOKS / f"{role}.yml")
        assert play["hosts"] == stage[0]["hosts"], f"render play for {role} runs on other hosts than {role}.yml"


@pytest.mark.ansible
def test_render_playbook_on_the_sim_site(tmp_path: Path) -> None:
    playbook_bin = Path(sys.executable).parent / "ansible-playbook"
    if not playbook_bin.exists() and not shutil.which("ansible-playbook"):
        pytest.skip("ansible-playbook is not installed")
    site = load_site(REPO / "inventory" / "sim" / "site.yaml")
    write_inventory(site, tmp_path / "inventory")
    out = tmp_path / "rendered"
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1",
           "PATH": f"{playbook_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [str(playbook_bin) if playbook_bin.exists() else "ansible-playbook", "-i", str(tmp_path / "inventory"),
         str(RENDER_PLAYBOOK), "-e",
         json.dumps({"podctl_render_dir": str(out), "podctl_render_secret": SECRET_PLACEHOLDER})],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    head = {f for f in files if f.startswith("head01/")}
    node = {f for f in files if f.startswith("node01/")}
    assert {"head01/etc/slurm/slurm.conf", "head01/etc/slurm/slurmdbd.conf", "head01/etc/prometheus/prometheus.yml",
            "head01/etc/opensm/opensm.conf", "head01/etc/chrony/chrony.conf",
            "head01/etc/systemd/system/scratch.mount"} <= head
    assert "node01/etc/slurm/slurmdbd.conf" not in node and "node01/etc/prometheus/prometheus.yml" not in node
    assert {"node01/etc/systemd/network/60-podctl-ib0.network", "node01/etc/slurm/slurm.conf"} <= node
    assert not any("munge" in f for f in files)
    dbd = (out / "head01/etc/slurm/slurmdbd.conf").read_text()
    assert f"StoragePass={SECRET_PLACEHOLDER}\n" in dbd
    # head01 serves time to the pod; the compute nodes follow it.
    assert "local stratum 10" in (out / "head01/etc/chrony/chrony.conf").read_text()
    assert "server 10.89.0.10 iburst" in (out / "node01/etc/chrony/chrony.conf").read_text()
