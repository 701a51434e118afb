"""Building what runs on the nodes: storage, Slurm (with its health gate), monitoring and validation settings."""

from __future__ import annotations

import os.path
import posixpath
from pathlib import Path

from .. import platforms
from ..hostlist import fold as fold_hostlist
from ..model import (
    VALIDATION_TOOLS_LOCAL_PATH,
    Exclusion,
    FreeSpace,
    HealthCheck,
    ManagementNetwork,
    Monitoring,
    MonitoringTls,
    Partition,
    Profile,
    Role,
    Secret,
    Slurm,
    StorageMount,
    ThresholdOverride,
    ValidationSettings,
    ValidationTools,
    mounts_shared_by,
)
from ..suggest import did_you_mean
from ..yamlsource import PathKey
from .certs import certificate_serves
from .values import UNTRUSTED_TREES, address_problem, system_path, under, written_as_address


class ServiceSections:
    """The service half of Builder (see build.py): it reads the nodes NodeSections built."""

    def storage(self) -> tuple[StorageMount, ...]:
        mounts: list[StorageMount] = []
        names: dict[str, int] = {}
        points: dict[str, int] = {}
        default_clients = tuple(n.hostname for n in self.nodes if Role.STORAGE_CLIENT in n.roles)
        for i, s in enumerate(self.data.get("storage", [])):
            path: PathKey = ("storage", i)
            if s["name"] in names:
                self.report.error(
                    path + ("name",),
                    f"storage name {s['name']!r} is already used by storage[{names[s['name']]}]",
                    code="duplicate",
                )
            names.setdefault(s["name"], i)
            mp = posixpath.normpath(s["mountpoint"])
            if mp in points:
                self.report.error(
                    path + ("mountpoint",),
                    f"mountpoint {mp} is already used by storage[{points[mp]}]",
                    code="duplicate",
                )
            points.setdefault(mp, i)
            if system := system_path(mp):
                self.report.error(
                    path + ("mountpoint",),
                    f"mounting shared storage on {mp} would hide or break the system's {system}",
                    f"mount it on a folder of its own, such as /shared/{s['name']}",
                    code="mountpoint",
                )
            self.storage_server(path + ("server",), s["server"], s["type"])
            if "clients" in s:
                clients = self.site_hosts(path + ("clients",), s["clients"], "")
            else:
                clients = default_clients
                if not clients:
                    self.report.warning(
                        path,
                        f"no node mounts {s['name']!r}: no node has the storage-client role",
                        "add the storage-client role to a group or set `clients`",
                        code="no-clients",
                    )
            mounts.append(
                StorageMount(
                    name=s["name"],
                    type=s["type"],
                    server=s["server"],
                    export=s.get("export") or s.get("filesystem", ""),
                    mountpoint=mp,
                    options=tuple(s.get("options", [])),
                    clients=clients,
                )
            )
        return tuple(mounts)

    def storage_server(self, path: PathKey, server: str, kind: str) -> None:
        host, at, _network = server.partition("@")
        if at and kind != "lustre":
            self.report.error(
                path,
                f"storage server {server!r}: only a Lustre server takes an LNet network (@...)",
                f"write the host alone: {host}",
                code="server",
            )
            return
        if problem := address_problem(host):
            self.report.error(path, f"storage server {server!r} is not a valid address: {problem}", code="address")
            return
        if written_as_address(host) or host in self.by_name or "." in host:
            return  # an address, a node of this site, or a DNS name outside it
        self.report.error(
            path,
            f"storage server {server!r} is neither a node of this site, an address, nor a DNS name",
            did_you_mean(host, self.by_name) or "name the server by address or fully qualified name",
            code="unknown-server",
        )

    def slurm(self, site_name: str, storage: tuple[StorageMount, ...]) -> Slurm | None:
        s = self.data.get("slurm")
        if s is None:
            return None
        path: PathKey = ("slurm",)
        if "controllers" in s:
            controllers = self.site_hosts(path + ("controllers",), s["controllers"], "")
        else:
            controllers = tuple(n.hostname for n in self.nodes if Role.CONTROLLER in n.roles)
        if not controllers:
            self.report.error(
                path,
                "Slurm needs a controller: no node has the controller role",
                "give a group the controller role or set slurm.controllers",
                code="no-controller",
            )
        partitions: list[Partition] = []
        seen: dict[str, int] = {}
        defaults = []
        for i, p in enumerate(s["partitions"]):
            ppath = path + ("partitions", i)
            if p["name"] in seen:
                self.report.error(
                    ppath + ("name",),
                    f"partition {p['name']!r} is already declared in partitions[{seen[p['name']]}]",
                    code="duplicate",
                )
            seen.setdefault(p["name"], i)
            nodes = self.site_hosts(ppath + ("nodes",), p["nodes"], f"partition {p['name']!r} ")
            not_compute = [h for h in nodes if Role.COMPUTE not in self.by_name[h].roles]
            if not_compute:
                self.report.warning(
                    ppath + ("nodes",),
                    f"partition {p['name']!r} includes node(s) without the compute role: {fold_hostlist(not_compute)}",
                    "slurmd runs only on compute nodes",
                    code="partition",
                )
            if p.get("default", False):
                defaults.append(i)
            partitions.append(
                Partition(
                    name=p["name"],
                    nodes=nodes,
                    hostlist=p["nodes"],
                    default=p.get("default", False),
                    max_time=p.get("max_time", "UNLIMITED"),
                )
            )
        if len(defaults) > 1:
            self.report.error(
                path + ("partitions", defaults[1], "default"),
                f"more than one default partition (partitions{defaults})",
                code="partition",
            )
        state = Slurm.state_save_location
        if len(controllers) > 1:
            shared = mounts_shared_by(storage, controllers)
            if shared:
                state = posixpath.join(shared[0].mountpoint, "slurm", "state")
            else:
                self.report.error(
                    path + (("controllers",) if "controllers" in s else ()),
                    f"{len(controllers)} Slurm controllers ({fold_hostlist(controllers)}) share no storage: failover "
                    "needs a StateSaveLocation every controller reads and writes",
                    "mount one storage entry on every controller (its clients, or the storage-client role), "
                    "or list one controller",
                    code="slurm-failover",
                )
        slurm = Slurm(
            cluster_name=s.get("cluster_name", site_name),
            controllers=controllers,
            accounting=s.get("accounting", False),
            partitions=tuple(partitions),
            gres=s.get("gres", True),
            select_type=s.get("select_type", "select/cons_tres"),
            state_save_location=state,
            health_check=self.health_check(path + ("health_check",), s.get("health_check", {}), storage),
            restart_batch=s.get("restart_batch", Slurm.restart_batch),
        )
        self.slurm_releases(slurm)
        self.slurm_select_type(controllers)
        return slurm

    def slurm_releases(self, slurm: Slurm) -> None:
        """Slurm's version rule over the Slurm each node's OS ships (podctl.platforms): a site that
        mixes releases across its Slurm daemons is refused where the newer or older OS is given."""
        controllers = slurm.controllers
        daemons = [platforms.SlurmDaemon(host, "slurmctld", self.by_name[host].platform.slurm) for host in controllers]
        if slurm.dbd_host is not None:
            daemons.append(
                platforms.SlurmDaemon(slurm.dbd_host, "slurmdbd", self.by_name[slurm.dbd_host].platform.slurm)
            )
        for node in self.nodes:
            if Role.COMPUTE in node.roles:
                daemons.append(platforms.SlurmDaemon(node.hostname, "slurmd", node.platform.slurm))
            elif Role.LOGIN in node.roles and node.hostname not in controllers:
                daemons.append(platforms.SlurmDaemon(node.hostname, "commands", node.platform.slurm))
        problems = platforms.slurm_rule_problems(daemons)
        if not problems:
            return
        # The YAML path: the `os` of the first group whose release differs from the controller's.
        primary = self.by_name[controllers[0]].platform if controllers else platforms.DEFAULT
        path: PathKey = ("os",) if "os" in self.data else ("nodes",)
        for i, g in enumerate(self.data["nodes"]):
            hosts = [n for n in self.nodes if n.group == g["group"]]
            if hosts and hosts[0].platform != primary:
                path = ("nodes", i, "os") if "os" in g else ("os",)
                break
        for problem in problems:
            self.report.error(
                path,
                f"Slurm's version rule: {problem}",
                "give every node that runs Slurm the same os release (each release ships one Slurm: "
                + ", ".join(f"{p.key} has {p.slurm}" for p in platforms.SUPPORTED)
                + ")",
                code="slurm-version",
            )

    def slurm_select_type(self, controllers: tuple[str, ...]) -> None:
        """A select plugin the controller's Slurm takes only in part: the slurm role renders what
        that Slurm takes instead (slurm.conf.j2), and says so here. (The schema offers no
        select/cons_res, which Slurm 23.11 removed; the role, used on its own, renders cons_tres.)"""
        select = self.data["slurm"].get("select_type", "select/cons_tres")
        if not controllers or controllers[0] not in self.by_name:
            return
        platform = self.by_name[controllers[0]].platform
        path: PathKey = ("slurm", "select_type")
        if select == "select/linear" and platform.slurm >= platforms.SlurmVersion(24, 5):
            self.report.warning(
                path,
                f"Slurm {platform.slurm} ({platform.key}) refuses select/linear with topology/tree: podctl "
                "renders topology/default, so jobs are placed without regard to the fabric's switches",
                "use select/cons_tres to keep topology-aware placement",
                code="slurm-select",
            )

    def health_check(self, path: PathKey, h: dict, storage: tuple[StorageMount, ...]) -> HealthCheck | None:
        if not h.get("enabled", True):
            return None
        states = tuple(h.get("node_states", ["any"]))
        if "any" in states and len(states) > 1 and set(states) - {"any", "cycle"}:
            self.report.error(
                path + ("node_states",),
                f"node_states {list(states)}: 'any' already covers every state",
                "use [any] (optionally with cycle), or list the states without any",
                code="health-check",
            )
        free = []
        for i, entry in enumerate(h.get("free_space", [{"path": "/tmp", "min_free_gib": 1}])):
            where = posixpath.normpath(entry["path"])
            if where in (e.path for e in free):
                self.report.error(path + ("free_space", i, "path"), f"{where} is listed twice", code="duplicate")
            mount = next((m for m in storage if under(where, m.mountpoint)), None)
            if mount is not None:
                self.report.error(
                    path + ("free_space", i, "path"),
                    f"{where} lies on shared storage {mount.name!r} ({mount.mountpoint}): one user filling it "
                    "would make the gate drain every node that mounts it",
                    "check free space only on each node's local folders (/tmp, /var/tmp, a local scratch); "
                    "watch shared storage with its own monitoring",
                    code="health-check",
                )
            free.append(FreeSpace(where, float(entry["min_free_gib"])))
        return HealthCheck(
            interval_s=h.get("interval", 300),
            node_states=states,
            timeout_s=h.get("timeout", 10),
            prolog=h.get("prolog", False),
            mount_timeout_s=float(h.get("mount_timeout", 3)),
            min_free_memory_gib=float(h.get("min_free_memory_gib", 1)),
            free_space=tuple(free),
            services=tuple(h.get("services", ())),
        )

    def monitoring(self, management: ManagementNetwork, file: str) -> Monitoring | None:
        m = self.data.get("monitoring")
        if m is None:
            return None
        host = self.one_host(("monitoring", "prometheus_host"), m["prometheus_host"], "monitoring host")
        listen = m.get("listen", "management")
        return Monitoring(
            prometheus_host=host,
            retention=m.get("retention", "15d"),
            scrape_interval=m.get("scrape_interval", "15s"),
            exporters=tuple(m.get("exporters", ["node", "slurm", "dcgm"])),
            alert_rules=m.get("alert_rules", True),
            listen=listen,
            tls=self.monitoring_tls(m["tls"], host, listen, management, file) if "tls" in m else None,
        )

    def monitoring_tls(
        self, t: dict, host: str, listen: str, management: ManagementNetwork, file: str
    ) -> MonitoringTls | None:
        """The site's certificate, if it serves the name Prometheus's clients will ask for."""
        path: PathKey = ("monitoring", "tls")
        # Relative to the site file's folder, as a person reading the file would expect.
        cert, key = (Path(os.path.abspath(Path(file).parent / t[k])) for k in ("cert", "key"))
        if listen == "localhost":
            names = ["localhost"]
        else:
            names = [f"{host}.{management.domain}", host] if management.domain else [host]
        served, problem = certificate_serves(cert, key, names)
        if served is None:
            self.report.error(
                path,
                f"{cert} with {key} cannot serve Prometheus as {' or '.join(names)}: {problem}",
                f"give a PEM certificate whose subject alternative names include {names[0]}, and its unencrypted key",
                code="tls",
            )
            return None
        return MonitoringTls(cert=cert, key=key, server_name=served)

    def validation(
        self, profiles: dict[str, Profile], storage: tuple[StorageMount, ...], file: str
    ) -> ValidationSettings:
        v = self.data.get("validation", {})
        thresholds: dict[str, dict[str, ThresholdOverride]] = {}
        for pname, figures in v.get("thresholds", {}).items():
            path: PathKey = ("validation", "thresholds", pname)
            prof = profiles.get(pname)
            if prof is None:
                self.report.error(
                    path, f"unknown profile {pname!r}", did_you_mean(pname, profiles), code="unknown-profile", key=True
                )
                continue
            known = [r.figure for r in prof.reference]
            for fig, override in figures.items():
                if fig not in known:
                    self.report.error(
                        path + (fig,),
                        f"profile {pname!r} has no reference figure {fig!r}",
                        did_you_mean(fig, known) or f"its figures: {', '.join(known) or 'none'}",
                        code="unknown-figure",
                        key=True,
                    )
                thresholds.setdefault(pname, {})[fig] = ThresholdOverride(
                    float(override["value"]) if "value" in override else None,
                    float(override["tolerance"]) if "tolerance" in override else None,
                )
        exclusions = []
        for i, e in enumerate(v.get("exclude", [])):
            hosts = self.site_hosts(("validation", "exclude", i, "hosts"), e["hosts"], "")
            exclusions.append(Exclusion(hosts=hosts, hostlist=e["hosts"], reason=e["reason"]))
        return ValidationSettings(
            thresholds=thresholds,
            exclude=tuple(exclusions),
            nccl_tests_path=self.nccl_tests_path(v, storage),
            nccl_tests=tuple(v.get("nccl_tests", ["all_reduce_perf"])),
            tools=self.validation_tools(v.get("tools", {}), profiles, storage, file),
        )

    def nccl_tests_path(self, v: dict, storage: tuple[StorageMount, ...]) -> str | None:
        if "nccl_tests_path" not in v:
            return None
        where = posixpath.normpath(v["nccl_tests_path"])
        if why := self.writable_by_others(where, storage):
            self.report.error(
                ("validation", "nccl_tests_path"),
                f"root runs the nccl-tests binaries on every compute node (through Slurm), and {where} {why}",
                "build nccl-tests into a folder on each compute node's local disk, owned by root, "
                "e.g. /opt/nccl-tests/build",
                code="untrusted-path",
            )
        return where

    def validation_tools(
        self, t: dict, profiles: dict[str, Profile], storage: tuple[StorageMount, ...], file: str
    ) -> ValidationTools:
        path: PathKey = ("validation", "tools")
        compute = [n for n in self.nodes if Role.COMPUTE in n.roles]
        where = posixpath.normpath(t["path"]) if "path" in t else VALIDATION_TOOLS_LOCAL_PATH
        if "path" in t:
            if why := self.writable_by_others(where, storage):
                self.report.error(
                    path + ("path",),
                    f"root runs the validation tools (the health gate, validate's checks), and {where} {why}",
                    f"install them on each compute node's local disk, owned by root, e.g. {VALIDATION_TOOLS_LOCAL_PATH}",
                    code="untrusted-path",
                )
            elif system_path(where):
                self.report.error(
                    path + ("path",),
                    f"installing the validation tools into {where} would mix them with the system's files",
                    f"use a folder of their own, e.g. {VALIDATION_TOOLS_LOCAL_PATH}",
                    code="path",
                )
        # Relative to the site file's folder, as a person reading the file would expect.
        wheels = Path(os.path.abspath(Path(file).parent / t["wheels"])) if "wheels" in t else None
        if wheels is not None and "index_url" in t:
            self.report.warning(
                path + ("index_url",),
                "index_url is not used: pip installs from the wheel folder with --no-index",
                "remove index_url, or wheels to install from the index",
                code="ignored",
            )
        # numpy: torch needs it for Tensor.numpy(), which burnin's bit-for-bit comparison uses.
        if "packages" in t:
            packages = tuple(t["packages"])
        elif any(profiles[n.profile].gpus for n in compute if n.profile in profiles):
            packages = ("torch", "numpy", "nvidia-ml-py")
        else:
            packages = ("torch", "numpy")
        index = t.get("index_url")
        if isinstance(index, dict):
            index = Secret(vault=index.get("vault"), file=index.get("file"))
        return ValidationTools(path=where, wheels=wheels, index_url=index, packages=packages)

    @staticmethod
    def writable_by_others(where: str, storage: tuple[StorageMount, ...]) -> str | None:
        """Why code at `where`, which root runs on the nodes, could be written by someone else:
        a world-writable temporary folder, users' homes, or shared storage (writable from every
        client, by root of any of them, or by the account squashed files belong to). None if not."""
        mount = next((m for m in storage if under(where, m.mountpoint)), None)
        if mount is not None:
            return (
                f"lies on shared storage {mount.name!r} ({mount.mountpoint}), which other hosts and their users write"
            )
        tmp = next((t for t in UNTRUSTED_TREES if under(where, t)), None)
        return f"lies under {tmp}, where every user may write" if tmp else None
