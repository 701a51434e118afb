from __future__ import annotations

import pytest

from podctl.core.model import Fabric
from podctl.derive.site import load_site
from podctl.derive.topology import FabricPlan, plan_fabric
from podctl.localize.routing import Router
from tests.helpers.fabrics import small_fabric
from tests.helpers.sites import SITES


@pytest.fixture(scope="session")
def h100_127() -> tuple[Fabric, FabricPlan, Router]:
    fabric = load_site(SITES["h100-127"]).fabrics["compute"]
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
    fabric = load_site(SITES["a100-140"]).fabrics["compute"]
    plan = plan_fabric(fabric)
    return fabric, plan, Router(plan)
