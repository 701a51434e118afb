from __future__ import annotations

import pytest

from podctl.derive.facts import hca_names
from podctl.derive.site import load_site
from podctl.derive.topology import plan_fabric
from podctl.ibfabric.formats import topology_from_plan
from tests.conftest import REPO, SIM_SITE

SITES = {
    "sim": SIM_SITE,
    "h100-127": REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml",
    "a100-140": REPO / "inventory" / "examples" / "dgx-a100-superpod-140.yaml",
}


_SITES: dict = {}


def _site(name: str):
    if name not in _SITES:
        _SITES[name] = load_site(SITES[name])
    return _SITES[name]


@pytest.fixture(scope="session")
def planned():
    """site name -> (site path, fabric, plan, planned topology), built once; HCAs named as the profiles say."""
    cache = {}

    def get(name: str):
        if name not in cache:
            fabric = _site(name).fabrics["compute"]
            plan = plan_fabric(fabric)
            cache[name] = (
                SITES[name],
                fabric,
                plan,
                topology_from_plan(plan, fabric.rate, hca_names(_site(name), "compute")),
            )
        return cache[name]

    return get


@pytest.fixture(scope="session")
def names():
    """site name -> host -> the names of its compute HCAs, rail 1 first."""
    return lambda name: hca_names(_site(name), "compute")


@pytest.fixture(scope="session")
def loaded():
    """site name -> its Site, loaded once."""
    return _site
