"""Writing files and folders without losing anything.

Every file podctl writes goes through a temporary file of a unique name in
the same folder (created exclusively, so a link planted there is never
followed) and is renamed over its target in one step: a reader sees the old
file or the new one, never half of one.

A folder podctl writes (an inventory, a report) carries a manifest of what
it wrote. podctl replaces or adds to a folder only when everything in it is
its own: a folder holding anyone else's files is an error, never a wipe.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from podctl.core.errors import PodctlError

MANIFEST = ".podctl-manifest.json"


class OutputError(PodctlError):
    """An output path podctl cannot or must not write; the message names it and what to do."""


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def private_folder(path: Path, what: str) -> Path:
    """`path` as a folder only this user can use (`what` says what for): made with mode 0700 when
    missing; refused (OutputError) when it is a link or not a folder, belongs to another user, is
    open to group or others, or lies in a folder others may rename it in (writable by them, without
    the sticky bit)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st, parent = os.lstat(path), os.stat(path.parent)
    except OSError as exc:
        raise OutputError(f"cannot make {path} for {what}: {_why(exc)}") from None
    me = os.geteuid()
    fix = f"remove it (after checking who made it and why) or choose another folder: {what} must be yours alone"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path} is not a folder of its own (a link or a file), so not a place for {what}; {fix}")
    if st.st_uid != me:
        raise OutputError(f"{path} belongs to uid {st.st_uid}, not to you (uid {me}); {fix}")
    if st.st_mode & 0o077:
        raise OutputError(
            f"{path} is open to group or others (mode {stat.S_IMODE(st.st_mode):04o}); {fix}, or `chmod 700 {path}`"
        )
    if parent.st_uid not in (0, me) or (parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX):
        raise OutputError(f"{path.parent} lets others rename {path} away; {fix}")
    return path


def atomic_write(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` through a unique temporary file and one rename."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write into {path.parent}: {_why(exc)}") from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write: {_why(exc)}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _manifest(folder: Path) -> tuple[set[str], set[str]]:
    """(files, trees) podctl recorded as its own in `folder`: trees are subfolders whose
    whole content is podctl's. Nothing, when there is no readable manifest."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set(), set()  # missing or unreadable: nothing in the folder is known to be podctl's
    if not isinstance(data, dict):
        return set(), set()

    def names(key: str) -> set[str]:
        value = data.get(key)
        return {str(v) for v in value} if isinstance(value, list) else set()

    return names("files"), names("trees")


def _write_manifest(folder: Path, what: str, files: set[str], trees: set[str]) -> None:
    atomic_write(
        folder / MANIFEST,
        json.dumps({"written_by": "podctl", "what": what, "files": sorted(files), "trees": sorted(trees)}, indent=1)
        + "\n",
    )


def _entries(folder: Path) -> list[str]:
    """Every file and folder below `folder`, as relative POSIX paths (folders with a trailing /)."""
    out: list[str] = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        out += [(rel / d).as_posix() + "/" for d in dirs]
        out += [(rel / f).as_posix() for f in files]
    return [e for e in out if e != MANIFEST]


def _check_folder(folder: Path, what: str, fix: str) -> tuple[set[str], set[str]]:
    """What podctl wrote in `folder` before; OutputError when the folder holds anything else."""
    if folder.is_symlink():
        raise OutputError(f"{folder}: is a symbolic link; give the folder itself for {what}")
    if not folder.exists():
        return set(), set()
    if not folder.is_dir():
        raise OutputError(f"{folder}: exists and is not a folder; {fix}")
    try:
        present = _entries(folder)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot read: {_why(exc)}") from None
    files, trees = _manifest(folder)
    if not present:
        return files, trees

    # A folder is podctl's if it holds a file of podctl's.
    folders = {"/".join(f.split("/")[:i]) + "/" for f in files for i in range(1, f.count("/") + 1)}

    def own(entry: str) -> bool:
        if entry in files or entry in folders:
            return True
        parts = entry.rstrip("/").split("/")
        return any("/".join(parts[:i]) + "/" in trees for i in range(1, len(parts) + 1))

    foreign_all = [e for e in present if not own(e)]
    foreign_folders = {e for e in foreign_all if e.endswith("/")}

    def inside_foreign(entry: str) -> bool:
        parts = entry.rstrip("/").split("/")[:-1]
        return any("/".join(parts[:i]) + "/" in foreign_folders for i in range(1, len(parts) + 1))

    # Name a foreign folder once, not everything in it.
    foreign = sorted(e for e in foreign_all if not inside_foreign(e))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputError(
            f"{folder}: not a podctl {what}: it holds files podctl did not write ({shown}); podctl "
            f"writes into a new or empty folder, or one it wrote itself; {fix}"
        )
    return files, trees


def _make_parent(folder: Path) -> None:
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot create {folder.parent}: {_why(exc)}") from None


def write_tree(
    folder: Path, files: Mapping[str, str], what: str, fix: str, modes: Mapping[str, int] | None = None
) -> list[str]:
    """Replace `folder` by exactly `files` ({relative path: text}) in one rename.

    The folder may be absent, empty, or one podctl wrote before (its manifest
    lists everything in it). The new tree is built beside it and swapped in.
    """
    folder = Path(folder)
    _check_folder(folder, what, fix)
    _make_parent(folder)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".new", dir=folder.parent))
    except OSError as exc:
        raise OutputError(f"{folder}: cannot write into {folder.parent}: {_why(exc)}") from None
    old: Path | None = None
    try:
        for rel, text in files.items():
            target = staging / rel
            if not target.resolve().is_relative_to(staging.resolve()):
                raise ValueError(f"{rel!r} lies outside the folder")  # a podctl bug, never a user's
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, text, (modes or {}).get(rel, 0o644))
        _write_manifest(staging, what, set(files), set())
        os.chmod(staging, 0o755)
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".old", dir=folder.parent))
            os.rename(folder, old / folder.name)
        os.rename(staging, folder)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None and (old / folder.name).exists() and not folder.exists():
            os.rename(old / folder.name, folder)
        raise OutputError(f"{folder}: cannot write {what}: {_why(exc)}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return sorted(files)


class OutputFolder:
    """A folder podctl adds files to (a report): its own, or new, or empty.

    Each file written is recorded in the folder's manifest, so that a later
    run may write into the same folder again, and nobody else's file is
    ever overwritten.
    """

    def __init__(self, folder: Path, what: str, fix: str) -> None:
        self.path = Path(folder)
        self.what = what
        self.files, self.trees = _check_folder(self.path, what, fix)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot create: {_why(exc)}") from None

    def write(self, name: str, text: str, mode: int = 0o644) -> Path:
        if name not in self.files:
            self.files.add(name)
            _write_manifest(self.path, self.what, self.files, self.trees)
        path = self.path / name
        atomic_write(path, text, mode)
        return path

    def folder(self, name: str) -> Path:
        """A subfolder of podctl's own (scratch space): everything under it is podctl's."""
        tree = name.rstrip("/") + "/"
        if tree not in self.trees:
            self.trees.add(tree)
            _write_manifest(self.path, self.what, self.files, self.trees)
        path = self.path / name
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{path}: cannot create: {_why(exc)}") from None
        return path


def write_new_file(path: Path, text: str, overwrite: bool, mode: int = 0o644) -> None:
    """Write one file the user named; an existing one only with `overwrite`."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: is a folder; name a file")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise OutputError(f"{path}: already exists; pass --force to overwrite it")
    if not path.parent.is_dir():
        raise OutputError(f"{path}: the folder {path.parent} does not exist")
    atomic_write(path, text, mode)
