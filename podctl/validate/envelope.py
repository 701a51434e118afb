"""Reading a node-side check's JSON envelope from its stdout, wherever it ran.

Every `python3 -m validation.<check>` prints one JSON object as its last
line (see validation/result.py). A check that died before printing one, or
could not be started, becomes an "error" envelope that says why, so that a
broken node fails with a reason instead of breaking the run.
"""

from __future__ import annotations

import json
from typing import Any


def parse_envelope(stdout: str, returncode: int | None, stderr_tail: str, check: str, host: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "status" in data:
            return data
    text = stdout.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
            if isinstance(data, dict) and "status" in data:
                return data
        except json.JSONDecodeError:
            pass
    how = "was killed" if returncode is None else f"exited {returncode}"
    tail = stderr_tail.strip()[-600:]
    return broken_envelope(check, host, f"{how} without a JSON result" + (f"; stderr tail: {tail}" if tail else ""))


def broken_envelope(check: str, host: str, message: str) -> dict[str, Any]:
    return envelope(check, host, "error", [finding(message)])


def envelope(check: str, host: str, status: str, findings: list[dict[str, Any]], *,
             measurements: list[dict[str, Any]] | None = None, details: dict[str, Any] | None = None,
             duration_s: float = 0.0) -> dict[str, Any]:
    """An envelope of validation/result.py's shape, for results podctl makes itself
    (conformance, cabling, verdicts of multi-node tests, checks that could not run)."""
    return {"check": check, "host": host, "status": status, "duration_s": duration_s,
            "measurements": measurements or [], "findings": findings, "details": details or {}}


def finding(message: str, severity: str = "error", device: str | None = None) -> dict[str, Any]:
    return {"severity": severity, "message": message, "device": device}
