"""`podctl status SITE`: the pod at a glance, from what the pod itself records.

    Slurm (sinfo on the controller)          each node's state and drain reason
    each compute node (one SSH round)        the health gate's last record, the last certification
    Prometheus (its API on the monitoring host, behind its login)   the alerts firing or pending

Every source may be missing or broken (a node unreachable, a record never written, Prometheus
down); the status says so in place of the figure and never stops at the first gap.

Prometheus is asked on its own host, over SSH, by the program the monitoring role installs there
(podctl.derive.facts.MONITORING_QUERY_PROGRAM), with the monitoring password that the role keeps on this
controller: the password goes in on the program's standard input, never on a command line, which
every user of that host can read in the process list.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from podctl.core import state
from podctl.core.model import Role, Site
from podctl.derive.facts import MONITORING_QUERY_PROGRAM
from podctl.derive.nodehealth import GATE_STATE
from podctl.runtime.remote import Nodes, RemoteResult, site_nodes
from podctl.validate.ledger import CERT_RECORD
from podctl.validate.slurm import NodeState, SlurmError, SlurmJobs

SEPARATOR = "----podctl-status----"
ALERTS_COMMAND = f"{MONITORING_QUERY_PROGRAM} prometheus /api/v1/alerts"
QUERY_TIMEOUT_S = 30


@dataclass
class NodeStatus:
    host: str
    slurm: NodeState | None = None
    health: dict[str, Any] | None = None
    certification: dict[str, Any] | None = None
    unreachable: str | None = None


@dataclass
class PodStatus:
    site: str
    nodes: list[NodeStatus] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # sources that could not be read

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "nodes": [
                {
                    "host": n.host,
                    "slurm": None if n.slurm is None else {"state": n.slurm.state, "reason": n.slurm.reason},
                    "health": n.health,
                    "certification": n.certification,
                    "unreachable": n.unreachable,
                }
                for n in self.nodes
            ],
            "alerts": self.alerts,
            "problems": self.problems,
        }


def _record(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def node_records(nodes: Nodes, hosts: list[str]) -> dict[str, tuple[dict | None, dict | None, str | None]]:
    """host -> (health record, certification record, why unreachable)."""
    command = f"cat {GATE_STATE}/last.json 2>/dev/null; echo {SEPARATOR}; cat {CERT_RECORD} 2>/dev/null; true"
    out = {}
    for host, r in nodes.run_each({h: command for h in hosts}, timeout_s=30).items():
        if r.error:
            out[host] = (None, None, r.error)
            continue
        health, _, cert = r.stdout.partition(SEPARATOR)
        out[host] = (_record(health), _record(cert), None)
    return out


def monitoring_password(site: Site) -> tuple[str | None, str | None]:
    """(the monitoring password kept on this controller, None), or (None, why there is none)."""
    path = state.monitoring_password_path(site.name)
    try:
        password = path.read_text(encoding="utf-8").splitlines()[0].strip() if path.stat().st_size else ""
    except FileNotFoundError:
        return None, f"no monitoring password at {path}: deploy the monitoring stage from this controller"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read the monitoring password at {path}: {exc}"
    if not password:
        return None, f"the monitoring password file {path} is empty: remove it and deploy the monitoring stage"
    return password, None


def ask_with_secret(nodes: Nodes, host: str, command: str, secret: str, timeout_s: float) -> RemoteResult:
    """Run `command` on `host` with `secret` as the first line of its standard input."""
    conn = nodes.connection(host)
    try:
        done = conn.run(command, hide=True, warn=True, timeout=timeout_s, in_stream=io.StringIO(secret + "\n"))
    except Exception as exc:  # noqa: BLE001 - as Nodes.run: every failure is a result
        return RemoteResult(host, None, "", "", f"cannot ask {host} over SSH: {type(exc).__name__}: {exc}")
    finally:
        conn.close()
    return RemoteResult(host, done.exited, done.stdout, done.stderr)


def prometheus_alerts(nodes: Nodes, host: str, password: str) -> tuple[list[dict[str, Any]], str | None]:
    """The alerts Prometheus holds (firing or pending), or why they could not be read."""
    return parse_alerts(host, ask_with_secret(nodes, host, ALERTS_COMMAND, password, QUERY_TIMEOUT_S))


def parse_alerts(host: str, r: RemoteResult) -> tuple[list[dict[str, Any]], str | None]:
    if r.error or r.returncode != 0:
        return [], f"Prometheus on {host}: {r.error or r.stderr.strip().splitlines()[-1:] or 'no answer'}"
    data = _record(r.stdout) or {}
    alerts = (data.get("data") or {}).get("alerts") if isinstance(data.get("data"), dict) else None
    if not isinstance(alerts, list):
        return [], f"Prometheus on {host}: an answer without alerts ({r.stdout[:100]!r})"
    out = []
    for a in alerts:
        if not isinstance(a, dict):
            continue
        labels = a.get("labels") if isinstance(a.get("labels"), dict) else {}
        annotations = a.get("annotations") if isinstance(a.get("annotations"), dict) else {}
        out.append(
            {
                "alert": str(labels.get("alertname", "?")),
                "state": str(a.get("state", "?")),
                "instance": str(labels.get("instance", "")),
                "severity": str(labels.get("severity", "")),
                "since": str(a.get("activeAt", "")),
                "summary": str(annotations.get("summary", "")),
            }
        )
    return out, None


def pod_status(site: Site, private_key: Path | None) -> PodStatus:
    status = PodStatus(site.name)
    nodes = site_nodes(site, private_key)
    compute = [n.hostname for n in site.nodes if n.has(Role.COMPUTE)]
    states: dict[str, NodeState] = {}
    if site.slurm is not None:
        try:
            states = SlurmJobs(nodes, site.slurm.controllers[0], None).states(compute)
        except SlurmError as exc:
            status.problems.append(str(exc))
    records = node_records(nodes, compute)
    for host in compute:
        health, cert, unreachable = records.get(host, (None, None, "not asked"))
        status.nodes.append(NodeStatus(host, states.get(host), health, cert, unreachable))
    if site.monitoring is not None:
        password, problem = monitoring_password(site)
        if password is not None:
            status.alerts, problem = prometheus_alerts(nodes, site.monitoring.prometheus_host, password)
        if problem:
            status.problems.append(problem)
    return status


def age(seconds_since_epoch: float | None, now: float | None = None) -> str:
    """'42 s ago', '7 min ago', '3 h ago', '12 d ago'."""
    if seconds_since_epoch is None:
        return "never"
    delta = max(0.0, (now or time.time()) - seconds_since_epoch)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if delta >= size:
            return f"{delta / size:.0f} {unit} ago"
    return f"{delta:.0f} s ago"


def iso_age(text: str | None, now: float | None = None) -> str:
    if not text:
        return "never"
    try:
        return age(datetime.fromisoformat(text).timestamp(), now)
    except ValueError:
        return text
