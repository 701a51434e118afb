"""Each node keeps its own last certification: written there by `podctl validate`, read by
`podctl status` from wherever it runs. A node carries the record across controllers, report
folders and years; the report it names stays where it was written.
"""

from __future__ import annotations

import json
import shlex
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from podctl.runtime.remote import Nodes
from podctl.validate.judge import Certification

CERT_RECORD = "/var/lib/podctl/certification.json"


def certification_record(
    cert: Certification, host: str, report: Path, suites: Sequence[str], version: str
) -> dict[str, object]:
    failures = cert.failures.get(host, [])
    return {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "certified": not failures,
        "failures": failures[:10],
        "suites": list(suites),
        "report": str(report),
        "written_from": socket.gethostname(),
        "podctl": version,
    }


def write_command(record: dict[str, object], path: str = CERT_RECORD) -> str:
    """A shell command that writes `record` to `path` on a node, atomically."""
    text = json.dumps(record, sort_keys=True)
    tmp = f"{path}.tmp"
    folder = path.rsplit("/", 1)[0]
    return (
        f"mkdir -p {shlex.quote(folder)} && printf '%s\\n' {shlex.quote(text)} > {shlex.quote(tmp)} "
        f"&& mv {shlex.quote(tmp)} {shlex.quote(path)}"
    )


def record_certifications(
    nodes: Nodes, cert: Certification, hosts: Sequence[str], report: Path, suites: Sequence[str], version: str
) -> dict[str, str | None]:
    """Write each host's record; host -> None, or why it could not be written."""
    commands = {h: write_command(certification_record(cert, h, report, suites, version)) for h in hosts}
    out: dict[str, str | None] = {}
    for host, result in nodes.run_each(commands, timeout_s=30).items():
        out[host] = result.error or (None if result.returncode == 0 else result.stderr.strip()[:200])
    return out
