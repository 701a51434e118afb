"""How many emulated nodes this host runs at the density the sim is measured at.

The sim's nodes are containers sharing this host's cores. Its reference figures were measured
with 3 nodes on 2 cores, and nodes past that density wait on each other: validate runs the node
checks that measure a figure in waves of this size and multi-node jobs on at most this many
nodes, and Ansible allows a crowded node's sshd longer to answer. A real pod is not limited: its
nodes are machines of their own.
"""

from __future__ import annotations

import math
import os


def cohost_capacity() -> int:
    """Emulated nodes that run at once at the measured density: 3 per 2 of this host's cores."""
    return max(2, (3 * (os.cpu_count() or 2)) // 2)


def crowding(emulated_nodes: int) -> int:
    """How many times over that density `emulated_nodes` crowd this host (1 for a real pod)."""
    return max(1, math.ceil(emulated_nodes / cohost_capacity()))


def cohost_scale(members: int) -> float | None:
    """The factor a figure of one sim job across `members` co-hosted nodes (or ranks) is scaled by,
    back to the reference density: members / capacity, or None when the job fits that density.
    Only for emulated nodes: a real pod's figures are never scaled."""
    capacity = cohost_capacity()
    return round(members / capacity, 3) if members > capacity else None
