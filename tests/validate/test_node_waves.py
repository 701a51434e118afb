"""Which nodes of a sim pod run a node suite's check together: a suite whose figures are judged runs
in waves that keep the co-hosted nodes at the sim's reference density, each wave's nodes started
together; health, which measures no figure, runs on every node at once, as on a real pod. Found at
32 sim nodes: health ran in 11 waves of 3 (5.7 s against 2 s at 16 nodes)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from podctl.core.cohost import cohost_capacity
from podctl.derive.site import load_site
from podctl.runtime.remote import RemoteResult
from podctl.validate.pod import PodTarget, node_checks, target, waves
from tests.helpers.simpod import grown_sim_site


class RecordingNodes:
    """Nodes that answer every command with a failure and record which hosts ran together."""

    def __init__(self) -> None:
        self.together: list[list[str]] = []

    def run_each(self, commands: Mapping[str, str], timeout_s: float) -> dict[str, RemoteResult]:
        self.together.append(list(commands))
        return {h: RemoteResult(h, 1, "", "no envelope") for h in commands}


def pod_of(tmp_path: Path, compute: int) -> PodTarget:
    return target(load_site(grown_sim_site(tmp_path, "window", compute)))


def test_a_suite_with_judged_figures_runs_in_waves_at_the_sim_density_and_health_on_every_node_at_once(
    tmp_path: Path,
) -> None:
    capacity = cohost_capacity()
    pod = pod_of(tmp_path, capacity * 3 + 1)
    hosts = list(pod.hosts)
    assert waves(pod, "health", hosts) == [hosts]
    expected = [hosts[i : i + capacity] for i in range(0, len(hosts), capacity)]
    assert waves(pod, "burnin", hosts) == expected
    assert waves(pod, "collectives", hosts) == expected

    nodes = RecordingNodes()
    runs = node_checks(pod, nodes, ("health",), "quick", lambda _m: None)  # type: ignore[arg-type]
    assert nodes.together == [hosts]
    assert sorted(r.node for r in runs) == sorted(hosts)

    nodes = RecordingNodes()
    runs = node_checks(pod, nodes, ("burnin",), "quick", lambda _m: None)  # type: ignore[arg-type]
    assert nodes.together == expected, "each wave's nodes start together, at most the sim's density"
    # Every node's failure is reported on that node, none lost between waves.
    assert sorted(r.node for r in runs) == sorted(hosts)
    assert {r.status for r in runs} == {"error"}
