"""Rendering a role's templates on this machine, as the role would on a host of a site.

ansible-playbook on localhost (connection local) with the site's rendered
inventory, the role's defaults and vars, and the template module: nothing
reaches a node. The deploy role tests and the tests that hand the files to
their real consumers (Slurm's daemons, promtool, amtool) use it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import yaml

from podctl.core import platforms
from podctl.core.assets import roles_dir
from podctl.derive.site import load_site

BIN = Path(sys.executable).parent


def inventory_of(site: Path, out: Path) -> Path:
    if not (out / "hosts.yml").is_file():
        subprocess.run([str(BIN / "podctl"), "inventory", str(site), "-o", str(out)], check=True, capture_output=True)
    return out


def render_templates(
    site: Path,
    role: str,
    host: str,
    templates: Mapping[str, str],
    tmp: Path,
    overrides: Mapping[str, object] | None = None,
    slurm_version: str | None = None,
) -> dict[str, str]:
    """{file name: text} of the role's `templates` ({file name: template}) rendered for `host` of `site`.

    `slurm_version` ("22.05", "24.11"): the Slurm major release the host runs, which the slurm role
    reads from the node's installed Slurm (`_podctl_slurm_version`); by default that of the OS the
    site gives the host (podctl.core.platforms).
    """
    if slurm_version is None:
        slurm_version = str(load_site(site).node(host).platform.slurm)
    role_dir = roles_dir() / role
    inventory = inventory_of(site, tmp / "inventory")
    out = tmp / f"rendered-{role}-{host}"
    out.mkdir(parents=True, exist_ok=True)
    playbook = tmp / f"render-{role}-{host}.yml"
    vars_files = [str(p) for p in (role_dir / "defaults" / "main.yml", role_dir / "vars" / "main.yml") if p.is_file()]
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Render",
                    "hosts": host,
                    "connection": "local",
                    "gather_facts": False,
                    "vars_files": vars_files,
                    "tasks": [
                        {
                            "name": "Render",
                            "ansible.builtin.template": {
                                "src": str(role_dir / "templates" / "{{ item.value }}"),
                                "dest": f"{out}/{{{{ item.key }}}}",
                                "mode": "0644",
                            },
                            "loop": "{{ _podctl_test_templates | dict2items }}",
                        }
                    ],
                }
            ]
        )
    )
    # Extra vars: the role's defaults are loaded as vars_files here, which would outrank play vars.
    extra = tmp / f"extra-{role}-{host}.json"
    extra.write_text(
        json.dumps(
            {
                "_podctl_slurm_version": slurm_version,
                "podctl_platform": platform_vars(slurm_version),
                **(overrides or {}),
                "_podctl_test_templates": dict(templates),
            }
        )
    )
    env = {**os.environ, "ANSIBLE_LOCALHOST_WARNING": "False", "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), "-e", f"@{extra}", str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return {name: (out / name).read_text() for name in templates}


def platform_vars(slurm_version: str) -> dict[str, object]:
    """`podctl_platform` as the platform role loads it on a node of the release that ships Slurm
    `slurm_version` (its vars file)."""
    (platform,) = [p for p in platforms.SUPPORTED if str(p.slurm) == slurm_version]
    path = roles_dir() / "platform" / "vars" / f"{platform.key}.yml"
    return dict(yaml.safe_load(path.read_text())["podctl_platform"])


def bcrypt_filter() -> ModuleType:
    """The collection's filter plugin podctl.pod.bcrypt_hash, as a module (Ansible loads it so)."""
    return filter_plugin("bcrypt_hash")


def filter_plugin(name: str) -> ModuleType:
    """The collection's filter plugin podctl.pod.<name>, as a module (Ansible loads it so)."""
    return collection_plugin("filter", name)


def collection_plugin(kind: str, name: str) -> ModuleType:
    """The collection's plugin podctl.pod.<name> of `kind` (filter, modules), imported as a module."""
    path = roles_dir().parent / "plugins" / kind / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"podctl_{kind}_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_role_task(role: str, tasks_file: str, name: str, variables: Mapping[str, object], tmp: Path) -> bool:
    """Run the task called `name` of the role's `tasks_file` alone, on localhost (connection local),
    with the role's defaults and vars, `variables` as extra vars, and no inventory of a site; True
    when it failed."""
    role_dir = roles_dir() / role
    (task,) = [t for t in yaml.safe_load((role_dir / "tasks" / tasks_file).read_text()) if t.get("name") == name]
    tmp.mkdir(parents=True, exist_ok=True)
    playbook, extra = tmp / "one-task.yml", tmp / "one-task-vars.json"
    vars_files = [str(p) for p in (role_dir / "defaults" / "main.yml", role_dir / "vars" / "main.yml") if p.is_file()]
    play = {"name": "One task", "hosts": "localhost", "connection": "local", "gather_facts": False}
    playbook.write_text(yaml.safe_dump([play | {"vars_files": vars_files, "tasks": [task]}]))
    extra.write_text(json.dumps(dict(variables)))
    env = {**os.environ, "ANSIBLE_LOCALHOST_WARNING": "False", "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-e", f"@{extra}", str(playbook)],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 2), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.returncode == 2
