"""Building Slurm: controllers, partitions, its state folder, the releases of its daemons and the health gate."""

from __future__ import annotations

import posixpath
import re

from podctl.core import platforms, slurmkeys
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import (
    FreeSpace,
    HealthCheck,
    Partition,
    Profile,
    Role,
    Slurm,
    StorageMount,
    mounts_shared_by,
)
from podctl.core.suggest import did_you_mean
from podctl.core.yamlsource import PathKey
from podctl.derive.sitefile.slurmpolicy import SlurmPolicySection
from podctl.derive.sitefile.values import under

# A GPU type in a TRES string (TRESBillingWeights=GRES/gpu:h100=2.0, MaxTRESPerUser=gres/gpu:h100=8).
GPU_TYPE_IN_TRES = re.compile(r"(?i)\bgres/gpu:([a-z0-9_]+)")


class SlurmSection(SlurmPolicySection):
    """The slurm section of Builder (see build.py): it reads the nodes NodeSections built and the storage."""

    def slurm(self, site_name: str, storage: tuple[StorageMount, ...], profiles: dict[str, Profile]) -> Slurm | None:
        s = self.data.get("slurm")
        if s is None:
            return None
        path: PathKey = ("slurm",)
        controllers = self.slurm_controllers(path, s)
        release = self.slurm_release(controllers)
        accounting = s.get("accounting", False)
        policy_path = path + ("accounting", "policy")
        slurm = Slurm(
            cluster_name=s.get("cluster_name", site_name),
            controllers=controllers,
            accounting=bool(accounting),
            partitions=self.slurm_partitions(path, s["partitions"], release),
            gres=s.get("gres", True),
            select_type=s.get("select_type", "select/cons_tres"),
            state_save_location=self.slurm_state_location(path, s, controllers, storage),
            health_check=self.health_check(path + ("health_check",), s.get("health_check", {}), storage),
            restart_batch=s.get("restart_batch", Slurm.restart_batch),
            config=self.slurm_settings(path + ("config",), s.get("config", {}), "slurm.conf", release),
            cgroup_config=self.slurm_settings(
                path + ("cgroup_config",), s.get("cgroup_config", {}), "cgroup.conf", release
            ),
            policy=self.slurm_policy(policy_path, accounting["policy"]) if isinstance(accounting, dict) else None,
        )
        if slurm.policy is not None:
            self.policy_partitions(path, slurm.partitions, slurm.policy)
            self.policy_preemption(policy_path + ("qos",), accounting["policy"].get("qos", []), slurm.config)
        self.slurm_releases(slurm)
        self.slurm_select_type(controllers)
        self.slurm_gpu_types(s, slurm, profiles)
        return slurm

    def slurm_controllers(self, path: PathKey, s: dict) -> tuple[str, ...]:
        """slurm.controllers, or the nodes with the controller role."""
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
        return controllers

    def slurm_release(self, controllers: tuple[str, ...]) -> platforms.SlurmVersion:
        """The Slurm the site's daemons run: the primary controller's (Slurm's version rule keeps
        the others within reach of it: slurm_releases)."""
        if controllers and controllers[0] in self.by_name:
            return self.by_name[controllers[0]].platform.slurm
        return platforms.DEFAULT.slurm

    def slurm_settings(
        self, path: PathKey, given: dict, where: str, release: platforms.SlurmVersion
    ) -> tuple[tuple[str, str], ...]:
        """A site's own Slurm settings (slurm.config, slurm.cgroup_config, a partition's options):
        each key one the release's Slurm knows (its own man page: podctl.core.slurmkeys) and podctl
        does not set itself, each value one setting on one line. Keys as the man page writes them."""
        known = slurmkeys.known_keys(str(release), where)
        ours = {key.lower(): (key, site_key) for key, site_key in slurmkeys.PODCTL_SETS[where].items()}
        file = slurmkeys.FILES[where]
        out: dict[str, tuple[str, str]] = {}
        for key, value in given.items():
            kpath = path + (key,)
            lower = str(key).lower()
            if lower in ours:
                name, site_key = ours[lower]
                self.report.error(
                    kpath,
                    f"podctl writes {name} in {file} itself" + (f", from {site_key}" if site_key else ""),
                    f"set {site_key} instead"
                    if site_key
                    else "a site cannot change it (docs/slurm.md lists what podctl sets, and why)",
                    code="slurm-setting",
                    key=True,
                )
                continue
            if lower not in known:
                elsewhere = [r for r in slurmkeys.releases() if lower in slurmkeys.known_keys(r, where)]
                self.report.error(
                    kpath,
                    f"Slurm {release} knows no {key!r} in {file}"
                    + (f" (Slurm {', '.join(elsewhere)} does: another release)" if elsewhere else ""),
                    did_you_mean(key, known.values())
                    or f"see the {slurmkeys.SOURCES[where][0]} man page of Slurm {release}",
                    code="slurm-setting",
                    key=True,
                )
                continue
            if lower in out:
                self.report.error(
                    kpath,
                    f"{key!r} is {out[lower][0]!r} already: Slurm reads keys without regard to case",
                    code="duplicate",
                    key=True,
                )
                continue
            text = slurmkeys.setting_value(value)
            problem = slurmkeys.value_problem(text)
            if problem:
                self.report.error(
                    kpath,
                    f"the value of {known[lower]} {problem}",
                    "give one value, with no whitespace, '#', backslash or quote (a list: comma-separated)",
                    code="slurm-setting",
                )
                continue
            out[lower] = (known[lower], text)
        return tuple(out.values())

    def slurm_partitions(
        self, path: PathKey, declared: list[dict], release: platforms.SlurmVersion
    ) -> tuple[Partition, ...]:
        """The partitions: each name once, nodes of this site (compute nodes, or a warning), one default at most."""
        partitions: list[Partition] = []
        seen: dict[str, int] = {}
        defaults = []
        for i, p in enumerate(declared):
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
                    options=self.slurm_settings(ppath + ("options",), p.get("options", {}), "partition", release),
                )
            )
        if len(defaults) > 1:
            self.report.error(
                path + ("partitions", defaults[1], "default"),
                f"more than one default partition (partitions{defaults})",
                code="partition",
            )
        return tuple(partitions)

    def slurm_state_location(
        self, path: PathKey, s: dict, controllers: tuple[str, ...], storage: tuple[StorageMount, ...]
    ) -> str:
        """StateSaveLocation: the controller's local folder, or with several controllers a folder on
        storage they all mount (failover needs one they all read and write)."""
        if len(controllers) <= 1:
            return Slurm.state_save_location
        shared = mounts_shared_by(storage, controllers)
        if shared:
            return posixpath.join(shared[0].mountpoint, "slurm", "state")
        self.report.error(
            path + (("controllers",) if "controllers" in s else ()),
            f"{len(controllers)} Slurm controllers ({fold_hostlist(controllers)}) share no storage: failover "
            "needs a StateSaveLocation every controller reads and writes",
            "mount one storage entry on every controller (its clients, or the storage-client role), "
            "or list one controller",
            code="slurm-failover",
        )
        return Slurm.state_save_location

    def slurm_releases(self, slurm: Slurm) -> None:
        """Slurm's version rule over the Slurm each node's OS ships (podctl.core.platforms): a site that
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

    def slurm_gpu_types(self, s: dict, slurm: Slurm, profiles: dict[str, Profile]) -> None:
        """A setting that names a GPU type (a TRES such as gres/gpu:h100) names one that some compute
        node offers (its profile's gpus.slurm_type), or Slurm would never match it."""
        offered = set()
        for node in self.nodes:
            gpus = profiles[node.profile].gpus if node.profile in profiles else None
            if Role.COMPUTE in node.roles and gpus is not None and slurm.gres:
                offered.add(gpus.slurm_type)
        settings: list[tuple[PathKey, object]] = [(("slurm", "config", k), v) for k, v in s.get("config", {}).items()]
        for i, p in enumerate(s.get("partitions", [])):
            settings += [(("slurm", "partitions", i, "options", k), v) for k, v in p.get("options", {}).items()]
        policy = s["accounting"].get("policy", {}) if isinstance(s.get("accounting"), dict) else {}
        for i, q in enumerate(policy.get("qos", [])):
            qpath = ("slurm", "accounting", "policy", "qos", i)
            settings += [
                (qpath + (k, t), t) for k in ("max_tres_per_user", "max_tres_per_job", "grp_tres") for t in q.get(k, {})
            ]
        for path, value in settings:
            if value == "gres/gpu" and not offered:
                self.report.error(
                    path,
                    "a GPU limit, but no compute node offers GPUs to Slurm: Slurm counts no gres/gpu here",
                    "remove the limit, or give the compute nodes a profile with GPUs (and slurm.gres: true)",
                    code="gpu-type",
                )
            for named in sorted({m.lower() for m in GPU_TYPE_IN_TRES.findall(slurmkeys.setting_value(value))}):
                if named not in offered:
                    self.report.error(
                        path,
                        f"GPU type {named!r} is offered by no compute node"
                        + (f" (they offer {', '.join(sorted(offered))})" if offered else " (none offers GPUs)"),
                        did_you_mean(named, offered) or "name a type of a compute node's profile (gpus.slurm_type)",
                        code="gpu-type",
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
