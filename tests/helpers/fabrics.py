"""Small fabrics built in code, for the tests of the fabric plan and of localization."""

from __future__ import annotations

from podctl.core.model import Fabric


def small_fabric(nodes: int, *, su_size: int = 4, radix: int = 8, rails: int = 2, tiers: int | None = None) -> Fabric:
    """Tiny fabrics (8-port switches) that still have two or three tiers and several blocks."""
    return Fabric(
        name="compute",
        type="infiniband",
        rate="NDR",
        switch_model="test-8",
        radix=radix,
        scalable_unit_size=su_size,
        tiers=tiers,
        leaf_down_ports=radix // 2,
        leaf_up_ports=radix // 2,
        rails=rails,
        nodes=tuple(f"n{i:03d}" for i in range(1, nodes + 1)),
        subnet_managers=(),
        routing_engine="ftree",
        switch_prefix="ib",
    )
