"""The sim pod's fabric, for real: ibsim beside the pod, OpenSM as the SM host's service under
umad2sim, validate reading the real tools there, and `podctl sim fault`'s fabric faults named by
their cables.

Uses the session's deployed sim pod (tests/conftest.py: `sim_pod`, pod `simcert`, every stage
deployed). Starts nothing of its own: `podctl sim up` started ibsim (in head01's network namespace)
and the fabric stage OpenSM. Each validate runs the health suite only (the fabric tools run
whatever the suites): the fabric checks come from the tools, not from a suite. The faults are
cleared at the end of the test that injects them, and the fabric is checked healthy again.
"""

from __future__ import annotations

import pytest

from podctl.derive.emulated import EMULATED_SM_SERVICE, UMAD2SIM_PROGRAM
from tests.helpers.simpod import Pod, podctl

pytestmark = [pytest.mark.sim, pytest.mark.deploy]

FABRIC_CHECKS = ("cabling", "routes", "port-counters")


@pytest.fixture(scope="module")
def pod(sim_pod: Pod) -> Pod:
    return sim_pod


def fabric_findings(data: dict) -> dict[tuple[str, str], list[str]]:
    """(check, node) -> the error findings of the fabric checks' failing runs."""
    out: dict[tuple[str, str], list[str]] = {}
    for run in data["runs"]:
        if run["check"] in FABRIC_CHECKS and run["result"]["status"] != "pass":
            out[(run["check"], run["node"])] = [
                f["message"] for f in run["result"]["findings"] if f["severity"] == "error"
            ]
    return out


def assert_healthy(pod: Pod, name: str) -> dict:
    rc, data, out = pod.validate(name, "--suite", "health")
    checks = {(r["check"], r["node"], r["result"]["status"]) for r in data["runs"] if r["check"] in FABRIC_CHECKS}
    # A healthy fabric names nothing: one passing run of each check, for the fabric.
    assert checks == {(c, "fabric", "pass") for c in FABRIC_CHECKS}, (checks, out[-2000:])
    assert rc == 0 and data["verdict"] == "CERTIFIED", (data["failures"], out[-2000:])
    return data


def test_opensm_runs_as_the_sm_hosts_service_and_is_master(pod: Pod) -> None:
    assert pod.sh("head01", f"systemctl is-active {EMULATED_SM_SERVICE}").stdout.strip() == "active"
    sminfo = pod.sh("head01", f"{UMAD2SIM_PROGRAM} sminfo").stdout
    assert "SMINFO_MASTER" in sminfo, sminfo
    # It read the opensm.conf podctl rendered: the site's routing engine configured every switch.
    log = pod.sh("head01", "grep 'tables configured on all switches' /var/log/opensm.log | tail -1").stdout
    assert "ftree tables configured" in log, log
    # Its private folder holds umad2sim's stand-in sysfs; nothing of it in /.
    assert pod.sh("head01", f"stat -c '%U %a' /var/lib/{EMULATED_SM_SERVICE}").stdout.split() == ["root", "700"]
    assert not pod.sh("head01", "ls -d /sys-* 2>/dev/null").stdout.strip()


def test_validate_reads_the_real_tools_on_the_sm_host(pod: Pod) -> None:
    data = assert_healthy(pod, "fabric-healthy")
    tools = data["meta"]["fabric_tools"]
    assert tools["host"] == "head01" and tools["emulated"] is True
    assert sorted(tools["files"]) == ["iblinkinfo", "ibnetdiscover", "ibqueryerrors", "lfts"]
    routes = next(r for r in data["runs"] if r["check"] == "routes")
    # 3 switches, each routing the 6 HCAs of the 3 nodes' two rails.
    assert routes["result"]["details"]["entries"] == 18, routes["result"]["details"]
    report = (pod.base / "fabric-healthy" / "report.html").read_text()
    junit = (pod.base / "fabric-healthy" / "junit.xml").read_text()
    assert "Routes and port counters" in report and "against the sim pod's emulated fabric" in report
    assert 'classname="routes.fabric"' in junit and 'classname="cabling.fabric"' in junit


def test_each_fabric_fault_is_named_by_its_cable_and_cleared(pod: Pod) -> None:
    try:
        faulted = podctl(
            "sim", "fault", "--pod", pod.name,
            "--swap", "node01:1", "node03:1",  # two node cables traded at the leaf
            "--degrade", "ib-leaf-su01-r2[6]", "--speed", "EDR",  # a leaf-spine cable trains at EDR
            "--unplug", "node02:2",  # node02's rail-2 cable pulled
            "--errors", "ib-spine-01[1]", "--count", "500",  # a spine port counts symbol errors
        )  # fmt: skip
        assert "swapped" in faulted.stderr and "unplugged" in faulted.stderr, faulted.stderr
        # One --degrade per call: this one restarts ibsim again, the unplug and the counter kept.
        podctl("sim", "fault", "--pod", pod.name, "--degrade", "node03:2", "--width", "1x")
        rc, data, out = pod.validate("fabric-faults", "--suite", "health")
        assert rc == 1
        found = fabric_findings(data)
        assert found[("cabling", "node01")] == [
            "WRONG-PORT ib-leaf-su01-r1[1] <-> node01 mlx5_0: found at ib-leaf-su01-r1[3]"
        ]
        assert found[("cabling", "node03")] == [
            "WRONG-PORT ib-leaf-su01-r1[3] <-> node03 mlx5_0: found at ib-leaf-su01-r1[1]",
            "WRONG-WIDTH ib-leaf-su01-r2[3] <-> node03 mlx5_1: expected 4xHDR, found 1xHDR",
        ]
        assert found[("cabling", "node02")] == ["MISSING ib-leaf-su01-r2[2] <-> node02 mlx5_1"]
        assert found[("cabling", "ib-leaf-su01-r2")] == [
            "WRONG-SPEED ib-spine-01[6] <-> ib-leaf-su01-r2[6]: expected 4xHDR, found 4xEDR"
        ]
        assert found[("port-counters", "ib-leaf-su01-r1")] == [
            "cable ib-leaf-su01-r1[5] <-> ib-spine-01[1]: SymbolErrorCounter 500 (threshold 10) at ib-spine-01[1]"
        ]
        assert any("no table routes node02 mlx5_1 (rail 2, its cable at ib-leaf-su01-r2[2])" in m
                   for m in found[("routes", "fabric")])  # fmt: skip
        assert set(data["failures"]) >= {"node01", "node02", "node03"}, data["failures"]
    finally:
        cleared = podctl("sim", "fault", "--pod", pod.name, "--clear")
    assert "cleared" in cleared.stderr, cleared.stderr
    assert_healthy(pod, "fabric-cleared")
