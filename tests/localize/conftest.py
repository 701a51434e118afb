from __future__ import annotations

import pytest

from podctl.core.model import Fabric
from podctl.derive.site import load_site
from podctl.derive.topology import FabricPlan, plan_fabric
from podctl.localize.routing import Router
from tests.conftest import REPO


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


@pytest.fixture(scope="session")
def h100_127() -> tuple[Fabric, FabricPlan, Router]:
    fabric = load_site(REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml").fabrics["compute"]
    plan = plan_fabric(fabric)
    return fabric, plan, Router(plan)


@pytest.fixture(scope="session")
def three_tier() -> tuple[Fabric, FabricPlan, Router]:
    # 10 SUs of 4 on 8-port switches: blocks of 4 SUs, the last one short.
    fabric = small_fabric(40)
    plan = plan_fabric(fabric)
    assert plan.tiers == 3
    return fabric, plan, Router(plan)


@pytest.fixture(scope="session")
def a100_140() -> tuple[Fabric, FabricPlan, Router]:
    fabric = load_site(REPO / "inventory" / "examples" / "dgx-a100-superpod-140.yaml").fabrics["compute"]
    plan = plan_fabric(fabric)
    return fabric, plan, Router(plan)
