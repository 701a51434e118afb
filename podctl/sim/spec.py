"""From a site to the containers that stand in for it: pure functions, no I/O.

Everything `podctl sim up` passes to podman is decided here, so that it can
be read and tested without podman: names, labels, addresses, the hosts every
node can resolve, and the folders that stand in for shared filesystems.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from podctl.core.hostlist import HostlistError, expand
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.model import Site
from podctl.core.platforms import Platform
from podctl.sim.errors import SimError
from podctl.sim.podman import (
    LABEL_ADDRESS,
    LABEL_NODE,
    LABEL_PLATFORM,
    LABEL_POD,
    LABEL_SITE,
    LABEL_SPEC,
    container_name,
    network_name,
)

# podman's rule for container and network names.
_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")

# Beyond podman's defaults: sshd writes audit records at login, ping needs
# raw sockets, slurmd/munge and benchmarks adjust priorities, and the
# monitoring role loads its nftables rules (NET_ADMIN, in the node's own
# network namespace).  Faults are still injected from the host, never from
# inside a node.
EXTRA_CAPABILITIES: tuple[str, ...] = ("AUDIT_WRITE", "NET_ADMIN", "NET_RAW", "SYS_NICE")

# podman's own defaults exceed this machine's hard limits (docs/environment.md);
# passing them explicitly keeps the sim working without containers.conf.
ULIMITS: tuple[str, ...] = ("nofile=1024:1024", "nproc=4096:4096")


@dataclass(frozen=True)
class MountSpec:
    name: str
    host_dir: Path
    mountpoint: str
    clients: tuple[str, ...]


@dataclass(frozen=True)
class NodeSpec:
    hostname: str
    address: ipaddress.IPv4Address
    container: str
    platform: Platform  # which node image it starts from


@dataclass(frozen=True)
class PodSpec:
    pod: str
    site_path: str
    network: str
    subnet: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address | None
    domain: str
    nodes: tuple[NodeSpec, ...]  # the nodes to bring up (all, or the --nodes subset)
    all_nodes: tuple[NodeSpec, ...]  # every node of the site
    mounts: tuple[MountSpec, ...]
    subset: bool

    @property
    def labels(self) -> dict[str, str]:
        return {LABEL_POD: self.pod, LABEL_SITE: self.site_path}

    @property
    def platforms(self) -> tuple[Platform, ...]:
        """The releases of the nodes to bring up, each once, in site order: the images they need."""
        return tuple(dict.fromkeys(n.platform for n in self.nodes))


def validate_pod_name(name: str) -> str:
    if not _NAME.match(name):
        raise SimError(
            f"site name {name!r} cannot name podman containers: use letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def select_nodes(site: Site, hostlist: str | None) -> tuple[str, ...]:
    """Hostnames chosen by a ClusterShell hostlist (all nodes when None), in
    site order.  Unknown names are an error that lists them and the site's nodes."""
    every = [n.hostname for n in site.nodes]
    if hostlist is None or not hostlist.strip():
        return tuple(every)
    try:
        wanted = expand(hostlist)
    except HostlistError as exc:
        raise SimError(f"--nodes {hostlist!r} is not a valid hostlist: {exc}") from exc
    unknown = [h for h in wanted if not site.has_node(h)]
    if unknown:
        raise SimError(
            f"--nodes names {len(unknown)} host(s) not in site {site.name!r}: {fold_hostlist(unknown)}\n"
            f"the site's nodes are {fold_hostlist(every)}"
        )
    chosen = set(wanted)
    return tuple(h for h in every if h in chosen)


def pod_spec(site: Site, site_path: str | Path, hostlist: str | None, mounts_root: Path) -> PodSpec:
    pod = validate_pod_name(site.name)
    mgmt = site.management
    chosen = select_nodes(site, hostlist)
    problems: list[str] = []
    all_nodes: list[NodeSpec] = []
    for node in site.nodes:
        if node.address not in mgmt.cidr:
            problems.append(f"{node.hostname}: address {node.address} is outside the management cidr {mgmt.cidr}")
        elif node.address in (mgmt.cidr.network_address, mgmt.cidr.broadcast_address):
            problems.append(
                f"{node.hostname}: address {node.address} is the network or broadcast address of {mgmt.cidr}"
            )
        if mgmt.gateway is not None and node.address == mgmt.gateway:
            problems.append(
                f"{node.hostname}: address {node.address} is the management gateway, which the sim gives "
                "to the host side of the pod's bridge"
            )
        all_nodes.append(NodeSpec(node.hostname, node.address, container_name(pod, node.hostname), node.platform))
    if problems:
        raise SimError(f"site {site.name!r} cannot be simulated:\n  " + "\n  ".join(problems))
    by_name = {n.hostname: n for n in all_nodes}
    every = tuple(n.hostname for n in site.nodes)
    mounts = tuple(
        MountSpec(
            name=m.name,
            host_dir=mounts_root / m.name,
            mountpoint=m.mountpoint,
            # The site names who mounts it; an empty list means everyone.
            clients=tuple(m.clients) if m.clients else every,
        )
        for m in site.storage
    )
    return PodSpec(
        pod=pod,
        site_path=str(Path(site_path).resolve()),
        network=network_name(pod),
        subnet=mgmt.cidr,
        gateway=mgmt.gateway,
        domain=mgmt.domain,
        nodes=tuple(by_name[h] for h in chosen),
        all_nodes=tuple(all_nodes),
        mounts=mounts,
        subset=len(chosen) != len(all_nodes),
    )


def network_create_args(spec: PodSpec) -> list[str]:
    args = ["network", "create", "--subnet", str(spec.subnet)]
    if spec.gateway is not None:
        args += ["--gateway", str(spec.gateway)]
    for key, value in spec.labels.items():
        args += ["--label", f"{key}={value}"]
    return [*args, spec.network]


def node_mac(address: ipaddress.IPv4Address) -> str:
    """A MAC derived from the address (locally administered, unicast), so a
    node keeps its MAC when its container is recreated or restarted and the
    host's ARP entry for it stays right; a fresh random MAC would leave the
    host sending to the old one until the entry goes stale (~30 s here)."""
    return "02:50:" + ":".join(f"{octet:02x}" for octet in address.packed)


def hosts_file(spec: PodSpec) -> str:
    """/etc/hosts for every node: all nodes of the site, full name first so
    `hostname -f` gives the FQDN.  (The CNI backend here has no DNS plugin.)
    Copied in as a plain file rather than podman's bind mount, so a role can
    template /etc/hosts as on real hardware."""
    lines = [
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        f"# pod {spec.pod}: the site's management addresses",
    ]
    for node in spec.all_nodes:
        names = ([f"{node.hostname}.{spec.domain}"] if spec.domain else []) + [node.hostname]
        lines.append(f"{node.address}\t{' '.join(names)}")
    return "\n".join(lines) + "\n"


def create_args(spec: PodSpec, node: NodeSpec, image: str, public_key: str) -> list[str]:
    """`podman create` arguments for one node; the last label is a hash of the
    others (but the site file's path) and the pod key, so `up` can tell a
    container made from an older image, platform, address or key from a current one."""
    args = [
        "create",
        "--name",
        node.container,
        "--hostname",
        node.hostname,
        "--network",
        spec.network,
        "--ip",
        str(node.address),
        "--mac-address",
        node_mac(node.address),
        "--systemd=always",
        "--stop-timeout",
        "5",
    ]
    node_labels = {LABEL_NODE: node.hostname, LABEL_ADDRESS: str(node.address), LABEL_PLATFORM: node.platform.key}
    for key, value in {**spec.labels, **node_labels}.items():
        args += ["--label", f"{key}={value}"]
    for cap in EXTRA_CAPABILITIES:
        args += ["--cap-add", cap]
    for limit in ULIMITS:
        args += ["--ulimit", limit]
    args += ["--no-hosts"]
    if spec.domain:
        args += ["--dns-search", spec.domain]
    for mount in spec.mounts:
        if node.hostname in mount.clients:
            args += ["--volume", f"{mount.host_dir}:{mount.mountpoint}:rw"]
    args += [image, "/sbin/init"]
    # What makes a node what it is: not the site file's path, nor the other nodes of the pod (the
    # hosts file), so that adding a node to the site keeps every running node as it is; the os
    # role's managed block in /etc/hosts names the newcomer on the others, as on real hardware.
    site_label = f"{LABEL_SITE}={spec.site_path}"
    digest = spec_digest([a for a in args if a != site_label], public_key)
    return [*args[:-2], "--label", f"{LABEL_SPEC}={digest}", *args[-2:]]


def spec_digest(args: Sequence[str], public_key: str) -> str:
    payload = "\0".join([*args, public_key.strip()])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def spec_label(args: Sequence[str]) -> str:
    prefix = f"{LABEL_SPEC}="
    for value in args:
        if value.startswith(prefix):
            return value[len(prefix) :]
    return ""


def host_key_options(known_hosts: Path) -> dict[str, str]:
    """How every SSH connection to a sim node checks its host key, `ssh -F` and the readiness probe
    alike: strictly, against the pod's known_hosts alone (its nodes' keys, read through podman), not
    the system's as well."""
    return {"StrictHostKeyChecking": "yes", "UserKnownHostsFile": str(known_hosts), "GlobalKnownHostsFile": "/dev/null"}


def ssh_config(spec: PodSpec, key: Path, known_hosts: Path) -> str:
    lines = [f"# Written by `podctl sim up` for pod {spec.pod} ({spec.site_path}).", ""]
    for node in spec.all_nodes:
        names = [node.hostname] + ([f"{node.hostname}.{spec.domain}"] if spec.domain else [])
        lines += [
            f"Host {' '.join(names)}",
            f"  HostName {node.address}",
            "  User root",
            f"  IdentityFile {key}",
            "  IdentitiesOnly yes",
            *(f"  {option} {value}" for option, value in host_key_options(known_hosts).items()),
            "  LogLevel ERROR",
            "",
        ]
    return "\n".join(lines)
