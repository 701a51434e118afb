"""Where podctl finds what it ships: the one place that knows.

Everything podctl hands to other programs travels inside the installed
package, so that an installed podctl deploys and validates outside any
checkout:

- the Ansible collection `podctl.pod` (roles and one playbook per deploy
  stage) under `podctl/ansible_collections/podctl/pod/`, found by Ansible
  through ANSIBLE_COLLECTIONS_PATH=`collections_path()`;
- the node-side `validation` package, which the validation-tools stage copies
  to the nodes (a package of its own: it never imports podctl);
- the site schema and the built-in profiles (`podctl.schema`, `podctl.profiles`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# The deploy stages, in the order site.yml runs them; each is a playbook of the collection.
STAGES: tuple[str, ...] = ("os", "fabric", "storage", "slurm", "monitoring", "validation-tools")
COLLECTION = "podctl.pod"


def collections_path() -> Path:
    """The folder holding `ansible_collections/podctl/pod`: Ansible's collections path for podctl's own."""
    return Path(str(resources.files("podctl")))


def collection_dir() -> Path:
    return collections_path() / "ansible_collections" / "podctl" / "pod"


def playbooks_dir() -> Path:
    return collection_dir() / "playbooks"


def roles_dir() -> Path:
    return collection_dir() / "roles"


def stage_playbook_name(stage: str) -> str:
    """`validation-tools` -> `validation_tools.yml`: collection playbooks are named like identifiers."""
    return stage.replace("-", "_") + ".yml"


def validation_package() -> Path:
    """The node-side checks' package folder (holding validation/__init__.py)."""
    return Path(str(resources.files("validation")))
