"""The validated site model: plain, immutable data built once from site.yaml.

Nothing here does I/O. `podctl.derive.site.load_site` builds a `Site` from a file;
derived facts (cables, rail addresses, Slurm topology) live in
`podctl.derive.topology` and `podctl.derive.facts`, which take a `Site` as input.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from podctl.core import platforms
from podctl.core.platforms import Platform

API_VERSION = "podctl/v1alpha1"
KNOWN_API_VERSIONS = (API_VERSION,)


class Role(str, Enum):
    CONTROLLER = "controller"
    LOGIN = "login"
    COMPUTE = "compute"
    SUBNET_MANAGER = "subnet-manager"
    MONITORING = "monitoring"
    STORAGE_CLIENT = "storage-client"


# InfiniBand link rates per port (4x), in Gb/s of data.
IB_RATES_GBPS: dict[str, int] = {"EDR": 100, "HDR": 200, "NDR": 400, "XDR": 800}


@dataclass(frozen=True)
class Reference:
    """One row of a profile's reference-performance table.

    A measurement passes when it is at least `value * (1 - tolerance)`.
    """

    figure: str
    value: float
    tolerance: float
    unit: str
    source: str

    @property
    def bound(self) -> float:
        return self.value * (1.0 - self.tolerance)


@dataclass(frozen=True)
class NVLink:
    generation: int
    links_per_gpu: int
    bandwidth_gbps: float  # GB/s per GPU, both directions


@dataclass(frozen=True)
class GPUs:
    model: str
    count: int
    memory_gib: int
    nvlink: NVLink | None
    peak_bf16_tflops: float | None
    # What Slurm calls the type (gres.conf Type=, --gres=gpu:TYPE:N): the model's first word,
    # lower-cased, unless the profile names it.
    slurm_type: str = "gpu"
    # For each GPU, GPU 0 first, the cores next to it as Slurm numbers them (gres.conf Cores=);
    # empty when the profile does not say.
    cores: tuple[str, ...] = ()


@dataclass(frozen=True)
class HCAs:
    count: int
    rate: str  # key of IB_RATES_GBPS
    # RDMA device names, rail r (1-based) at index r-1: what the node description
    # and NCCL_IB_HCA call them. The loader always fills them in.
    names: tuple[str, ...] = ()

    @property
    def gbps(self) -> int:
        return IB_RATES_GBPS[self.rate] if self.count else 0


# host -> its HCA names in one fabric, rail r at index r-1 (see podctl.derive.facts.hca_names)
HcaNames = Mapping[str, Sequence[str]]


def default_hca_names(count: int, taken: Collection[str] = ()) -> tuple[str, ...]:
    """mlx5_0, mlx5_1, ... skipping `taken`: the kernel numbers RDMA devices in PCI order."""
    names: list[str] = []
    n = 0
    while len(names) < count:
        if f"mlx5_{n}" not in taken:
            names.append(f"mlx5_{n}")
        n += 1
    return tuple(names)


def hca_name(host: str, rail: int, names: HcaNames | None = None) -> str:
    """The name of `host`'s HCA on `rail` (1-based); mlx5_<rail-1> when `names` does not say."""
    given = names.get(host) if names else None
    if given and 0 < rail <= len(given):
        return given[rail - 1]
    return f"mlx5_{rail - 1}"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    gpus: GPUs | None
    compute_hcas: HCAs
    storage_hcas: HCAs
    cpu_cores: int  # logical CPUs: sockets x cores per socket x threads per core
    memory_gib: int
    # True for profiles whose hardware is stood in for (the sim): absent GPUs
    # and HCAs are expected there, not faults.
    emulated: bool
    reference: tuple[Reference, ...]
    builtin: bool = False
    sockets: int = 1
    threads_per_core: int = 1

    @property
    def cores_per_socket(self) -> int:
        return self.cpu_cores // (self.sockets * self.threads_per_core)

    def reference_for(self, figure: str) -> Reference | None:
        for row in self.reference:
            if row.figure == figure:
                return row
        return None


@dataclass(frozen=True)
class NodeGroup:
    name: str
    hostlist: str
    hosts: tuple[str, ...]
    profile: str
    roles: frozenset[Role]
    platform: Platform = platforms.DEFAULT


@dataclass(frozen=True)
class Node:
    hostname: str
    group: str
    profile: str
    roles: frozenset[Role]
    address: ipaddress.IPv4Address
    platform: Platform = platforms.DEFAULT  # its OS (podctl.core.platforms)

    def has(self, role: Role) -> bool:
        return role in self.roles


@dataclass(frozen=True)
class ManagementNetwork:
    cidr: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address | None
    domain: str
    dns: tuple[str, ...]
    ntp: tuple[str, ...]


@dataclass(frozen=True)
class IPoIB:
    """IPoIB subnets, one per compute rail (index = rail number, 0-based)."""

    rails: tuple[ipaddress.IPv4Network, ...]
    mtu: int


# The placeholders of a fabric's naming templates (podctl.ibfabric.identity says what each matches).
NAMING_PLACEHOLDERS = ("name", "host", "hca", "n", "*")


@dataclass(frozen=True)
class Fabric:
    name: str  # "compute" or "storage"
    type: str  # "infiniband"
    rate: str  # key of IB_RATES_GBPS
    switch_model: str
    radix: int
    scalable_unit_size: int  # nodes per scalable unit (= per leaf, per rail)
    tiers: int | None  # None: as few as suffice (two, else three)
    leaf_down_ports: int
    leaf_up_ports: int
    rails: int  # cables per node into this fabric
    nodes: tuple[str, ...]  # hostnames attached, in cabling order (name order)
    subnet_managers: tuple[str, ...]  # master first; empty when managed elsewhere (external_sm)
    routing_engine: str | None  # None: the engine the plan calls for (topology.routing_advice)
    switch_prefix: str
    # How the fabric's devices describe themselves (templates; see the schema's fabric.naming).
    naming_switch: tuple[str, ...] = ()
    naming_hca: tuple[str, ...] = ()
    # subnet_managers: external: UFM or a switch's subnet manager runs the fabric, not podctl.
    external_sm: bool = False

    @property
    def oversubscription(self) -> float:
        """Leaf down-ports in use per up-port (1.0 = non-blocking)."""
        used = min(self.scalable_unit_size, self.leaf_down_ports)
        return used / self.leaf_up_ports if self.leaf_up_ports else float("inf")


@dataclass(frozen=True)
class StorageMount:
    name: str
    type: str  # "nfs" | "lustre"
    server: str
    export: str  # NFS export path or Lustre filesystem name
    mountpoint: str
    options: tuple[str, ...]
    clients: tuple[str, ...]  # hostnames that mount it


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    hostlist: str
    default: bool
    max_time: str
    # The site's own options on its PartitionName line (partitions[].options): (key, value), in order.
    options: tuple[tuple[str, str], ...] = ()


# What Slurm calls each QoS limit podctl writes (sacctmgr's option names), by the site file's key.
QOS_LIMITS = {
    "priority": "Priority",
    "max_wall": "MaxWall",
    "max_jobs_per_user": "MaxJobsPerUser",
    "max_submit_jobs_per_user": "MaxSubmitJobsPerUser",
    "max_tres_per_user": "MaxTRESPerUser",
    "max_tres_per_job": "MaxTRESPerJob",
    "grp_tres": "GrpTRES",
    "preempt": "Preempt",
}


@dataclass(frozen=True)
class SlurmQos:
    """A QoS of the site's policy: its limits as sacctmgr writes them ((option, value), site order)."""

    name: str
    limits: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SlurmAccount:
    name: str
    parent: str = "root"
    fairshare: int = 1
    qos: tuple[str, ...] = ()  # empty: the parent's
    default_qos: str | None = None


@dataclass(frozen=True)
class SlurmUser:
    name: str
    accounts: tuple[str, ...]
    default_account: str


# priority/multifactor's weights (slurm.conf key, site key under policy.priority, default): the
# defaults make fair share the largest factor, then how long a job waited and its QoS.
PRIORITY_WEIGHTS = (
    ("PriorityWeightFairshare", "fairshare", 10000),
    ("PriorityWeightAge", "age", 1000),
    ("PriorityWeightQOS", "qos", 1000),
    ("PriorityWeightJobSize", "job_size", 0),
    ("PriorityWeightPartition", "partition", 0),
)


@dataclass(frozen=True)
class SlurmPolicy:
    """slurm.accounting.policy: who may run, under which limits, and in what order."""

    accounts: tuple[SlurmAccount, ...] = ()
    users: tuple[SlurmUser, ...] = ()
    qos: tuple[SlurmQos, ...] = ()
    priority_weights: tuple[tuple[str, int], ...] = tuple((key, default) for key, _, default in PRIORITY_WEIGHTS)
    decay_half_life: str = "7-00:00:00"
    prune: bool = False


@dataclass(frozen=True)
class FreeSpace:
    path: str
    min_free_gib: float


@dataclass(frozen=True)
class HealthCheck:
    """The node health gate Slurm runs (slurm.health_check); None on Slurm when disabled."""

    interval_s: int = 300
    node_states: tuple[str, ...] = ("any",)
    timeout_s: int = 10
    prolog: bool = False
    mount_timeout_s: float = 3.0
    min_free_memory_gib: float = 1.0
    free_space: tuple[FreeSpace, ...] = (FreeSpace("/tmp", 1.0),)
    services: tuple[str, ...] = ()


@dataclass(frozen=True)
class Slurm:
    cluster_name: str
    controllers: tuple[str, ...]
    accounting: bool
    partitions: tuple[Partition, ...]
    gres: bool  # advertise GPUs as gres/gpu on GPU nodes
    select_type: str
    # slurmctld's state: local with one controller; on storage every controller mounts with
    # several, as failover needs (the backup takes over the primary's state from there).
    state_save_location: str = "/var/lib/slurm/slurmctld"
    health_check: HealthCheck | None = HealthCheck()
    # Compute nodes whose slurmd restarts at once when a change needs restarts (slurm.restart_batch).
    restart_batch: int = 32
    # The site's own slurm.conf and cgroup.conf lines (slurm.config, slurm.cgroup_config): (key,
    # value), in the site file's order, each key one the release's Slurm knows and podctl sets not.
    config: tuple[tuple[str, str], ...] = ()
    cgroup_config: tuple[tuple[str, str], ...] = ()
    # Accounts, users, QoS and fair share (slurm.accounting.policy); None: no policy of podctl's.
    policy: SlurmPolicy | None = None

    @property
    def dbd_host(self) -> str | None:
        """Where slurmdbd runs, with accounting on: the primary controller."""
        return self.controllers[0] if self.accounting and self.controllers else None


# Where Prometheus and Alertmanager listen (monitoring.listen): the Prometheus host's management
# address, or its loopback address alone.
MONITORING_LISTEN = ("management", "localhost")


@dataclass(frozen=True)
class MonitoringTls:
    """The site's certificate for Prometheus and Alertmanager (PEM files on the controller)."""

    cert: Path
    key: Path
    # The name in the certificate that clients ask for: the Prometheus host's FQDN or host name
    # (listen: management), or localhost (listen: localhost).
    server_name: str


@dataclass(frozen=True)
class Monitoring:
    prometheus_host: str
    retention: str
    scrape_interval: str
    exporters: tuple[str, ...]
    alert_rules: bool
    listen: str = "management"
    tls: MonitoringTls | None = None


@dataclass(frozen=True)
class ThresholdOverride:
    value: float | None
    tolerance: float | None


@dataclass(frozen=True)
class Exclusion:
    hosts: tuple[str, ...]
    hostlist: str
    reason: str


# Default folder of the validation tools, on each compute node's local disk. Root runs them (the
# health gate, validate's node suites, its Slurm jobs): they are never installed where another user
# could write (shared storage, /tmp), see podctl.derive.sitefile.validation.
VALIDATION_TOOLS_LOCAL_PATH = "/opt/podctl-validation"
# The program every root-run check goes through (validation/trusted_exec.py, installed by the
# validation-tools stage): it refuses an interpreter, module or program another user could have
# written, and runs Python isolated from /.
VALIDATION_EXEC = "/usr/local/sbin/podctl-validation-exec"


@dataclass(frozen=True)
class Secret:
    """A site value not held in clear in the site file: ansible-vault ciphertext (`!vault`, which
    Ansible decrypts with the vault secret podctl passes it), or the path of a file of the user's
    own, mode 0600, that podctl reads when it writes the inventory's 0600 file."""

    vault: str | None = None
    file: str | None = None

    def __str__(self) -> str:
        return "(an ansible-vault value)" if self.vault is not None else f"(the content of {self.file})"


@dataclass(frozen=True)
class ValidationTools:
    """Where and from what the validation-tools stage installs the node-side code.

    Layout on each compute node's local disk, owned by root: `{path}/venv` (the virtualenv),
    `{path}/src/validation/` (the repository's validation package, on sys.path through a .pth
    file in the venv), `{path}/wheels/` (the copied wheel folder, when `wheels` is set).
    """

    path: str
    wheels: Path | None  # a folder on the controller
    index_url: str | Secret | None
    packages: tuple[str, ...]

    @property
    def python(self) -> str:
        return f"{self.path}/venv/bin/python"

    @property
    def secrets(self) -> tuple[Secret, ...]:
        return (self.index_url,) if isinstance(self.index_url, Secret) else ()

    def argv(self, module: str, *args: str) -> list[str]:
        """How root runs `python -m module args` on a node: through VALIDATION_EXEC."""
        return [VALIDATION_EXEC, self.python, "-m", module, *args]


def program_argv(program: str, *args: str) -> list[str]:
    """How root runs a program of the site's (an nccl-tests binary) on a node: through
    VALIDATION_EXEC, which refuses it unless root alone could have written it."""
    return [VALIDATION_EXEC, "--program", program, *args]


@dataclass(frozen=True)
class ValidationSettings:
    # profile name -> figure -> override
    thresholds: dict[str, dict[str, ThresholdOverride]]
    exclude: tuple[Exclusion, ...]
    nccl_tests_path: str | None
    tools: ValidationTools
    nccl_tests: tuple[str, ...] = ("all_reduce_perf",)  # binaries in nccl_tests_path to run


@dataclass(frozen=True)
class Site:
    name: str
    description: str
    source: str  # the file it was loaded from
    profiles: dict[str, Profile]
    groups: tuple[NodeGroup, ...]
    nodes: tuple[Node, ...]
    management: ManagementNetwork
    ipoib: IPoIB | None
    fabrics: dict[str, Fabric]
    storage: tuple[StorageMount, ...]
    slurm: Slurm | None
    monitoring: Monitoring | None
    validation: ValidationSettings
    _by_name: dict[str, Node] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({n.hostname: n for n in self.nodes})

    def node(self, hostname: str) -> Node:
        return self._by_name[hostname]

    def has_node(self, hostname: str) -> bool:
        return hostname in self._by_name

    def nodes_with(self, role: Role) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if role in n.roles)

    def profile_of(self, node: Node) -> Profile:
        return self.profiles[node.profile]

    @property
    def emulated(self) -> bool:
        """Every node is a `podctl sim` container: its SSH key is the sim's, its host keys change on `sim up`."""
        return all(self.profile_of(n).emulated for n in self.nodes)


def mounts_shared_by(storage: tuple[StorageMount, ...], hosts: list[str] | tuple[str, ...]) -> list[StorageMount]:
    """The storage every one of `hosts` mounts (none for no hosts), in site order."""
    return [m for m in storage if hosts and set(hosts) <= set(m.clients)]
