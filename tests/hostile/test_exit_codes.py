"""Exit codes hold: every error a user can cause exits 2 with a message naming the input; 70 is a bug."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import assert_user_error, podctl
from tests.helpers.repo import REPO

from .test_bounded import CASES as BAD_SITES

SIM = str(REPO / "inventory" / "sim" / "site.yaml")


def _cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "empty.yaml").write_text("")
    (tmp / "binary.yaml").write_bytes(b"\x00\xff\xfe" * 100)
    (tmp / "a-file").write_text("x")
    (tmp / "{{x}}").mkdir(exist_ok=True)
    (tmp / "garbage.txt").write_text("this is not ibnetdiscover output\n" * 3)
    return {
        "check-missing": (["check", str(tmp / "nope.yaml")], "no such file"),
        "check-folder": (["check", str(tmp)], "is a directory"),
        "check-empty": (["check", str(tmp / "empty.yaml")], "empty"),
        "check-binary": (["check", str(tmp / "binary.yaml")], "UTF-8"),
        "plan-missing": (["plan", str(tmp / "nope.yaml")], "no such file"),
        "inventory-onto-a-file": (["inventory", SIM, "-o", str(tmp / "a-file")], "a-file"),
        "deploy-unknown-stage": (["deploy", SIM, "--only", "slrum"], "did you mean 'slurm'"),
        "deploy-only-and-skip": (["deploy", SIM, "--only", "os", "--skip", "slurm"], "--only and --skip"),
        "deploy-unknown-host": (["deploy", SIM, "--limit", "node09"], "not in the site"),
        "deploy-bad-hostlist": (["deploy", SIM, "--limit", "node[01-"], "--limit"),
        "deploy-playbooks-with-braces": (["deploy", SIM, "--playbooks-dir", str(tmp / "{{x}}")], "'{'"),
        "validate-no-site": (["validate"], "SITE"),
        "validate-local-no-profile": (["validate", "--local"], "--profile"),
        "validate-local-unknown-profile": (["validate", "--local", "--profile", "dgx-h1000"], "dgx-h1000"),
        "validate-unknown-suite": (["validate", "--local", "--profile", "sim", "--suite", "helth"], "health"),
        "validate-report-onto-a-file": (
            ["validate", "--local", "--profile", "sim", "--report", str(tmp / "a-file")],
            "a-file",
        ),
        "fabric-no-files": (["fabric", "check", SIM], "--ibnetdiscover"),
        "fabric-missing-file": (["fabric", "check", SIM, "--ibnetdiscover", str(tmp / "nope.txt")], "nope.txt"),
        "fabric-garbage": (["fabric", "check", SIM, "--ibnetdiscover", str(tmp / "garbage.txt")], "garbage.txt"),
        "init-unknown-profile": (["init", "--profile", "dgx-z100", "--scalable-units", "1"], "dgx-z100"),
        "init-too-many-units": (["init", "--profile", "dgx-h100", "--scalable-units", "9999"], "--scalable-units"),
        "init-bad-name": (["init", "--profile", "dgx-h100", "--scalable-units", "1", "--name", "Pod X"], "--name"),
    }


CASE_NAMES = sorted(_cases(Path("/tmp")))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_a_user_error_exits_2_with_a_message(name: str, tmp_path: Path) -> None:
    args, needle = _cases(tmp_path)[name]
    assert_user_error(podctl(*args), needle)


@pytest.mark.parametrize("command", ["check", "plan", "inventory", "deploy", "validate", "fabric"])
@pytest.mark.parametrize("bad", sorted(BAD_SITES))
def test_every_command_refuses_a_hostile_site_with_exit_2(command: str, bad: str, tmp_path: Path) -> None:
    text, needle = BAD_SITES[bad]
    site = tmp_path / "site.yaml"
    site.write_text(text)
    args = {
        "check": ["check", str(site)],
        "plan": ["plan", str(site)],
        "inventory": ["inventory", str(site), "-o", str(tmp_path / "inv")],
        "deploy": ["deploy", str(site), "--check"],
        "validate": ["validate", str(site)],
        "fabric": ["fabric", "check", str(site), "--ibnetdiscover", SIM],
    }[command]
    ran = podctl(*args)
    assert_user_error(ran, needle)
    assert not (tmp_path / "inv").exists()
