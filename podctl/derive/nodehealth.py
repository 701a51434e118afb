"""What a node's health is judged against: derived from the site and the node's profile.

One definition for both users of it: the certification's health suite (`podctl validate`,
`validation.health` with the profile's expectations) and the health gate Slurm runs between
jobs (`validation/healthgate.py`, reading the expectations file the deploy renders from
`gate_expectations`).
"""

from __future__ import annotations

import re

from podctl.core.model import IB_RATES_GBPS, VALIDATION_EXEC, Profile, Role, Site

# Where the slurm role installs the gate and its inputs on every compute node, and where the
# gate writes; the monitoring role points node exporter's textfile collector at TEXTFILE_DIR.
GATE_PROGRAM = "/usr/local/sbin/podctl-healthcheck"
GATE_PROLOG = "/usr/local/sbin/podctl-healthcheck-prolog"
GATE_EXPECT = "/etc/podctl/health.json"
GATE_STATE = "/var/lib/podctl/health"
# The maintenance mark a deploy writes before it restarts a gate service on a node (tmpfs: a
# reboot clears it), and how long the gate asks a starting or stopping unit again.
GATE_MAINTENANCE = "/run/podctl/maintenance.json"
GATE_TRANSIENT_WAIT_S = 5
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# PCIe lanes of an SXM GPU's host link; fewer means a degraded link.
GPU_PCIE_WIDTH = 16


def health_argv(profile: Profile, hca_rate_gbps: int | None = None) -> list[str]:
    """`validation.health`'s expectation flags for a node of this profile."""
    n_gpus = profile.gpus.count if profile.gpus else 0
    argv = [
        "validation.health",
        "--expect-gpus",
        str(n_gpus),
        "--expect-cores",
        str(profile.cpu_cores),
        "--expect-memory-gib",
        str(profile.memory_gib),
    ]
    if profile.gpus:
        argv += [
            "--expect-gpu-model",
            profile.gpus.model.split("-")[0],
            "--expect-gpu-memory-gib",
            str(profile.gpus.memory_gib),
            "--expect-pcie-width",
            str(GPU_PCIE_WIDTH),
        ]
        if profile.gpus.nvlink and n_gpus > 1:
            argv += ["--expect-nvlinks", str(profile.gpus.nvlink.links_per_gpu)]
    if not profile.emulated:
        argv += ["--expect-hcas", str(profile.compute_hcas.count + profile.storage_hcas.count)]
        names = profile.compute_hcas.names + profile.storage_hcas.names
        if names:
            # Count and check only the profile's HCAs: a host may have RDMA devices that no
            # InfiniBand fabric cables (on a DGX H100, the Ethernet ports of the storage cards).
            argv += ["--hca-filter", "^(?:" + "|".join(re.escape(n) for n in names) + ")$"]
        if hca_rate_gbps:
            argv += ["--expect-hca-rate-gbps", str(hca_rate_gbps)]
    return argv


def gate_services(site: Site) -> list[str]:
    """systemd units a compute node needs to run jobs: munge (Slurm's credentials), slurmd, and
    chrony (a clock off by minutes makes munge refuse credentials). Exporters are not among them:
    Prometheus's NodeDown alert watches those, and a node runs jobs fine without one."""
    services = ["munge", "slurmd", "chrony"]
    hc = site.slurm.health_check if site.slurm else None
    return services + [s for s in (hc.services if hc else ()) if s not in services]


def gate_expectations(site: Site, host: str) -> dict[str, object] | None:
    """The health gate's expectations file for `host`; None where no gate runs (no Slurm,
    gate disabled, or not a compute node)."""
    node = site.node(host)
    hc = site.slurm.health_check if site.slurm else None
    if hc is None or Role.COMPUTE not in node.roles:
        return None
    profile = site.profile_of(node)
    rates = [IB_RATES_GBPS[f.rate] for f in site.fabrics.values() if host in f.nodes and f.rate in IB_RATES_GBPS]
    return {
        "node": host,
        "timeout_s": hc.timeout_s,
        "mount_timeout_s": hc.mount_timeout_s,
        "mounts": [{"path": s.mountpoint, "name": s.name} for s in site.storage if host in s.clients],
        "free_space": [{"path": f.path, "min_free_gib": f.min_free_gib} for f in hc.free_space],
        "min_free_memory_gib": hc.min_free_memory_gib,
        "services": gate_services(site),
        "transient_wait_s": GATE_TRANSIENT_WAIT_S,
        "maintenance": GATE_MAINTENANCE,
        "node_check": {
            "launcher": VALIDATION_EXEC,
            "python": site.validation.tools.python,
            "argv": [
                "-m",
                *health_argv(profile, min(rates) if rates else None),
                "--xid-state",
                f"{GATE_STATE}/xid.json",
            ],
        },
        "drain": True,
        "textfile_dir": TEXTFILE_DIR if site.monitoring and "node" in site.monitoring.exporters else None,
    }
