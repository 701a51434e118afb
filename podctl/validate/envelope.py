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
    return {"check": check, "host": host, "status": "error", "duration_s": 0.0, "measurements": [],
            "findings": [{"severity": "error", "message": message, "device": None}], "details": {}}
