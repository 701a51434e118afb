"""podctl.pod.slurm_policy's reading and planning, on what Slurm's sacctmgr printed (tests/data/slurm).

The module's commands run against the real slurmdbd on the sim pod (tests/deploy/test_deploy_sim.py:
the policy's behaviour as users, a change under a running job, a removal refused); here the plan
from a given state is checked command by command, without a database.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from podctl.derive.inventory import _policy_vars
from podctl.derive.site import check_site_text, load_site
from tests.helpers.repo import DATA, REPO, SIM_SITE
from tests.helpers.roles import collection_plugin

pytestmark = pytest.mark.deploy


policy = collection_plugin("modules", "slurm_policy")
COLUMNS = {
    "qos": ["Name", "Descr", *policy.QOS_COLUMNS],
    "accounts": ["Account", "Org"],
    "associations": ["Account", "User", "Par Name", "Share", "QOS", "Def QOS"],
    "users": ["User", "Def Acct"],
}


def _printed(extra: dict[str, str] | None = None) -> dict[str, list[dict[str, str]]]:
    """The pod's state as sacctmgr printed it, with rows of `extra` (same format) added."""
    extra = extra or {}
    return {
        kind: policy.parse((DATA / "slurm" / f"sacctmgr-{kind}.txt").read_text() + extra.get(kind, ""), columns)
        for kind, columns in COLUMNS.items()
    }


def _state(extra: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    rows = _printed(extra)
    return policy.State(rows["qos"], rows["accounts"], rows["associations"], rows["users"])


def _want(site: Path = SIM_SITE) -> dict:
    """The module's input for a site, as the inventory hands it to the role."""
    given = _policy_vars(load_site(site).slurm.policy)
    assert given is not None
    return {key: given[key] for key in ("qos", "accounts", "users")}


def _edited_sim_site(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = SIM_SITE.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    # The validation wheels are named relative to the sim site's folder.
    text = text.replace("../../.cache", str(REPO / ".cache"))
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


def _plan(want: dict, state, prune: bool = False) -> list[str]:  # type: ignore[no-untyped-def]
    commands, _ = policy.plan("sim", want, state, prune)
    return [" ".join(c) for c in commands]


def test_the_state_the_site_made_plans_nothing() -> None:
    assert _plan(_want(), _state()) == []


def test_changed_shares_and_limits_are_modified_and_nothing_else(tmp_path: Path) -> None:
    edited = _edited_sim_site(
        tmp_path,
        ("name: research, fairshare: 60", "name: research, fairshare: 70"),
        ('max_wall: "01:00:00"', 'max_wall: "90"'),
    )
    assert _plan(_want(edited), _state()) == [
        "modify qos where name=interactive set MaxWall=90",
        "modify account where name=research cluster=sim set Fairshare=70",
    ]


def test_a_limit_is_read_the_same_however_it_is_written() -> None:
    # Slurm's time forms, and memory in any unit, against what sacctmgr prints.
    assert policy.normal_limit("MaxWall", "60") == policy.normal_limit("MaxWall", "01:00:00") == 3600
    assert policy.normal_limit("MaxWall", "1-00:00:00") == policy.normal_limit("MaxWall", "24:00:00")
    assert policy.normal_limit("MaxWall", "1-2") == 26 * 3600
    assert policy.normal_limit("MaxWall", "5:30") == 330
    assert policy.normal_limit("MaxTRESPerUser", "mem=1T,node=2") == policy.normal_limit(
        "MaxTRESPerUser", "node=2,mem=1048576M"
    )
    assert policy.normal_limit("Preempt", "b,a") == policy.normal_limit("Preempt", "a,b")
    assert policy.normal_limit("Priority", "0") == policy.normal_limit("Priority", "")


def test_a_limit_the_site_drops_is_cleared_and_a_tres_it_drops_set_to_minus_one() -> None:
    want = {"interactive": {"Priority": "100", "MaxTRESPerUser": "gres/gpu=8"}}
    have = _state().qos["interactive"]
    assert policy.qos_changes(want["interactive"], have) == [
        "MaxWall=-1",
        "MaxJobsPerUser=-1",
        "MaxTRESPerUser=gres/gpu=8,node=-1",
    ]


def test_new_accounts_are_added_parents_first_and_users_with_their_default() -> None:
    want = _want()
    want["accounts"] = [
        {"name": "vision", "parent": "lab", "fairshare": 2, "qos": [], "default_qos": None},
        {"name": "lab", "parent": "research", "fairshare": 5, "qos": ["normal"], "default_qos": "normal"},
        *want["accounts"],
    ]
    want["users"] = [*want["users"], {"name": "dana", "accounts": ["vision", "lab"], "default_account": "lab"}]
    assert _plan(want, _state()) == [
        "add account lab cluster=sim Organization=podctl Description=lab Parent=research Fairshare=5 QOS=normal "
        "DefaultQOS=normal",
        "add account vision cluster=sim Organization=podctl Description=vision Parent=lab Fairshare=2",
        "add user dana Account=vision,lab cluster=sim DefaultAccount=lab",
    ]


def test_what_podctl_made_and_the_site_dropped_goes_users_first_and_what_it_did_not_make_stays() -> None:
    # Rows added as sacctmgr prints them: an account and a QoS made by hand, with a user each.
    state = _state(
        {
            "qos": "handmade|by hand|0|||||||\n",
            "accounts": "handmade|ops\n",
            "associations": "handmade||root|1|normal|\nhandmade|erin||1|normal|\n",
            "users": "erin|handmade\n",
        }
    )
    want = _want()
    want["users"] = [u for u in want["users"] if u["name"] != "bob"]
    want["accounts"] = [a for a in want["accounts"] if a["name"] != "teaching"]
    want["qos"] = []
    want["accounts"] = [{**a, "qos": ["normal"], "default_qos": "normal"} for a in want["accounts"]]
    kept = _plan(want, state)
    assert kept == [
        "modify account where name=research cluster=sim set QOS=normal",
        "delete user where name=bob account=teaching cluster=sim",
        "delete account where name=teaching cluster=sim",
        "delete qos where name=interactive",
    ]
    pruned = _plan(want, state, prune=True)
    assert pruned == [
        "modify account where name=research cluster=sim set QOS=normal",
        "delete user where name=bob account=teaching cluster=sim",
        "delete user where name=erin account=handmade cluster=sim",
        "delete account where name=handmade cluster=sim",
        "delete account where name=teaching cluster=sim",
        "delete qos where name=handmade",
        "delete qos where name=interactive",
    ]
    # root's account and association, and the QoS normal, are never removed.
    assert not any("root" in c or "name=normal" in c for c in pruned)


def test_a_default_account_is_moved_before_the_old_association_goes() -> None:
    want = _want()
    for user in want["users"]:
        if user["name"] == "alice":
            user["accounts"], user["default_account"] = ["teaching"], "teaching"
    assert _plan(want, _state()) == [
        "add user alice Account=teaching cluster=sim",
        "modify user where name=alice cluster=sim set DefaultAccount=teaching",
        "delete user where name=alice account=research cluster=sim",
    ]


def test_the_sim_site_and_the_every_field_site_render_the_policys_settings() -> None:
    rendered = yaml.safe_dump(_policy_vars(load_site(DATA / "valid-every-field.yaml").slurm.policy))
    assert "MaxTRESPerUser: gres/gpu:h100_sxm=8,mem=1T" in rendered
    assert "Preempt: scavenger" in rendered
    assert "PriorityWeightFairshare: 20000" in rendered


def test_a_gpu_limit_on_a_pod_whose_nodes_offer_no_gpus_is_refused() -> None:
    text = SIM_SITE.read_text().replace("max_tres_per_user: { node: 1 }", "max_tres_per_user: { node: 1, gres/gpu: 2 }")
    assert "gres/gpu: 2" in text
    errors = [(d.path, d.message) for d in check_site_text(text, "site.yaml").errors]
    assert errors == [
        (
            "slurm.accounting.policy.qos[0].max_tres_per_user.gres/gpu",
            "a GPU limit, but no compute node offers GPUs to Slurm: Slurm counts no gres/gpu here",
        )
    ]
