"""Nothing lost: podctl writes only into folders that are new, empty or its own, and never through a link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from podctl.core.fsio import MANIFEST, OutputError, OutputFolder, atomic_write, write_tree
from podctl.validate.judge import Certification
from podctl.validate.report import write_report
from tests.helpers.cli import assert_user_error, podctl
from tests.helpers.repo import REPO

SIM = str(REPO / "inventory" / "sim" / "site.yaml")


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_inventory_over_an_ansible_project_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    project = tmp_path / "ansible-project"
    for rel, text in {
        "hosts.yml": "all: {}\n",
        "site.yml": "- hosts: all\n",
        "roles/web/tasks/main.yml": "---\n",
        "group_vars/all/secrets.yml": "token: x\n",
    }.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    before = _tree(project)
    ran = podctl("inventory", SIM, "-o", str(project))
    assert_user_error(ran, "not a podctl inventory", "site.yml")
    assert _tree(project) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ansible-project"]


def test_an_inventory_podctl_wrote_is_replaced_but_a_file_added_to_it_is_not_lost(tmp_path: Path) -> None:
    out = tmp_path / "inv"
    assert podctl("inventory", SIM, "-o", str(out)).rc == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert "hosts.yml" in manifest["files"] and "host_vars/node01.yml" in manifest["files"]
    assert podctl("inventory", SIM, "-o", str(out)).rc == 0  # its own: replaced
    (out / "group_vars" / "all" / "mine.yml").write_text("extra: 1\n")
    ran = podctl("inventory", SIM, "-o", str(out))
    assert_user_error(ran, "group_vars/all/mine.yml")
    assert (out / "group_vars" / "all" / "mine.yml").read_text() == "extra: 1\n"


@pytest.mark.parametrize("where", ["through-a-file", "proc", "symlink"])
def test_inventory_into_an_impossible_place_is_a_user_error(where: str, tmp_path: Path) -> None:
    if where == "through-a-file":
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "inv"
    elif where == "proc":
        target = Path("/proc/podctl-test-inventory")
    else:
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        target = tmp_path / "link"
    ran = podctl("inventory", SIM, "-o", str(target))
    assert_user_error(ran, str(target))
    if where == "symlink":
        assert list((tmp_path / "real").iterdir()) == []


def test_init_never_follows_a_link_planted_beside_its_output(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "site.yaml"
    # The names a fixed temporary file would have had.
    for name in (".site.yaml.tmp", "site.yaml.tmp", ".site.yaml.new"):
        (tmp_path / name).symlink_to(victim)
    ran = podctl("init", "--profile", "dgx-h100", "--scalable-units", "1", "-o", str(out))
    assert ran.rc == 0, ran.err
    assert victim.read_text() == "precious\n"
    assert out.read_text().startswith("# yaml-language-server")
    # A planted link at the output itself is replaced only with --force, and then as a file.
    out.unlink()
    out.symlink_to(victim)
    assert_user_error(
        podctl("init", "--profile", "dgx-h100", "--scalable-units", "1", "-o", str(out)), "already exists"
    )
    assert podctl("init", "--profile", "dgx-h100", "--scalable-units", "1", "-o", str(out), "--force").rc == 0
    assert victim.read_text() == "precious\n" and not out.is_symlink()


@pytest.mark.parametrize("case", ["missing-folder", "a-folder"])
def test_init_into_an_impossible_place_is_a_user_error(case: str, tmp_path: Path) -> None:
    out = tmp_path / "no-such-folder" / "site.yaml" if case == "missing-folder" else tmp_path
    assert_user_error(podctl("init", "--profile", "dgx-h100", "--scalable-units", "1", "-o", str(out)), str(out))


def test_a_report_folder_with_foreign_files_is_refused_before_anything_runs(tmp_path: Path) -> None:
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.html").write_text("someone else's\n")
    ran = podctl("validate", "--local", "--profile", "sim", "--suite", "health", "--report", str(report))
    assert_user_error(ran, "not a podctl report", "report.html")
    assert (report / "report.html").read_text() == "someone else's\n"
    assert sorted(p.name for p in report.iterdir()) == ["report.html"]


def test_a_report_folder_is_podctls_own_to_write_again(tmp_path: Path) -> None:
    cert = Certification(subject="x", nodes=["n1"])
    first = write_report(tmp_path / "r", cert, [], {"suites": []})
    second = write_report(tmp_path / "r", cert, [], {"suites": []})
    assert first == second and second["html"].is_file()
    assert set(json.loads((tmp_path / "r" / MANIFEST).read_text())["files"]) == {
        "report.json",
        "junit.xml",
        "report.html",
    }


def test_write_tree_refuses_paths_outside_the_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_tree(tmp_path / "t", {"../escape": "x"}, "test", "fix")
    assert not (tmp_path / "escape").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_atomic_write_never_writes_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = tmp_path / "out"
    target.symlink_to(victim)
    atomic_write(target, "new")
    assert victim.read_text() == "keep" and target.read_text() == "new" and not target.is_symlink()


def test_an_output_folder_survives_an_unwritable_parent(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permissions: use a path through a file instead.
        (tmp_path / "file").write_text("x")
        with pytest.raises(OutputError, match="cannot"):
            OutputFolder(tmp_path / "file" / "report", "report", "fix")
    else:  # pragma: no cover - CI runs as root
        (tmp_path / "ro").mkdir(mode=0o500)
        with pytest.raises(OutputError):
            OutputFolder(tmp_path / "ro" / "report", "report", "fix")
