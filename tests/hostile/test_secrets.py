"""Secrets kept out of the site file (podctl.derive.secrets): an ansible-vault value that Ansible itself
opens with the vault secret podctl passes it, or a 0600 file podctl reads. Neither is printed or
written anywhere but the inventory's 0600 file; a secret nothing can open, or a file others can
read, stops the command with a clear error."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podctl.core.model import Secret
from podctl.derive.inventory import SITE_VARS, write_inventory
from podctl.derive.site import load_site
from tests.helpers.cli import assert_user_error, podctl
from tests.helpers.repo import REPO

pytestmark = pytest.mark.ansible

SECRET = "v4ult3d-t0ken"
URL = f"https://pypi.example.com/simple?token={SECRET}"
ANSIBLE_BIN = Path(sys.executable).parent
EXAMPLE = REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"


@pytest.fixture
def vault_password(tmp_path: Path) -> Path:
    path = tmp_path / "vault-pass"
    path.write_text("correct horse battery staple\n")
    path.chmod(0o600)
    return path


def _encrypted(password_file: Path) -> str:
    """`index_url: !vault |` and its ciphertext, as ansible-vault encrypt_string prints them."""
    ran = subprocess.run(
        [str(ANSIBLE_BIN / "ansible-vault"), "encrypt_string", "--vault-password-file", str(password_file), URL,
         "--name", "index_url"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return ran.stdout


def _site(tmp_path: Path, index_url_yaml: str, base: Path = EXAMPLE) -> Path:
    """`base` with validation.tools.index_url written as given (a YAML fragment at that key)."""
    text = base.read_text()
    text = text.replace("\nvalidation:\n", "\nvalidation:\n  tools:\n" + _indent(index_url_yaml, 4) + "\n", 1)
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line if line else line for line in text.rstrip("\n").split("\n"))


def _holding(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and SECRET in p.read_text())


def test_a_vault_value_is_opened_by_ansible_alone(tmp_path: Path, vault_password: Path) -> None:
    site_file = _site(tmp_path, _encrypted(vault_password))
    site = load_site(site_file)
    assert isinstance(site.validation.tools.index_url, Secret) and site.validation.tools.index_url.vault
    for output in ("text", "json"):
        ran = podctl("plan", str(site_file), "-o", output)
        assert ran.rc == 0 and SECRET not in ran.out, ran.err
    assert "(an ansible-vault value)" in ran.out  # the JSON plan: not cut to the terminal's width
    write_inventory(site, tmp_path / "inv")
    vars_text = (tmp_path / "inv" / SITE_VARS).read_text()
    assert "!vault |" in vars_text and SECRET not in vars_text
    assert stat.S_IMODE((tmp_path / "inv" / SITE_VARS).stat().st_mode) == 0o600
    # The real consumer: Ansible reads the inventory and opens the value with the vault secret.
    ask = [str(ANSIBLE_BIN / "ansible"), "dgx001", "-i", str(tmp_path / "inv"), "-m", "ansible.builtin.debug",
           "-a", "var=podctl_validation_tools.index_url"]  # fmt: skip
    opened = subprocess.run(
        [*ask, "--vault-password-file", str(vault_password)], capture_output=True, text=True, timeout=120
    )
    assert opened.returncode == 0 and URL in opened.stdout, opened.stdout + opened.stderr
    closed = subprocess.run(
        ask, capture_output=True, text=True, timeout=120, env={**os.environ, "ANSIBLE_NOCOLOR": "1"}
    )
    assert SECRET not in closed.stdout + closed.stderr


def test_deploy_refuses_a_vault_value_nothing_opens(tmp_path: Path, vault_password: Path) -> None:
    site_file = _site(tmp_path, _encrypted(vault_password))
    env = {"ANSIBLE_VAULT_PASSWORD_FILE": "", "ANSIBLE_VAULT_IDENTITY_LIST": ""}
    ran = podctl("deploy", str(site_file), "--only", "validation-tools", "--runs-dir", str(tmp_path / "runs"), env=env)
    assert_user_error(ran, "validation.tools.index_url is an ansible-vault value", "--vault-password-file")
    ran = podctl(
        "deploy", str(site_file), "--only", "os", "--runs-dir", str(tmp_path / "runs"), "--vault-id", "prod", env=env
    )
    assert_user_error(ran, "--vault-id 'prod': give it as ID@FILE")


def test_a_0600_file_of_ones_own_holds_a_secret_and_nothing_else_does(tmp_path: Path) -> None:
    secret = tmp_path / "index-url"
    secret.write_text(URL + "\n")
    secret.chmod(0o600)
    site_file = _site(tmp_path, f"index_url: {{file: {secret}}}")
    ran = podctl("plan", str(site_file), "-o", "json")
    assert ran.rc == 0 and SECRET not in ran.out and str(secret) in ran.out, ran.err
    write_inventory(load_site(site_file), tmp_path / "inv")
    assert _holding(tmp_path / "inv") == [SITE_VARS]
    assert yaml.safe_load((tmp_path / "inv" / SITE_VARS).read_text())["podctl_validation_tools"]["index_url"] == URL


@pytest.mark.parametrize("problem", ["open-to-others", "missing", "a-link", "two-lines"])
def test_a_secret_file_others_could_read_or_that_is_not_one_is_refused(tmp_path: Path, problem: str) -> None:
    secret = tmp_path / "index-url"
    if problem != "missing":
        secret.write_text(URL + ("\nmore\n" if problem == "two-lines" else "\n"))
        secret.chmod(0o644 if problem == "open-to-others" else 0o600)
    if problem == "a-link":
        real = tmp_path / "real"
        secret.rename(real)
        secret.symlink_to(real)
    site_file = _site(tmp_path, f"index_url: {{file: {secret}}}")
    ran = podctl("inventory", str(site_file), "-o", str(tmp_path / "inv"))
    why = {
        "open-to-others": "open to group or others (mode 0644)",
        "missing": "No such file",
        "a-link": "not a regular file",
        "two-lines": "exactly one line",
    }[problem]
    assert_user_error(ran, "validation.tools.index_url", str(secret), why)
    assert not (tmp_path / "inv").exists() or _holding(tmp_path / "inv") == []


def test_a_vault_tag_anywhere_else_is_a_type_error_with_its_path(tmp_path: Path, vault_password: Path) -> None:
    encrypted = _encrypted(vault_password).replace("index_url:", "description:", 1)
    text = EXAMPLE.read_text().replace(
        "  description: 127-node dgx-h100 pod, 4 scalable unit(s)\n", _indent(encrypted, 2) + "\n"
    )
    path = tmp_path / "site.yaml"
    path.write_text(text)
    ran = podctl("check", str(path))
    assert ran.rc == 2 and "metadata.description" in ran.out + ran.err, ran.out + ran.err
    assert "Traceback" not in ran.out + ran.err
