"""Fixtures for the deploy integration tests.

The deploy tests run on the session's shared sim pod (tests/conftest.py: `sim_pod`, pod
`simcert` on 10.89.12.0/24, 1 head + 3 compute), whose fixture deploys every stage once with
real Ansible; tests/conftest.py runs test_deploy_sim.py before any other test touches that pod,
so its first deploy and no-change re-run are judged on the pod as deployed.
"""

from __future__ import annotations

import pytest

from tests.helpers.simpod import Pod


@pytest.fixture(scope="module")
def deploy_pod(sim_pod: Pod) -> Pod:
    return sim_pod
