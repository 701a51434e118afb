"""A job is judged by srun's exit status as well as by rank 0's envelope.

Rank 0 prints the result; srun's exit status is every task's. When they disagree (rank 0 says
pass, a task on another node exited non-zero or on a signal), Slurm's accounting records the
job FAILED and podctl must not call it passed: the job fails, on the host srun named.
"""

from __future__ import annotations

import json

from podctl.runtime.remote import RemoteResult
from podctl.validate.judge import CheckRun, finding_hosts, judge
from podctl.validate.slurm import Job, SlurmJobs, failed_tasks
from tests.helpers.repo import REPO
from validation.result import envelope

SAMPLES = REPO / "tests" / "data" / "slurm" / "srun-task-errors.txt"


class FakeNodes:
    def __init__(self, returncode: int, stderr: str, status: str | None = "pass") -> None:
        self.answer = (returncode, stderr, status)
        self.commands: list[str] = []

    def run(self, host: str, command: str, timeout_s: float) -> RemoteResult:
        self.commands.append(command)
        returncode, stderr, status = self.answer
        if status is None:  # the job's ranks were ended before rank 0 printed anything
            return RemoteResult(host, returncode, "", stderr)
        printed = envelope("smoke", "node01", status, [], measurements=[{"figure": "x", "value": 1.0, "unit": "u"}])
        return RemoteResult(host, returncode, json.dumps(printed) + "\n", stderr)


def job() -> Job:
    return Job("smoke 2 nodes", "smoke", ("node01", "node02"), 1, 0, ("python3", "-m", "validation.smoke"))


def test_srun_lines_from_other_sites_name_the_hosts_with_failed_tasks() -> None:
    found = failed_tasks(SAMPLES.read_text())
    assert sorted(found) == ["cn-0013", "node30", "sn30-r1-h1"]
    assert found["sn30-r1-h1"] == [
        "sn30-r1-h1: task 0: Exited with exit code 1",
        "sn30-r1-h1: tasks 1,3-5: Terminated",
        "sn30-r1-h1: tasks 2,6-7: Killed",
    ]
    assert found["node30"] == ["node30: tasks 0-1: Exited with exit code 1"]


def test_a_task_that_failed_after_rank_0_reported_pass_fails_the_job_on_its_host() -> None:
    stderr = "srun: error: node02: task 1: Exited with exit code 2\n"
    result = SlurmJobs(FakeNodes(2, stderr), "head01", None).run(job())
    assert result["status"] == "fail"
    (added,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert finding_hosts(added, ["node01", "node02"]) == ["node02"]
    assert added["device"] == "node02" and "srun exited 2" in added["message"]
    assert "node02: task 1: Exited with exit code 2" in added["message"]
    cert = judge("t", {"node01": [], "node02": []}, [CheckRun("smoke", "pod", "node01", result)])
    assert set(cert.failures) == {"node02"}, cert.failures


def test_a_non_zero_exit_that_names_no_task_fails_every_node_of_the_job() -> None:
    result = SlurmJobs(FakeNodes(137, "srun: Force Terminated job step 41.0\n"), "head01", None).run(job())
    assert result["status"] == "fail"
    (added,) = [f for f in result["findings"] if f["severity"] == "error"]
    assert finding_hosts(added, ["node01", "node02"]) == ["node01", "node02"]
    cert = judge("t", {"node01": [], "node02": []}, [CheckRun("smoke", "pod", "node01", result)])
    assert set(cert.failures) == {"node01", "node02"}


def test_a_clean_exit_or_an_exit_that_agrees_changes_nothing() -> None:
    assert SlurmJobs(FakeNodes(0, ""), "head01", None).run(job())["status"] == "pass"
    failed = SlurmJobs(FakeNodes(1, "srun: error: node01: task 0: Exited with exit code 1\n", "fail"), "head01", None)
    result = failed.run(job())
    assert result["status"] == "fail" and not result["findings"]


def test_the_task_that_failed_first_leads_the_reason_ahead_of_those_srun_ended_for_it() -> None:
    # The BERT job's lines from another site: task 0 exited 1, srun ended the rest. At pod scale
    # tens of "Terminated" lines follow the cause: the same sample with 30 more tasks ended.
    sample = SAMPLES.read_text().splitlines()[1:7]
    ended = [f"srun: error: node{n:02d}: task {n}: Terminated" for n in range(8, 38)]
    stderr = "\n".join(sample[:4] + ended + sample[4:]) + "\n"
    result = SlurmJobs(FakeNodes(143, stderr, status=None), "head01", None).run(job())
    assert result["status"] == "error"
    (message,) = [f["message"] for f in result["findings"] if f["severity"] == "error"]
    reason = message.split("stderr tail: ", 1)[1]
    assert reason.startswith("srun: error: sn30-r1-h1: task 0: Exited with exit code 1\n(then 32 more"), reason
    assert "none failed on its own" not in reason


def test_a_job_whose_every_task_was_terminated_says_no_task_failed_on_its_own() -> None:
    ended = [f"srun: error: node{n:02d}: task {n - 1}: Terminated" for n in range(1, 32)]
    stderr = "\n".join(ended + ["srun: Force Terminated StepId=77.0"]) + "\n"
    result = SlurmJobs(FakeNodes(143, stderr, status=None), "head01", None).run(job())
    (message,) = [f["message"] for f in result["findings"] if f["severity"] == "error"]
    assert "node01: task 0: Terminated\n(then 30 more" in message
    assert "every task srun named was Terminated: none failed on its own" in message
    assert message.endswith("srun: Force Terminated StepId=77.0")
