"""The one JSON envelope every node-side check prints, and the statistics in it.

A check builds a `Report` while it measures; `run_check` wraps the body so
that an unexpected exception becomes status "error" with its message instead
of a traceback, and `emit` prints the envelope as one JSON object on stdout.

Exit codes of every `python3 -m validation.<check>`:
    0  status "pass" or "skip"
    1  status "fail" (a finding of severity "error")
    2  status "error" (the check itself broke; see findings and details)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

STATUSES = ("pass", "fail", "skip", "error")
SEVERITIES = ("error", "warning", "info")
EXIT_CODES = {"pass": 0, "skip": 0, "fail": 1, "error": 2}


class UsageError(Exception):
    """Bad command-line arguments; reported as an error envelope, not just a usage line."""


class CheckArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise UsageError(message)


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None, check: str) -> argparse.Namespace | int:
    """Parsed arguments, or the exit code after printing an error envelope for bad ones."""
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        return emit(error_envelope(check, f"bad arguments: {exc}"))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of already sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = math.ceil(position)
    fraction = position - low
    return float(sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction)


def summarize(samples: Iterable[float]) -> tuple[float, dict[str, float]]:
    """Median and spread (min, max, p10, p90, IQR) of timed samples.

    Callers pass only timed iterations: warm-up is excluded before this.
    """
    values = sorted(float(v) for v in samples)
    if not values:
        raise ValueError("no samples to summarize")
    median = percentile(values, 50)
    p25 = percentile(values, 25)
    p75 = percentile(values, 75)
    spread = {
        "min": values[0],
        "max": values[-1],
        "p10": percentile(values, 10),
        "p90": percentile(values, 90),
        "iqr": p75 - p25,
    }
    return median, spread


@dataclass
class Measurement:
    figure: str
    value: float
    unit: str
    device: str | None = None
    samples: int = 1
    spread: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "value": self.value,
            "unit": self.unit,
            "device": self.device,
            "samples": self.samples,
            "spread": dict(self.spread),
        }


@dataclass
class Finding:
    severity: str
    message: str
    device: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {SEVERITIES}")

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "message": self.message, "device": self.device}


def hostname() -> str:
    """The node's name as the site knows it: Slurm's name for it in a job step (slurmd sets
    SLURMD_NODENAME; the host's own name may be a longer FQDN), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


class Report:
    """What one check found, filled in while it runs."""

    def __init__(self, check: str, host: str | None = None) -> None:
        self.check = check
        self.host = host or hostname()
        self.started = datetime.now(UTC)
        self._t0 = time.monotonic()
        self.measurements: list[Measurement] = []
        self.findings: list[Finding] = []
        self.details: dict[str, Any] = {}
        self._skip_reason: str | None = None
        self._error: str | None = None

    def measure(
        self,
        figure: str,
        value: float,
        unit: str,
        device: str | None = None,
        samples: int = 1,
        spread: dict[str, float] | None = None,
    ) -> Measurement | None:
        """Record a figure; a non-finite one (nan, inf) is a failure of the check, never a figure."""
        if not math.isfinite(float(value)):
            self.error(f"{figure} measured {float(value)!r}: the measurement broke", device)
            return None
        m = Measurement(figure, float(value), unit, device, int(samples), dict(spread or {}))
        self.measurements.append(m)
        return m

    def measure_samples(
        self, figure: str, samples: Sequence[float], unit: str, device: str | None = None
    ) -> Measurement | None:
        """Median of timed samples, with their spread."""
        median, spread = summarize(samples)
        return self.measure(figure, median, unit, device, len(samples), spread)

    def find(self, severity: str, message: str, device: str | None = None) -> Finding:
        f = Finding(severity, message, device)
        self.findings.append(f)
        return f

    def error(self, message: str, device: str | None = None) -> Finding:
        return self.find("error", message, device)

    def warning(self, message: str, device: str | None = None) -> Finding:
        return self.find("warning", message, device)

    def info(self, message: str, device: str | None = None) -> Finding:
        return self.find("info", message, device)

    def skip(self, reason: str) -> None:
        """Mark the whole check as not applicable on this host."""
        self._skip_reason = reason
        self.info(f"skipped: {reason}")

    def crashed(self, exc: BaseException) -> None:
        self._error = f"{type(exc).__name__}: {exc}"
        self.find("error", f"check raised {self._error}")
        self.details["traceback"] = traceback.format_exc()

    @property
    def status(self) -> str:
        if self._error is not None:
            return "error"
        if any(f.severity == "error" for f in self.findings):
            return "fail"
        if self._skip_reason is not None and not self.measurements:
            return "skip"
        return "pass"

    def to_dict(self) -> dict[str, Any]:
        return envelope(
            self.check,
            self.host,
            self.status,
            [f.to_dict() for f in self.findings],
            measurements=[m.to_dict() for m in self.measurements],
            details=self.details,
            duration_s=round(time.monotonic() - self._t0, 3),
            started=self.started.isoformat(timespec="seconds"),
        )


def envelope(
    check: str,
    host: str,
    status: str,
    findings: list[dict[str, Any]],
    *,
    measurements: list[dict[str, Any]] | None = None,
    details: dict[str, Any] | None = None,
    duration_s: float = 0.0,
    started: str | None = None,
) -> dict[str, Any]:
    """The envelope, as a dict: the one definition of its shape (envelope_problems checks it).

    Checks build theirs through Report; the controller builds one for results it makes
    itself (conformance, cabling, verdicts of multi-node tests, checks that could not run).
    """
    out: dict[str, Any] = {"check": check, "host": host, "status": status}
    if started is not None:
        out["started"] = started
    out.update(
        {"duration_s": duration_s, "measurements": measurements or [], "findings": findings, "details": details or {}}
    )
    return out


def finding(message: str, severity: str = "error", device: str | None = None) -> dict[str, Any]:
    return Finding(severity, message, device).to_dict()


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def envelope_problems(data: object) -> list[str]:
    """Why `data` is not an envelope of the shape `Report.to_dict` gives; [] when it is.

    The controller reads envelopes from nodes it does not control: it checks
    each against this before trusting a single field of it.
    """
    if not isinstance(data, dict):
        return [f"the result is {type(data).__name__}, not a JSON object"]
    problems: list[str] = []
    for key in ("check", "host"):
        if not isinstance(data.get(key), str):
            problems.append(f"{key!r} is not a string")
    if data.get("status") not in STATUSES:
        problems.append(f"status {data.get('status')!r} is not one of {', '.join(STATUSES)}")
    if "duration_s" in data and not (_finite(data["duration_s"]) and data["duration_s"] >= 0):
        problems.append(f"duration_s {data['duration_s']!r} is not a finite number of seconds")
    if not isinstance(data.get("details", {}), dict):
        problems.append("'details' is not an object")
    measurements = data.get("measurements")
    if not isinstance(measurements, list):
        problems.append("'measurements' is not a list")
        measurements = []
    for i, m in enumerate(measurements):
        if not isinstance(m, dict):
            problems.append(f"measurements[{i}] is not an object")
            continue
        if not isinstance(m.get("figure"), str) or not isinstance(m.get("unit"), str):
            problems.append(f"measurements[{i}] has no figure or unit")
        if not _finite(m.get("value")):
            problems.append(
                f"measurements[{i}] ({m.get('figure')!r}) has the value {m.get('value')!r}, not a finite number"
            )
        if m.get("device") is not None and not isinstance(m.get("device"), str):
            problems.append(f"measurements[{i}] has a device that is not a string")
        if "samples" in m and not (isinstance(m["samples"], int) and not isinstance(m["samples"], bool)):
            problems.append(f"measurements[{i}] has samples that is not an integer")
        if "spread" in m and not (isinstance(m["spread"], dict) and all(_finite(v) for v in m["spread"].values())):
            problems.append(f"measurements[{i}] has a spread that is not finite numbers")
    findings = data.get("findings")
    if not isinstance(findings, list):
        problems.append("'findings' is not a list")
        findings = []
    for i, f in enumerate(findings):
        if not isinstance(f, dict) or f.get("severity") not in SEVERITIES or not isinstance(f.get("message"), str):
            problems.append(f"findings[{i}] is not a finding (severity, message)")
        elif f.get("device") is not None and not isinstance(f.get("device"), str):
            problems.append(f"findings[{i}] has a device that is not a string")
    return problems


def error_envelope(check: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """An envelope for a check that broke before it could build a Report."""
    report = Report(check)
    report._error = message
    report.find("error", message)
    report.details.update(details or {})
    return report.to_dict()


def run_check(check: str, body: Callable[[Report], None]) -> dict[str, Any]:
    """Run `body` on a fresh Report; never lets an exception escape."""
    report = Report(check)
    try:
        body(report)
    except Exception as exc:  # noqa: BLE001 - the envelope is the error channel
        report.crashed(exc)
        print(report.details["traceback"], file=sys.stderr)
    return report.to_dict()


def _json_safe(value: Any) -> Any:
    """JSON has no NaN/inf: non-finite floats become strings so the line stays valid."""
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def dumps(envelope: dict[str, Any]) -> str:
    return json.dumps(_json_safe(envelope), allow_nan=False, sort_keys=False)


def emit(envelope: dict[str, Any]) -> int:
    """Print the envelope as one JSON line on stdout; return the exit code."""
    sys.stdout.write(dumps(envelope) + "\n")
    sys.stdout.flush()
    return EXIT_CODES.get(envelope.get("status", "error"), 2)


def progress(message: str) -> None:
    """Progress goes to stderr: stdout carries only the JSON result."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
