"""`pip install podctl`, without extras, gives a working CLI for everything that needs no pod: the
wheel built from this checkout, in a clean virtualenv of its own, run from outside the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.repo import REPO, SIM_SITE

SITE = REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The podctl executable of a clean virtualenv that holds podctl's wheel and its dependencies only."""
    work = tmp_path_factory.mktemp("plain-install")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(REPO)],
        capture_output=True, text=True, cwd=work, timeout=300,
    )  # fmt: skip
    shutil.rmtree(REPO / "build", ignore_errors=True)  # setuptools' scratch folder, not the project's
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (work / "dist").glob("podctl-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]
    listed = subprocess.run([str(venv / "bin" / "pip"), "list"], capture_output=True, text=True, check=True).stdout
    for extra in ("paramiko", "ansible-runner", "ansible-core", "torch", "pytest"):
        assert f"\n{extra} " not in listed.lower(), f"{extra} is installed: not a plain install"
    return venv / "bin" / "podctl"


def run(podctl: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(podctl), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_the_commands_that_need_no_pod_work_without_extras(plain: Path, tmp_path: Path) -> None:
    init = tmp_path / "site.yaml"
    topology = tmp_path / "topo.txt"
    for args in (
        ["--help"],
        ["--version"],
        ["schema"],
        ["check", str(SITE), "--strict"],
        ["plan", str(SITE), "-o", "json"],
        ["inventory", str(SITE), "-o", str(tmp_path / "inv")],
        ["init", "--profile", "dgx-h100", "--scalable-units", "1", "-o", str(init)],
        ["check", str(init)],
        ["fabric", "--help"],
        ["fabric", "topology", str(SITE)],
        ["sim", "--help"],
        ["deploy", "--help"],
        ["validate", "--help"],
    ):
        ran = run(plain, *args, cwd=tmp_path)
        assert ran.returncode == 0, (args, ran.stdout[-1000:], ran.stderr[-2000:])
        if args == ["fabric", "topology", str(SITE)]:
            topology.write_text(ran.stdout)
    assert (tmp_path / "inv" / "hosts.yml").is_file()
    checked = run(plain, "fabric", "check", str(SITE), "--ibnetdiscover", str(topology), cwd=tmp_path)
    assert checked.returncode == 0 and "Traceback" not in checked.stderr, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["status", str(SITE)],
        ["validate", str(SITE), "--suite", "health"],
        ["nodes", "recheck", str(SITE), "dgx001"],
    ],
    ids=["status", "validate", "recheck"],
)
def test_a_command_that_needs_an_extra_names_it_and_exits_2(plain: Path, tmp_path: Path, args: list[str]) -> None:
    ran = run(plain, *args, cwd=tmp_path)
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert "pip install 'podctl[deploy]'" in ran.stderr and "Traceback" not in ran.stderr + ran.stdout


def test_deploy_without_ansible_says_which_extra(plain: Path, tmp_path: Path) -> None:
    ran = run(plain, "deploy", str(SITE), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert ran.returncode == 2 and "podctl[deploy]" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr


def test_the_sim_site_checks_clean_from_outside_the_checkout(plain: Path, tmp_path: Path) -> None:
    ran = run(plain, "check", str(SIM_SITE), cwd=tmp_path)
    assert ran.returncode == 0 and "0 error(s)" in ran.stdout, ran.stdout + ran.stderr
