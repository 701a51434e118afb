"""The day-2 pieces that need no pod: reading sinfo, choosing partners and candidates, the
certification record a node keeps, Prometheus's alert list, ages. The sim pod's day-2 tests
(tests/day2) run them against Slurm, the nodes and Prometheus."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from podctl.operate import recheck, status
from podctl.operate.recheck import Recheck, _candidates
from podctl.validate.judge import Certification
from podctl.validate.ledger import certification_record, write_command
from podctl.validate.pod import pick_partners
from podctl.validate.slurm import parse_sinfo

# sinfo -N -h -o '%N|%T|%E' on Slurm 22.05: a node in two partitions is listed twice; %T is long.
SINFO = """node01|idle|none
node01|idle|none
node02|drained|podctl: service chrony is inactive
node03|draining|replacing DIMM B3
node04|down*|Not responding
node05|mixed|none
node06|idle*|none
node07|drained|podctl validate: health: gpu3: row remapping pending
"""


def test_sinfo_states_and_what_they_mean() -> None:
    states = parse_sinfo(SINFO)
    assert list(states) == [f"node0{i}" for i in range(1, 8)]
    assert [h for h, s in states.items() if s.idle] == ["node01"]
    assert [h for h, s in states.items() if s.drained] == ["node02", "node03", "node04", "node07"]
    assert [h for h, s in states.items() if s.by_podctl] == ["node02", "node07"]


def test_recheck_candidates_leave_a_persons_drain_alone() -> None:
    out = Recheck()
    states = parse_sinfo(SINFO)
    chosen = _candidates(("node01", "node02", "node03", "node07", "node99"), states, False, out)
    assert chosen == ["node02", "node07"]
    assert out.skipped == {
        "node01": "not drained (idle)",
        "node03": "drained by a person (replacing DIMM B3); --any-reason rechecks it too",
        "node99": "Slurm does not know this node (deploy it first)",
    }
    assert _candidates(("node03",), states, True, Recheck()) == ["node03"]


class _Plan:
    scalable_units = (("n01", "n02", "n03", "n04"), ("n05", "n06", "n07", "n08"))


def test_partners_come_from_the_same_unit_when_one_is_free() -> None:
    assert pick_partners(_Plan(), ("n06",), ("n01", "n02", "n07")) == ("n07",)
    assert pick_partners(_Plan(), ("n06", "n05"), ("n01", "n07")) == ("n01", "n07")
    assert pick_partners(_Plan(), ("n06",), ()) == ()
    assert pick_partners(None, ("n06",), ("n03",)) == ("n03",)


def test_a_recheck_reason_is_short_and_says_how_many_more() -> None:
    assert recheck.reason(["a", "b", "c"]) == "podctl recheck: a (+2 more)"
    assert len(recheck.reason(["x" * 500])) == 200


def test_the_certification_record_lands_on_the_node_as_json(tmp_path: Path) -> None:
    cert = Certification(subject="sim", nodes=["node01", "node02"])
    cert.fail("node02", 'health: service munge is inactive; it\'s "quoted" $(not run)')
    record = certification_record(cert, "node02", Path("/reports/x/report.html"), ["health"], "0.9")
    target = tmp_path / "var" / "certification.json"
    subprocess.run(["sh", "-c", write_command(record, str(target))], check=True)
    back = json.loads(target.read_text())
    assert back["certified"] is False and back["failures"] == cert.failures["node02"]
    assert not (tmp_path / "var" / "certification.json.tmp").exists()


# The shape of Prometheus's GET /api/v1/alerts (https://prometheus.io/docs/prometheus/latest/querying/api/).
ALERTS = {
    "status": "success",
    "data": {
        "alerts": [
            {
                "labels": {"alertname": "PodctlNodeCannotDrain", "instance": "node03:9100", "severity": "critical"},
                "annotations": {"summary": "node03:9100 is unhealthy and could not drain itself"},
                "state": "firing",
                "activeAt": "2026-12-01T10:00:00.123Z",
                "value": "1e+00",
            },
            {"labels": {"alertname": "NodeDown"}, "state": "pending"},
            "not an alert",
        ]
    },
}


class _Nodes:
    def __init__(self, stdout: str, returncode: int = 0) -> None:
        self.stdout, self.returncode = stdout, returncode

    def run(self, host: str, command: str, timeout_s: float):
        from podctl.remote import RemoteResult

        return RemoteResult(host, self.returncode, self.stdout, "")


def test_alerts_from_prometheus_and_its_failures() -> None:
    alerts, problem = status.prometheus_alerts(_Nodes(json.dumps(ALERTS)), "head01")  # type: ignore[arg-type]
    assert problem is None
    assert [(a["alert"], a["state"], a["instance"]) for a in alerts] == [
        ("PodctlNodeCannotDrain", "firing", "node03:9100"),
        ("NodeDown", "pending", ""),
    ]
    for broken in ("", "<html>", json.dumps({"data": {"alerts": "x"}}), "[]"):
        alerts, problem = status.prometheus_alerts(_Nodes(broken), "head01")  # type: ignore[arg-type]
        assert alerts == [] and problem and problem.startswith("Prometheus on head01")


@pytest.mark.parametrize(
    ("delta", "text"), [(5, "5 s ago"), (120, "2 min ago"), (7200, "2 h ago"), (3 * 86400, "3 d ago")]
)
def test_ages(delta: float, text: str) -> None:
    assert status.age(1000.0, now=1000.0 + delta) == text
    assert status.age(None) == "never" and status.iso_age("garbage") == "garbage"
