"""Derived facts: everything the roles need that follows from the site model.

Roles read these from the rendered inventory instead of re-deriving them from
gathered facts, so `--limit` and adding nodes behave. Pure functions of the
model; the fabric plan is computed once per fabric and shared.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property, lru_cache

from podctl.core.assets import STAGES
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Fabric, HCAs, Node, Profile, Role, Site, hca_name
from podctl.core.redact import redact_urls
from podctl.derive.topology import (
    FabricPlan,
    RoutingAdvice,
    plan_fabric,
    root_switches,
    routing_advice,
    slurm_topology_conf,
)

# The check stage plans each fabric to find infeasible ones; plan, inventory and the
# facts reuse that plan instead of computing it again.
cached_plan = lru_cache(maxsize=8)(plan_fabric)

# Slurm drains a node whose RealMemory exceeds what it finds; leave room for the OS.
SLURM_MEMORY_FRACTION = 0.9

# The ports of podctl's monitoring. The monitoring role's defaults are the same; its preflight
# checks the exporters' against the scrape targets derived here.
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
EXPORTER_PORTS = {"node": 9100, "slurm": 9341, "dcgm": 9400}
# On the Prometheus host: GETs a path of Prometheus or Alertmanager behind their login, the password
# on its standard input (the monitoring role installs it; podctl status runs it over SSH).
MONITORING_QUERY_PROGRAM = "/usr/local/lib/podctl/podctl-monitoring-get"
_DURATION_UNITS_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_s(text: str) -> float:
    """Seconds of a Prometheus duration as the schema allows it (one number and unit: 15s, 500ms, 1m)."""
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(number) * _DURATION_UNITS_S[text[len(number) :]]


def gres_lines(cores: tuple[str, ...], gpus: int) -> list[dict[str, str]]:
    """gres.conf's File= and Cores= for a node's GPUs: consecutive GPUs next to the same cores share a
    line (/dev/nvidia[0-3] Cores=0-55); without cores, one line for all of them."""
    cores = cores or ("",) * gpus  # no cores: every GPU next to the same (none), one line
    lines: list[dict[str, str]] = []
    start = 0
    for k in range(1, gpus + 1):
        if k < gpus and cores[k] == cores[start]:
            continue
        lines.append({"file": _nvidia_devices(start, k - 1), "cores": cores[start]})
        start = k
    return lines


def _nvidia_devices(first: int, last: int) -> str:
    return f"/dev/nvidia{first}" if first == last else f"/dev/nvidia[{first}-{last}]"


@dataclass(frozen=True)
class MonitoringWeb:
    """How Prometheus and Alertmanager are reached on the Prometheus host, behind their login."""

    listen_address: str  # what both bind: the host's management address, or 127.0.0.1
    host: str  # what clients put in their URLs: that address, or the name the site's certificate carries
    scheme: str  # https with the site's certificate, else http

    def url(self, port: int, path: str) -> str:
        return f"{self.scheme}://{self.host}:{port}{path}"


def hcas_for(profile: Profile, fabric: str) -> HCAs:
    """The HCAs of `profile` that a fabric named `fabric` cables: compute_hcas for "compute", else storage_hcas."""
    return profile.compute_hcas if fabric == "compute" else profile.storage_hcas


def hca_names(site: Site, fabric: str) -> dict[str, tuple[str, ...]]:
    """host -> its HCA names, rail 1 first, for every node attached to `fabric`."""
    return {host: hcas_for(site.profile_of(site.node(host)), fabric).names for host in site.fabrics[fabric].nodes}


@dataclass(frozen=True)
class RailAddress:
    rail: int  # 1-based, as cabled
    interface: str
    address: str  # a.b.c.d/prefix


class Facts:
    """The derived view of one site; computed lazily, each piece once."""

    def __init__(self, site: Site) -> None:
        self.site = site

    @cached_property
    def plans(self) -> dict[str, FabricPlan]:
        return {name: cached_plan(fabric) for name, fabric in self.site.fabrics.items()}

    @cached_property
    def routing(self) -> dict[str, RoutingAdvice]:
        """The OpenSM routing engine each fabric's plan calls for, and why."""
        return {name: routing_advice(plan) for name, plan in self.plans.items()}

    def routing_engine(self, name: str) -> str:
        """The engine OpenSM runs on fabric `name`: the site's choice, else what the plan calls for."""
        return self.site.fabrics[name].routing_engine or self.routing[name].engine

    def routing_roots(self, name: str) -> list[str]:
        """The switches OpenSM's updn must be given as roots (its root_guid_file, by their GUIDs) on
        fabric `name`, where it runs updn; left to find its own, updn picks others on a fat tree.
        Empty for the other engines (ftree finds the roots of the trees it accepts)."""
        if self.routing_engine(name) != "updn":
            return []
        return [s.name for s in root_switches(self.plans[name])]

    @cached_property
    def slurm_nodes(self) -> tuple[Node, ...]:
        return tuple(n for n in self.site.nodes if Role.COMPUTE in n.roles) if self.site.slurm else ()

    @cached_property
    def rail_addresses(self) -> dict[str, tuple[RailAddress, ...]]:
        site, out = self.site, {}
        compute = site.fabrics.get("compute")
        if compute is None or site.ipoib is None:
            return {}
        bases = [(int(subnet.network_address), subnet.prefixlen) for subnet in site.ipoib.rails]
        for position, host in enumerate(compute.nodes):
            # Integer arithmetic: building IPv4Interface objects dominated at 10,000 rails.
            out[host] = tuple(
                RailAddress(
                    rail=r + 1, interface=f"ib{r}", address=f"{ipaddress.IPv4Address(base + position + 1)}/{prefix}"
                )
                for r, (base, prefix) in enumerate(bases)
            )
        return out

    def hca_map(self, host: str) -> list[dict[str, object]]:
        """Where each of a node's HCAs is cabled, per fabric."""
        rows: list[dict[str, object]] = []
        for name, plan in self.plans.items():
            fabric = self.site.fabrics[name]
            if host not in self._attached(name):
                continue
            names = {host: hcas_for(self.site.profile_of(self.site.node(host)), name).names}
            for rail in range(1, fabric.rails + 1):
                port = plan.leaf_port(host, rail)
                rows.append(
                    {
                        "fabric": name,
                        "rail": rail,
                        "hca": hca_name(host, rail, names),
                        "switch": port.device,
                        "port": port.port,
                    }
                )
        return rows

    def _attached(self, fabric: str) -> frozenset[str]:
        return self._attached_sets[fabric]

    @cached_property
    def _attached_sets(self) -> dict[str, frozenset[str]]:
        return {name: frozenset(f.nodes) for name, f in self.site.fabrics.items()}

    # -- Slurm ------------------------------------------------------------------------

    @cached_property
    def slurm_node_lines(self) -> list[dict[str, object]]:
        """One NodeName line per (group) of compute nodes: same profile, same hardware."""
        site = self.site
        lines: list[dict[str, object]] = []
        for group in site.groups:
            hosts = [h for h in group.hosts if site.has_node(h) and Role.COMPUTE in site.node(h).roles]
            if not hosts:
                continue
            prof = site.profiles[group.profile]
            gpus = prof.gpus.count if prof.gpus and site.slurm and site.slurm.gres else 0
            lines.append(
                {
                    "names": fold_hostlist(hosts),
                    "cpus": prof.cpu_cores,
                    "sockets": prof.sockets,
                    "cores_per_socket": prof.cores_per_socket,
                    "threads_per_core": prof.threads_per_core,
                    "real_memory_mb": int(prof.memory_gib * 1024 * SLURM_MEMORY_FRACTION),
                    "gpus": gpus,
                    "gpu_type": prof.gpus.slurm_type if gpus and prof.gpus else "",
                    "gres": gres_lines(prof.gpus.cores if prof.gpus else (), gpus),
                }
            )
        return lines

    @cached_property
    def slurm_topology_conf(self) -> str:
        compute = self.plans.get("compute")
        if compute is None or not self.slurm_nodes:
            return ""
        # Hosts on the fabric that Slurm does not schedule (a head node on spare ports)
        # would be unknown nodes to slurmctld: leave them out of topology.conf.
        return slurm_topology_conf(compute, {n.hostname for n in self.slurm_nodes})

    # -- Monitoring -------------------------------------------------------------------

    @cached_property
    def scrape_targets(self) -> dict[str, list[str]]:
        mon = self.site.monitoring
        if mon is None:
            return {}
        targets: dict[str, list[str]] = {}
        port = EXPORTER_PORTS
        if "node" in mon.exporters:
            targets["node"] = [f"{n.hostname}:{port['node']}" for n in self.site.nodes]
        if "slurm" in mon.exporters and self.site.slurm:
            targets["slurm"] = [f"{h}:{port['slurm']}" for h in self.site.slurm.controllers[:1]]
        if "dcgm" in mon.exporters:
            gpu_nodes = [n for n in self.site.nodes if self.site.profile_of(n).gpus]
            targets["dcgm"] = [f"{n.hostname}:{port['dcgm']}" for n in gpu_nodes]
        return targets

    @cached_property
    def monitoring_web(self) -> MonitoringWeb | None:
        mon = self.site.monitoring
        if mon is None:
            return None
        if mon.listen == "localhost":
            address = "127.0.0.1"
        else:
            address = str(self.site.node(mon.prometheus_host).address)
        if mon.tls is not None:
            return MonitoringWeb(listen_address=address, host=mon.tls.server_name, scheme="https")
        return MonitoringWeb(listen_address=address, host=address, scheme="http")

    # -- Summary ----------------------------------------------------------------------

    def stage_targets(self) -> dict[str, list[dict[str, str]]]:
        """What each deploy stage will configure, and where."""
        site = self.site
        all_hosts = fold_hostlist([n.hostname for n in site.nodes])
        out: dict[str, list[dict[str, str]]] = {stage: [] for stage in STAGES}
        out["os"].append(
            {
                "what": "hostname, /etc/hosts, chrony, baseline packages, sysctl/limits, SSH hardening",
                "where": all_hosts,
            }
        )
        for name, fabric in site.fabrics.items():
            out["fabric"].append(
                {
                    "what": f"{name} fabric: rdma-core, IB diagnostics"
                    + (", IPoIB on " + str(fabric.rails) + " rails" if name == "compute" and site.ipoib else ""),
                    "where": fold_hostlist(list(fabric.nodes)),
                }
            )
            if fabric.subnet_managers:
                out["fabric"].append(
                    {
                        "what": f"{name} fabric: OpenSM, routing engine {self.routing_engine(name)}",
                        "where": fold_hostlist(list(fabric.subnet_managers)),
                    }
                )
        for mount in site.storage:
            out["storage"].append(
                {
                    "what": f"{mount.type} mount {mount.server}:{mount.export} on {mount.mountpoint}",
                    "where": fold_hostlist(list(mount.clients)),
                }
            )
        if site.slurm:
            s = site.slurm
            out["slurm"].append(
                {
                    "what": "munge, slurmctld" + (" + slurmdbd, MariaDB" if s.accounting else ""),
                    "where": fold_hostlist(list(s.controllers)),
                }
            )
            out["slurm"].append(
                {"what": "munge, slurmd", "where": fold_hostlist([n.hostname for n in self.slurm_nodes])}
            )
        if site.monitoring:
            m = site.monitoring
            web = self.monitoring_web
            out["monitoring"].append(
                {
                    "what": "Prometheus"
                    + (", Alertmanager with alert rules" if m.alert_rules else "")
                    + f" on {web.listen_address if web else '?'}, behind a login"
                    + (" over TLS" if m.tls else ""),
                    "where": m.prometheus_host,
                }
            )
            for exporter, targets in self.scrape_targets.items():
                out["monitoring"].append(
                    {
                        "what": f"{exporter} exporter, for the Prometheus host alone (nftables)",
                        "where": fold_hostlist([t.split(":")[0] for t in targets]),
                    }
                )
        compute = [n.hostname for n in site.nodes if Role.COMPUTE in n.roles]
        if compute:
            tools = site.validation.tools
            source = (
                f"wheels from {tools.wheels}"
                if tools.wheels
                else (redact_urls(str(tools.index_url or "")) or "the default index")
            )
            out["validation-tools"].append(
                {
                    "what": f"validation checks + {', '.join(tools.packages) or 'no packages'} in {tools.path}/venv "
                    f"(on each node, owned by root; {source})",
                    "where": fold_hostlist(compute),
                }
            )
        return out


# OpenSM's priority of a fabric's first subnet manager (opensm.conf's sm_priority, 0-15: the
# highest running one is master); each next one the site lists gets one less, down to 1.
MASTER_SM_PRIORITY = 14


def sm_priorities(fabric: Fabric) -> dict[str, int]:
    """host -> its OpenSM priority on `fabric`, in the order the site lists them: master first."""
    return {host: max(1, MASTER_SM_PRIORITY - i) for i, host in enumerate(fabric.subnet_managers)}


def fabric_summary(fabric: Fabric, plan: FabricPlan, advice: RoutingAdvice) -> dict[str, object]:
    counts = plan.counts()
    return {
        "rate": fabric.rate,
        "switch": f"{fabric.switch_model} ({fabric.radix} ports)",
        "tiers": plan.tiers,
        "rails": fabric.rails,
        "nodes": len(fabric.nodes),
        "scalable_units": len(plan.scalable_units),
        "switches": counts["switches"],
        "cables": counts["cables"],
        "oversubscription": round(fabric.oversubscription, 3),
        "subnet_managers": fold_hostlist(list(fabric.subnet_managers)),
        "sm_priorities": sm_priorities(fabric),
        "external_sm": fabric.external_sm,
        # What OpenSM will run (the site's choice, else the plan's), and what the plan calls for.
        "routing_engine": fabric.routing_engine or advice.engine,
        "routing_advice": {"engine": advice.engine, "reason": advice.reason},
    }
