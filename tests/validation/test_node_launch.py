"""Rank discovery for the multi-process checks (validation/launch.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from validation.launch import env_from_environ, first_host


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [
        ("dgx001", "dgx001"),
        ("dgx[007-010,12],login1", "dgx007"),
        ("gpu-a[01-04]", "gpu-a01"),
        ("n[3,5-6]-ib", "n3-ib"),
        ("login1,dgx[1-2]", "login1"),
    ],
)
def test_first_host_of_slurm_nodelist(nodelist: str, first: str) -> None:
    assert first_host(nodelist) == first


def test_torchrun_variables_win() -> None:
    env = env_from_environ(
        {
            "RANK": "3",
            "WORLD_SIZE": "16",
            "LOCAL_RANK": "3",
            "LOCAL_WORLD_SIZE": "8",
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29400",
            "SLURM_PROCID": "9",
        }
    )
    assert env is not None
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (3, 16, 3, 8)
    assert (env.master_addr, env.master_port, env.source) == ("10.0.0.1", 29400, "torchrun")


def test_slurm_variables() -> None:
    env = env_from_environ(
        {
            "SLURM_PROCID": "9",
            "SLURM_NTASKS": "16",
            "SLURM_LOCALID": "1",
            "SLURM_TASKS_PER_NODE": "8(x2)",
            "SLURM_JOB_NODELIST": "dgx[010-011]",
            "SLURM_JOB_ID": "123456",
            "PATH": "/nonexistent",
        }
    )
    assert env is not None
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (9, 16, 1, 8)
    assert env.master_addr == "dgx010"
    assert env.master_port == 29500 + 123456 % 10000
    assert env.source == "slurm"


def test_no_launcher_means_none() -> None:
    assert env_from_environ({"HOME": "/root"}) is None


def test_a_check_process_ends_with_its_result_and_skips_finalization() -> None:
    # A non-daemon thread that never ends stands in for what the interpreter's finalization
    # would tear down (torch's C++ threads aborted a finished rank there on the sim pod):
    # sys.exit would wait for it for ever; end_process must leave at once, output flushed.
    script = (
        "import sys, threading\n"
        "from validation.launch import end_process\n"
        "threading.Thread(target=threading.Event().wait).start()\n"
        'sys.stdout.write(\'{"status": "pass"}\')\n'
        "sys.stderr.write('progress')\n"
        "end_process(3)\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, '{"status": "pass"}', "progress")


def _rank_1_never_returns(env, args):  # spawned: a module-level function
    import time

    if env.rank == 0:
        return {"check": "stuck", "status": "pass", "measurements": [], "findings": [], "details": {}}
    time.sleep(3600)
    return None


def test_a_local_rank_stuck_after_rank_0_answered_is_stopped_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0's envelope is the result; a rank stuck in its teardown does not hold the check until
    its timeout, and the envelope says which rank was stopped."""
    import argparse
    import time

    import validation.launch as launch

    monkeypatch.setattr(launch, "STRAGGLER_GRACE_S", 2.0)
    started = time.monotonic()
    envelope = launch.spawn_local("stuck", 2, _rank_1_never_returns, argparse.Namespace(), timeout_s=300)
    assert time.monotonic() - started < 120
    assert envelope["status"] == "pass"
    assert envelope["details"]["launch"]["stopped_after_rank_0"] == [1]
    assert (
        envelope["details"]["launch"]["exit_codes"][1] is not None
        and envelope["details"]["launch"]["exit_codes"][1] < 0
    )


def _answer_then_hold_the_exit(env, args):  # spawned: a module-level function
    import threading

    # A thread the interpreter would wait for at exit: what a teardown that never ends looks
    # like to the process (torch 2.6's gloo in destroy_process_group, on Debian 13).
    threading.Thread(target=threading.Event().wait).start()
    if env.rank == 0:
        return {"check": "held", "status": "pass", "measurements": [], "findings": [], "details": {}}
    return None


def test_local_ranks_end_once_their_answer_is_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each local rank leaves as soon as its answer is with the launcher: nothing at its exit
    holds the check, and no rank needs stopping."""
    import argparse
    import time

    import validation.launch as launch

    monkeypatch.setattr(launch, "STRAGGLER_GRACE_S", 60.0)
    started = time.monotonic()
    envelope = launch.spawn_local("held", 2, _answer_then_hold_the_exit, argparse.Namespace(), timeout_s=120)
    assert time.monotonic() - started < 45
    assert envelope["status"] == "pass"
    assert envelope["details"]["launch"] == {"mode": "local-procs", "exit_codes": [0, 0]}
