from __future__ import annotations

from pathlib import Path

import pytest

from podctl.core.model import Site
from podctl.deploy.errors import DeployError
from podctl.deploy.stages import (
    STAGES,
    check_validation_tools,
    select_stages,
    stage_of_task_path,
    stage_playbooks,
    wrapper_playbook,
)
from podctl.derive.site import load_site

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.deploy


@pytest.mark.parametrize(
    ("only", "skip", "expected"),
    [
        (None, None, list(STAGES)),
        ("os", None, ["os"]),
        ("storage,os", None, ["os", "storage"]),  # site.yml's order, not the order given
        (" fabric , os ", None, ["os", "fabric"]),
        (None, "slurm,monitoring,validation-tools", ["os", "fabric", "storage"]),
        (None, "os", ["fabric", "storage", "slurm", "monitoring", "validation-tools"]),
        ("validation-tools,os", None, ["os", "validation-tools"]),
    ],
)
def test_select_stages(only: str | None, skip: str | None, expected: list[str]) -> None:
    assert select_stages(only, skip) == expected


@pytest.mark.parametrize(
    ("only", "skip", "message"),
    [
        ("os,slrum", None, "--only: unknown stage 'slrum' (did you mean 'slurm'?)"),
        (None, "nothing", "--skip: unknown stage 'nothing'"),
        ("os", "fabric", "give one of them, not both"),
        (",", None, "--only: empty stage list"),
        (None, ",".join(STAGES), "no stage left to run"),
    ],
)
def test_select_stages_errors(only: str | None, skip: str | None, message: str) -> None:
    with pytest.raises(DeployError, match=None) as info:
        select_stages(only, skip)
    assert message in str(info.value)


def test_missing_playbook_names_the_stage(tmp_path: Path) -> None:
    (tmp_path / "os.yml").write_text("---\n")
    with pytest.raises(DeployError) as info:
        stage_playbooks(tmp_path, ["os", "monitoring"])
    assert "monitoring.yml" in str(info.value)
    assert "--skip monitoring" in str(info.value)
    assert stage_playbooks(tmp_path, ["os"]) == [tmp_path / "os.yml"]


def test_wrapper_forgets_the_records_reads_packages_once_then_imports_stages_in_order(tmp_path: Path) -> None:
    import yaml

    from podctl.core.assets import playbooks_dir

    stages = [tmp_path / "os.yml", tmp_path / "storage.yml"]
    plays = yaml.safe_load(wrapper_playbook(stages))
    imports = [play["ansible.builtin.import_playbook"] for play in plays]
    packages = (playbooks_dir() / "packages.yml").resolve()
    records = (playbooks_dir() / "converged.yml").resolve()
    assert imports == [str(records), str(packages), *(str(s.resolve()) for s in stages)]
    assert plays[0]["vars"] == {"podctl_converged_state": "absent"}
    assert "podctl_installed_packages" in packages.read_text() and "dpkg-query" in packages.read_text()
    # In check mode nothing is forgotten: the run changes nothing.
    checked = yaml.safe_load(wrapper_playbook(stages, forget=False))
    assert [play["ansible.builtin.import_playbook"] for play in checked] == imports[1:]


@pytest.mark.parametrize(
    ("task_path", "stage"),
    [
        ("/work/main/playbooks/roles/os/tasks/configure.yml:12", "os"),
        ("/x/playbooks/roles/fabric/handlers/main.yml:3", "fabric"),
        ("/x/playbooks/storage.yml:2", "storage"),
        ("/x/playbooks/roles/validation_tools/tasks/install.yml:9", "validation-tools"),
        ("/x/playbooks/validation-tools.yml:2", "validation-tools"),
        ("/x/playbooks/roles/other/tasks/main.yml:2", None),
        ("/usr/lib/python3/site-packages/ansible/whatever.py:1", None),
        ("", None),
        (None, None),
    ],
)
def test_stage_of_task_path(task_path: str | None, stage: str | None) -> None:
    assert stage_of_task_path(task_path) == stage


def _sim_site_with_wheels(tmp_path: Path, wheels: str) -> Site:
    text = (REPO / "inventory" / "sim" / "site.yaml").read_text().replace("../../.cache/validation-wheels", wheels)
    site_file = tmp_path / "site.yaml"
    site_file.write_text(text)
    return load_site(site_file)


def test_validation_tools_wheel_folder_checked_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(DeployError) as info:
        check_validation_tools(_sim_site_with_wheels(tmp_path, "no-such-folder"))
    assert f"validation.tools.wheels: {tmp_path / 'no-such-folder'} is not a folder" in str(info.value)
    assert "make sim-wheels" in str(info.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DeployError, match="holds no wheels"):
        check_validation_tools(_sim_site_with_wheels(tmp_path, "empty"))
    (tmp_path / "empty" / "torch-2.13.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    check_validation_tools(_sim_site_with_wheels(tmp_path, "empty"))
