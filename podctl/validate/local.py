"""`podctl validate --local`: single-node certification of this host, no site, no Slurm.

Runs the node-side checks (validation/) as subprocesses of the Python that
has torch, one process per local GPU for the distributed ones, and collects
their JSON envelopes as CheckRuns for the judge (certify_local).
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from podctl import __version__
from podctl.core.assets import validation_package
from podctl.core.errors import PodctlError
from podctl.core.model import Profile
from podctl.derive.nodehealth import health_argv
from podctl.validate.envelope import broken_envelope, parse_envelope
from podctl.validate.figures import suite_of
from podctl.validate.judge import Certification, CheckRun, effective_reference, judge
from podctl.validate.request import LocalRequest

BURNIN_PROFILES = ("quick", "long")


class ValidationError(PodctlError):
    pass


@dataclass(frozen=True)
class LocalCheck:
    suite: str
    check: str
    argv: list[str]
    timeout_s: float


def validation_root() -> Path:
    """The folder that holds the `validation` package: what the checks' Python puts on its path."""
    return validation_package().parent


# nccl-tests beside podctl's own collectives: the sizes the node's reference rows are judged at.
NCCL_TESTS_ARGS = (
    "--min-bytes",
    "1G",
    "--max-bytes",
    "8G",
    "--factor",
    "8",
    "--judge-sizes",
    "1G,8G",
    "--extra-args",
    "-d bfloat16 -c 1",
)


def plan_local(
    profile: Profile, suites: tuple[str, ...], burnin: str, gpus: int | None, nccl_tests: str | None = None
) -> list[LocalCheck]:
    """The checks to run on this host for `profile`, in order; `nccl_tests` is a folder with an
    nccl-tests build (all_reduce_perf runs in the collectives suite, beside podctl's own)."""
    n_gpus = profile.gpus.count if profile.gpus else 0
    procs = gpus or n_gpus or 2  # gloo between two local ranks on GPU-less hosts
    checks: list[LocalCheck] = []
    if "health" in suites:
        argv = health_argv(profile)
        checks.append(LocalCheck("health", "health", argv, 120))
    if "burnin" in suites:
        argv = ["validation.burnin", "--profile", burnin]
        if not profile.gpus:
            argv.append("--cpu")
        checks.append(LocalCheck("burnin", "burnin", argv, 3 * 3600 if burnin == "long" else 600))
    if "collectives" in suites:
        argv = ["validation.collectives", "--local-procs", str(procs), "--expect-world-size", str(procs)]
        if not profile.gpus:
            argv.append("--cpu")
        checks.append(LocalCheck("collectives", "collectives", argv, 900))
        if nccl_tests is not None and profile.gpus:
            binary = posixpath.join(nccl_tests, "all_reduce_perf")
            argv = ["validation.nccl_tests", "--binary", binary, "--gpus", str(procs), *NCCL_TESTS_ARGS]
            checks.append(LocalCheck("collectives", "nccl_tests", argv, 900))
    if "smoke" in suites:
        argv = ["validation.smoke", "--local-procs", str(procs), "--expect-world-size", str(procs)]
        if profile.gpus and profile.gpus.peak_bf16_tflops:
            argv += ["--peak-tflops", f"{profile.gpus.peak_bf16_tflops:g}"]
        if not profile.gpus:
            argv.append("--cpu")
        checks.append(LocalCheck("smoke", "smoke", argv, 1200))
    return checks


# What run_local says of each check: ("start", check, None, 0.0), then ("done", check, its run, seconds).
OnEvent = Callable[[str, LocalCheck, CheckRun | None, float], None]


def run_local(checks: list[LocalCheck], python: str, workdir: Path, on_event: OnEvent) -> list[CheckRun]:
    root = validation_root()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # NVLink multicast can take a shared host's GPUs out of service: never on by default.
    for var, value in (
        ("NCCL_NVLS_ENABLE", "0"),
        ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
        ("NVSHMEM_DISABLE_NVLS", "1"),
    ):
        env.setdefault(var, value)
    host = socket.gethostname()
    runs: list[CheckRun] = []
    for check in checks:
        on_event("start", check, None, 0.0)
        argv = [python, "-m", *check.argv]
        if check.check == "smoke":
            argv += ["--checkpoint-dir", str(workdir / "checkpoint")]
        log = workdir / f"{check.suite}.log"
        started = time.monotonic()
        try:
            with log.open("w") as err:
                proc = subprocess.run(
                    argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=root, timeout=check.timeout_s
                )
            tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
            envelope = parse_envelope(proc.stdout, proc.returncode, tail, check.check, host)
        except subprocess.TimeoutExpired:
            envelope = broken_envelope(check.check, host, f"timed out after {check.timeout_s:.0f} s (log: {log})")
        except OSError as exc:
            raise ValidationError(f"cannot run {python}: {exc.strerror}; pass --python with torch installed") from None
        (workdir / f"{check.suite}.json").write_text(json.dumps(envelope, indent=2) + "\n")
        run = CheckRun(check=check.check, scope="node", node=host, envelope=envelope)
        runs.append(run)
        on_event("done", check, run, time.monotonic() - started)
    return runs


def default_python() -> str:
    return sys.executable


def scratch_dir(report_dir: Path) -> Path:
    """A new folder for this run's raw outputs, under the report's raw/ (checked before any check runs)."""
    from podctl.validate.report import report_folder

    return Path(tempfile.mkdtemp(prefix="run-", dir=report_folder(report_dir).folder("raw")))


@dataclass(frozen=True)
class LocalCertification:
    """What certify_local judged and wrote."""

    cert: Certification
    runs: list[CheckRun]
    meta: dict[str, Any]  # as report.json holds it
    reports: dict[str, Path]  # json, junit, html -> the file written


def certify_local(request: LocalRequest, on_event: OnEvent) -> LocalCertification:
    """Run the request's suites on this host, judge them against its profile's reference, and write
    the report into request.report_dir."""
    from podctl.derive.site import builtin_profiles
    from podctl.validate.report import write_report

    profiles = builtin_profiles()
    if request.profile not in profiles:
        raise ValidationError(f"unknown profile {request.profile!r}; built-in profiles: {', '.join(sorted(profiles))}")
    profile = profiles[request.profile]
    started = datetime.now(UTC)
    workdir = scratch_dir(request.report_dir)
    checks = plan_local(profile, request.suites, request.burnin, request.gpus, request.nccl_tests)
    t0 = time.monotonic()
    runs = run_local(checks, request.python or default_python(), workdir, on_event)
    host = socket.gethostname()
    rows = effective_reference(profile, {})
    wanted = {suite_of(r.figure) for r in rows}
    rows = [r for r in rows if suite_of(r.figure) in request.suites]
    cert = judge(f"{host} ({profile.name})", {host: rows}, runs)
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "podctl": __version__,
        "suites": list(request.suites),
        "profile": profile.name,
        "mode": "local",
        "burnin": request.burnin,
        "wall_s": round(time.monotonic() - t0, 1),
        "skipped_suites": sorted(s for s in wanted - set(request.suites) if s),
    }
    paths = write_report(request.report_dir, cert, runs, meta)
    return LocalCertification(cert, runs, meta, paths)
