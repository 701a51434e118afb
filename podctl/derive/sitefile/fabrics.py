"""Building the fabrics: InfiniBand fabrics with their naming templates, and IPoIB over them."""

from __future__ import annotations

import ipaddress
import re

from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import (
    NAMING_PLACEHOLDERS,
    Fabric,
    HCAs,
    IPoIB,
    ManagementNetwork,
    Node,
    Profile,
    Role,
)
from podctl.core.yamlsource import PathKey


class FabricSections:
    """The fabric part of Builder (see build.py): InfiniBand fabrics, their naming and IPoIB; it
    reads the nodes NodeSections built."""

    def fabrics(self, profiles: dict[str, Profile]) -> dict[str, Fabric]:
        out: dict[str, Fabric] = {}
        for fname, f in self.data.get("fabrics", {}).items():
            path: PathKey = ("fabrics", fname)
            hca_attr = "compute_hcas" if fname == "compute" else "storage_hcas"

            def hcas_of(node: Node, hca_attr: str = hca_attr) -> HCAs | None:
                prof = profiles.get(node.profile)
                return getattr(prof, hca_attr) if prof else None

            if "nodes" in f:
                attached = self.site_hosts(path + ("nodes",), f["nodes"], "")
            else:
                attached = tuple(n.hostname for n in self.nodes if (h := hcas_of(n)) is not None and h.count > 0)
            if not attached:
                self.report.error(
                    path,
                    f"no node is attached to the {fname} fabric",
                    f"give nodes whose profile has {hca_attr}, or list them in fabrics.{fname}.nodes",
                    code="empty-fabric",
                )
            counts: dict[int, list[str]] = {}
            for host in attached:
                h = hcas_of(self.by_name[host])
                if h is not None:
                    counts.setdefault(h.count, []).append(host)
            rails = f.get("rails")
            if rails is None:
                rails = max(counts, key=lambda c: len(counts[c])) if counts else 1
            for count, hosts in sorted(counts.items()):
                if count != rails:
                    prof = self.by_name[hosts[0]].profile
                    self.report.error(
                        path + ("rails",) if "rails" in f else path,
                        f"{len(hosts)} node(s) ({fold_hostlist(hosts)}) have {count} {hca_attr.replace('_', ' ')} "
                        f"(profile {prof}) but the fabric has {rails} rail(s)",
                        "every attached node must have one HCA per rail: fix the profile, `rails`, or the fabric's `nodes`",
                        code="rails",
                    )
                rates = {getattr(profiles[self.by_name[h].profile], hca_attr).rate for h in hosts}
                for rate in sorted(r for r in rates if r and r != f["rate"]):
                    self.report.warning(
                        path + ("rate",),
                        f"fabric rate {f['rate']} differs from the HCA rate {rate} of profile(s) used here",
                        "links will train at the lower of the two rates",
                        code="rate",
                    )
            radix = f["switch"]["radix"]
            leaf = f.get("leaf", {"down_ports": radix // 2, "up_ports": radix - radix // 2})
            if leaf["down_ports"] + leaf["up_ports"] > radix:
                self.report.error(
                    path + ("leaf",),
                    f"leaf uses {leaf['down_ports']} + {leaf['up_ports']} ports but the switch has {radix}",
                    code="radix",
                )
            su = f.get("scalable_unit_size", leaf["down_ports"])
            if su > leaf["down_ports"]:
                self.report.error(
                    path + ("scalable_unit_size",),
                    f"{su} nodes per scalable unit, but a leaf switch has only {leaf['down_ports']} down-ports "
                    f"(radix {radix})",
                    f"use at most {leaf['down_ports']} nodes per unit, or a switch with more ports",
                    code="leaf-ports",
                )
            used = min(su, leaf["down_ports"], max(len(attached), 1))
            if used > leaf["up_ports"]:
                self.report.warning(
                    path + ("leaf",),
                    f"leaf switches are oversubscribed {used}:{leaf['up_ports']} "
                    f"({used / leaf['up_ports']:.2f}:1): not full bisection bandwidth",
                    "intended for cost, or give the leaf as many up-ports as nodes",
                    code="oversubscription",
                )
            external = f.get("subnet_managers") == "external"
            if external:
                sms: tuple[str, ...] = ()
            elif "subnet_managers" in f:
                # In the site's order: the first is master (podctl.derive.facts.sm_priorities).
                sms = self.site_hosts(path + ("subnet_managers",), f["subnet_managers"], "", in_order=True)
            else:
                sms = tuple(n.hostname for n in self.nodes if Role.SUBNET_MANAGER in n.roles)
                if not sms:
                    self.report.error(
                        path,
                        f"no subnet manager for the {fname} fabric: without one no port of it comes up",
                        "give a node with an HCA on it the subnet-manager role, list subnet_managers, or say "
                        "subnet_managers: external (UFM or a switch's subnet manager runs it)",
                        code="no-subnet-manager",
                    )
            # A subnet manager needs an HCA in the fabric, though management hosts usually sit on
            # spare switch ports outside the planned rails, so it need not be in `nodes`.
            no_hca = [h for h in sms if (hc := hcas_of(self.by_name[h])) is None or hc.count == 0]
            if no_hca:
                self.report.error(
                    path + ("subnet_managers",) if "subnet_managers" in f else path,
                    f"subnet manager(s) {fold_hostlist(no_hca)} have no {hca_attr.replace('_', ' ')} in their profile",
                    "OpenSM runs on a host with an HCA in the fabric it manages",
                    code="subnet-manager",
                )
            tiers = f.get("tiers", "auto")
            out[fname] = Fabric(
                name=fname,
                type=f.get("type", "infiniband"),
                rate=f["rate"],
                switch_model=f["switch"]["model"],
                radix=radix,
                scalable_unit_size=su,
                tiers=None if tiers == "auto" else int(tiers),
                leaf_down_ports=leaf["down_ports"],
                leaf_up_ports=leaf["up_ports"],
                rails=rails,
                nodes=attached,
                subnet_managers=sms,
                external_sm=external,
                routing_engine=f.get("routing_engine"),
                switch_prefix=f.get("switch_prefix", "ib" if fname == "compute" else "st"),
                naming_switch=tuple(f.get("naming", {}).get("switch", [])),
                naming_hca=tuple(f.get("naming", {}).get("hca", [])),
            )
            self.naming(path + ("naming",), f.get("naming", {}))
        return out

    def naming(self, path: PathKey, naming: dict) -> None:
        for kind in ("switch", "hca"):
            for i, template in enumerate(naming.get(kind, [])):
                unknown = [p for p in re.findall(r"\{([^{}]*)\}", template) if p not in NAMING_PLACEHOLDERS]
                if unknown:
                    known = ", ".join("{" + p + "}" for p in NAMING_PLACEHOLDERS)
                    self.report.error(
                        path + (kind, i),
                        f"unknown placeholder {{{unknown[0]}}} in {template!r}",
                        f"placeholders: {known}; the rest of a template is literal text",
                        code="naming",
                    )
                elif kind == "hca" and "{hca}" in template and "{n}" in template:
                    self.report.error(
                        path + (kind, i),
                        f"{template!r} gives both {{hca}} and {{n}}",
                        "an HCA is named either way, not both",
                        code="naming",
                    )

    def ipoib(self, mgmt: ManagementNetwork, compute: Fabric | None) -> IPoIB | None:
        spec = self.data["networks"].get("ipoib")
        if spec is None:
            return None
        path: PathKey = ("networks", "ipoib")
        if compute is None:
            self.report.error(
                path,
                "IPoIB subnets are declared but there is no compute fabric",
                "declare fabrics.compute, or remove networks.ipoib",
                code="ipoib",
            )
            return None
        rails_needed = compute.rails
        nets: list[ipaddress.IPv4Network] = []
        if "rails" in spec:
            for k, text in enumerate(spec["rails"]):
                net = self.network(path + ("rails", k), text)
                if net is not None:
                    nets.append(net)
            if len(spec["rails"]) != rails_needed:
                self.report.error(
                    path + ("rails",),
                    f"{len(spec['rails'])} IPoIB subnet(s) for {rails_needed} compute rail(s)",
                    "give one subnet per rail",
                    code="rails",
                )
        else:
            supernet = self.network(path + ("supernet",), spec["supernet"])
            if supernet is None:
                return None
            if spec["prefix"] < supernet.prefixlen:
                self.report.error(
                    path + ("prefix",), f"prefix /{spec['prefix']} is larger than the supernet {supernet}", code="ipoib"
                )
                return None
            available = 2 ** (spec["prefix"] - supernet.prefixlen)
            if available < rails_needed:
                self.report.error(
                    path + ("prefix",),
                    f"{supernet} holds {available} /{spec['prefix']} subnet(s), "
                    f"the compute fabric has {rails_needed} rails",
                    f"use a prefix of at most /{supernet.prefixlen + (rails_needed - 1).bit_length()} or a larger supernet",
                    code="ipoib",
                )
                return None
            subnets = supernet.subnets(new_prefix=spec["prefix"])
            nets = [next(subnets) for _ in range(rails_needed)]
        for k, net in enumerate(nets):
            where = path + ("rails", k) if "rails" in spec else path + ("supernet",)
            if net.num_addresses - 2 < len(compute.nodes):
                self.report.error(
                    where,
                    f"rail {k} subnet {net} has room for {max(net.num_addresses - 2, 0)} hosts, "
                    f"the compute fabric has {len(compute.nodes)} nodes",
                    "use larger subnets",
                    code="ipoib",
                )
            if net.overlaps(mgmt.cidr):
                self.report.error(
                    where, f"rail {k} subnet {net} overlaps the management network {mgmt.cidr}", code="ipoib"
                )
            for j in range(k):
                if net.overlaps(nets[j]):
                    self.report.error(where, f"rail {k} subnet {net} overlaps rail {j} subnet {nets[j]}", code="ipoib")
        return IPoIB(rails=tuple(nets), mtu=spec.get("mtu", 4092))
