"""Label rules that keep podctl to its own containers and networks."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from podctl.sim import podman as pm
from podctl.sim.podman import Podman


def test_names():
    assert pm.container_name("sim", "node01") == "podctl-sim-node01"
    assert pm.network_name("sim") == "podctl-sim"


def test_filters_select_exactly_one_pod():
    assert pm.pod_filter("sim") == ["--filter", "label=io.podctl.pod=sim"]
    assert pm.any_pod_filter() == ["--filter", "label=io.podctl.pod"]


def test_owned_by_requires_the_exact_pod_label():
    assert pm.owned_by({"io.podctl.pod": "sim"}, "sim")
    assert not pm.owned_by({"io.podctl.pod": "sim2"}, "sim")
    assert not pm.owned_by({"io.podctl.pod.extra": "sim"}, "sim")
    assert not pm.owned_by({}, "sim")
    assert not pm.owned_by(None, "sim")


def _fake_podman(tmp_path: Path, output: object) -> Podman:
    """A podman that logs its arguments and prints canned JSON."""
    log = tmp_path / "args"
    exe = tmp_path / "podman"
    exe.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\ncat <<'JSON'\n{json.dumps(output)}\nJSON\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return Podman(str(exe), "/usr/sbin/runc")


def test_containers_are_listed_with_the_runtime_and_filter(tmp_path):
    rows = [
        {
            "Id": "abc",
            "Names": ["podctl-sim-node01"],
            "State": "running",
            "Labels": {"io.podctl.pod": "sim", "io.podctl.node": "node01"},
        },
    ]
    podman = _fake_podman(tmp_path, rows)
    [info] = podman.containers(pm.pod_filter("sim"))
    assert (info.name, info.node, info.pod, info.running) == ("podctl-sim-node01", "node01", "sim", True)
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["--runtime", "/usr/sbin/runc"]
    assert "label=io.podctl.pod=sim" in args


def test_network_json_is_parsed():
    net = pm.parse_network(
        {
            "name": "podctl-sim",
            "labels": {"io.podctl.pod": "sim"},
            "subnets": [{"subnet": "10.89.0.0/24", "gateway": "10.89.0.1"}],
        }
    )
    assert net.subnets == (("10.89.0.0/24", "10.89.0.1"),)
    assert pm.owned_by(net.labels, "sim")


def test_podman_failures_carry_a_hint():
    message = pm.explain_podman_failure(
        ["start", "x"], "Error: OCI runtime error: crun: cgroups in hybrid mode not supported"
    )
    assert "podman start x failed" in message
    assert 'runtime = "runc"' in message
    assert "hint:" not in pm.explain_podman_failure(["ps"], "Error: something new")
