"""podctl-validation-exec (validation/trusted_exec.py): root runs a check only from code root alone
could have written, isolated, from /. Each attack is run against a real virtualenv in a folder as
the validation-tools stage leaves it (tests/helpers/rootowned.py), as root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.rootowned import NOBODY, SYSTEM_PYTHON, Tools, tools_tree
from validation.trusted_exec import REFUSED

# A module that announces itself: where it ran from, as whom, with which sys.path.
PROBE = (
    "import json, os, sys\n"
    "print(json.dumps({'file': __file__, 'cwd': os.getcwd(), 'uid': os.getuid(), 'path': sys.path,"
    " 'flags': [sys.flags.isolated, sys.flags.dont_write_bytecode]}))\n"
)


@pytest.fixture
def tools() -> Iterator[Tools]:
    with tools_tree() as t:
        (t.package / "probe.py").write_text(PROBE)
        os.chmod(t.package / "probe.py", 0o644)
        yield t


def launch(tools: Tools, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    return subprocess.run(
        [str(tools.launcher), *args],
        capture_output=True,
        text=True,
        cwd=cwd or "/",
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def probe(tools: Tools, **kwargs) -> subprocess.CompletedProcess[str]:
    return launch(tools, str(tools.python), "-m", "validation.probe", **kwargs)


def refused(ran: subprocess.CompletedProcess[str], why: str) -> None:
    assert ran.returncode == REFUSED, (ran.returncode, ran.stdout, ran.stderr)
    assert ran.stdout == ""
    assert "podctl-validation-exec: refused:" in ran.stderr and why in ran.stderr, ran.stderr


def test_a_clean_install_runs_isolated_from_root_without_bytecode(tools: Tools, tmp_path: Path) -> None:
    ran = probe(tools, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PYTHONSTARTUP": str(tmp_path / "x")})
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["file"] == str(tools.package / "probe.py")
    assert seen["cwd"] == "/" and seen["uid"] == 0 and seen["flags"] == [1, 1]
    assert str(tmp_path) not in seen["path"] and "" not in seen["path"]
    assert not list(tools.package.rglob("__pycache__"))  # -B: nothing written beside the source


def test_a_module_planted_in_the_callers_folder_or_on_pythonpath_does_not_run(tools: Tools, tmp_path: Path) -> None:
    # The health gate's attack: slurmd runs it from its log folder, which the slurm account owns.
    canary = tmp_path / "ran-as-root"
    planted = tmp_path / "validation"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "probe.py").write_text(f"open({str(canary)!r}, 'w').write('planted')\n")
    for env in ({}, {"PYTHONPATH": str(tmp_path)}):
        ran = probe(tools, cwd=tmp_path, env=env)
        assert ran.returncode == 0 and json.loads(ran.stdout)["file"] == str(tools.package / "probe.py")
    assert not canary.exists()


@pytest.mark.parametrize(
    ("target", "attack", "why"),
    [
        ("package/probe.py", "chown", f"owned by uid {NOBODY}, not root"),
        ("package", "chmod-g", "writable by group"),
        ("top", "chmod-o", "writable by others"),
        ("site-packages", "chown", f"owned by uid {NOBODY}"),
        ("venv/pyvenv.cfg", "chmod-o", "writable by others"),
    ],
)
def test_code_another_user_could_write_is_refused_and_nothing_runs(
    tools: Tools, target: str, attack: str, why: str
) -> None:
    path = {
        "package/probe.py": tools.package / "probe.py",
        "package": tools.package,
        "top": tools.top,
        "site-packages": tools.site_packages,
        "venv/pyvenv.cfg": tools.top / "venv" / "pyvenv.cfg",
    }[target]
    if attack == "chown":
        os.chown(path, NOBODY, NOBODY)
    else:
        os.chmod(path, path.stat().st_mode | (0o020 if attack == "chmod-g" else 0o002))
    refused(probe(tools), why)


def test_a_pth_file_planted_in_site_packages_is_refused(tools: Tools, tmp_path: Path) -> None:
    # A .pth file's `import` lines run at every start: one written by another user is code.
    canary = tmp_path / "pth-ran"
    pth = tools.site_packages / "zz-planted.pth"
    pth.write_text(f"import os; open({str(canary)!r}, 'w')\n")
    os.chown(pth, NOBODY, NOBODY)
    refused(probe(tools), "zz-planted.pth is owned by uid")
    assert not canary.exists()


def test_a_folder_a_pth_file_adds_is_vetted_too(tools: Tools, tmp_path: Path) -> None:
    elsewhere = tmp_path / "lib"  # under /tmp: others may write there
    elsewhere.mkdir()
    pth = tools.site_packages / "extra.pth"
    pth.write_text(f"{elsewhere}\n")
    os.chmod(pth, 0o644)
    refused(probe(tools), "/tmp is writable by group and others")


def test_a_link_to_a_place_others_write_is_refused(tools: Tools, tmp_path: Path) -> None:
    # The interpreter link of the virtualenv, pointed at a Python in /tmp.
    fake = tmp_path / "python3"
    fake.symlink_to("/usr/bin/python3.11")
    link = tools.top / "venv" / "bin" / "python"
    link.unlink()
    link.symlink_to(fake)
    refused(probe(tools), "/tmp is writable")


def test_an_interpreter_under_tmp_is_refused(tmp_path: Path) -> None:
    with tools_tree() as tools:
        ran = launch(tools, "/tmp/../tmp/python3", "-m", "validation.health")
    refused(ran, "/tmp is writable by group and others")


def test_a_program_is_vetted_and_run_from_root(tools: Tools, tmp_path: Path) -> None:
    program = tools.top / "all_reduce_perf"
    program.write_text('#!/bin/sh\npwd; echo "$@"\n')
    os.chmod(program, 0o755)
    ran = launch(tools, "--program", str(program), "-b", "8", cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.split() == ["/", "-b", "8"], ran
    planted = tmp_path / "all_reduce_perf"
    planted.write_text("#!/bin/sh\necho planted\n")
    os.chmod(planted, 0o755)
    refused(launch(tools, "--program", str(planted)), "/tmp is writable")
    os.chown(program, NOBODY, NOBODY)
    refused(launch(tools, "--program", str(program)), f"owned by uid {NOBODY}")


def test_bad_usage_says_how(tools: Tools) -> None:
    ran = launch(tools, str(tools.python), "validation.probe")
    assert ran.returncode == 2 and "usage:" in ran.stderr


def test_a_link_to_nothing_under_roots_folder_is_no_refusal_but_one_under_tmp_is(tools: Tools) -> None:
    """Debian's python3-torch links torch/include to the headers of libtorch-dev, which a node
    without recommends does not have: a link to nothing where only root could create it is no
    code to refuse. One to nothing under /tmp is: anyone could put code there."""
    absent = tools.site_packages / "includes-of-a-package-not-installed"
    absent.symlink_to(tools.top / "no-such-folder" / "c10")
    ran = probe(tools)
    assert ran.returncode == 0, ran.stderr
    absent.unlink()
    absent.symlink_to("/tmp/podctl-no-such-folder/c10")
    refused(probe(tools), "/tmp is writable by")


@dataclass(frozen=True)
class SystemPython:
    """An interpreter whose standard library and system site-packages are folders of the test's
    own, and a virtualenv of it with `include-system-site-packages = true`."""

    stdlib: Path
    system_site: Path
    python: Path  # the virtualenv's


@pytest.fixture
def system_python(tools: Tools) -> SystemPython:
    """Debian's interpreter copied beside the tools (it finds its standard library from where it
    lies: lib/python3.X beside its bin/), that folder holding links to Debian's modules, its system
    site-packages an empty lib/python3/dist-packages; its virtualenv has the tools' .pth file."""
    binary = SYSTEM_PYTHON.resolve()
    base = tools.top / "python"
    (base / "bin").mkdir(parents=True)
    shutil.copy2(binary, base / "bin" / binary.name)
    stdlib = base / "lib" / binary.name
    stdlib.mkdir(parents=True)
    for module in (Path("/usr/lib") / binary.name).iterdir():
        (stdlib / module.name).symlink_to(module)
    system_site = base / "lib" / "python3" / "dist-packages"
    system_site.mkdir(parents=True)
    venv = tools.top / "venv-system-site"
    subprocess.run(
        [str(base / "bin" / binary.name), "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
        timeout=120,
    )
    assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text().splitlines()
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    (site_packages / "podctl-validation.pth").write_text(f"{tools.top / 'src'}\n")
    return SystemPython(stdlib, system_site, venv / "bin" / "python")


def test_a_venv_with_the_system_site_packages_runs_when_they_and_the_stdlib_are_roots(
    tools: Tools, system_python: SystemPython
) -> None:
    # The tree the two tests below break: as built, it runs (their refusals are the break's alone).
    ran = launch(tools, str(system_python.python), "-m", "validation.probe")
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["file"] == str(tools.package / "probe.py")
    assert str(system_python.stdlib) in seen["path"] and str(system_python.system_site) in seen["path"]


@pytest.mark.parametrize(
    ("attack", "why"),
    [("chown", f"is owned by uid {NOBODY}, not root"), ("chmod-o", "is writable by others (mode 0757)")],
    ids=("owner", "mode"),
)
def test_a_stdlib_folder_another_user_could_write_is_refused(
    tools: Tools, system_python: SystemPython, attack: str, why: str
) -> None:
    # Nothing else the launcher walks lies under it: only its check of the stdlib folders sees it.
    if attack == "chown":
        os.chown(system_python.stdlib, NOBODY, NOBODY)
    else:
        os.chmod(system_python.stdlib, 0o757)
    refused(launch(tools, str(system_python.python), "-m", "validation.probe"), f"{system_python.stdlib} {why}")


def test_a_system_site_packages_folder_not_roots_is_refused_when_the_venv_includes_it(
    tools: Tools, system_python: SystemPython
) -> None:
    os.chown(system_python.system_site, NOBODY, NOBODY)
    refused(
        launch(tools, str(system_python.python), "-m", "validation.probe"),
        f"{system_python.system_site} is owned by uid {NOBODY}, not root",
    )
