"""The conformance tests' pure parts: expected services, messages, secret masking.

What they do against real nodes is shown on the sim pod (see the report of
issue 5); here, what can be decided without one.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("testinfra")

from podctl.validate.conformance import test_conformance as tc  # noqa: E402
from podctl.validate.conformance.drift import describe_change, describe_difference  # noqa: E402

SLURM = {"controllers": ["head01"], "accounting": True, "dbd_host": "head01"}
MONITORING = {"prometheus_host": "head01", "exporters": ["node", "slurm"]}


def node(name: str, groups: list[str], **extra: Any) -> tc.Node:
    n = tc.Node.__new__(tc.Node)
    n.name, n.groups = name, groups
    n.vars = {"inventory_hostname": name, "podctl_slurm": SLURM, "podctl_monitoring": MONITORING, **extra}
    return n


def units(n: tc.Node) -> list[str]:
    return [u for u, _ in tc.expected_services(n)]


def test_services_follow_the_roles() -> None:
    head = node("head01", ["role_controller", "role_login", "role_monitoring"])
    compute = node("node01", ["role_compute", "role_storage_client"])
    assert units(head) == [
        "chrony",
        "munge",
        "slurmctld",
        "slurmdbd",
        "mariadb",
        "prometheus-node-exporter",
        "prometheus",
        "prometheus-alertmanager",
    ]
    assert units(compute) == ["chrony", "munge", "slurmd", "prometheus-node-exporter"]


def test_services_without_slurm_accounting_or_the_node_exporter() -> None:
    no_acct = node(
        "head01",
        ["role_controller"],
        podctl_slurm={**SLURM, "accounting": False},
        podctl_monitoring={**MONITORING, "exporters": ["slurm"], "prometheus_host": "mon01"},
    )
    assert units(no_acct) == ["chrony", "munge", "slurmctld"]
    bare = node("util01", ["role_storage_client"], podctl_slurm=None, podctl_monitoring=None)
    assert units(bare) == ["chrony"]


def test_difference_names_the_first_differing_line() -> None:
    message = describe_difference("/etc/slurm/slurm.conf", b"a\nb\nX\n", b"a\nb\nc\n")
    assert message.startswith("/etc/slurm/slurm.conf differs from what podctl renders (sha256 ")
    assert message.endswith("first differing line 3: node has 'X', podctl renders 'c')")
    assert "lacks 1 line(s) from line 2: 'b'" in describe_difference("/f", b"a\n", b"a\nb\n")
    assert "same lines, different line endings" in describe_difference("/f", b"a\n", b"a")


@pytest.mark.parametrize(
    ("state", "reason", "message"),
    [
        ("drain", "bad DIMM", "node02 is drained in Slurm (state drain): bad DIMM"),
        ("down*", "Not responding", "node02 is down, not responding in Slurm (state down*): Not responding"),
        ("alloc", "none", "node02 is allocated to a job in Slurm (state alloc): no reason given"),
        ("idle~", "", "node02 is idle, powered off in Slurm (state idle~): no reason given"),
    ],
)
def test_slurm_states_read_as_words(state: str, reason: str, message: str) -> None:
    assert tc.describe_slurm_state("node02", state, reason) == message


TRACKING = """Reference ID    : 0A59160A (10.89.22.10)
Stratum         : 11
System time     : 0.000008237 seconds slow of NTP time
Leap status     : Normal
"""


def test_chrony_tracking_is_parsed_with_the_offset_sign() -> None:
    fields = tc.parse_chrony_tracking(TRACKING)
    assert fields["Leap status"] == "Normal" and fields["Reference ID"].startswith("0A59160A")
    assert tc.chrony_offset_s(fields["System time"]) == pytest.approx(-8.237e-06)
    assert tc.chrony_offset_s("1.5 seconds fast of NTP time") == 1.5
    assert tc.chrony_offset_s("") is None


def test_drift_of_a_secret_task_is_named_without_its_content() -> None:
    """A task that hides its arguments (no_log, e.g. slurmdbd.conf with the database password) is censored
    by Ansible: the finding says it would change, and carries nothing of the file."""
    result = {
        "censored": "the output has been hidden due to the fact that 'no_log: true' was specified",
        "changed": True,
    }
    (message,) = describe_change("Accounting | slurmdbd.conf", result)
    assert message.startswith("Accounting | slurmdbd.conf: not as podctl deploys it") and "secret" in message


def test_drift_of_a_file_names_the_line_and_a_missing_file() -> None:
    diff = {
        "before": "a\nb\nX\n",
        "after": "a\nb\nc\n",
        "before_header": "/etc/slurm/slurm.conf",
        "after_header": "dynamically generated",
    }
    (message,) = describe_change("Configure | slurm.conf", {"changed": True, "diff": [diff]})
    assert message.endswith("first differing line 3: node has 'X', podctl renders 'c')")
    missing = {"before": "", "after": "x=1\n", "before_header": "/etc/x.conf"}
    assert describe_change("t", {"changed": True, "diff": missing}) == [
        "/etc/x.conf is missing on the node (podctl deploys it)"
    ]
    assert describe_change("Install | packages", {"changed": True}) == [
        "Install | packages: not as podctl deploys it (Ansible would change it)"
    ]


def test_drift_of_a_loop_names_each_file_that_differs() -> None:
    # A task with a loop (the validation package, file by file) reports its items under "results".
    changed = {
        "changed": True,
        "dest": "/home/shared/podctl-validation/src/validation/units.py",
        "diff": [{"before": "A = 1\n# edited\n", "after": "A = 1\n", "before_header": "", "after_header": "units.py"}],
    }
    same = {"changed": False, "dest": "/home/shared/podctl-validation/src/validation/gpt.py"}
    (message,) = describe_change("Configure | The validation package", {"changed": True, "results": [same, changed]})
    assert message.startswith("/home/shared/podctl-validation/src/validation/units.py differs")
    assert "the node has 1 extra line(s) from line 2: '# edited'" in message


POD_2411 = {
    "head01": {"slurmctld": "24.11.5-4+deb13u1", "slurmdbd": "24.11.5-4+deb13u1", "slurm-client": "24.11.5-4+deb13u1"},
    "node01": {"slurmd": "24.11.5-4+deb13u1", "slurm-client": "24.11.5-4+deb13u1"},
    "login01": {"slurm-client": "24.11.5-4+deb13u1"},
}


def test_one_slurm_release_across_the_pod_keeps_the_version_rule() -> None:
    assert all(tc.slurm_version_findings(host, POD_2411) == [] for host in POD_2411)


def test_a_node_whose_installed_slurmd_is_too_old_is_named_with_the_controller() -> None:
    installed = {**POD_2411, "node01": {"slurmd": "22.05.8-4+deb12u1", "slurm-client": "22.05.8-4+deb12u1"}}
    (finding,) = tc.slurm_version_findings("node01", installed)
    assert "slurmd 22.05 on node01 is 4 major releases older than slurmctld 24.11 on head01" in finding
    assert tc.slurm_version_findings("head01", installed)  # the other end of the pair
    assert tc.slurm_version_findings("login01", installed) == []


def test_a_login_nodes_commands_newer_than_slurmctld_break_the_rule() -> None:
    installed = {**POD_2411, "login01": {"slurm-client": "25.05.1-1"}}
    (finding,) = tc.slurm_version_findings("login01", installed)
    assert "commands 25.05 on login01 is newer than slurmctld 24.11 on head01" in finding
