"""What run.py and test_conformance.py agree on: the checks and the environment
variables that carry the run's inputs.

Kept free of pytest and testinfra imports: podctl imports it to describe the
suite without running it.
"""

from __future__ import annotations

from dataclasses import dataclass

CHECK_NAME = "conformance"

# Inputs of test_conformance.py, set by run.py in the pytest subprocess.
ENV_TIME_TOLERANCE = "PODCTL_CONFORMANCE_TIME_TOLERANCE_S"

DEFAULT_TIME_TOLERANCE_S = 1.0


@dataclass(frozen=True)
class Check:
    test: str  # test function in test_conformance.py
    title: str
    what: str


CHECKS: tuple[Check, ...] = (
    Check("test_reachable", "reachable", "The host answers over SSH with the inventory's address, user and key."),
    Check(
        "test_services_active",
        "services active",
        "Each service the host's roles call for is active and enabled: chrony everywhere; munge where Slurm "
        "runs; slurmd on compute nodes; slurmctld on the controllers; slurmdbd and MariaDB on the accounting "
        "host; prometheus-node-exporter on every node when the site's monitoring lists the node exporter; "
        "Prometheus and Alertmanager on the monitoring host.",
    ),
    Check(
        "test_munge_key",
        "munge key",
        "/etc/munge/munge.key exists with mode 0400 and owner munge, and its SHA-256 is the same on every "
        "Slurm host (a host whose key differs from the others is named; the key itself is never read).",
    ),
    Check(
        "test_storage_mounted",
        "storage mounted",
        "Every shared mount the site gives the host is mounted at its mountpoint (findmnt), with the site's "
        "file-system type on real nodes.",
    ),
    Check(
        "test_time_in_sync",
        "time in sync",
        "chronyd reports a selected time source (or, on the pod's NTP server, its local clock) with a normal "
        "leap status and an offset within the tolerance, and the node's clock is within the tolerance of "
        "the controller's.",
    ),
    Check(
        "test_idle_in_slurm",
        "idle in Slurm",
        "Each compute node is idle in sinfo on the primary controller; a node that is down, drained or "
        "allocated fails with its state and reason.",
    ),
)

# Not a pytest test: drift.py runs the roles themselves in check mode.
DRIFT = Check(
    "drift",
    "configuration as podctl deploys it",
    "Ansible runs the roles' config steps (preflight and configure) in check mode with diffs: every file "
    "and setting Ansible would change is drift, named with its first differing line (a task that "
    "handles a secret says only that it would change).",
)
