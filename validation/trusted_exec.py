#!/usr/bin/python3 -I
"""Run a validation check as root only from root's own code.

    podctl-validation-exec PYTHON -m validation.<check> [ARGS...]
    podctl-validation-exec --program PATH [ARGS...]       # a site's nccl-tests binary

Everything podctl starts as root on a node (the health gate's GPU/HCA check, the node suites of
`podctl validate` and `podctl nodes recheck`, the ranks of its Slurm jobs) goes through this
program, installed alone on the node's local disk (/usr/local/sbin). Before it runs PYTHON it
checks every file Python would read code from:

- the interpreter as given and every link on the way to the real binary;
- the virtualenv PYTHON belongs to (its pyvenv.cfg and everything under it: site-packages and
  the packages in it, every .pth file) and the folders those .pth files add (the validation
  package);
- the standard library's folders;
- and every folder above each of them, up to /.

Each must be owned by root and writable by nobody else: no group or other write bit (a folder
with the sticky bit, like /tmp, is not an exception). One that is not is refused: nothing runs,
the reason goes to stderr as `podctl-validation-exec: refused: ...`, and the exit status is 77
(EX_NOPERM), which the gate reports as a refusal (an alert, never a drain) and validate as an
error on that node.

Otherwise it replaces itself with `PYTHON -I -B -m ...` from the folder /: isolated (no
PYTHON* variables, no user site-packages, neither the working folder nor the script's on
sys.path), writing no bytecode. With --program, PATH (and every folder and link on the way to
it) is checked the same way, then run from /.

Standard library only, one file: it must judge the validation tools without importing them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

REFUSED = 77  # EX_NOPERM
PROG = "podctl-validation-exec"
# Where the base interpreter reads code from, asked of it with -I -S (no site module: no .pth
# runs). It knows nothing of a virtualenv then (site.py reads pyvenv.cfg): see venv_of.
_SITE_QUERY = (
    "import json, site, sysconfig; "
    "paths = sysconfig.get_paths(); "
    "print(json.dumps({'site': site.getsitepackages(), 'stdlib': sorted({paths['stdlib'], paths['platstdlib']})}))"
)


class Refused(Exception):
    """A path Python would read code from is not root's alone."""


def _why(path: Path, st: os.stat_result) -> str | None:
    if st.st_uid != 0:
        return f"{path} is owned by uid {st.st_uid}, not root"
    if stat.S_ISLNK(st.st_mode):
        return None  # a link's own mode bits mean nothing; its folder and its target are checked
    if st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if st.st_mode & bit)
        return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def check_path(path: Path, seen: set[Path]) -> None:
    """Refused unless `path`, every folder above it, and every link on the way (and the
    links' targets, likewise) are root's alone."""
    if not path.is_absolute():
        raise Refused(f"{path} is not an absolute path")
    parts = path.parts
    current = Path(parts[0])
    for depth, part in enumerate(parts):
        current = current / part if depth else current
        if current in seen:
            continue
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            # Nothing there (a link into a package that is not installed: Debian's python3-torch
            # links torch/include to libtorch-dev's headers). The folder above was found root's
            # alone, so only root can put something there: nothing to refuse.
            if depth == 0:
                raise Refused(f"{current}: No such file or directory") from None
            seen.add(current)
            return
        except OSError as exc:
            raise Refused(f"{current}: {exc.strerror}") from None
        why = _why(current, st)
        if why:
            raise Refused(why)
        seen.add(current)
        if stat.S_ISLNK(st.st_mode):
            target = Path(os.path.normpath(current.parent / os.readlink(current)))
            if len(seen) > 4096:
                raise Refused(f"{path}: too many links")
            check_path(target, seen)
            rest = parts[depth + 1 :]
            check_path(target.joinpath(*rest) if rest else target, seen)
            return


def check_tree(top: Path, seen: set[Path]) -> int:
    """check_path(top), then every file and folder under it (links are not followed: a link
    below `top` is checked for its owner, and where it points is checked as a path). The
    number of entries looked at."""
    check_path(top, seen)
    count = 0
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            entry = Path(root) / name
            count += 1
            try:
                st = os.lstat(entry)
            except OSError as exc:
                raise Refused(f"{entry}: {exc.strerror}") from None
            why = _why(entry, st)
            if why:
                raise Refused(why)
            if stat.S_ISLNK(st.st_mode):
                check_path(Path(os.path.normpath(entry.parent / os.readlink(entry))), seen)
    return count


def pth_folders(site_dir: Path) -> list[Path]:
    """The folders the .pth files in a site-packages folder add to sys.path (their plain lines;
    a line starting with `import` is code, which the walk over site-packages has vetted as root's)."""
    out = []
    for pth in sorted(site_dir.glob("*.pth")):
        for line in pth.read_text(errors="replace").splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "import ", "import\t")):
                continue
            folder = Path(line) if os.path.isabs(line) else site_dir / line
            if folder.is_dir():
                out.append(Path(os.path.normpath(folder)))
    return out


def venv_of(python: Path) -> Path | None:
    """The virtualenv `python` (as given, not resolved) starts in: where Python finds pyvenv.cfg,
    beside the executable or one folder up."""
    return next((d for d in (python.parent, python.parent.parent) if (d / "pyvenv.cfg").is_file()), None)


def uses_system_site(venv: Path) -> bool:
    for line in (venv / "pyvenv.cfg").read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "include-system-site-packages":
            return value.strip().lower() == "true"
    return False


def vet(python: Path) -> None:
    """Refused unless every place `python` would read code from is root's alone."""
    seen: set[Path] = set()
    check_path(python, seen)
    # The interpreter is root's: asking it where it looks runs nothing else (-S: no site, no .pth).
    proc = subprocess.run(
        [str(python), "-I", "-S", "-c", _SITE_QUERY],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=30,
        check=False,
    )
    if proc.returncode != 0:
        raise Refused(f"{python} does not run: {proc.stderr.strip()[-200:]}")
    where = json.loads(proc.stdout)
    for folder in where["stdlib"]:
        check_path(Path(folder), seen)
    venv = venv_of(python)
    trees: list[Path] = []
    site_dirs: list[Path] = []
    if venv is not None:
        trees.append(venv)  # the whole virtualenv: its site-packages, scripts and config
        site_dirs += sorted({d.resolve() for d in venv.glob("lib*/python3*/site-packages") if d.is_dir()})
    if venv is None or uses_system_site(venv):
        site_dirs += [Path(s) for s in where["site"] if Path(s).is_dir()]
    trees += site_dirs
    for site_dir in site_dirs:
        trees += pth_folders(site_dir)
    walked: list[Path] = []
    for top in trees:
        if not any(top == w or w in top.parents for w in walked):
            check_tree(top, seen)
            walked.append(top)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--program":
        program, command, is_python = Path(argv[1]), argv[1:], False
    elif len(argv) >= 3 and argv[1] == "-m":
        program, command, is_python = Path(argv[0]), [argv[0], "-I", "-B", *argv[1:]], True
    else:
        print(f"usage: {PROG} PYTHON -m MODULE [ARGS...] | {PROG} --program PATH [ARGS...]", file=sys.stderr)
        return 2
    try:
        if is_python:
            vet(program)
        else:
            check_path(program, set())
    except Refused as exc:
        print(f"{PROG}: refused: {exc}", file=sys.stderr)
        return REFUSED
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        print(f"{PROG}: refused: cannot vet {program}: {exc}", file=sys.stderr)
        return REFUSED
    os.chdir("/")
    try:
        os.execv(program, command)
    except OSError as exc:
        print(f"{PROG}: cannot run {program}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
