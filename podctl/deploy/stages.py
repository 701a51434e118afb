"""Choosing deploy stages (podctl.core.assets.STAGES, in the order site.yml runs them): one playbook each."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from podctl.core.assets import STAGES, stage_playbook_name, validation_package
from podctl.core.assets import playbooks_dir as collection_playbooks
from podctl.core.model import Site
from podctl.core.suggest import did_you_mean
from podctl.deploy.errors import DeployError
from podctl.runtime import converged

# The collection's play that reads each node's installed packages before the stages.
PACKAGES_PLAYBOOK = "packages.yml"


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    hint = did_you_mean(word, candidates)
    return f" ({hint})" if hint else ""


def parse_stage_list(text: str | None, option: str) -> list[str]:
    """'os, fabric' -> ['os', 'fabric']; unknown names are an error naming the known ones."""
    if text is None:
        return []
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise DeployError(f"{option}: empty stage list; stages are {', '.join(STAGES)}")
    for name in names:
        if name not in STAGES:
            raise DeployError(
                f"{option}: unknown stage {name!r}{_did_you_mean(name, STAGES)}; stages are {', '.join(STAGES)}"
            )
    return names


def select_stages(only: str | None, skip: str | None) -> list[str]:
    """The stages to run, always in site.yml's order whatever order they were given in."""
    if only is not None and skip is not None:
        raise DeployError("--only and --skip: give one of them, not both")
    chosen = set(parse_stage_list(only, "--only")) if only is not None else set(STAGES)
    chosen -= set(parse_stage_list(skip, "--skip"))
    selected = [stage for stage in STAGES if stage in chosen]
    if not selected:
        raise DeployError(f"--skip {skip}: no stage left to run")
    return selected


def stage_playbooks(playbooks_dir: Path, stages: list[str]) -> list[Path]:
    """Each stage's playbook; a missing one is an error that says which."""
    missing = [s for s in stages if not (playbooks_dir / stage_playbook_name(s)).is_file()]
    if missing:
        raise DeployError(
            f"no playbook for stage(s) {', '.join(missing)} in {playbooks_dir} "
            f"(expected {', '.join(stage_playbook_name(s) for s in missing)}); run the others with "
            f"--skip {','.join(missing)}"
        )
    return [playbooks_dir / stage_playbook_name(s) for s in stages]


def wrapper_playbook(playbooks: list[Path], forget: bool = True) -> str:
    """A playbook importing the selected stages, so that one ansible-playbook run
    does them all (one SSH connection per host, facts gathered once), after the collection's
    packages.yml (each node's installed packages, read once for every stage's apt step).
    First, unless in check mode, each host forgets its record of the last converged deploy
    (podctl.runtime.converged): the run that follows may change it."""
    lines = ["---", "# Written by podctl deploy: the stages this run selected, in site.yml's order."]
    if forget:
        lines += converged.forget_play()
    for path in [collection_playbooks() / PACKAGES_PLAYBOOK, *playbooks]:
        lines.append(f"- name: Stage {path.stem}")
        lines.append(f"  ansible.builtin.import_playbook: {path.resolve()}")
    return "\n".join(lines) + "\n"


def stage_of_task_path(task_path: str | None) -> str | None:
    """Which stage a task belongs to, from its file: roles/<stage>/... or <stage>.yml.

    Role names cannot hold dashes: roles/validation_tools/ is the stage validation-tools.
    """
    if not task_path:
        return None
    path = task_path.rsplit(":", 1)[0]
    parts = Path(path).parts
    if "roles" in parts:
        index = len(parts) - 1 - parts[::-1].index("roles")
        if index + 1 < len(parts) and parts[index + 1].replace("_", "-") in STAGES:
            return parts[index + 1].replace("_", "-")
    stem = Path(path).stem.replace("_", "-")
    return stem if stem in STAGES else None


def check_validation_tools(site: Site) -> None:
    """The controller folders the validation-tools stage copies to the nodes exist."""
    package = validation_package()
    if not (package / "__init__.py").is_file():
        raise DeployError(
            f"{package}: podctl's validation package is incomplete (reinstall podctl); or deploy "
            "with --skip validation-tools"
        )
    tools = site.validation.tools
    if tools.wheels is None:
        return
    make = (
        f"make it with `pip download {' '.join(tools.packages)} --dest {tools.wheels}` on a machine of the "
        "nodes' Python version and architecture (for the sim: `make sim-wheels`)"
    )
    if not tools.wheels.is_dir():
        raise DeployError(
            f"validation.tools.wheels: {tools.wheels} is not a folder on this machine; {make}, "
            "or remove `wheels` to install from an index"
        )
    if not any(tools.wheels.glob("*.whl")):
        raise DeployError(f"validation.tools.wheels: {tools.wheels} holds no wheels (*.whl); {make}")
