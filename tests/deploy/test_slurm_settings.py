"""A site's own Slurm settings (slurm.config, slurm.cgroup_config, partitions[].options): each key
checked against the release's own man pages (podctl/core/slurm-keys.json, kept in step here),
refused where podctl writes the key itself, each value one setting, and rendered into the files.
The releases' own daemons read the every-field site's settings in tests/deploy/test_real_consumers.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from podctl.core import platforms, slurmkeys
from podctl.core.assets import roles_dir
from podctl.derive.site import check_site_text
from tests.helpers.repo import DATA, REPO, SIM_SITE
from tests.helpers.roles import render_templates
from tests.helpers.slurm_man import render, table

pytestmark = pytest.mark.deploy

TEMPLATES = {name: f"{name}.j2" for name in ("slurm.conf", "cgroup.conf")}
EVERY_FIELD = DATA / "valid-every-field.yaml"
SITES = [SIM_SITE, EVERY_FIELD, *sorted((REPO / "inventory" / "examples").glob("*.yaml"))]


def test_the_key_table_is_what_each_releases_own_man_pages_say() -> None:
    """Read again from slurm.conf(5) and cgroup.conf(5) as Debian ships them with each supported
    release's Slurm (this machine's, the consumers image's): the file podctl reads is that."""
    stored = (REPO / "podctl" / "core" / slurmkeys.KEYS_FILE).read_text()
    assert render(table()) == stored, "the man pages say otherwise: run `make slurm-keys`"
    data = json.loads(stored)
    assert sorted(data) == sorted(str(p.slurm) for p in platforms.SUPPORTED)
    for release, entry in data.items():
        # Each list holds what it should, and nothing of another section.
        assert {"SchedulerParameters", "PriorityType", "KillWait"} <= set(entry["slurm.conf"]), release
        assert {"OverSubscribe", "MaxNodes", "AllowQos"} <= set(entry["partition"]), release
        assert {"AllowedRAMSpace", "ConstrainSwapSpace"} <= set(entry["cgroup.conf"]), release
        assert not {"NodeName", "OverSubscribe"} & set(entry["cgroup.conf"])


def _rendered_keys(site: Path, tmp_path: Path) -> dict[str, set[str]]:
    """The keys the slurm role writes for `site`'s first compute node, per kind of setting."""
    from podctl.derive.site import load_site

    loaded = load_site(site)
    assert loaded.slurm is not None
    host = next(n.hostname for n in loaded.nodes if n.hostname in loaded.slurm.partitions[0].nodes)
    files = render_templates(site, "slurm", host, TEMPLATES, tmp_path / site.stem)
    keys: dict[str, set[str]] = {"slurm.conf": set(), "partition": set(), "cgroup.conf": set()}
    for kind, text in (("slurm.conf", files["slurm.conf"]), ("cgroup.conf", files["cgroup.conf"])):
        for line in text.splitlines():
            if re.match(r"[A-Za-z]+=", line):
                first, *rest = line.split()
                keys[kind].add(first.split("=", 1)[0])
                if first.startswith("PartitionName="):
                    keys["partition"] |= {option.split("=", 1)[0] for option in [first, *rest]}
    return keys


def test_what_podctl_writes_itself_is_the_table_that_refuses_it_to_a_site(tmp_path: Path) -> None:
    """Every key the role renders for the example sites, minus the site's own settings, is in
    PODCTL_SETS; every key there is written by a template: the table is neither short nor stale."""
    rendered: dict[str, set[str]] = {kind: set() for kind in slurmkeys.PODCTL_SETS}
    for site in SITES:
        for kind, keys in _rendered_keys(site, tmp_path).items():
            rendered[kind] |= keys
    own = check_site_text(EVERY_FIELD.read_text(), str(EVERY_FIELD)).site.slurm
    assert own is not None
    site_keys = {
        "slurm.conf": {k for k, _ in own.config},
        "cgroup.conf": {k for k, _ in own.cgroup_config},
        "partition": {k for p in own.partitions for k, _ in p.options},
    }
    sources = {
        name: (roles_dir() / "slurm" / "templates" / name).read_text() for name in ("slurm.conf.j2", "cgroup.conf.j2")
    }
    for kind, table_keys in slurmkeys.PODCTL_SETS.items():
        assert rendered[kind] - site_keys[kind] <= set(table_keys), (kind, rendered[kind] - set(table_keys))
        source = sources["cgroup.conf.j2" if kind == "cgroup.conf" else "slurm.conf.j2"]
        stale = [key for key in table_keys if not re.search(rf"(^|\s|\{{ ){key}=", source, re.MULTILINE)]
        assert not stale, (kind, stale)


def _check(slurm_lines: str, release: str = "13") -> list[tuple[str, str, str]]:
    """(path, message, hint) of each error of the sim site with `slurm_lines` added to its slurm
    section, its nodes on Debian `release`."""
    text = SIM_SITE.read_text().replace("\nslurm:\n", f"\nslurm:\n{slurm_lines}", 1)
    text = text.replace("\nnodes:\n", f'\nos: {{release: "{release}"}}\nnodes:\n', 1)
    return [(d.path, d.message, d.hint or "") for d in check_site_text(text, "site.yaml").errors]


def test_a_key_podctl_writes_is_refused_naming_the_site_key_that_sets_it() -> None:
    errors = _check(
        '  config: { ClusterName: other, authtype: auth/none }\n  cgroup_config: { ConstrainDevices: "no" }\n'
    )
    assert errors == [
        (
            "slurm.config.ClusterName",
            "podctl writes ClusterName in slurm.conf itself, from slurm.cluster_name",
            "set slurm.cluster_name instead",
        ),
        (
            "slurm.config.authtype",
            "podctl writes AuthType in slurm.conf itself",
            "a site cannot change it (docs/slurm.md lists what podctl sets, and why)",
        ),
        (
            "slurm.cgroup_config.ConstrainDevices",
            "podctl writes ConstrainDevices in cgroup.conf itself",
            "a site cannot change it (docs/slurm.md lists what podctl sets, and why)",
        ),
    ]


def test_a_partition_option_podctl_writes_is_refused() -> None:
    text = SIM_SITE.read_text().replace(
        '      max_time: "02:00:00"\n', '      max_time: "02:00:00"\n      options: { Nodes: node01 }\n'
    )
    (error,) = check_site_text(text, "site.yaml").errors
    assert error.path == "slurm.partitions[0].options.Nodes"
    assert error.hint == "set slurm.partitions[].nodes instead"


@pytest.mark.parametrize(
    ("lines", "path", "message", "hint"),
    [
        (
            "  config: { SchedulerParamters: bf_continue }\n",
            "slurm.config.SchedulerParamters",
            "Slurm 24.11 knows no 'SchedulerParamters' in slurm.conf",
            "did you mean 'SchedulerParameters'?",
        ),
        (
            "  cgroup_config: { CgroupAutomount: yes }\n",
            "slurm.cgroup_config.CgroupAutomount",
            "Slurm 24.11 knows no 'CgroupAutomount' in cgroup.conf (Slurm 22.05 does: another release)",
            "did you mean 'CgroupMountpoint'?",
        ),
    ],
)
def test_a_key_the_releases_slurm_does_not_know_is_refused_with_a_did_you_mean(
    lines: str, path: str, message: str, hint: str
) -> None:
    assert _check(lines) == [(path, message, hint)]


def test_the_release_decides_which_keys_exist() -> None:
    # cgroup.conf's CgroupAutomount: Slurm 22.05 knows it (Debian 12), 24.11 no longer (Debian 13).
    assert _check("  cgroup_config: { CgroupAutomount: yes }\n", release="12") == []
    assert len(_check("  cgroup_config: { CgroupAutomount: yes }\n", release="13")) == 1


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ('"60 NodeName=evil[1-2]"', "holds whitespace: Slurm would read what follows as another setting"),
        ('"60#"', "holds a '#': Slurm reads the rest of the line as a comment"),
        ('"60\\\\"', "holds a backslash: at a line's end it joins the next line to it"),
        ("'6\"0'", "holds a quote, which Slurm's parser reads as its own"),
        ('""', "is empty"),
    ],
)
def test_a_value_that_would_change_more_than_its_setting_is_refused(value: str, why: str) -> None:
    ((path, message, _),) = _check(f"  config: {{ KillWait: {value} }}\n")
    assert (path, message) == ("slurm.config.KillWait", f"the value of KillWait {why}")


def test_a_line_break_in_a_value_is_refused_before_anything_is_built() -> None:
    ((path, message, _),) = _check('  config: { KillWait: "60\\nNodeName=evil" }\n')
    assert path == "slurm.config.KillWait" and "'\\n'" in message


def test_the_sites_settings_reach_the_files_as_slurm_writes_them(tmp_path: Path) -> None:
    site = check_site_text(EVERY_FIELD.read_text(), str(EVERY_FIELD)).site
    assert site is not None and site.slurm is not None
    assert site.slurm.partitions[0].options == (
        ("OverSubscribe", "EXCLUSIVE"),
        ("DefCpuPerGPU", "16"),
        ("ExclusiveUser", "NO"),
    )
    files = render_templates(EVERY_FIELD, "slurm", "gpu01", TEMPLATES, tmp_path)
    conf = files["slurm.conf"].splitlines()
    for line in ("SchedulerParameters=bf_continue,bf_window=4320", "KillWait=60", "MessageTimeout=30"):
        assert line in conf
    batch = next(line for line in conf if line.startswith("PartitionName=batch "))
    assert batch.endswith(" State=UP DefCpuPerGPU=16 ExclusiveUser=NO OverSubscribe=EXCLUSIVE"), batch
    debug = next(line for line in conf if line.startswith("PartitionName=debug "))
    assert debug.endswith(" State=UP AllowAccounts=research,ops"), debug
    # The policy's settings (slurm.accounting.policy): its weights, and enforcement with accounting on.
    for line in (
        "PriorityType=priority/multifactor",
        "PriorityWeightFairshare=20000",
        "PriorityWeightAge=500",
        "PriorityWeightQOS=2000",
        "PriorityWeightJobSize=10",
        "PriorityWeightPartition=100",
        "PriorityDecayHalfLife=14-00:00:00",
        "AccountingStorageEnforce=associations,limits,qos,safe",
        "AccountingStorageTRES=gres/gpu",
    ):
        assert line in conf, line
    assert "AllowedRAMSpace=95" in files["cgroup.conf"].splitlines()


def test_the_role_alone_refuses_a_value_that_would_add_a_setting(tmp_path: Path) -> None:
    """The role, used without podctl check (its own inventory), stops before writing a file."""
    from tests.helpers.roles import run_role_task

    for bad in ({"KillWait": "60 NodeName=evil"}, {"KillWait": "60\nNodeName=evil"}, {"Kill Wait": "60"}):
        failed = run_role_task(
            "slurm", "configure.yml", "Configure | the site's own settings are one setting each",
            {"podctl_slurm_config": bad, "podctl_slurm_cgroup_config": {}, "podctl_slurm_partitions": []}, tmp_path,
        )  # fmt: skip
        assert failed, bad
    assert not run_role_task(
        "slurm", "configure.yml", "Configure | the site's own settings are one setting each",
        {"podctl_slurm_config": {"KillWait": 60}, "podctl_slurm_cgroup_config": {"AllowedRAMSpace": 95},
         "podctl_slurm_partitions": [{"name": "b", "options": {"OverSubscribe": "NO"}}]}, tmp_path,
    )  # fmt: skip


def test_the_guide_names_every_key_podctl_writes() -> None:
    guide = (REPO / "docs" / "slurm.md").read_text()
    missing = [key for keys in slurmkeys.PODCTL_SETS.values() for key in keys if f"`{key}`" not in guide]
    assert not missing, f"docs/slurm.md does not name {missing}"
