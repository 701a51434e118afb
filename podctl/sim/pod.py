"""Bring a simulated pod up, report on it, take it down.

`up` is idempotent: a running container made from the current site, image
and key whose systemd is up and whose sshd answers is kept; anything else
(missing, stopped, broken, or made from an older spec) is replaced.  Nodes
are handled in parallel, each through create -> systemd -> sshd.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from podctl.core import platforms, state
from podctl.core.fsio import atomic_write
from podctl.core.model import Site
from podctl.sim import fabric as fabric_mod
from podctl.sim import health
from podctl.sim.errors import SimError
from podctl.sim.health import Deadline
from podctl.sim.image import ensure_image, prune_old_images, recipe_for
from podctl.sim.podman import (
    LABEL_ADDRESS,
    LABEL_PLATFORM,
    LABEL_POD,
    LABEL_SPEC,
    ContainerInfo,
    Podman,
    any_pod_filter,
    explain_podman_failure,
    network_name,
    owned_by,
    pod_filter,
)
from podctl.sim.preflight import check_disk, check_inotify, check_neighbours
from podctl.sim.spec import (
    NodeSpec,
    PodSpec,
    create_args,
    hosts_file,
    network_create_args,
    pod_spec,
    spec_label,
    ssh_config,
)

# A kept container gets this long to prove it is healthy before it is replaced.
KEEP_CHECK_S = 15.0
KEEP_SSH_S = 5.0


@dataclass
class NodeResult:
    hostname: str
    address: str
    container: str
    action: str = ""  # kept | created | replaced
    systemd: str = ""
    ssh: bool = False
    failed_units: list[str] = field(default_factory=list)
    error: str = ""
    host_keys: list[str] = field(default_factory=list)  # "TYPE BASE64" lines, read through podman


@dataclass
class UpResult:
    spec: PodSpec
    key: Path
    ssh_config: Path
    images: dict[str, str]  # platform key (debian-13) -> the node image its nodes started from
    nodes: list[NodeResult]
    removed: list[str]
    seconds: float
    fabric: fabric_mod.FabricUp | None = None  # the compute fabric's ibsim, beside the nodes


class Reporter:
    """What `up` tells the person waiting: phase names and per-node steps.
    The CLI backs it with rich progress bars; tests and the benchmark use
    the silent default."""

    def phase(self, name: str, total: int) -> None: ...

    def advance(self, name: str, detail: str = "") -> None: ...

    def message(self, text: str) -> None: ...


def ensure_ssh_key(pod: str) -> Path:
    key = state.ssh_key_path(pod)
    if key.exists() and key.with_suffix(".pub").exists():
        return key
    key.parent.mkdir(parents=True, exist_ok=True)
    key.parent.chmod(0o700)
    for stale in (key, key.with_suffix(".pub")):
        stale.unlink(missing_ok=True)
    proc = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"podctl-sim-{pod}", "-f", str(key)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SimError(f"ssh-keygen could not create the pod key {key}: {proc.stderr.strip()}")
    return key


def ensure_network(podman: Podman, spec: PodSpec, reporter: Reporter) -> bool:
    """Create the pod's network, or keep it when it matches the site.
    Returns True when an existing network had to be replaced (its containers
    must then be recreated too)."""
    existing = podman.network(spec.network)
    if existing is not None:
        if not owned_by(existing.labels, spec.pod):
            raise SimError(
                f"a podman network named {spec.network} exists but is not labelled {LABEL_POD}={spec.pod}; "
                "podctl does not touch what it did not create: remove or rename it "
                f"(podman network rm {spec.network}) or rename the site"
            )
        wanted_gw = str(spec.gateway) if spec.gateway is not None else None
        if any(sub == str(spec.subnet) and (wanted_gw is None or gw == wanted_gw) for sub, gw in existing.subnets):
            return False
        reporter.message(f"network {spec.network} has another subnet than the site's {spec.subnet}: recreating it")
        remove_containers(podman, spec.pod, podman.containers(pod_filter(spec.pod)))
        podman.run(["network", "rm", spec.network])
        create_network(podman, spec)
        return True
    create_network(podman, spec)
    return False


def create_network(podman: Podman, spec: PodSpec) -> None:
    proc = podman.run(network_create_args(spec), check=False)
    if proc.returncode == 0:
        return
    # Name the network in the way, if podman knows it (reading only).
    holders = [
        n.name
        for n in podman.networks([])
        if n.name != spec.network and any(_overlaps(sub, spec.subnet) for sub, _ in n.subnets)
    ]
    if holders:
        raise SimError(
            f"cannot create network {spec.network}: the site's management cidr {spec.subnet} overlaps podman "
            f"network(s) {', '.join(holders)}. Take that down first (for a pod: podctl sim down --pod NAME), "
            "or give this site another management cidr"
        )
    raise SimError(explain_podman_failure(network_create_args(spec)[:2], proc.stderr or proc.stdout))


def _overlaps(cidr: str, subnet: ipaddress.IPv4Network) -> bool:
    try:
        return ipaddress.ip_network(cidr, strict=False).overlaps(subnet)
    except ValueError:
        return False


def remove_containers(podman: Podman, pod: str, containers: list[ContainerInfo]) -> list[str]:
    names = [c.name for c in containers if owned_by(c.labels, pod)]
    if names:
        # -t 0: a simulated node is thrown away, not shut down.
        podman.run(["rm", "--force", "--time", "0", *names], timeout=120)
    return names


def check_name_clashes(podman: Podman, spec: PodSpec, ours: dict[str, ContainerInfo]) -> None:
    clashes = []
    for node in spec.nodes:
        if node.hostname in ours:
            continue
        other = podman.container_by_name(node.container)
        if other is not None and not owned_by(other.labels, spec.pod):
            clashes.append(node.container)
    if clashes:
        raise SimError(
            f"container(s) {', '.join(clashes)} exist but are not labelled {LABEL_POD}={spec.pod}; "
            "podctl leaves them alone: remove or rename them, or rename the site"
        )


def _node_is_healthy(podman: Podman, spec: PodSpec, key: Path, node: NodeSpec, result: NodeResult) -> bool:
    deadline = Deadline.after(KEEP_CHECK_S)
    result.systemd = health.wait_systemd(podman, node.container, deadline)
    if result.systemd not in health.GOOD_SYSTEMD_STATES:
        return False
    result.ssh, _ = _wait_ssh(podman, spec, key, node, result, Deadline.after(KEEP_SSH_S))
    return result.ssh


# The node threads of one `up` each add their node's keys to the pod's one known_hosts.
_KNOWN_HOSTS_LOCK = threading.Lock()


def _wait_ssh(
    podman: Podman, spec: PodSpec, key: Path, node: NodeSpec, result: NodeResult, deadline: Deadline
) -> tuple[bool, str]:
    """sshd answering with the pod key, and with a host key the pod's known_hosts holds: the node's
    own, read through podman (not over the network a node could be impersonated on) and written
    there first."""
    result.host_keys = _host_keys(podman, node.container)
    if not result.host_keys:
        return False, f"no SSH host key in {node.container} (/etc/ssh/ssh_host_*_key.pub)"
    with _KNOWN_HOSTS_LOCK:
        write_known_hosts(spec, {node.hostname: result.host_keys})
    return health.wait_ssh(key, state.known_hosts_path(spec.pod), str(node.address), deadline)


def _bring_up_node(
    podman: Podman,
    spec: PodSpec,
    node: NodeSpec,
    images: Mapping[str, str],
    key: Path,
    current: ContainerInfo | None,
    deadline: Deadline,
    reporter: Reporter,
) -> NodeResult:
    result = NodeResult(node.hostname, str(node.address), node.container)
    public_key = key.with_suffix(".pub").read_text()
    args = create_args(spec, node, images[node.platform.key], public_key)

    if current is not None and current.running and current.labels.get(LABEL_SPEC) == spec_label(args):
        if _node_is_healthy(podman, spec, key, node, result):
            result.action = "kept"
            for phase in ("containers", "systemd", "sshd"):
                reporter.advance(phase, node.hostname)
            return result
        reporter.message(f"{node.hostname}: existing container is unhealthy (systemd {result.systemd}); replacing it")

    if current is not None:
        remove_containers(podman, spec.pod, [current])
        result.action = "replaced"
    else:
        result.action = "created"
    podman.run(args)
    # The key is in place before sshd first starts, like on a provisioned node.
    podman.run(["cp", str(key.with_suffix(".pub")), f"{node.container}:/root/.ssh/authorized_keys"])
    podman.run(["cp", str(state.pod_dir(spec.pod) / "hosts"), f"{node.container}:/etc/hosts"])
    podman.run(["start", node.container])
    health.forget_neighbor(str(node.address))
    reporter.advance("containers", node.hostname)

    result.systemd = health.wait_systemd(podman, node.container, deadline)
    if result.systemd not in health.GOOD_SYSTEMD_STATES:
        logs = podman.run(["logs", "--tail", "15", node.container], check=False)
        result.error = f"systemd is {result.systemd!r} after the deadline"
        tail = (logs.stdout + logs.stderr).strip().splitlines()[-8:]
        if tail:
            result.error += "; last console lines:\n    " + "\n    ".join(tail)
        return result
    if result.systemd == "degraded":
        result.failed_units = health.failed_units(podman, node.container)
    reporter.advance("systemd", node.hostname)

    result.ssh, why = _wait_ssh(podman, spec, key, node, result, deadline)
    if not result.ssh:
        result.error = f"sshd on {node.address} did not accept the pod key before the deadline: {why}"
        return result
    reporter.advance("sshd", node.hostname)
    return result


def up(
    podman: Podman,
    site: Site,
    site_path: str | Path,
    hostlist: str | None,
    timeout_s: float,
    reporter: Reporter,
    images: Mapping[str, str] | None = None,
) -> UpResult:
    """`images` maps a platform key to its node image (the CLI finds or builds them first, with
    its own progress); the image of any platform the nodes need that it lacks is found or built
    here."""
    started = time.monotonic()
    spec = pod_spec(site, site_path, hostlist, state.pod_dir(site.name) / "mounts")
    with state.locked(state.pod_dir(spec.pod) / ".lock"):
        images = dict(images or {})
        for platform in spec.platforms:
            if platform.key not in images:
                images[platform.key], _ = ensure_image(podman, recipe_for(platform), reporter.message)
        key = ensure_ssh_key(spec.pod)
        for mount in spec.mounts:
            mount.host_dir.mkdir(parents=True, exist_ok=True)
        (state.pod_dir(spec.pod) / "hosts").write_text(hosts_file(spec))

        ensure_network(podman, spec, reporter)
        ours = {c.node: c for c in podman.containers(pod_filter(spec.pod)) if owned_by(c.labels, spec.pod)}
        check_name_clashes(podman, spec, ours)

        check_inotify(sum(1 for n in spec.nodes if not (n.hostname in ours and ours[n.hostname].running)))
        check_neighbours(len(spec.all_nodes))
        if new_nodes := sum(1 for n in spec.nodes if n.hostname not in ours):
            check_disk(new_nodes, podman.graph_root())  # `podman info` only when a node is to be made

        removed: list[str] = []
        if not spec.subset:
            wanted = {n.hostname for n in spec.all_nodes}
            removed = remove_containers(podman, spec.pod, [c for h, c in ours.items() if h not in wanted])

        for phase in ("containers", "systemd", "sshd"):
            reporter.phase(phase, len(spec.nodes))
        # The deadline covers the nodes, not a first image build before them.
        deadline = Deadline.after(timeout_s)
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(spec.nodes)))) as pool:
            futures = [
                pool.submit(
                    _bring_up_node, podman, spec, node, images, key, ours.get(node.hostname), deadline, reporter
                )
                for node in spec.nodes
            ]
            results = [f.result() for f in futures]

        # Faults recorded for a node that was recreated no longer apply.
        faults = state.read_faults(spec.pod)
        for r in results:
            if r.action != "kept":
                faults.pop(r.hostname, None)
        for name in removed:
            faults.pop(name.removeprefix(f"podctl-{spec.pod}-"), None)
        state.write_faults(spec.pod, faults)

        # The nodes' host keys (each node's read before its readiness probe), so that deploy,
        # validate and `ssh -F` check them as on a real pod; nodes gone from the site are left out.
        write_known_hosts(spec, {r.hostname: r.host_keys for r in results if r.host_keys})
        state.write_pod_record(spec.pod, {n.hostname: str(n.address) for n in spec.all_nodes})
        config = state.ssh_config_path(spec.pod)
        config.write_text(ssh_config(spec, key, state.known_hosts_path(spec.pod)))

    failed = [r for r in results if r.error]
    if failed:
        raise SimError(
            f"{len(failed)} of {len(results)} node(s) of pod {spec.pod} did not come up within {timeout_s:.0f} s:\n  "
            + "\n  ".join(f"{r.hostname}: {r.error}" for r in failed)
            + f"\nrun `podctl sim up {site_path}` again to retry (healthy nodes are kept), "
            f"or `podctl sim status --pod {spec.pod}`"
        )
    with state.locked(state.pod_dir(spec.pod) / ".lock"):
        fabric = fabric_mod.up(podman, site)
    return UpResult(
        spec=spec,
        key=key,
        ssh_config=config,
        images=images,
        nodes=results,
        removed=removed,
        seconds=time.monotonic() - started,
        fabric=fabric,
    )


def _host_keys(podman: Podman, container: str) -> list[str]:
    proc = podman.run(["exec", container, "sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub"], check=False)
    return [" ".join(line.split()[:2]) for line in proc.stdout.splitlines() if len(line.split()) >= 2]


def write_known_hosts(spec: PodSpec, keys: Mapping[str, list[str]]) -> None:
    """known_hosts of the pod: each node's keys under its address and names (`keys`: host -> "TYPE
    BASE64" lines). Nodes not in `keys` (`sim up NODES`, or another node's probe) keep the lines they had."""
    path = state.known_hosts_path(spec.pod)
    kept: dict[str, list[str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            names = line.split(" ", 1)[0].split(",")
            kept.setdefault(names[1] if len(names) > 1 else names[0], []).append(line)
    lines = []
    for node in spec.all_nodes:
        names = ",".join(
            [str(node.address), node.hostname] + ([f"{node.hostname}.{spec.domain}"] if spec.domain else [])
        )
        if node.hostname in keys:
            lines += [f"{names} {k}" for k in keys[node.hostname]]
        else:
            lines += kept.get(node.hostname, [])
    atomic_write(path, "".join(f"{line}\n" for line in lines), mode=0o600)


# -- finding a pod without its site file --------------------------------------


def pods_present(podman: Podman) -> list[str]:
    names = {c.pod for c in podman.containers(any_pod_filter()) if c.pod}
    names |= {n.labels.get(LABEL_POD, "") for n in podman.networks(any_pod_filter())}
    return sorted(n for n in names if n)


def resolve_pod(podman: Podman, pod: str | None) -> str:
    if pod:
        return pod
    present = pods_present(podman)
    if not present:
        raise SimError(
            "no simulated pod is up (no container or network labelled io.podctl.pod); "
            "start one with `podctl sim up SITE.yaml`"
        )
    if len(present) > 1:
        raise SimError(f"{len(present)} simulated pods are up ({', '.join(present)}): choose one with --pod NAME")
    return present[0]


def pod_container(podman: Podman, pod: str, hostname: str) -> ContainerInfo:
    for c in podman.containers(pod_filter(pod)):
        if c.node == hostname and owned_by(c.labels, pod):
            return c
    known = sorted(c.node for c in podman.containers(pod_filter(pod)))
    raise SimError(
        f"pod {pod!r} has no node {hostname!r}"
        + (f"; its nodes are {', '.join(known)}" if known else " (no containers: run `podctl sim up`)")
    )


# -- status and down -----------------------------------------------------------


@dataclass
class NodeStatus:
    hostname: str
    container: str
    address: str
    platform: str  # the platforms key its container was made for; "" for one made before
    state: str
    systemd: str
    ssh: bool | None
    faults: dict[str, object]


def status(podman: Podman, pod: str) -> tuple[list[NodeStatus], str | None]:
    containers = [c for c in podman.containers(pod_filter(pod)) if owned_by(c.labels, pod)]
    network = podman.network(network_name(pod))
    net_text = None
    if network is not None and owned_by(network.labels, pod):
        net_text = f"{network.name} " + ", ".join(f"{s} (gateway {g})" for s, g in network.subnets)
    key = state.ssh_key_path(pod)
    known_hosts = state.known_hosts_path(pod)
    faults = state.read_faults(pod)

    def one(c: ContainerInfo) -> NodeStatus:
        address = c.labels.get(LABEL_ADDRESS, "")
        systemd = health.systemd_state(podman, c.name) if c.running else "-"
        ssh: bool | None = None
        if c.running and key.exists():
            ssh, _ = health.ssh_answers(key, known_hosts, address, connect_timeout=2)
        platform = c.labels.get(LABEL_PLATFORM, "")
        return NodeStatus(c.node, c.name, address, platform, c.state, systemd, ssh, dict(faults.get(c.node, {})))

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(containers)))) as pool:
        rows = list(pool.map(one, containers))
    rows.sort(key=lambda r: r.hostname)
    return rows, net_text


def down(podman: Podman, pod: str, purge: bool) -> tuple[list[str], bool]:
    with state.locked(state.pod_dir(pod) / ".lock"):
        fabric_mod.down(pod)
        removed = remove_containers(podman, pod, podman.containers(pod_filter(pod)))
        network = podman.network(network_name(pod))
        network_removed = False
        if network is not None and owned_by(network.labels, pod):
            podman.run(["network", "rm", network.name])
            network_removed = True
        state.faults_path(pod).unlink(missing_ok=True)
        state.ssh_config_path(pod).unlink(missing_ok=True)
        state.pod_record_path(pod).unlink(missing_ok=True)
        state.known_hosts_path(pod).unlink(missing_ok=True)
    # Images of older recipes that were in use when the current one was built
    # can go now (podman refuses while another pod still uses one).
    prune_old_images(podman, [recipe_for(platform) for platform in platforms.SUPPORTED])
    if purge:
        shutil.rmtree(state.pod_dir(pod), ignore_errors=True)
    return removed, network_removed
