"""The collection's modules that keep root's files root's: `secret_file` (a generated secret, never
written or read through a link or a foreign file) and `root_tree` (folders only root can write).

Each module runs here as Ansible runs it on a node (a script given its arguments in a file), as
root, against files in a temporary folder; the sim pod runs them for real in every deploy
(tests/deploy/test_deploy_sim.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from podctl.core.assets import collection_dir, collections_path
from tests.helpers.repo import cannot_run_here

MODULES = collection_dir() / "plugins" / "modules"
NOBODY = 65534


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0:
        cannot_run_here("the modules set and check owners: they run as root")


def _module(name: str, tmp_path: Path, **args: Any) -> dict[str, Any]:
    args_file = tmp_path / f"{name}-args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    # The collection's module_utils, importable as Ansible's packaging makes them on a node: a
    # folder holding `ansible_collections` alone (podctl's own folder holds an ansible.py too).
    importable = tmp_path / "collections"
    if not importable.exists():
        importable.mkdir()
        (importable / "ansible_collections").symlink_to(collections_path() / "ansible_collections")
    env = {**os.environ, "PYTHONPATH": str(importable)}
    proc = subprocess.run(
        [sys.executable, str(MODULES / f"{name}.py"), str(args_file)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    out = json.loads(proc.stdout)
    assert proc.returncode == (1 if out.get("failed") else 0), proc.stderr
    return out


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    folder = tmp_path / "secrets"
    folder.mkdir(mode=0o700)
    return folder


def test_a_secret_is_made_once_with_its_mode_and_never_returned(tmp_path: Path, secrets: Path) -> None:
    path = secrets / "db.pass"
    made = _module("secret_file", tmp_path, path=str(path), owner="root", group="root", mode="0600")
    value = path.read_text()
    assert made["changed"] and made["path"] == str(path)
    assert len(value) == 33 and value.endswith("\n") and value[:-1].isalnum()
    assert path.stat().st_mode & 0o7777 == 0o600 and path.stat().st_nlink == 1
    assert value.strip() not in json.dumps(made)
    kept = _module("secret_file", tmp_path, path=str(path), owner="root", group="root", mode="0600")
    assert not kept["changed"] and path.read_text() == value
    # A mode or group that drifted is set back on the file itself, the secret kept.
    path.chmod(0o644)
    fixed = _module("secret_file", tmp_path, path=str(path), owner="root", group="root", mode="0600")
    assert fixed["changed"] and path.stat().st_mode & 0o7777 == 0o600 and path.read_text() == value
    assert sorted(p.name for p in secrets.iterdir()) == ["db.pass"]


def _link_to_shadow(path: Path) -> str:
    path.symlink_to("/etc/shadow")
    return "is a symbolic link (to /etc/shadow)"


def _foreign(path: Path) -> str:
    path.write_text("planted\n")
    os.chown(path, NOBODY, NOBODY)
    return f"belongs to uid {NOBODY}, not to uid 0"


def _hard_link(path: Path) -> str:
    other = path.parent.parent / "elsewhere"
    other.write_text("x\n")
    os.link(other, path)
    return "has 2 hard links"


def _folder(path: Path) -> str:
    path.mkdir()
    return "is not a plain file"


@pytest.mark.parametrize("plant", [_link_to_shadow, _foreign, _hard_link, _folder])
def test_what_stands_in_a_secrets_place_is_refused_by_name_and_left_alone(
    tmp_path: Path, secrets: Path, plant: Any
) -> None:
    path = secrets / "db.pass"
    said = plant(path)
    before = os.lstat(path)
    out = _module("secret_file", tmp_path, path=str(path), owner="root", mode="0600")
    assert out["failed"] and str(path) in out["msg"] and said in out["msg"], out["msg"]
    assert "remove it" in out["msg"]
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode, after.st_uid) == (before.st_ino, before.st_mode, before.st_uid)
    assert Path("/etc/shadow").stat().st_uid == 0


@pytest.mark.parametrize("mode, owner", [(0o770, 0), (0o700, NOBODY)], ids=["group-writable", "another owner"])
def test_a_secrets_folder_another_account_can_write_is_refused(tmp_path: Path, mode: int, owner: int) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(mode)
    os.chown(folder, owner, owner)
    out = _module("secret_file", tmp_path, path=str(folder / "db.pass"), owner="root", mode="0600")
    assert out["failed"] and str(folder) in out["msg"] and not (folder / "db.pass").exists(), out["msg"]


def test_a_secret_readable_by_every_user_is_refused(tmp_path: Path, secrets: Path) -> None:
    out = _module("secret_file", tmp_path, path=str(secrets / "db.pass"), owner="root", mode="0644")
    assert out["failed"] and "every user" in out["msg"] and not (secrets / "db.pass").exists()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "etc-slurm"
    (root / "plugstack.conf.d").mkdir(parents=True)
    (root / "slurm.conf").write_text("ClusterName=x\n")
    (root / "slurmdbd.conf").write_text("StoragePass=x\n")
    # A file given to a daemon's account is allowed: it cannot add or replace entries.
    os.chown(root / "slurmdbd.conf", NOBODY, NOBODY)
    return root


def test_a_folder_only_root_writes_is_named_for_the_record(tmp_path: Path, tree: Path) -> None:
    missing = tmp_path / "sudoers.d"
    out = _module("root_tree", tmp_path, paths=[str(tree), str(missing)], absent_ok=[str(missing)])
    assert not out.get("failed") and not out["changed"] and out["trees"] == [str(tree), str(missing)]


@pytest.mark.parametrize(
    "break_it, named",
    [
        (lambda t: os.chown(t, NOBODY, NOBODY), "etc-slurm belongs to uid 65534, not to root"),
        (lambda t: t.chmod(0o775), "etc-slurm is writable by its group or others (mode 0775)"),
        (lambda t: os.chown(t / "plugstack.conf.d", NOBODY, -1), "plugstack.conf.d belongs to uid 65534"),
        (lambda t: (t / "plugstack.conf.d").chmod(0o777), "plugstack.conf.d is writable by its group or others"),
        (lambda t: t.parent.chmod(0o777), "is writable by its group or others (mode 0777)"),
    ],
    ids=["owner", "mode", "subfolder owner", "subfolder mode", "folder above"],
)
def test_a_folder_another_account_can_write_fails_naming_it(
    tmp_path: Path, tree: Path, break_it: Any, named: str
) -> None:
    break_it(tree)
    out = _module("root_tree", tmp_path, paths=[str(tree)])
    assert out["failed"] and named in out["msg"], out["msg"]
    assert out["msg"].startswith("only root may write where root runs or reads configuration")


def test_a_missing_folder_fails_unless_it_may_be_absent(tmp_path: Path) -> None:
    out = _module("root_tree", tmp_path, paths=[str(tmp_path / "nope")])
    assert out["failed"] and "nope does not exist" in out["msg"]
