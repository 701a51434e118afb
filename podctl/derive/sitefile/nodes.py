"""Building the site's nodes: profiles, the management network, node groups and their addresses."""

from __future__ import annotations

import ipaddress

from podctl.core import platforms
from podctl.core.model import (
    ManagementNetwork,
    Node,
    NodeGroup,
    Platform,
    Profile,
    Role,
)
from podctl.core.suggest import did_you_mean
from podctl.core.yamlsource import PathKey, format_path
from podctl.derive.sitefile.profiles import builtin_profiles, make_profile, profile_problems
from podctl.derive.sitefile.values import address_problem, written_as_address


class NodeSections:
    """The node half of Builder (see build.py): it keeps the nodes it builds in self.nodes and self.by_name."""

    def profiles(self) -> dict[str, Profile]:
        profiles = dict(builtin_profiles())
        for name, body in self.data.get("profiles", {}).items():
            if name in profiles:
                self.report.error(
                    ("profiles", name),
                    f"profile {name!r} is built in and cannot be redefined",
                    "give your profile another name, or override figures under validation.thresholds",
                    code="duplicate",
                    key=True,
                )
                continue
            for path, message, hint, code in profile_problems(body):
                self.report.error(("profiles", name) + path, message, hint, code=code)
            if body.get("emulated"):
                self.report.warning(
                    ("profiles", name, "emulated"),
                    "emulated: true only tells validation to expect no GPUs or HCAs on these nodes; it does not "
                    "turn off host-key checking or Slurm's cgroup limits, which only a pod `podctl sim up` made "
                    "goes without",
                    "leave it out for real hardware; for a simulated pod use the built-in `sim` profile",
                    code="emulated",
                )
            profiles[name] = make_profile(name, body, builtin=False)
        return profiles

    def management(self) -> ManagementNetwork:
        m = self.data["networks"]["management"]
        path = ("networks", "management")
        cidr = self.network(path + ("cidr",), m["cidr"]) or ipaddress.IPv4Network("0.0.0.0/32")
        gateway = None
        if "gateway" in m:
            gateway = self.address(path + ("gateway",), m["gateway"])
            if gateway is not None and gateway not in cidr:
                self.report.error(
                    path + ("gateway",),
                    f"gateway {gateway} is outside the management network {cidr}",
                    code="address-range",
                )
        return ManagementNetwork(
            cidr=cidr,
            gateway=gateway,
            domain=m.get("domain", "pod.internal"),
            dns=tuple(m.get("dns", [])),
            ntp=tuple(m.get("ntp", [])),
        )

    def network(self, path: PathKey, text: str) -> ipaddress.IPv4Network | None:
        try:
            return ipaddress.IPv4Network(text, strict=True)
        except ipaddress.NetmaskValueError as exc:
            self.report.error(path, f"invalid network {text!r}: {exc}", code="network")
        except ValueError as exc:
            hint = None
            try:
                hint = f"did you mean {ipaddress.IPv4Network(text, strict=False)}?"
            except ValueError:
                pass
            self.report.error(path, f"invalid network {text!r}: {exc}", hint, code="network")
        return None

    def address(self, path: PathKey, text: str) -> ipaddress.IPv4Address | None:
        try:
            return ipaddress.IPv4Address(text)
        except ValueError as exc:
            self.report.error(path, f"invalid address {text!r}: {exc}", code="address")
            return None

    def groups(self, profiles: dict[str, Profile], mgmt: ManagementNetwork) -> tuple[NodeGroup, ...]:
        groups: list[NodeGroup] = []
        seen_groups: dict[str, int] = {}
        host_origin: dict[str, tuple[str, int]] = {}  # lower-case name -> (name, group index)
        addr_origin: dict[ipaddress.IPv4Address, tuple[PathKey, str]] = {}
        reserved = {mgmt.cidr.network_address, mgmt.cidr.broadcast_address}
        site_platform = self.platform(("os",), self.data["os"]) if "os" in self.data else platforms.DEFAULT
        for i, g in enumerate(self.data["nodes"]):
            path: PathKey = ("nodes", i)
            name = g["group"]
            if name in seen_groups:
                self.report.error(
                    path + ("group",),
                    f"group name {name!r} is already used by nodes[{seen_groups[name]}]",
                    "group names become Ansible groups and must be unique",
                    code="duplicate",
                )
            seen_groups.setdefault(name, i)
            if name in ("all", "ungrouped") or name.startswith("role_"):
                self.report.error(
                    path + ("group",),
                    f"group name {name!r} is reserved",
                    "Ansible owns `all` and `ungrouped`; podctl names its role groups `role_*`",
                    code="reserved",
                )
            hosts = self.hostlist(path + ("hosts",), g["hosts"])
            if g["profile"] not in profiles:
                self.report.error(
                    path + ("profile",),
                    f"unknown profile {g['profile']!r}",
                    did_you_mean(g["profile"], profiles)
                    or f"built-in profiles: {', '.join(sorted(builtin_profiles()))}; or define it under `profiles`",
                    code="unknown-profile",
                )
            roles = frozenset(Role(r) for r in g["roles"])
            platform = self.platform(path + ("os",), g["os"]) if "os" in g else site_platform
            addresses = self.group_addresses(path, g, hosts)
            for k, host in enumerate(hosts):
                # DNS compares names without case (RFC 4343): node01 and NODE01 are one host.
                if host.lower() in host_origin:
                    first, at = host_origin[host.lower()]
                    self.report.error(
                        path + ("hosts",),
                        f"host {host} is already declared in nodes[{at}]"
                        + (f" as {first} (host names are not case-sensitive)" if first != host else ""),
                        "each host belongs to exactly one group",
                        code="duplicate-host",
                    )
                    continue
                host_origin[host.lower()] = (host, i)
                addr = addresses[k] if k < len(addresses) else None
                if addr is None:
                    continue
                apath = path + (("addresses", k) if "addresses" in g else ("address",))
                if addr not in mgmt.cidr:
                    self.report.error(
                        apath,
                        f"address {addr} of {host} is outside the management network {mgmt.cidr}",
                        f"the group's {len(hosts)} host(s) need consecutive free addresses inside {mgmt.cidr}",
                        code="address-range",
                    )
                elif addr in reserved:
                    self.report.error(
                        apath,
                        f"address {addr} of {host} is the network or broadcast address of {mgmt.cidr}",
                        code="address-range",
                    )
                elif mgmt.gateway is not None and addr == mgmt.gateway:
                    self.report.error(
                        apath, f"address {addr} of {host} is the gateway's address", code="address-collision"
                    )
                if addr in addr_origin:
                    other_path, other = addr_origin[addr]
                    self.report.error(
                        apath,
                        f"address {addr} of {host} is already used by {other} ({format_path(other_path)})",
                        "give each node its own address",
                        code="address-collision",
                    )
                else:
                    addr_origin[addr] = (apath, host)
                node = Node(
                    hostname=host, group=name, profile=g["profile"], roles=roles, address=addr, platform=platform
                )
                self.nodes.append(node)
                self.by_name[host] = node
            groups.append(
                NodeGroup(
                    name=name, hostlist=g["hosts"], hosts=hosts, profile=g["profile"], roles=roles, platform=platform
                )
            )
        return tuple(groups)

    def platform(self, path: PathKey, body: dict) -> Platform:
        """The schema allows only supported pairs; a release written as a number (13) is the string "13"."""
        found = platforms.find(body.get("distribution", "debian"), str(body.get("release", platforms.DEFAULT.release)))
        if found is None:
            self.report.error(
                path,
                f"podctl does not support {body.get('distribution', 'debian')} {body.get('release')}",
                f"supported: {platforms.supported_text()} (docs/platforms.md)",
                code="platform",
            )
            return platforms.DEFAULT
        return found

    def group_addresses(self, path: PathKey, g: dict, hosts: tuple[str, ...]) -> list[ipaddress.IPv4Address | None]:
        if "addresses" in g:
            out = [self.address(path + ("addresses", k), a) for k, a in enumerate(g["addresses"])]
            if len(out) != len(hosts):
                self.report.error(
                    path + ("addresses",),
                    f"{len(out)} address(es) for {len(hosts)} host(s) in {g['hosts']!r}",
                    "give one address per host, in hostlist order, or a start `address`",
                    code="address-count",
                )
            return out
        start = self.address(path + ("address",), g["address"])
        if start is None:
            return []
        out = []
        for k in range(len(hosts)):
            try:
                out.append(start + k)
            except ipaddress.AddressValueError:
                self.report.error(
                    path + ("address",),
                    f"{len(hosts)} consecutive addresses from {start} run past 255.255.255.255",
                    code="address-range",
                )
                break
        return out

    def name_and_time_servers(self, mgmt: ManagementNetwork) -> None:
        for k, server in enumerate(mgmt.dns):
            if problem := address_problem(server):
                self.report.error(
                    ("networks", "management", "dns", k),
                    f"DNS server {server!r} is not a valid address: {problem}",
                    code="address",
                )
        for k, server in enumerate(mgmt.ntp):
            if problem := address_problem(server):
                self.report.error(
                    ("networks", "management", "ntp", k),
                    f"NTP server {server!r} is not a valid address: {problem}",
                    code="address",
                )
                continue
            if not written_as_address(server) and server not in self.by_name and "." not in server:
                self.report.error(
                    ("networks", "management", "ntp", k),
                    f"NTP server {server!r} is neither a node of this site, an address, nor a DNS name",
                    did_you_mean(server, self.by_name),
                    code="unknown-node",
                )
