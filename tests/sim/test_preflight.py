"""Preflight: missing or misconfigured tools give advice, not a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from podctl.errors import PodctlError
from podctl.sim import preflight
from podctl.sim.errors import SimError


def fake_bin(folder: Path, name: str, script: str = "exit 0") -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_sim_error_is_a_podctl_error_with_exit_code_2():
    assert issubclass(SimError, PodctlError)
    assert SimError("x").exit_code == 2


def test_missing_podman_says_what_to_install(tmp_path):
    fake_bin(tmp_path, "runc")
    with pytest.raises(SimError) as err:
        preflight.find_tools("down", path=str(tmp_path))
    message = str(err.value)
    assert "podman" in message
    assert "apt-get install -y podman" in message
    assert "sim-setup.sh" in message


def test_every_missing_tool_is_named_at_once(tmp_path):
    with pytest.raises(SimError) as err:
        preflight.find_tools("image", path=str(tmp_path))
    message = str(err.value)
    for tool in ("podman", "runc", "debootstrap"):
        assert f"  {tool}:" in message
    assert "apt-get install -y debootstrap podman runc tar" in message
    assert "crun fails" in message  # why runc, not crun


def test_fault_needs_tc_and_nsenter(tmp_path):
    for name in ("podman", "runc", "ip", "ssh"):
        fake_bin(tmp_path, name)
    with pytest.raises(SimError) as err:
        preflight.find_tools("fault", path=str(tmp_path))
    message = str(err.value)
    assert "tc:" in message and "nsenter:" in message
    assert "apt-get install -y iproute2 util-linux" in message


def test_tools_found_on_the_given_path(tmp_path):
    for name in ("podman", "runc"):
        fake_bin(tmp_path, name)
    tools = preflight.find_tools("down", path=str(tmp_path))
    assert tools.podman == str(tmp_path / "podman")
    assert tools.runc == str(tmp_path / "runc")


def test_not_root_is_refused_with_the_reason():
    with pytest.raises(SimError, match="must run as root"):
        preflight.require_root(euid=1000)
    preflight.require_root(euid=0)


def test_podman_that_cannot_start_points_at_containers_conf(tmp_path):
    fake_bin(
        tmp_path, "podman", 'echo "Error: default OCI runtime \\"crun\\" not found: invalid argument" >&2; exit 125'
    )
    fake_bin(tmp_path, "runc")
    tools = preflight.find_tools("down", path=str(tmp_path))
    with pytest.raises(SimError) as err:
        preflight.check_podman(tools)
    message = str(err.value)
    assert 'crun\\" not found' in message or 'crun" not found' in message
    assert "/etc/containers/containers.conf" in message
    assert 'runtime = "runc"' in message


def test_missing_debian_keyring(tmp_path):
    with pytest.raises(SimError, match="apt-get install -y debian-archive-keyring"):
        preflight.check_debootstrap(tmp_path / "missing.gpg")


def test_search_path_adds_sbin_for_runc_only_when_path_is_not_explicit(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert "/usr/sbin" in preflight.search_path().split(os.pathsep)
    assert preflight.search_path("/nowhere") == "/nowhere"
