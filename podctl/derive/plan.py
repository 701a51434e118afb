"""`podctl plan`: what the site declares and what podctl derives from it."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from podctl.core.console import styled
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Site
from podctl.derive.facts import Facts, fabric_summary


def plan_summary(site: Site, facts: Facts | None = None) -> dict[str, object]:
    facts = facts or Facts(site)
    profiles = Counter(n.profile for n in site.nodes)
    gpus = sum(site.profiles[p].gpus.count * c for p, c in profiles.items() if site.profiles[p].gpus)
    return {
        "site": site.name,
        "source": site.source,
        "nodes": {
            "total": len(site.nodes),
            "gpus": gpus,
            "groups": [
                {
                    "group": g.name,
                    "hosts": g.hostlist,
                    "count": len(g.hosts),
                    "profile": g.profile,
                    "roles": sorted(r.value for r in g.roles),
                }
                for g in site.groups
            ],
            "by_profile": dict(sorted(profiles.items())),
        },
        "management": {"cidr": str(site.management.cidr), "domain": site.management.domain},
        "ipoib": [str(n) for n in site.ipoib.rails] if site.ipoib else [],
        "fabrics": {
            name: fabric_summary(f, facts.plans[name], facts.routing[name]) for name, f in site.fabrics.items()
        },
        "storage": [
            {
                "name": s.name,
                "type": s.type,
                "source": f"{s.server}:{s.export}",
                "mountpoint": s.mountpoint,
                "clients": len(s.clients),
            }
            for s in site.storage
        ],
        "slurm": (
            {
                "cluster": site.slurm.cluster_name,
                "controllers": fold_hostlist(site.slurm.controllers),
                "accounting": site.slurm.accounting,
                "policy": (
                    {
                        "accounts": len(site.slurm.policy.accounts),
                        "users": len(site.slurm.policy.users),
                        "qos": len(site.slurm.policy.qos),
                    }
                    if site.slurm.policy
                    else None
                ),
                "partitions": {p.name: len(p.nodes) for p in site.slurm.partitions},
                "topology_switches": facts.slurm_topology_conf.count("SwitchName="),
            }
            if site.slurm
            else None
        ),
        "monitoring": (
            {
                "prometheus": site.monitoring.prometheus_host,
                "targets": {k: len(v) for k, v in facts.scrape_targets.items()},
            }
            if site.monitoring
            else None
        ),
        "stages": facts.stage_targets(),
    }


def print_plan(summary: dict, console: Console) -> None:
    nodes = summary["nodes"]
    console.print(
        styled(
            (f"site {summary['site']}", "bold"), f" ({summary['source']}): {nodes['total']} nodes, {nodes['gpus']} GPUs"
        )
    )
    groups = Table(title="Node groups", title_justify="left")
    for col in ("group", "hosts", "count", "profile", "roles"):
        groups.add_column(col)
    for g in nodes["groups"]:
        groups.add_row(g["group"], g["hosts"], str(g["count"]), g["profile"], ", ".join(g["roles"]))
    console.print(groups)

    for name, f in summary["fabrics"].items():
        t = Table(
            title=f"{name} fabric: {f['rate']}, {f['switch']}, {f['tiers']} tiers, {f['rails']} rails, "
            f"{f['scalable_units']} scalable unit(s), oversubscription {f['oversubscription']}:1",
            title_justify="left",
        )
        t.add_column("tier")
        t.add_column("switches", justify="right")
        t.add_column("cables below", justify="right")
        below = {"leaf": "node-leaf", "spine": "leaf-spine", "core": "spine-core"}
        for tier in ("leaf", "spine", "core"):
            count = f["switches"].get(tier, 0)
            if count:
                t.add_row(tier, str(count), str(f["cables"].get(below[tier], 0)))
        t.add_row("total", str(sum(f["switches"].values())), str(sum(f["cables"].values())), style="bold")
        console.print(t)
        managers = ", ".join(
            f"{host} (priority {priority}{', master' if i == 0 else ''})"
            for i, (host, priority) in enumerate(f["sm_priorities"].items())
        )
        managers = "external (UFM or a switch's subnet manager)" if f["external_sm"] else managers
        console.print(f"  subnet managers: {managers or '(none)'}; routing engine {f['routing_engine']}")
        advice = f["routing_advice"]
        if advice["engine"] == f["routing_engine"]:
            console.print(f"  routing: {advice['engine']}, because {advice['reason']}")
        elif advice["engine"] == "ftree":
            # Another engine on a tree ftree accepts is the site's choice, not a problem.
            console.print(
                f"  routing: {f['routing_engine']}, the site's choice; ftree would do too: {advice['reason']}"
            )
        else:
            console.print(
                styled(
                    (f"  routing: the plan calls for {advice['engine']}, not {f['routing_engine']}", "yellow"),
                    f", because {advice['reason']}",
                )
            )
    if summary["ipoib"]:
        console.print(f"IPoIB rails: {', '.join(summary['ipoib'])}")
    if summary["slurm"]:
        s = summary["slurm"]
        parts = ", ".join(f"{k} ({v} nodes)" for k, v in s["partitions"].items())
        console.print(
            f"Slurm cluster {s['cluster']}: controllers {s['controllers']}, accounting "
            f"{'on' if s['accounting'] else 'off'}"
            + (
                f" with a policy of {s['policy']['accounts']} account(s), {s['policy']['users']} user(s), "
                f"{s['policy']['qos']} QoS"
                if s["policy"]
                else ""
            )
            + f", partitions {parts}, "
            f"{s['topology_switches']} switches in topology.conf"
        )
    stages = Table(title="Deploy stages", title_justify="left")
    stages.add_column("stage")
    stages.add_column("configures")
    stages.add_column("where")
    for stage, items in summary["stages"].items():
        for i, item in enumerate(items):
            stages.add_row(stage if i == 0 else "", item["what"], item["where"])
        if not items:
            stages.add_row(stage, "(nothing declared)", "")
    console.print(stages)
