from __future__ import annotations

import pytest

from podctl.derive.facts import hca_names
from podctl.derive.topology import plan_fabric
from podctl.ibfabric.formats import topology_from_plan
from tests.helpers.sites import SITES, loaded_site


@pytest.fixture(scope="session")
def planned():
    """site name -> (site path, fabric, plan, planned topology), built once; HCAs named as the profiles say."""
    cache = {}

    def get(name: str):
        if name not in cache:
            fabric = loaded_site(name).fabrics["compute"]
            plan = plan_fabric(fabric)
            cache[name] = (
                SITES[name],
                fabric,
                plan,
                topology_from_plan(plan, fabric.rate, hca_names(loaded_site(name), "compute")),
            )
        return cache[name]

    return get


@pytest.fixture(scope="session")
def names():
    """site name -> host -> the names of its compute HCAs, rail 1 first."""
    return lambda name: hca_names(loaded_site(name), "compute")


@pytest.fixture(scope="session")
def loaded():
    """site name -> its Site, loaded once."""
    return loaded_site
