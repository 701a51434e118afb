"""The site model from data the schema accepted: every section built, every semantic error reported.

Builder is split by subject, a module each: NodeSections (profiles, networks, node groups),
FabricSections (fabrics, IPoIB), StorageSection, SlurmSection (with its health gate),
MonitoringSection and ValidationSection; this module holds what they share (host lists) and the
order the sections are built in.
"""

from __future__ import annotations

from podctl.core import hostlist as hostlists
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Node, Site
from podctl.core.suggest import did_you_mean
from podctl.core.yamlsource import PathKey
from podctl.derive.sitefile.diagnostics import Reporter
from podctl.derive.sitefile.fabrics import FabricSections
from podctl.derive.sitefile.monitoring import MonitoringSection
from podctl.derive.sitefile.nodes import NodeSections
from podctl.derive.sitefile.slurm import SlurmSection
from podctl.derive.sitefile.storage import StorageSection
from podctl.derive.sitefile.validation import ValidationSection


class Builder(NodeSections, FabricSections, StorageSection, SlurmSection, MonitoringSection, ValidationSection):
    def __init__(self, data: dict, report: Reporter) -> None:
        self.data = data
        self.report = report
        self.nodes: list[Node] = []
        self.by_name: dict[str, Node] = {}

    # -- helpers -------------------------------------------------------------------

    def hostlist(self, path: PathKey, text: str, in_order: bool = False) -> tuple[str, ...]:
        """The hosts of a hostlist: sorted, or with `in_order` as written (hostlists.expand_in_order)."""
        try:
            hosts = hostlists.expand_in_order(text) if in_order else hostlists.expand(text)
        except hostlists.HostlistError as exc:
            self.report.error(
                path,
                f"invalid hostlist {text!r}: {exc}",
                "use Slurm syntax such as dgx[001-032,040] or node[01-03]",
                code="hostlist",
            )
            return ()
        # A host name becomes a file name (host_vars/HOST.yml), an Ansible host and a Slurm
        # NodeName: `..` would write outside the inventory, `a.b` is a domain, not a host.
        bad = [h for h in hosts if not hostlists.is_hostname(h)]
        if bad:
            shown = ", ".join(repr(h) for h in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            self.report.error(
                path,
                f"hostlist {text!r} names {shown}: not a host name",
                "a host name is one RFC 1123 label: letters, digits and hyphens, not starting or ending "
                f"with a hyphen, at most {hostlists.HOSTNAME_MAX} characters (the domain goes under "
                "networks.management.domain)",
                code="hostname",
            )
            return tuple(h for h in hosts if hostlists.is_hostname(h))
        return hosts

    def site_hosts(self, path: PathKey, text: str, what: str, in_order: bool = False) -> tuple[str, ...]:
        """Expand a hostlist whose every host must be a node of this site."""
        hosts = self.hostlist(path, text, in_order)
        unknown = [h for h in hosts if h not in self.by_name]
        if unknown:
            folded = fold_hostlist(unknown)
            hint = did_you_mean(unknown[0], self.by_name) if len(unknown) == 1 else None
            self.report.error(
                path,
                f"{what}names node(s) not in this site: {folded}",
                hint or "declare them under `nodes` or fix the hostlist",
                code="unknown-node",
            )
        return tuple(h for h in hosts if h in self.by_name)

    def one_host(self, path: PathKey, name: str, what: str) -> str:
        if name not in self.by_name:
            self.report.error(
                path,
                f"{what} {name!r} is not a node of this site",
                did_you_mean(name, self.by_name) or "name one of the hosts under `nodes`",
                code="unknown-node",
            )
        return name

    # -- the whole site ------------------------------------------------------------

    def build(self, file: str) -> Site:
        d = self.data
        meta = d["metadata"]
        profiles = self.profiles()
        management = self.management()
        groups = self.groups(profiles, management)
        fabrics = self.fabrics(profiles)
        ipoib = self.ipoib(management, fabrics.get("compute"))
        storage = self.storage()
        slurm = self.slurm(meta["name"], storage, profiles)
        monitoring = self.monitoring(management, file)
        validation = self.validation(profiles, storage, file)
        self.name_and_time_servers(management)
        site = Site(
            name=meta["name"],
            description=meta.get("description", ""),
            source=file,
            profiles=profiles,
            groups=groups,
            nodes=tuple(self.nodes),
            management=management,
            ipoib=ipoib,
            fabrics=fabrics,
            storage=storage,
            slurm=slurm,
            monitoring=monitoring,
            validation=validation,
        )
        return site
