"""The conformance suite's JUnit XML -> one CheckRun per host.

data/conformance.junit.xml was recorded on the 4-node sim pod with faults
injected: head01's slurmdbd.conf edited (and its password changed), node01's
chrony stopped and node01 drained in Slurm, node02's slurm.conf edited and its
munge key replaced (mode 0644), node03 killed.
"""

from __future__ import annotations

from pathlib import Path

from podctl.validate.conformance.common import CHECKS
from podctl.validate.conformance.run import parse_junit
from podctl.validate.judge import judge

RECORDED = (Path(__file__).resolve().parent / "data" / "conformance.junit.xml").read_text(encoding="utf-8")
HOSTS = ["head01", "node01", "node02", "node03"]


def by_node(xml: str, hosts: list[str], problem: str | None = None) -> dict:
    return {r.node: r for r in parse_junit(xml, hosts, problem)}


def messages(run) -> list[str]:
    return [f["message"] for f in run.envelope["findings"]]


def test_one_check_run_per_host_in_the_result_shape() -> None:
    runs = parse_junit(RECORDED, HOSTS)
    assert [r.node for r in runs] == HOSTS
    for run in runs:
        assert (run.check, run.scope) == ("conformance", "node")
        env = run.envelope
        assert set(env) == {"check", "host", "status", "duration_s", "measurements", "findings", "details"}
        assert env["host"] == run.node and env["measurements"] == []
        # Recorded before configuration files moved from a pytest test to the drift check (drift.py):
        # the retired test is still read like any other.
        names = [t["name"] for t in env["details"]["tests"]]
        assert [n for n in names if n != "test_configs_match_render"] == [c.test for c in CHECKS]
        assert all(f["severity"] == "error" and f["device"] is None for f in env["findings"])


def test_each_fault_is_named_on_the_host_at_fault() -> None:
    runs = by_node(RECORDED, HOSTS)
    assert {h: r.status for h, r in runs.items()} == {
        "head01": "fail",
        "node01": "fail",
        "node02": "fail",
        "node03": "error",
    }
    head = messages(runs["head01"])
    assert len(head) == 1 and head[0].startswith("/etc/slurm/slurmdbd.conf differs from what podctl renders")
    assert "first differing line 4: node has 'DbdPort=6820', podctl renders 'DbdPort=6819'" in head[0]
    assert messages(runs["node01"]) == [
        "chrony is not active (inactive)",
        "time is not kept in sync: chrony is inactive",
        "node01 is drained in Slurm (state drain): conformance demo: bad DIMM",
    ]
    node02 = messages(runs["node02"])
    assert node02[0].startswith("/etc/slurm/slurm.conf differs from what podctl renders (sha256 ")
    assert node02[0].endswith("the node has 1 extra line(s) from line 39: '# edited')")
    # The odd key is node02's: head01 (the controller) is not blamed for it.
    assert node02[1:] == [
        "munge key /etc/munge/munge.key has mode 0644, expected 0400",
        "munge key differs from head01's",
    ]
    assert not any("munge" in m for m in head)


def test_an_unreachable_host_is_an_error_with_that_reason_alone() -> None:
    run = by_node(RECORDED, HOSTS)["node03"]
    assert messages(run) == [
        "node03 cannot be reached over SSH: ssh: connect to host 10.89.22.13 port 22: Connection timed out"
    ]
    outcomes = {t["name"]: t["outcome"] for t in run.envelope["details"]["tests"]}
    assert outcomes.pop("test_reachable") == "failed"
    assert set(outcomes.values()) == {"skipped"}


def test_details_keep_each_test_with_its_outcome_and_durations_add_up() -> None:
    run = by_node(RECORDED, HOSTS)["head01"]
    tests = run.envelope["details"]["tests"]
    assert {t["name"]: t["outcome"] for t in tests}["test_configs_match_render"] == "failed"
    assert all("message" not in t for t in tests if t["outcome"] == "passed")
    assert run.envelope["duration_s"] == round(sum(t["duration_s"] for t in tests), 3) > 0


def test_the_judge_fails_each_node_with_its_own_findings() -> None:
    cert = judge("simconf", {h: [] for h in HOSTS}, parse_junit(RECORDED, HOSTS))
    assert not cert.certified
    assert sorted(cert.failures) == HOSTS
    assert (
        cert.failures["node01"][2]
        == "conformance: node01 is drained in Slurm (state drain): conformance demo: bad DIMM"
    )


CASE = '<testcase classname="" name="{test}[ansible://{host}]" time="0.5">{body}</testcase>'


def xml(*cases: str) -> str:
    return f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>'


def test_a_passing_host_passes_and_skips_do_not_count_against_it() -> None:
    cases = [CASE.format(test=c.test, host="n1", body="") for c in CHECKS[:-1]]
    cases.append(
        CASE.format(
            test=CHECKS[-1].test, host="n1", body='<skipped type="pytest.skip" message="not a compute node">x</skipped>'
        )
    )
    run = by_node(xml(*cases), ["n1"])["n1"]
    assert run.status == "pass" and run.envelope["findings"] == []
    assert run.envelope["details"]["tests"][-1] == {
        "name": "test_idle_in_slurm",
        "title": "idle in Slurm",
        "outcome": "skipped",
        "message": "not a compute node",
        "duration_s": 0.5,
    }


def test_a_test_that_raised_is_an_error_not_a_finding() -> None:
    cases = [
        CASE.format(test="test_reachable", host="n1", body=""),
        CASE.format(test="test_munge_key", host="n1", body='<failure message="KeyError: &apos;k&apos;">tb</failure>'),
        CASE.format(
            test="test_services_active",
            host="n1",
            body='<error message="failed on setup with &quot;OSError: x&quot;">tb</error>',
        ),
    ]
    run = by_node(xml(*cases), ["n1"])["n1"]
    assert run.status == "error"
    assert messages(run) == [
        "conformance test munge key broke: KeyError: 'k'",
        'conformance test services active broke: failed on setup with "OSError: x"',
    ]


def test_multi_line_failures_become_one_finding_per_line() -> None:
    body = '<failure message="Failed: slurmd is not active (inactive)&#10;munge is not active (failed)">x</failure>'
    run = by_node(xml(CASE.format(test="test_services_active", host="n1", body=body)), ["n1"])["n1"]
    assert run.status == "fail"
    assert messages(run) == ["slurmd is not active (inactive)", "munge is not active (failed)"]


def test_hosts_without_results_are_errors_that_say_why() -> None:
    runs = by_node("", ["n1", "n2"], problem="pytest exited 4: no inventory")
    assert {r.status for r in runs.values()} == {"error"}
    assert messages(runs["n2"]) == ["the conformance tests did not run on n2: pytest exited 4: no inventory"]
    # A host the site names but the XML lacks, next to one it has.
    runs = by_node(xml(CASE.format(test="test_reachable", host="n1", body="")), ["n1", "n2"])
    assert runs["n2"].status == "error" and runs["n1"].status == "pass"


def test_a_run_cut_short_is_not_a_pass() -> None:
    runs = by_node(
        xml(CASE.format(test="test_reachable", host="n1", body="")),
        ["n1"],
        problem="the tests did not finish within 900 s",
    )
    assert runs["n1"].status == "error"
    assert messages(runs["n1"]) == ["not every conformance test ran: the tests did not finish within 900 s"]
