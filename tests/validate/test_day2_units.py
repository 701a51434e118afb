"""The day-2 pieces that need no pod: reading sinfo, choosing partners and candidates, the
certification record a node keeps, Prometheus's alert list, ages. The sim pod's day-2 tests
(tests/day2) run them against Slurm, the nodes and Prometheus."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from podctl.core import state
from podctl.derive.site import load_site
from podctl.operate import recheck, status
from podctl.operate.recheck import Recheck, _candidates
from podctl.runtime.remote import RemoteResult
from podctl.validate.judge import Certification
from podctl.validate.ledger import certification_record, write_command
from podctl.validate.pod import pick_partners
from podctl.validate.slurm import parse_sinfo
from tests.helpers.repo import SIM_SITE

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


def _answer(stdout: str, returncode: int = 0) -> RemoteResult:
    return RemoteResult("head01", returncode, stdout, "")


def test_alerts_from_prometheus_and_its_failures() -> None:
    alerts, problem = status.parse_alerts("head01", _answer(json.dumps(ALERTS)))
    assert problem is None
    assert [(a["alert"], a["state"], a["instance"]) for a in alerts] == [
        ("PodctlNodeCannotDrain", "firing", "node03:9100"),
        ("NodeDown", "pending", ""),
    ]
    for broken in ("", "<html>", json.dumps({"data": {"alerts": "x"}}), "[]"):
        alerts, problem = status.parse_alerts("head01", _answer(broken))
        assert alerts == [] and problem and problem.startswith("Prometheus on head01")
    # What the query program prints when the login is refused.
    refused = RemoteResult("head01", 1, "", "prometheus: HTTP 401 Unauthorized\n")
    assert status.parse_alerts("head01", refused) == ([], "Prometheus on head01: ['prometheus: HTTP 401 Unauthorized']")


def test_the_monitoring_password_is_read_from_the_controllers_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path))
    site = load_site(SIM_SITE)
    password, problem = status.monitoring_password(site)
    assert password is None and problem and "deploy the monitoring stage" in problem
    path = state.monitoring_password_path(site.name)
    assert path == tmp_path / "sites" / "sim" / "monitoring-password"
    path.parent.mkdir(parents=True)
    path.write_text("")
    assert status.monitoring_password(site)[1] and "is empty" in status.monitoring_password(site)[1]
    path.write_text("s3cret\n")
    assert status.monitoring_password(site) == ("s3cret", None)
    # The program podctl status runs on the Prometheus host: no secret on its command line.
    assert "s3cret" not in status.ALERTS_COMMAND and status.ALERTS_COMMAND.endswith("prometheus /api/v1/alerts")


@pytest.mark.parametrize(
    ("delta", "text"), [(5, "5 s ago"), (120, "2 min ago"), (7200, "2 h ago"), (3 * 86400, "3 d ago")]
)
def test_ages(delta: float, text: str) -> None:
    assert status.age(1000.0, now=1000.0 + delta) == text
    assert status.age(None) == "never" and status.iso_age("garbage") == "garbage"
