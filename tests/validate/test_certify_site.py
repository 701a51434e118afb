"""certify_site called as a library, without click and without a pod: the sim site's nodes are
answered by a stand-in for podctl.runtime.remote.Nodes (as in test_node_waves.py), the fabric is the sim
site's planned one with a pair of cables swapped (as test_cabling_identities.py damages its own).
What comes back and what lands on disk are the real thing: the judged certification, report.json,
junit.xml, report.html, and the record each node would keep."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from podctl.derive.facts import cached_plan, hca_names
from podctl.derive.site import load_site
from podctl.ibfabric import corrupt
from podctl.ibfabric.formats import End, topology_from_plan, write_ibnetdiscover
from podctl.ibfabric.identity import write_anchors
from podctl.runtime.remote import RemoteResult
from podctl.validate import certify
from podctl.validate.certify import certify_site
from podctl.validate.fabric_inputs import MODEL_ROUTES_NOTE, FabricDumps
from podctl.validate.ledger import CERT_RECORD
from podctl.validate.request import ValidateRequest
from tests.helpers.repo import SIM_SITE
from validation.result import envelope, finding

SICK = "node02"
SICK_FINDING = "service chrony is inactive"


class AnsweringNodes:
    """The sim site's nodes: health passes on every node but SICK; every other command (the
    certification records) succeeds. Each batch of commands is kept."""

    def __init__(self) -> None:
        self.batches: list[dict[str, str]] = []

    def run_each(self, commands: Mapping[str, str], timeout_s: float) -> dict[str, RemoteResult]:
        self.batches.append(dict(commands))
        out = {}
        for host, command in commands.items():
            if "validation.health" in command:
                sick = host == SICK
                result = envelope("health", host, "fail" if sick else "pass", [finding(SICK_FINDING)] if sick else [])
                out[host] = RemoteResult(host, 1 if sick else 0, json.dumps(result) + "\n", "")
            else:
                out[host] = RemoteResult(host, 0, "", "")
        return out

    def run(self, host: str, command: str, timeout_s: float) -> RemoteResult:
        raise AssertionError(f"not asked of the nodes in these tests: {command}")


@pytest.fixture
def nodes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AnsweringNodes:
    # No sim pod of the site here, whatever this machine runs: validate collects no fabric itself.
    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path / "state"))
    answering = AnsweringNodes()
    monkeypatch.setattr(certify, "site_nodes", lambda site, key: answering)
    return answering


def _swapped_fabric(tmp_path: Path) -> FabricDumps:
    """The sim site's compute fabric as planned, but node03's two rails in each other's leaf ports,
    with the HCAs' GUIDs in an anchors file (none read over SSH)."""
    site = load_site(SIM_SITE)
    fabric = site.fabrics["compute"]
    names = hca_names(site, "compute")
    topo = topology_from_plan(cached_plan(fabric), fabric.rate, names)
    anchors = {}
    for device in topo.devices.values():
        if device.kind != "switch":
            host, hca = device.desc.split(" ")
            anchors[(host, names[host].index(hca) + 1)] = device.guid
    rail1, rail2 = names["node03"][:2]
    topo = corrupt.swap_ports(topo, End(f"node03 {rail1}", 1), End(f"node03 {rail2}", 1))
    (tmp_path / "ibnetdiscover.txt").write_text(write_ibnetdiscover(topo))
    (tmp_path / "anchors.txt").write_text(write_anchors(anchors))
    return FabricDumps(ibnetdiscover=tmp_path / "ibnetdiscover.txt", anchors=tmp_path / "anchors.txt")


def _records(nodes: AnsweringNodes) -> dict[str, str]:
    """host -> the command that wrote its certification record."""
    (batch,) = [b for b in nodes.batches if all(CERT_RECORD in c for c in b.values())]
    return batch


def test_a_site_run_judges_suites_and_cabling_and_writes_the_report_and_each_nodes_record(
    nodes: AnsweringNodes, tmp_path: Path
) -> None:
    report = tmp_path / "report"
    request = ValidateRequest(
        site=load_site(SIM_SITE),
        private_key=None,
        suites=("health",),
        report_dir=report,
        fabric=_swapped_fabric(tmp_path),
    )
    said: list[str] = []
    result = certify_site(request, said.append)

    assert not result.cert.certified
    assert result.cert.failures[SICK] == [f"health: {SICK_FINDING}"]
    assert len(result.cert.failures["node03"]) == 2
    assert all("cabling: WRONG-SWITCH" in r and "node03" in r for r in result.cert.failures["node03"])
    assert "node01" not in result.cert.failures
    assert MODEL_ROUTES_NOTE in said  # no --lfts: localization would follow podctl's model
    assert {(r.check, r.node) for r in result.runs} == {
        ("cabling", "node03"),
        ("health", "node01"),
        ("health", "node02"),
        ("health", "node03"),
    }

    assert result.reports == {
        "json": report / "report.json",
        "junit": report / "junit.xml",
        "html": report / "report.html",
    }
    data = json.loads((report / "report.json").read_text())
    assert data["verdict"] == "NOT CERTIFIED" and set(data["failures"]) == {SICK, "node03"}
    assert data["meta"]["mode"] == "site" and data["meta"]["suites"] == ["health"]
    assert data["meta"]["hosts"] == ["node01", "node02", "node03"] and data["meta"]["podctl"]
    assert 'failures="2"' in (report / "junit.xml").read_text()
    assert "node03" in (report / "report.html").read_text()

    records = _records(nodes)
    assert sorted(records) == ["node01", "node02", "node03"] and result.unrecorded == {}
    assert '"certified": true' in records["node01"]
    assert '"certified": false' in records[SICK] and '"certified": false' in records["node03"]
    assert str(report.resolve() / "report.html") in records["node01"]


def test_a_recheck_request_leaves_the_fabric_alone_and_certifies_its_nodes_only(
    nodes: AnsweringNodes, tmp_path: Path
) -> None:
    # What podctl nodes recheck asks: the nodes it tests, partners from its own pool, no fabric.
    request = ValidateRequest(
        site=load_site(SIM_SITE),
        private_key=None,
        suites=("health",),
        report_dir=tmp_path / "recheck",
        only=("node01",),
        partner_pool=(),
        mode="recheck",
    )
    said: list[str] = []
    result = certify_site(request, said.append)

    assert result.cert.certified and result.cert.nodes == ["node01"]
    assert [(r.check, r.node) for r in result.runs] == [("health", "node01")]
    assert not any(m.startswith(("routes:", "cabling:", "fabric:")) for m in said), said
    data = json.loads((tmp_path / "recheck" / "report.json").read_text())
    assert data["verdict"] == "CERTIFIED" and data["meta"]["mode"] == "recheck"
    assert data["meta"]["hosts"] == ["node01"] and data["meta"]["partners"] == []
    assert list(_records(nodes)) == ["node01"]
