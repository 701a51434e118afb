"""The supported platforms and Slurm's version rule (podctl.core.platforms), and `podctl check` holding a
site to that rule where its node groups name different OS releases."""

from __future__ import annotations

import json

import pytest

from podctl.core import platforms
from podctl.core.platforms import SlurmDaemon, SlurmVersion, slurm_rule_problems
from podctl.derive.site import check_site_text
from tests.helpers.repo import REPO

SIM_SITE = (REPO / "inventory" / "sim" / "site.yaml").read_text()


@pytest.mark.parametrize(
    ("newer", "older", "apart"),
    [("23.02", "22.05", 1), ("23.11", "22.05", 2), ("24.05", "22.05", 3), ("24.11", "22.05", 4), ("25.05", "24.11", 1)],
)
def test_major_releases_are_counted_in_schedmds_sequence_not_the_calendar(newer: str, older: str, apart: int) -> None:
    assert platforms.slurm_releases_apart(SlurmVersion.parse(newer), SlurmVersion.parse(older)) == apart


@pytest.mark.parametrize("text", ["24.11.5-4+deb13u1", "24.11.5", "24.11"])
def test_a_package_version_reads_as_its_major_release(text: str) -> None:
    assert str(SlurmVersion.parse(text)) == "24.11"


@pytest.mark.parametrize("text", ["", "slurm", "24", "x.11"])
def test_what_is_no_slurm_version_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        SlurmVersion.parse(text)


def daemons(**by_daemon: str) -> list[SlurmDaemon]:
    return [SlurmDaemon(f"{d}-host", d, SlurmVersion.parse(v)) for d, v in by_daemon.items()]


def test_the_rule_holds_for_one_release_and_for_an_older_slurmd_within_two() -> None:
    assert slurm_rule_problems(daemons(slurmdbd="24.11", slurmctld="24.11", slurmd="24.11")) == []
    assert slurm_rule_problems(daemons(slurmdbd="24.11", slurmctld="24.11", slurmd="24.05")) == []
    assert slurm_rule_problems(daemons(slurmdbd="24.11", slurmctld="24.05", slurmd="23.11")) == []


def test_a_slurmd_newer_than_its_slurmctld_breaks_the_rule() -> None:
    (problem,) = slurm_rule_problems(daemons(slurmctld="22.05", slurmd="24.11"))
    assert "slurmd 24.11 on slurmd-host is newer than slurmctld 22.05" in problem


def test_a_slurmctld_newer_than_slurmdbd_breaks_the_rule() -> None:
    (problem,) = slurm_rule_problems(daemons(slurmdbd="23.11", slurmctld="24.11"))
    assert "slurmctld 24.11" in problem and "newer than slurmdbd 23.11" in problem


def test_more_than_two_releases_apart_breaks_the_rule() -> None:
    (problem,) = slurm_rule_problems(daemons(slurmctld="24.11", slurmd="23.02"))
    assert "3 major releases older" in problem


def test_two_controllers_on_different_releases_break_the_rule() -> None:
    pair = [
        SlurmDaemon("a", "slurmctld", SlurmVersion.parse("24.11")),
        SlurmDaemon("b", "slurmctld", SlurmVersion.parse("24.05")),
    ]
    assert any("must be the same" in p for p in slurm_rule_problems(pair))


def test_a_site_without_os_gets_the_newest_release() -> None:
    result = check_site_text(SIM_SITE, "sim.yaml")
    assert not result.errors
    assert {n.platform for n in result.site.nodes} == {platforms.SUPPORTED[-1]}


@pytest.mark.parametrize("release", ['"12"', "12", '"13"', "13"])
def test_a_release_written_as_a_number_or_a_string_is_the_same(release: str) -> None:
    text = SIM_SITE.replace("\nnodes:\n", f"\nos: {{distribution: debian, release: {release}}}\nnodes:\n", 1)
    result = check_site_text(text, "sim.yaml")
    assert not result.errors, result.errors
    assert {n.platform.release for n in result.site.nodes} == {release.strip('"')}


def test_an_unsupported_release_is_refused_with_the_supported_ones() -> None:
    text = SIM_SITE.replace("\nnodes:\n", '\nos: {release: "11"}\nnodes:\n', 1)
    result = check_site_text(text, "sim.yaml")
    (error,) = result.errors
    assert error.path == "os.release"
    assert "12, 13" in error.message and "docs/platforms.md" in (error.hint or "")


def test_a_site_that_mixes_releases_across_slurm_is_refused_at_the_groups_os() -> None:
    text = SIM_SITE.replace(
        "    roles: [compute, storage-client]\n", '    roles: [compute, storage-client]\n    os: {release: "12"}\n', 1
    )
    result = check_site_text(text, "sim.yaml")
    assert result.errors
    assert {e.path for e in result.errors} == {"nodes[1].os"}
    assert all(e.code == "slurm-version" for e in result.errors)
    assert any(
        "slurmd 22.05 on node01 is 4 major releases older than slurmctld 24.11 on head01" in e.message
        for e in result.errors
    )


def test_a_node_outside_slurm_may_run_another_release() -> None:
    text = SIM_SITE.replace(
        "nodes:\n",
        "nodes:\n  - group: tools\n    hosts: tools01\n    profile: sim\n    roles: [storage-client]\n"
        '    address: 10.89.0.20\n    os: {release: "12"}\n',
        1,
    )
    result = check_site_text(text, "sim.yaml")
    assert not result.errors, result.errors


def test_the_schema_offers_exactly_the_supported_platforms() -> None:
    schema = json.loads((REPO / "podctl" / "schema" / "site.schema.json").read_text())
    os_def = schema["$defs"]["os"]["properties"]
    assert set(os_def["distribution"]["enum"]) == {p.distribution for p in platforms.SUPPORTED}
    assert {str(r) for r in os_def["release"]["enum"]} == {p.release for p in platforms.SUPPORTED}


@pytest.mark.parametrize(
    ("select", "release", "warned"),
    [
        ("select/linear", "13", "refuses select/linear with topology/tree"),
        ("select/linear", "12", None),
        ("select/cons_tres", "13", None),
    ],
)
def test_a_select_type_the_controllers_slurm_lacks_is_named(select: str, release: str, warned: str | None) -> None:
    text = SIM_SITE.replace("\nnodes:\n", f'\nos: {{release: "{release}"}}\nnodes:\n', 1).replace(
        "  cluster_name: sim\n", f"  cluster_name: sim\n  select_type: {select}\n", 1
    )
    result = check_site_text(text, "sim.yaml")
    assert not result.errors, result.errors
    found = [w for w in result.warnings if w.code == "slurm-select"]
    if warned is None:
        assert not found
    else:
        (warning,) = found
        assert warned in warning.message and warning.path == "slurm.select_type"
