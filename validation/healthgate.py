#!/usr/bin/python3 -I
"""The node health gate Slurm runs between jobs: fast checks against what this node is
supposed to be, a drain with the reason when it is not, and a record for Prometheus.

    podctl-healthcheck                     # Slurm's HealthCheckProgram: no arguments
    podctl-healthcheck-prolog              # the same as Slurm's Prolog (a symbolic link)
    podctl-healthcheck --no-drain --print  # by hand, or from `podctl nodes recheck`
    podctl-healthcheck --mark slurmd --for 300 --by 'podctl deploy'   # before a planned restart
    podctl-healthcheck --unmark                                       # once it is back

What it checks comes from the expectations file the deploy renders for this node
(/etc/podctl/health.json, from the site and the node's hardware profile): each shared
mount present and answering within its timeout, free space on the paths jobs use, free
memory, the services a compute node needs (munge and slurmd among them), a munge
credential that round-trips, and, through validation.health run by the validation
tools' Python, the GPUs (count, model, memory, ECC, row remapping, NVLinks, PCIe width,
throttle reasons, new XID events) and the HCA ports (state and rate).

Root runs only root's code. The gate runs as root; it starts that check through
podctl-validation-exec (validation/trusted_exec.py, installed beside it), which refuses an
interpreter, virtualenv or module path that anyone but root could have written, and otherwise
runs Python isolated (-I) from /. A refusal is recorded ("refused", the metric
podctl_health_refused and its alert), never a drain. Every command the gate starts runs from /.

Memory and disk pressure are what users' jobs can cause: free memory (leftover processes, files
in /dev/shm or a tmpfs /tmp) and free space on the folders it checks (/tmp, /var/tmp, a local
scratch) are what any job may fill, and what one job left behind would otherwise drain its node
once idle. They are warnings (the record's "warnings", the metric podctl_health_warnings and its
alert), never a drain, whether or not a job holds the node.

A unit found activating, deactivating or reloading is asked again every half second for a
short while (transient_wait_s, 5 s) before it counts: a restart passes through those states.
A maintenance mark (the file the expectations name under "maintenance", written with --mark
by podctl's deploy on a node just before it restarts slurmd there, removed once slurmctld has
the node back) pauses the gate for the units it lists and nothing else: any other finding
still drains. A mark expires at its own time, and never lasts more than an hour after it was
written, so a deploy that crashed cannot blind the gate.

Outcomes: "pass" (warnings or not); "fail" (a finding: in --drain mode the node is drained in Slurm with
the reason `podctl: <first finding>`, unless a person drained it already); "error" (the
gate could not judge: the node check timed out, crashed, or said nothing readable; the
expectations file is unreadable). An error never drains: it is reported instead, in the
record and in the exported metrics, which an alert rule watches.

Written per run, each atomically: <state>/last.json (the record `podctl status` reads)
and <textfile>/podctl_health.prom (node exporter's textfile collector). Runs may overlap
(slurmd's interval, a prolog, a person): a run that started before the one already on
record writes nothing, so a slow stale run never replaces a newer verdict.

Exit status: 0, except in prolog mode, where a failed node exits 1 so Slurm requeues
the job that was about to land on it. The gate's own crash exits 0: it must never be
the reason a node stops taking work.

This file is installed alone, on each node's local disk, and uses only the standard
library: a hung shared mount, or the validation tools on it, cannot stop it from running.
Why one module: that is also why it is one file; a second module would have to be
installed beside it on every node and found on its path before it could run.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

EXPECT = Path("/etc/podctl/health.json")
STATE = Path("/var/lib/podctl/health")
DRAIN_PREFIX = "podctl: "
# Slurm keeps a reason of any length; a short one reads in sinfo -R.
REASON_MAX = 160
GIB = 1024**3
# systemd's states of a unit on its way somewhere; asked again before they count as a fault.
TRANSIENT = ("activating", "deactivating", "reloading")
TRANSIENT_WAIT_S = 5.0
TRANSIENT_POLL_S = 0.5
# A maintenance mark never pauses the gate for longer than this, whatever it says.
MARK_MAX_S = 3600
# podctl-validation-exec's exit status when it refuses to run code another user could have written.
REFUSED_EXIT = 77


class Gate:
    """One run: findings gathered part by part, within a deadline."""

    def __init__(self, expect: dict[str, Any], deadline: float) -> None:
        self.expect = expect
        self.deadline = deadline
        self.findings: list[str] = []
        self.errors: list[str] = []  # why the gate could not judge (never drains)
        # Memory and disk pressure: warnings, never findings (see judge_pressure).
        self.pressure: list[str] = []
        self.warnings: list[str] = []
        self.refused: str | None = None  # podctl-validation-exec refused the node check's code
        self.parts: dict[str, Any] = {}
        self.failed_mounts: set[str] = set()

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    # ------------------------------------------------------------------ helpers

    def run(self, argv: list[str], timeout: float, stdin: bytes | None = None) -> tuple[int | None, str, str]:
        """(exit status or None on timeout, stdout, stderr). A child stuck in the kernel
        (a hung mount) is killed and left behind, never waited for."""
        timeout = min(timeout, self.left())
        try:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                cwd="/",  # never the caller's folder (slurmd's is the slurm account's log folder)
            )
        except OSError as exc:
            return 127, "", str(exc)
        try:
            out, err = child.communicate(stdin, timeout=max(timeout, 0.01))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
            return None, "", ""
        return child.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    # ------------------------------------------------------------------ parts

    def mounts(self, mountinfo: str) -> None:
        mounted = set()
        for line in mountinfo.splitlines():
            fields = line.split()
            if len(fields) > 4:
                mounted.add(fields[4].encode().decode("unicode_escape"))
        timeout = float(self.expect.get("mount_timeout_s", 3))
        part = []
        for mount in self.expect.get("mounts", []):
            path = mount["path"]
            if path not in mounted:
                self.findings.append(f"mount {path} is missing")
                self.failed_mounts.add(path)
                part.append({"path": path, "state": "missing"})
                continue
            t0 = time.monotonic()
            code, _, err = self.run(["stat", "-f", "--", path], timeout)
            took = round(time.monotonic() - t0, 3)
            if code is None:
                self.findings.append(f"mount {path} does not answer within {timeout:g} s")
                self.failed_mounts.add(path)
                part.append({"path": path, "state": "hung"})
            elif code != 0:
                self.findings.append(f"mount {path} fails: {err.strip()[:80]}")
                self.failed_mounts.add(path)
                part.append({"path": path, "state": "failing"})
            else:
                part.append({"path": path, "state": "ok", "answered_s": took})
        self.parts["mounts"] = part

    def under_failed_mount(self, path: str) -> str | None:
        for mount in self.failed_mounts:
            if path == mount or path.startswith(mount.rstrip("/") + "/"):
                return mount
        return None

    def free_space(self) -> None:
        timeout = float(self.expect.get("mount_timeout_s", 3))
        part = []
        for entry in self.expect.get("free_space", []):
            path, minimum = entry["path"], float(entry["min_free_gib"])
            if self.under_failed_mount(path):
                continue  # the mount's finding says it already
            code, out, err = self.run(["stat", "-f", "-c", "%a %S", "--", path], timeout)
            if code is None:
                self.findings.append(f"{path} does not answer within {timeout:g} s")
                continue
            match = re.fullmatch(r"(\d+) (\d+)\s*", out)
            if code != 0 or not match:
                self.findings.append(f"free space on {path} unreadable: {(err or out).strip()[:80]}")
                continue
            free = int(match.group(1)) * int(match.group(2)) / GIB
            part.append({"path": path, "free_gib": round(free, 3), "min_free_gib": minimum})
            if free < minimum:
                self.pressure.append(f"{path} has {free:.2f} GiB free, below {minimum:g} GiB")
        self.parts["free_space"] = part

    def memory(self, meminfo: str) -> None:
        minimum = float(self.expect.get("min_free_memory_gib", 0))
        match = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.M)
        if not match:
            self.errors.append("MemAvailable missing from /proc/meminfo")
            return
        available = int(match.group(1)) * 1024 / GIB
        self.parts["memory"] = {"available_gib": round(available, 2), "min_free_gib": minimum}
        if available < minimum:
            self.pressure.append(f"{available:.1f} GiB of memory available, below {minimum:g} GiB")

    def service_states(self, names: list[str]) -> dict[str, str] | None:
        """`systemctl is-active` of each unit, or None (recorded as an error) when it does not say."""
        code, out, err = self.run(["systemctl", "is-active", *names], 5)
        states = out.split()
        if code is None or len(states) != len(names):
            self.errors.append(f"systemctl is-active gave no answer for {', '.join(names)}: {err.strip()[:80]}")
            return None
        return dict(zip(names, states, strict=True))

    def services(self) -> None:
        names = list(self.expect.get("services", []))
        if not names:
            return
        states = self.service_states(names)
        if states is None:
            return
        # A unit starting, stopping or reloading is asked again for a short while before it
        # counts: an operator's `systemctl restart` passes through both in a second or two.
        # The one exception: the unit that started the gate and waits for it (slurmd of Slurm 23.02
        # and later, Type=notify, runs the gate before it tells systemd it is up).
        caller = self.caller()
        starting_caller = {n for n in names if n == caller and states[n] == "activating"}
        wait_s = max(0.0, min(float(self.expect.get("transient_wait_s", TRANSIENT_WAIT_S)), self.left() / 2))
        waited, until = 0.0, time.monotonic() + wait_s
        while time.monotonic() < until and (
            pending := [n for n in names if states[n] in TRANSIENT and n not in starting_caller]
        ):
            time.sleep(min(TRANSIENT_POLL_S, max(0.0, until - time.monotonic())))
            again = self.service_states(pending)
            if again is None:
                return
            states.update(again)
            waited = wait_s - max(0.0, until - time.monotonic())
        if waited:
            self.parts["services_waited_s"] = round(waited, 2)
        self.parts["services"] = states
        paused = self.maintenance()
        for name in names:
            state = states[name]
            if state == "active" or name in starting_caller:
                continue
            if name in paused:
                continue  # podctl is restarting it (the mark is in parts["maintenance"])
            if state in TRANSIENT:
                self.findings.append(f"service {name} is still {state} after {wait_s:g} s")
            else:
                self.findings.append(f"service {name} is {state}")
        if states.get("munge") == "active":
            self.munge()

    def maintenance(self) -> set[str]:
        """The services a live maintenance mark pauses (podctl deploy writes one on a node before it
        restarts them there and removes it once they are back; see `mark`). An expired or unreadable
        mark pauses nothing: a deploy that crashed must not blind the gate."""
        path = self.expect.get("maintenance")
        if not path:
            return set()
        try:
            text, written = Path(path).read_text(), Path(path).stat().st_mtime
            mark = json.loads(text)
            services = [str(s) for s in mark["services"]]
            until, by = float(mark["until"]), str(mark.get("by", ""))[:120]
            if not math.isfinite(until):  # NaN would compare false with every time: a mark for good
                raise ValueError(f"until is {mark['until']!r}, not a time")
            until = min(until, written + MARK_MAX_S)
        except FileNotFoundError:
            return set()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.errors.append(f"maintenance mark {path} unreadable, ignored: {exc}"[:160])
            return set()
        left = until - time.time()
        record = {"services": services, "by": by, "expires_in_s": round(left, 1)}
        if left <= 0:
            self.parts["maintenance"] = {**record, "state": "expired, ignored"}
            return set()
        self.parts["maintenance"] = {**record, "state": "honoured"}
        return set(services)

    @staticmethod
    def caller() -> str:
        """The command name of the process that started the gate (slurmd when Slurm runs it)."""
        try:
            return Path(f"/proc/{os.getppid()}/comm").read_text().strip()
        except OSError:
            return ""

    def munge(self) -> None:
        code, credential, err = self.run(["munge", "-n"], 3)
        if code == 0:
            code, _, err = self.run(["unmunge"], 3, stdin=credential.encode())
        if code is None:
            self.findings.append("munge does not answer within 3 s")
        elif code != 0:
            self.findings.append(f"munge credential does not round-trip: {err.strip()[:80]}")

    def node_check(self) -> None:
        """validation.health for the GPUs and HCAs, with the validation tools' Python, started
        through podctl-validation-exec (the expectations' launcher), which runs it only if root
        alone could have written it."""
        check = self.expect.get("node_check")
        if not check:
            return
        launcher, python, argv = check["launcher"], check["python"], list(check["argv"])
        hung = self.under_failed_mount(python)
        if hung:
            self.errors.append(f"GPU/HCA checks not run: the validation tools lie on {hung}")
            return
        code, out, err = self.run([launcher, python, *argv], self.left())
        if code == REFUSED_EXIT:
            self.refused = (err.strip().splitlines() or ["(no reason given)"])[-1][:300]
            self.errors.append(f"GPU/HCA checks not run: {self.refused}")
            self.parts["node_check"] = {"status": "refused", "exit": code}
            return
        if code is None:
            self.errors.append("GPU/HCA checks did not finish before the gate's time limit")
            return
        try:
            envelope = json.loads(out)
            status, findings = envelope["status"], envelope["findings"]
        except (ValueError, KeyError, TypeError):
            self.errors.append(f"GPU/HCA checks exited {code} without a readable result: {err.strip()[-120:]}")
            return
        self.parts["node_check"] = {"status": status, "exit": code}
        if status == "error":
            self.errors.append("GPU/HCA checks broke: " + "; ".join(str(f.get("message")) for f in findings)[:200])
            return
        for f in findings:
            if isinstance(f, dict) and f.get("severity") == "error":
                device = f"{f['device']}: " if f.get("device") else ""
                self.findings.append(f"{device}{f.get('message')}")


# ---------------------------------------------------------------------- records


def record_run(state: Path, record: dict[str, Any], text: str, textfile_dir: str | None) -> bool:
    """Write this run's record and metrics, unless a run that started later has written its
    own already (under a lock on <state>/.lock, so two runs finishing together cannot both
    win). False when this run was left out. A write that fails is said on stderr and never
    raises: a full disk must not turn into a crash."""
    lock = None
    try:
        state.mkdir(parents=True, exist_ok=True)
        lock = open(state / ".lock", "a")  # noqa: SIM115 - held until the writes are done
        fcntl.flock(lock, fcntl.LOCK_EX)
    except OSError as exc:
        print(f"podctl-healthcheck: writing without the lock: {exc}", file=sys.stderr)
    try:
        try:
            newer = float(json.loads((state / "last.json").read_text()).get("time", 0)) > record["time"]
        except (OSError, ValueError, TypeError, AttributeError):
            newer = False  # none yet, or unreadable: this run's record replaces it
        if newer:
            print(
                "podctl-healthcheck: a run that started later is on record already; this one is left out",
                file=sys.stderr,
            )
            return False
        targets = [(state / "last.json", text + "\n")]
        if textfile_dir:
            targets.append((Path(textfile_dir) / "podctl_health.prom", metrics(record)))
        for path, content in targets:
            try:
                write_atomic(path, content)
            except Exception as exc:  # noqa: BLE001 - see above
                print(f"podctl-healthcheck: cannot write its record to {path}: {exc}", file=sys.stderr)
        return True
    finally:
        if lock is not None:
            lock.close()


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            # By descriptor: the textfile folder belongs to the prometheus account, which could
            # swap the name for a link between a write and a chmod by path.
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def metrics(record: dict[str, Any]) -> str:
    """The record as node exporter textfile metrics."""
    status = record["status"]
    lines = [
        "# HELP podctl_health_ok 1 when the node's last health check passed, 0 when it found a fault.",
        "# TYPE podctl_health_ok gauge",
    ]
    if status != "error":
        lines.append(f"podctl_health_ok {1 if status == 'pass' else 0}")
    lines += [
        "# HELP podctl_health_check_error 1 when the health check could not judge the node (timeout, crash).",
        "# TYPE podctl_health_check_error gauge",
        f"podctl_health_check_error {1 if status == 'error' else 0}",
        "# HELP podctl_health_findings Faults the last health check found.",
        "# TYPE podctl_health_findings gauge",
        f"podctl_health_findings {len(record['findings'])}",
        "# HELP podctl_health_refused 1 when the check refused to run code that a user other than root could have written.",
        "# TYPE podctl_health_refused gauge",
        f"podctl_health_refused {1 if record.get('refused') else 0}",
        "# HELP podctl_health_warnings Memory or disk pressure, which a user's job can cause: an alert, never a drain.",
        "# TYPE podctl_health_warnings gauge",
        f"podctl_health_warnings {len(record.get('warnings', []))}",
        "# HELP podctl_health_drain_failed 1 when the node failed but could not drain itself in Slurm.",
        "# TYPE podctl_health_drain_failed gauge",
        f"podctl_health_drain_failed {1 if record.get('drain_error') else 0}",
        "# HELP podctl_health_last_run_timestamp_seconds When the health check last ran.",
        "# TYPE podctl_health_last_run_timestamp_seconds gauge",
        f"podctl_health_last_run_timestamp_seconds {record['time']:.0f}",
        "# HELP podctl_health_duration_seconds How long the last health check took.",
        "# TYPE podctl_health_duration_seconds gauge",
        f"podctl_health_duration_seconds {record['duration_s']:.3f}",
        "# HELP podctl_health_finding The first faults of the last health check, one series each.",
        "# TYPE podctl_health_finding gauge",
    ]
    lines += [f'podctl_health_finding{{finding="{_label(f)}"}} 1' for f in record["findings"][:5]]
    lines += [
        "# HELP podctl_health_warning The first warnings of the last health check, one series each.",
        "# TYPE podctl_health_warning gauge",
    ]
    lines += [f'podctl_health_warning{{warning="{_label(w)}"}} 1' for w in record.get("warnings", [])[:5]]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- Slurm


def judge_pressure(gate: Gate) -> None:
    """Memory or disk pressure is what a user's job can do to a node, idle or not: a warning (an
    alert for a person), never a drain."""
    if gate.pressure:
        gate.warnings += gate.pressure
        gate.parts["pressure"] = "memory and space a user's job can fill: warnings, never a drain"


def node_state(gate: Gate, node: str) -> tuple[str, str] | None:
    """(State, Reason) from scontrol, or None when scontrol cannot say."""
    code, out, _ = gate.run(["scontrol", "show", "node", "-o", node], 5)
    if code != 0:
        return None
    state = re.search(r"\bState=(\S+)", out)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)", out)
    return (state.group(1) if state else "", reason.group(1).strip() if reason else "")


def drain(gate: Gate, node: str, reason: str) -> tuple[str | None, str | None]:
    """(what was done, error). A drain by a person is left alone."""
    current = node_state(gate, node)
    if current is None:
        return None, "scontrol cannot read the node's state (is munge running?)"
    state, old = current
    if "DRAIN" in state and old and not old.startswith(DRAIN_PREFIX.strip()):
        return f"left alone: drained by a person ({old})", None
    if "DRAIN" in state and old == reason:
        return "already drained with this reason", None
    code, _, err = gate.run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"], 5)
    if code != 0:
        return None, f"scontrol update failed: {err.strip()[:120] or 'timed out'}"
    return "drained", None


def reason_of(findings: list[str]) -> str:
    text = DRAIN_PREFIX + findings[0] + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else "")
    return re.sub(r"\s+", " ", text)[:REASON_MAX]


# ---------------------------------------------------------------------- main


def check(expect: dict[str, Any], started: float) -> Gate:
    gate = Gate(expect, started + float(expect.get("timeout_s", 10)) - 0.5)
    gate.mounts(Path("/proc/self/mountinfo").read_text())
    gate.free_space()
    gate.memory(Path("/proc/meminfo").read_text())
    gate.services()
    gate.node_check()
    return gate


def outcome(gate: Gate) -> str:
    if gate.findings:
        return "fail"
    return "error" if gate.errors else "pass"


def mark(expect_path: Path, services: list[str], seconds: float, by: str) -> int:
    """Write this node's maintenance mark: the gate leaves `services` alone until it expires."""
    try:
        path = json.loads(expect_path.read_text()).get("maintenance")
        if not path:
            print(f"podctl-healthcheck: {expect_path} names no maintenance mark file", file=sys.stderr)
            return 2
        if not math.isfinite(seconds):
            print(f"podctl-healthcheck: --for {seconds}: give the mark's seconds as a number", file=sys.stderr)
            return 2
        until = time.time() + max(0.0, min(seconds, MARK_MAX_S))
        write_atomic(Path(path), json.dumps({"services": services, "until": round(until, 1), "by": by}) + "\n")
    except (OSError, ValueError) as exc:
        print(f"podctl-healthcheck: cannot write the maintenance mark: {exc}", file=sys.stderr)
        return 1
    return 0


def unmark(expect_path: Path) -> int:
    try:
        path = json.loads(expect_path.read_text()).get("maintenance")
        if path:
            Path(path).unlink(missing_ok=True)
    except (OSError, ValueError) as exc:
        print(f"podctl-healthcheck: cannot remove the maintenance mark: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    prolog_default = Path(sys.argv[0]).name.endswith("-prolog")
    p = argparse.ArgumentParser(prog="podctl-healthcheck", description=__doc__.split("\n\n")[0])
    p.add_argument("--expect", type=Path, default=EXPECT, help=f"expectations file (default {EXPECT})")
    p.add_argument("--state", type=Path, default=STATE, help=f"folder for last.json (default {STATE})")
    p.add_argument("--prolog", action="store_true", default=prolog_default, help="exit 1 on a fault")
    p.add_argument("--no-drain", action="store_true", help="report only, whatever the expectations say")
    p.add_argument("--print", action="store_true", help="print the record as JSON")
    p.add_argument(
        "--mark",
        metavar="UNIT[,UNIT]",
        help="check nothing; write the maintenance mark that pauses the gate for these units (see --for)",
    )
    p.add_argument("--for", dest="mark_s", type=float, default=300, help="seconds the mark lasts (default 300)")
    p.add_argument("--by", default="", help="who writes the mark, shown in the gate's record")
    p.add_argument("--unmark", action="store_true", help="check nothing; remove the maintenance mark")
    args = p.parse_args(argv)
    if args.mark:
        return mark(args.expect, [u for u in args.mark.split(",") if u], args.mark_s, args.by)
    if args.unmark:
        return unmark(args.expect)
    started, wall = time.monotonic(), time.time()
    record: dict[str, Any] = {"host": socket.gethostname(), "time": wall, "mode": "prolog" if args.prolog else "check"}
    expect: dict[str, Any] = {}
    try:
        expect = json.loads(args.expect.read_text())
        gate = check(expect, started)
        node = expect.get("node") or record["host"]
        judge_pressure(gate)
        record.update(status=outcome(gate), findings=gate.findings, errors=gate.errors, parts=gate.parts)
        record.update(warnings=gate.warnings, refused=gate.refused)
        record["node"] = node
        if record["status"] == "fail" and expect.get("drain", True) and not args.no_drain:
            record["drain"], record["drain_error"] = drain(gate, node, reason_of(gate.findings))
    except Exception as exc:  # noqa: BLE001 - the gate's own failure is a record, never a drain
        record.update(
            status="error",
            findings=[],
            errors=[f"{type(exc).__name__}: {exc}"],
            traceback=traceback.format_exc(limit=5),
        )
    record["duration_s"] = round(time.monotonic() - started, 3)
    text = json.dumps(record, indent=1, sort_keys=True)
    record_run(args.state, record, text, expect.get("textfile_dir"))
    if args.print:
        print(text)
    elif record["status"] != "pass":
        # slurmd logs what a HealthCheckProgram prints.
        print(f"podctl-healthcheck: {record['status']}: " + "; ".join(record["findings"] or record["errors"])[:400])
    return 1 if args.prolog and record["status"] == "fail" else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - even an unwritable record must not fail a job
        traceback.print_exc()
        sys.exit(0)
