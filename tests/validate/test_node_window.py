"""How many nodes of a sim pod run a node suite's check at once: a suite whose figures are judged
keeps the co-hosted nodes at the sim's reference density, a node starting as soon as another
finishes; health, which measures no figure, runs on every node at once, as on a real pod. Found at
32 sim nodes: health ran in 11 waves of 3 (5.7 s against 2 s at 16 nodes), and each burn-in and
collectives wave waited on its slowest node."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

from podctl.cohost import cohost_capacity
from podctl.remote import RemoteResult
from podctl.site import load_site
from podctl.validate.pod import PodTarget, at_once, node_checks, target
from tests.simpod import sim_site_copy


class CountingNodes:
    """Nodes that answer every command after a short wait and record how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.ran: list[str] = []
        self.all_at_once: list[int] = []

    def run(self, host: str, command: str, timeout_s: float) -> RemoteResult:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.ran.append(host)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        return RemoteResult(host, 1, "", "no envelope")

    def run_each(self, commands: Mapping[str, str], timeout_s: float) -> dict[str, RemoteResult]:
        self.all_at_once.append(len(commands))
        self.ran += list(commands)
        return {h: RemoteResult(h, 1, "", "no envelope") for h in commands}


def pod_of(tmp_path: Path, compute: int) -> PodTarget:
    site_file = tmp_path / "site.yaml"
    text = sim_site_copy("window", "10.89.9.", "172.31.0.0/16").replace("node[01-03]", f"node[01-{compute:02d}]")
    site_file.write_text(text)
    return target(load_site(site_file))


def test_a_suite_with_judged_figures_runs_at_the_sim_density_and_health_on_every_node_at_once(
    tmp_path: Path,
) -> None:
    capacity = cohost_capacity()
    pod = pod_of(tmp_path, capacity * 3 + 1)
    hosts = list(pod.hosts)
    assert at_once(pod, "health", hosts) == len(hosts)
    assert at_once(pod, "burnin", hosts) == capacity
    assert at_once(pod, "collectives", hosts) == capacity

    nodes = CountingNodes()
    runs = node_checks(pod, nodes, ("health",), "quick", lambda _m: None)  # type: ignore[arg-type]
    assert nodes.all_at_once == [len(hosts)] and nodes.most == 0
    assert sorted(r.node for r in runs) == sorted(hosts)

    nodes = CountingNodes()
    runs = node_checks(pod, nodes, ("burnin",), "quick", lambda _m: None)  # type: ignore[arg-type]
    assert nodes.all_at_once == []
    assert nodes.most == capacity, f"{nodes.most} nodes ran at once, the sim's density is {capacity}"
    assert sorted(nodes.ran) == sorted(hosts)
    # Every node's failure is reported on that node, none lost to the window.
    assert sorted(r.node for r in runs) == sorted(hosts)
    assert {r.status for r in runs} == {"error"}
