"""The port-counters check of validate: node HCA records and an ibqueryerrors report become
failing runs on the elements at fault, and the evidence fault localization uses."""

from __future__ import annotations

from pathlib import Path

from podctl.derive.facts import Facts
from podctl.derive.site import load_site
from podctl.ibfabric.topofile import guid_key
from podctl.validate.judge import CheckRun, judge
from podctl.validate.portcounters import port_counter_runs, port_evidence
from tests.helpers.repo import REPO

SITE = REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"
SAMPLE = REPO / "tests" / "data" / "fabric" / "ibqueryerrors-fdr-sx6036-mailquoted.txt"


def _health(host: str, ports: list[dict]) -> CheckRun:
    env = {"check": "health", "host": host, "status": "pass", "duration_s": 1.0, "measurements": [], "findings": [],
           "details": {"parts": {"infiniband": {"status": "checked", "ports": ports}}}}  # fmt: skip
    return CheckRun("health", "node", host, env)


def test_evidence_from_nodes_and_a_report_fails_the_node_and_the_switch(tmp_path: Path) -> None:
    site = load_site(SITE)
    plan = Facts(site).plans["compute"]
    runs = [
        _health("dgx005", [{"device": "mlx5_4", "port": 1, "state": "DOWN", "phys_state": "Polling", "rate_gbps": 10.0}]),
        _health("dgx006", [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 400.0,
                            "counters": {"symbol_error": 0}}]),
    ]  # fmt: skip
    report = tmp_path / "ibqueryerrors.txt"
    report.write_text("\n".join(line.removeprefix("> ").removeprefix(">") for line in SAMPLE.read_text().splitlines()))
    # The mailed switch stands in for a spine here: its ports 1-8 are leaf-spine cables.
    evidence, unplaced = port_evidence(site, plan, runs, report, {guid_key(0x2C903006E29B0): "ib-spine-01"})
    # 8 switch cables and the node's; the switch's `port ALL` line sums its ports' lines: counted once, on them.
    assert len(evidence) == 9 and unplaced == []
    out = port_counter_runs(evidence, unplaced, site)
    by_element = {(r.scope, r.node): r for r in out}
    node = by_element[("node", "dgx005")]
    assert node.status == "fail" and node.envelope["findings"][0]["message"] == (
        "cable dgx005 mlx5_4 <-> ib-leaf-su01-r3[5]: port state DOWN (physical: Polling) at dgx005 mlx5_4"
    )
    switch_runs = [r for r in out if r.scope == "fabric" and r.status == "fail"]
    assert switch_runs and all(r.node.startswith("ib-leaf-") for r in switch_runs)  # the lower end of each cable
    cert = judge("pod", {"dgx005": [], "dgx006": []}, out)
    assert set(cert.failures) == {"dgx005"} | {r.node for r in switch_runs}
    assert "dgx006" not in cert.failures


def test_without_a_source_nothing_is_said(tmp_path: Path) -> None:
    site = load_site(SITE)
    plan = Facts(site).plans["compute"]
    evidence, unplaced = port_evidence(site, plan, [_health("dgx001", [])], None)
    assert evidence == [] and unplaced == []
    assert [(r.scope, r.node, r.status) for r in port_counter_runs([], [], site)] == [("fabric", "fabric", "pass")]
