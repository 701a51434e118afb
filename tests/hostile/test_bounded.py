"""Bounded work: whatever a site file says, `podctl check` answers within a second and well under 200 MB."""

from __future__ import annotations

from pathlib import Path

import pytest

from podctl.core.hostlist import MAX_HOSTS, HostlistError, count, expand
from podctl.derive.site import check_site_text
from tests.helpers.cli import assert_user_error, podctl
from tests.helpers.repo import REPO

SIM = (REPO / "inventory" / "sim" / "site.yaml").read_text()


def _alias_bomb(levels: int = 12, width: int = 9) -> str:
    lines = [
        "apiVersion: podctl/v1alpha1",
        "kind: Site",
        'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
    ]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


CASES = {
    # name: (file text, what the message says)
    "alias-bomb": (_alias_bomb(), "expands to more than"),
    "recursive-sequence": ("apiVersion: podctl/v1alpha1\nkind: Site\nnodes: &n [*n]\n", "recursive alias"),
    "recursive-mapping": (
        "apiVersion: podctl/v1alpha1\nkind: Site\nmetadata: &m {name: x, more: *m}\n",
        "recursive alias",
    ),
    "recursive-merge": ("apiVersion: podctl/v1alpha1\nkind: Site\nmetadata: &m {name: x, <<: *m}\n", "recursive alias"),
    "deep-nesting": (
        "apiVersion: podctl/v1alpha1\nkind: Site\nmetadata: " + "[" * 200 + "]" * 200 + "\n",
        "nested more than",
    ),
    "huge-hostlist": (SIM.replace("hosts: node[01-03]", "hosts: node[1-100000000]"), "more than the 16,384"),
    "huge-product": (SIM.replace("hosts: node[01-03]", "hosts: n[1-9999]x[1-9999]y[1-9999]"), "more than the 16,384"),
    "huge-string": (SIM.replace("description: 1 head", "description: " + "x" * 5_000_000), "characters long"),
    "float-integer": (SIM.replace("prefix: 24", "prefix: 24.0"), "write 24, without a decimal point"),
    "float-fraction": (SIM.replace("prefix: 24", "prefix: 24.5"), "expected an integer"),
    "not-a-number": (
        SIM.replace("thresholds: {}", "thresholds: {sim: {gemm_fp32_gflops: {value: .nan}}}"),
        "not a finite number",
    ),
    "infinity": (
        SIM.replace("thresholds: {}", "thresholds: {sim: {gemm_fp32_gflops: {value: .inf}}}"),
        "not a finite number",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_loader_refuses_within_a_second(name: str) -> None:
    import time

    text, needle = CASES[name]
    started = time.monotonic()
    result = check_site_text(text, "site.yaml")
    # The bound the issue sets; unbounded expansion took minutes and gigabytes.
    assert time.monotonic() - started < 1.0, name
    assert result.errors and any(needle in d.render() for d in result.errors), [d.render() for d in result.errors]


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_refuses_with_exit_2_well_under_200_mb(name: str, tmp_path: Path) -> None:
    text, needle = CASES[name]
    site = tmp_path / "site.yaml"
    site.write_text(text)
    ran = podctl("check", str(site))
    assert_user_error(ran, needle)
    assert ran.max_rss_mb < 200, f"{name}: {ran.max_rss_mb:.0f} MB"
    assert ran.seconds < 10, f"{name}: {ran.seconds:.2f} s"  # the process, imports included


def test_the_loader_itself_refuses_an_alias_bomb_fast() -> None:
    import time

    started = time.monotonic()
    result = check_site_text(_alias_bomb(), "bomb.yaml")
    assert time.monotonic() - started < 1.0
    assert [d.code for d in result.errors] == ["too-large"]
    assert result.errors[0].location is not None and result.errors[0].location.line >= 3


@pytest.mark.parametrize(
    ("text", "hosts"),
    [("dgx[001-032,040],head01", 34), ("a[1-3]b[1-2]", 6), ("x[0-10/2]", 6), ("n1,n2", 2), ("node[01-99]", 99)],
)
def test_hostlists_are_counted_without_expanding(text: str, hosts: int) -> None:
    assert count(text) == hosts == len(expand(text))


@pytest.mark.parametrize("text", ["node[1-100000000]", "a[1-99999]", "n[1-200]m[1-200]"])
def test_hostlists_over_the_limit_are_refused(text: str) -> None:
    assert count(text) > MAX_HOSTS
    with pytest.raises(HostlistError, match="more than"):
        expand(text)


@pytest.mark.parametrize("text", ["a[1-3", "a]", "a[[1]]", "a[3-1]", "a[x-y]"])
def test_malformed_hostlists_are_errors(text: str) -> None:
    with pytest.raises(HostlistError):
        expand(text)


def test_deploy_limit_with_a_huge_hostlist_is_a_user_error() -> None:
    ran = podctl("deploy", str(REPO / "inventory" / "sim" / "site.yaml"), "--limit", "node[1-100000000]")
    assert_user_error(ran, "--limit")
    assert ran.seconds < 10 and ran.max_rss_mb < 200
