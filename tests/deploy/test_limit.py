from __future__ import annotations

import pytest

from podctl.deploy.errors import DeployError
from podctl.deploy.limit import expand_limit

pytestmark = pytest.mark.deploy

HOSTS = ["head01", "node01", "node02", "node03"]


@pytest.mark.parametrize(
    ("hostlist", "expected"),
    [
        ("node[01-03]", ["node01", "node02", "node03"]),
        ("node[02-03],head01", ["head01", "node02", "node03"]),  # the site's order
        ("node01,node01", ["node01"]),
        ("head01", ["head01"]),
    ],
)
def test_expand_limit(hostlist: str, expected: list[str]) -> None:
    assert expand_limit(hostlist, HOSTS) == expected


def test_unknown_hosts_are_named() -> None:
    with pytest.raises(DeployError) as info:
        expand_limit("node[03-05],hed01", HOSTS)
    message = str(info.value)
    assert "node04" in message and "node05" in message
    assert "hed01 (did you mean head01?)" in message
    assert "node03," not in message.split("not in the site:")[1].split(";")[0]


def test_bad_syntax() -> None:
    with pytest.raises(DeployError) as info:
        expand_limit("node[01-", HOSTS)
    assert "not a host list" in str(info.value)
