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
from validation.trusted_exec import PROG as EXEC_PROG
from validation.trusted_exec import REFUSED

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
    refused = [ln for ln in stderr_tail.splitlines() if ln.startswith(f"{EXEC_PROG}: refused:")]
    if returncode == REFUSED and refused:
        return broken_envelope(
            check,
            host,
            f"not run: {refused[-1].removeprefix(f'{EXEC_PROG}: ')[:QUOTE_CHARS]}; root runs only code that root "
            "alone can write: redeploy the validation tools (`podctl deploy SITE --only validation-tools`) "
            "and find out who changed them",
        )
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


def note_dropped(result: dict[str, Any], note: str) -> dict[str, Any]:
    """`result` with a warning that podctl kept only the end of what the node printed (`note`, from
    podctl.runtime.remote.RemoteResult.dropped_note; nothing when it is empty)."""
    if note:
        result.setdefault("findings", []).append(finding(note, severity="warning"))
    return result


__all__ = ["QUOTE_CHARS", "broken_envelope", "envelope", "finding", "note_dropped", "parse_envelope"]
