from __future__ import annotations

import pytest

from podctl.cabling.formats import topology_from_plan
from podctl.site import load_site
from podctl.topology import plan_fabric
from tests.conftest import REPO, SIM_SITE

SITES = {
    "sim": SIM_SITE,
    "h100-127": REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml",
    "a100-140": REPO / "inventory" / "examples" / "dgx-a100-superpod-140.yaml",
}


@pytest.fixture(scope="session")
def planned():
    """site name -> (site path, fabric, plan, planned topology), built once."""
    cache = {}

    def get(name: str):
        if name not in cache:
            fabric = load_site(SITES[name]).fabrics["compute"]
            plan = plan_fabric(fabric)
            cache[name] = (SITES[name], fabric, plan, topology_from_plan(plan, fabric.rate))
        return cache[name]

    return get
