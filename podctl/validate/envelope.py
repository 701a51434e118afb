"""Reading a node-side check's JSON envelope from its stdout, wherever it ran.

Every `python3 -m validation.<check>` prints one JSON object as its last
line (see validation/result.py, which defines its shape: `envelope`,
`finding`, `envelope_problems`; podctl builds its own results with them). A check that died before printing one, or
could not be started, becomes an "error" envelope that says why, so that a
broken node fails with a reason instead of breaking the run.
"""

from __future__ import annotations

import json
from typing import Any

from validation.result import envelope, envelope_problems, finding

# What of a node's output a finding quotes: enough to recognise it, not a flood.
QUOTE_CHARS = 300


# How much of the end of a node's stderr a finding quotes when the node printed no result.
STDERR_TAIL_CHARS = 600


def parse_envelope(stdout: str, returncode: int | None, stderr_tail: str, check: str, host: str) -> dict[str, Any]:
    """The envelope a node printed; an "error" envelope saying why when there is none, or when
    what it printed is not an envelope (a check's output is untrusted until it has the shape)."""
    candidates = [line.strip() for line in reversed(stdout.strip().splitlines()) if line.strip().startswith("{")]
    if stdout.strip().startswith("{"):
        candidates.append(stdout.strip())  # an indented, multi-line JSON object
    for text in candidates:
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            continue
        if not isinstance(data, dict) or "status" not in data:
            continue
        problems = envelope_problems(data)
        if problems:
            return broken_envelope(
                check,
                host,
                f"printed a result that is not a valid {check} envelope "
                f"({'; '.join(problems[:3])}): {text[:QUOTE_CHARS]!r}",
            )
        return data
    how = "was killed" if returncode is None else f"exited {returncode}"
    tail = stderr_tail.strip()[-STDERR_TAIL_CHARS:]
    printed = stdout.strip()[-QUOTE_CHARS:]
    return broken_envelope(
        check,
        host,
        f"{how} without a JSON result"
        + (f"; stdout tail: {printed!r}" if printed else "")
        + (f"; stderr tail: {tail}" if tail else ""),
    )


def broken_envelope(check: str, host: str, message: str) -> dict[str, Any]:
    return envelope(check, host, "error", [finding(message)])


__all__ = ["QUOTE_CHARS", "broken_envelope", "envelope", "finding", "parse_envelope"]
