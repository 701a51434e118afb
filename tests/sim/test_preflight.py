"""Preflight: missing or misconfigured tools give advice, not a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from podctl.core.errors import PodctlError
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


def test_a_pod_past_the_hosts_inotify_instances_is_refused_before_any_node_starts(tmp_path):
    from podctl.sim.preflight import INOTIFY_PER_NODE, check_inotify

    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    # 16 nodes fit Debian's default next to what the host holds; 31 do not (found bringing up a
    # 32-node pod: the nodes past the limit hung in "initializing").
    check_inotify(16, limit, in_use=10)
    with pytest.raises(SimError) as err:
        check_inotify(31, limit, in_use=10)
    message = str(err.value)
    assert f"about {31 * INOTIFY_PER_NODE} inotify instances" in message
    assert "fs.inotify.max_user_instances is 128" in message
    assert "sysctl -w fs.inotify.max_user_instances=8192" in message
    check_inotify(0, limit, in_use=500)  # nothing new to start: nothing to refuse
    limit.write_text("8192\n")
    check_inotify(31, limit, in_use=10)


def test_a_pod_past_the_hosts_neighbour_table_is_refused_before_any_node_starts(tmp_path):
    from podctl.sim.preflight import check_neighbours, neighbours_needed

    limit = tmp_path / "gc_thresh3"
    limit.write_text("1024\n")
    # Debian's cap: 16 nodes fit; 32 do not (found on a 32-node pod: a 31-rank job's connection
    # failed with "No route to host" and dmesg said "neighbor table overflow!").
    assert neighbours_needed(32) > 1024 >= neighbours_needed(16)
    check_neighbours(16, limit)
    with pytest.raises(SimError) as err:
        check_neighbours(32, limit)
    message = str(err.value)
    assert "net.ipv4.neigh.default.gc_thresh3 is 1024" in message and "No route to host" in message
    assert "sysctl -w net.ipv4.neigh.default.gc_thresh2=8192 net.ipv4.neigh.default.gc_thresh3=16384" in message
    limit.write_text("16384\n")
    check_neighbours(32, limit)
    check_neighbours(32, tmp_path / "absent")  # not Linux's procfs: nothing to check against


def test_a_pod_past_the_disk_podman_has_is_refused_before_any_node_starts(tmp_path):
    from podctl.sim.preflight import NODE_DISK_GIB, check_disk

    # The disk a 32-node pod ran out of mid-deploy: 100 GiB free takes no more than 100 // NODE_DISK_GIB nodes.
    fits = 100 // NODE_DISK_GIB
    check_disk(fits, tmp_path, free=100 * 2**30)
    check_disk(0, tmp_path, free=0)  # nodes already there: nothing new to fit
    with pytest.raises(SimError) as err:
        check_disk(fits + 1, tmp_path, free=100 * 2**30)
    message = str(err.value)
    assert f"{fits + 1} more sim node(s) take about {(fits + 1) * NODE_DISK_GIB} GiB" in message
    assert f"{tmp_path} has 100.0 GiB free" in message and "No space left on device" in message
    # Without a figure given, the file system's own: no disk holds a million nodes.
    with pytest.raises(SimError, match="GiB free"):
        check_disk(10**6, tmp_path)


def test_inotify_instances_in_use_are_counted_from_the_processes_descriptors(tmp_path):
    from podctl.sim.preflight import inotify_in_use

    for pid, targets in {"1": ["anon_inode:inotify", "/dev/null"], "42": ["anon_inode:inotify"] * 2}.items():
        fd = tmp_path / pid / "fd"
        fd.mkdir(parents=True)
        for n, target in enumerate(targets):
            (fd / str(n)).symlink_to(target)
    (tmp_path / "self").mkdir()  # not a process number: skipped
    assert inotify_in_use(tmp_path) == 3
    assert inotify_in_use(Path("/proc")) >= 0
