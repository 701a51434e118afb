#!/usr/bin/python
"""The site's accounts, users and QoS in Slurm's accounting: read with sacctmgr, changed only where they differ."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: slurm_policy
short_description: Make Slurm's accounts, users' associations and QoS what the site says
description:
  - Reads what slurmdbd holds (C(sacctmgr --noheader --parsable2 show ...)), compares it with the
    site's policy, and runs C(sacctmgr --immediate) only for what differs. A second run changes
    nothing and says so. In check mode it runs nothing and returns the commands it would run
    (shown as the diff).
  - podctl marks what it creates (an account's organization, a QoS's description: C(podctl)).
    An account or QoS podctl created and the site no longer lists is removed, and so is a user's
    association with such an account; anything else the site does not list is left alone unless
    I(prune) is true. The account root, the user root's association and the QoS normal are never
    removed.
  - An account or user association that still has jobs (pending, running, suspended) is never
    removed; the module fails before changing anything, naming it and its job count.
  - Runs where C(sacctmgr) reaches slurmdbd and C(squeue) reaches slurmctld (the dbd host).
options:
  cluster: {description: The cluster's name in accounting., type: str, required: true}
  accounts:
    description: Accounts (name, parent, fairshare, qos, default_qos), parents before children or not.
    type: list
    elements: dict
    default: []
  users:
    description: Users (name, accounts, default_account).
    type: list
    elements: dict
    default: []
  qos:
    description: QoS (name, limits, a mapping of sacctmgr's option names to values).
    type: list
    elements: dict
    default: []
  prune: {description: Also remove what podctl did not create and the site does not list., type: bool, default: false}
author: podctl
"""

EXAMPLES = r"""
- name: Policy | accounts, users and QoS as the site says
  podctl.pod.slurm_policy:
    cluster: pod1
    qos: [{name: interactive, limits: {MaxWall: "04:00:00", MaxTRESPerUser: "gres/gpu=8"}}]
    accounts: [{name: research, parent: root, fairshare: 60, qos: [normal, interactive], default_qos: normal}]
    users: [{name: alice, accounts: [research], default_account: research}]
"""

RETURN = r"""
commands:
  description: The sacctmgr commands run (in check mode, that would run), each an argument list.
  type: list
  elements: list
  returned: always
msg: {description: What changed, or that nothing did., type: str, returned: always}
"""

MARK = "podctl"
ROOT_ACCOUNT, ROOT_USER, BUILTIN_QOS = "root", "root", "normal"
# The QoS limits podctl manages, as `sacctmgr show qos format=` names their columns.
QOS_COLUMNS = {
    "Priority": "Priority",
    "MaxWall": "MaxWall",
    "MaxJobsPerUser": "MaxJobsPU",
    "MaxSubmitJobsPerUser": "MaxSubmitPU",
    "MaxTRESPerUser": "MaxTRESPU",
    "MaxTRESPerJob": "MaxTRES",
    "GrpTRES": "GrpTRES",
    "Preempt": "Preempt",
}
TRES_LIMITS = ("MaxTRESPerUser", "MaxTRESPerJob", "GrpTRES")
# What unsets each limit (sacctmgr(1): -1 clears a limit; an empty Preempt list clears it).
CLEARED = {"Preempt": ""}
_SIZE = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
# Job states that still hold an account (squeue --states).
LIVE_STATES = "PENDING,RUNNING,SUSPENDED,CONFIGURING,COMPLETING,REQUEUED,RESIZING"


def wall_seconds(text):
    """A time limit as seconds, read as Slurm reads one: minutes, minutes:seconds,
    hours:minutes:seconds, days-hours, days-hours:minutes or days-hours:minutes:seconds."""
    try:
        if "-" in text:
            days, rest = text.split("-", 1)
            h, m, s = ([int(x) for x in rest.split(":")] + [0, 0])[:3]
            return ((int(days) * 24 + h) * 60 + m) * 60 + s
        parts = [int(x) for x in text.split(":")]
    except ValueError:
        return text
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def tres(text):
    """A TRES string as name -> count (memory in MiB)."""
    out = {}
    for part in filter(None, text.split(",")):
        name, _, count = part.partition("=")
        if name == "mem" and count[-1:].upper() in _SIZE:
            count = str(int(float(count[:-1]) * _SIZE[count[-1].upper()]))
        out[name.strip()] = count.strip()
    return out


def normal_limit(option, text):
    """A limit's value as compared: the same whether the site wrote it or sacctmgr printed it."""
    text = (text or "").strip()
    if option in TRES_LIMITS:
        return tres(text)
    if option == "Preempt":
        return sorted(filter(None, text.split(",")))
    if option == "MaxWall":
        return wall_seconds(text) if text else ""
    if option == "Priority":
        return text if text not in ("", "0") else ""
    return text


def qos_changes(want, have):
    """The `set` options that make a QoS's limits `want` (option -> site value) from `have`
    (option -> what sacctmgr printed); every managed limit the site leaves out is cleared."""
    sets = []
    for option in QOS_COLUMNS:
        wanted, had = normal_limit(option, want.get(option, "")), normal_limit(option, have.get(option, ""))
        if wanted == had:
            continue
        if option in TRES_LIMITS:
            cleared = [f"{t}=-1" for t in sorted(had) if t not in wanted]
            value = ",".join([f"{t}={c}" for t, c in sorted(wanted.items())] + cleared)
        elif option in want:
            value = str(want[option])
        else:
            value = CLEARED.get(option, "-1")
        sets.append(f"{option}={value}")
    return sets


def parse(text, columns):
    """sacctmgr's --parsable2 lines as dicts of `columns`."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            fields = line.split("|")
            rows.append(dict(zip(columns, fields + [""] * (len(columns) - len(fields)))))
    return rows


class State:
    """What slurmdbd holds for the cluster, as read by `sacctmgr show`."""

    def __init__(self, qos, accounts, assocs, users):
        self.qos = {q["Name"]: q for q in qos}
        self.org = {a["Account"]: a["Org"] for a in accounts}
        self.accounts = {a["Account"]: a for a in assocs if not a["User"]}
        self.user_assocs = {(a["User"], a["Account"]) for a in assocs if a["User"]}
        self.default_account = {u["User"]: u["Def Acct"] for u in users}

    def ours(self, account):
        return self.org.get(account) == MARK

    def qos_ours(self, name):
        return self.qos.get(name, {}).get("Descr") == MARK


def _ancestors_first(accounts):
    """Accounts ordered so that each parent the site declares comes before its children."""
    by_name = {a["name"]: a for a in accounts}
    order, seen = [], set()

    def visit(name, trail=()):
        if name in seen or name not in by_name or name in trail:
            return
        visit(by_name[name]["parent"], trail + (name,))
        seen.add(name)
        order.append(by_name[name])

    for a in accounts:
        visit(a["name"])
    return order


def plan(cluster, want, state, prune):
    """The sacctmgr commands (argument lists without `sacctmgr --immediate`) that make `state`
    what `want` says, in an order sacctmgr takes; and what they remove: [(kind, name, user)]."""
    adds, sets, removals = [], [], []
    where = [f"cluster={cluster}"]
    for q in want["qos"]:
        if q["name"] not in state.qos:
            adds.append(["add", "qos", q["name"], f"Description={MARK}"])
        changes = qos_changes(q["limits"], state.qos.get(q["name"], {}))
        if changes:
            sets.append(["modify", "qos", "where", f"name={q['name']}", "set", *changes])
    for a in _ancestors_first(want["accounts"]):
        have = state.accounts.get(a["name"])
        options = [f"Parent={a['parent']}", f"Fairshare={a['fairshare']}"]
        options += [f"QOS={','.join(a['qos'])}"] if a["qos"] else []
        options += [f"DefaultQOS={a['default_qos']}"] if a.get("default_qos") else []
        if have is None:
            adds.append(
                ["add", "account", a["name"], *where, f"Organization={MARK}", f"Description={a['name']}", *options]
            )
            continue
        changed = []
        if have["Par Name"] != a["parent"]:
            changed.append(f"Parent={a['parent']}")
        if have["Share"] != str(a["fairshare"]):
            changed.append(f"Fairshare={a['fairshare']}")
        if a["qos"] and sorted(filter(None, have["QOS"].split(","))) != sorted(a["qos"]):
            changed.append(f"QOS={','.join(a['qos'])}")
        if a.get("default_qos") and have["Def QOS"] != a["default_qos"]:
            changed.append(f"DefaultQOS={a['default_qos']}")
        if changed:
            sets.append(["modify", "account", "where", f"name={a['name']}", *where, "set", *changed])
    for u in want["users"]:
        new = [acct for acct in u["accounts"] if (u["name"], acct) not in state.user_assocs]
        if new:
            default = u["default_account"] if u["name"] not in state.default_account else None
            adds.append(
                ["add", "user", u["name"], f"Account={','.join(new)}", *where]
                + ([f"DefaultAccount={default}"] if default else [])
            )
        if u["name"] in state.default_account and state.default_account[u["name"]] != u["default_account"]:
            sets.append(
                [
                    "modify",
                    "user",
                    "where",
                    f"name={u['name']}",
                    *where,
                    "set",
                    f"DefaultAccount={u['default_account']}",
                ]
            )
    deletes = _removals(cluster, want, state, prune, removals)
    return adds + sets + deletes, removals


def _removals(cluster, want, state, prune, removals):
    """Deletions: users' associations first, then accounts (children before parents), then QoS."""
    where = [f"cluster={cluster}"]
    wanted_accounts = {a["name"] for a in want["accounts"]}
    wanted_assocs = {(u["name"], acct) for u in want["users"] for acct in u["accounts"]}
    out = []
    for user, account in sorted(state.user_assocs):
        if (user, account) in wanted_assocs or user == ROOT_USER or account not in state.accounts:
            continue
        if state.ours(account) or prune:
            removals.append(("user", account, user))
            out.append(["delete", "user", "where", f"name={user}", f"account={account}", *where])
    gone = [a for a in state.accounts if a not in wanted_accounts and a != ROOT_ACCOUNT and (state.ours(a) or prune)]
    depth = {a: _depth(a, state) for a in gone}
    for account in sorted(gone, key=lambda a: (-depth[a], a)):
        removals.append(("account", account, None))
        out.append(["delete", "account", "where", f"name={account}", *where])
    wanted_qos = {q["name"] for q in want["qos"]}
    for name in sorted(state.qos):
        if name not in wanted_qos and name != BUILTIN_QOS and (state.qos_ours(name) or prune):
            removals.append(("qos", name, None))
            out.append(["delete", "qos", "where", f"name={name}"])
    return out


def _depth(account, state):
    depth, at, seen = 0, account, set()
    while at in state.accounts and at not in seen:
        seen.add(at)
        at = state.accounts[at]["Par Name"]
        depth += 1
    return depth


def _run(module, argv, what):
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg=f"{what}: {' '.join(argv)} exited {rc}: {(err or out).strip()[-500:]}", rc=rc)
    return out


def read_state(module, cluster):
    show = ["sacctmgr", "--noheader", "--parsable2", "show"]
    qos = parse(
        _run(module, show + ["qos", "format=Name,Descr," + ",".join(QOS_COLUMNS.values())], "read QoS"),
        ["Name", "Descr", *QOS_COLUMNS],
    )
    accounts = parse(_run(module, show + ["account", "format=Account,Org"], "read accounts"), ["Account", "Org"])
    assocs = parse(
        _run(
            module,
            show + ["association", f"cluster={cluster}", "format=Account,User,ParentName,Share,QOS,DefaultQOS"],
            "read associations",
        ),
        ["Account", "User", "Par Name", "Share", "QOS", "Def QOS"],
    )
    users = parse(_run(module, show + ["user", "format=User,DefaultAccount"], "read users"), ["User", "Def Acct"])
    return State(qos, accounts, assocs, users)


def live_jobs(module, removals):
    """Removals that would take an account or user with live jobs: (what, job count)."""
    refused = []
    for kind, account, user in removals:
        if kind == "qos":
            argv = ["squeue", "--noheader", "--all", f"--qos={account}", f"--states={LIVE_STATES}", "--format=%i"]
            what = f"QoS {account}"
        else:
            argv = ["squeue", "--noheader", "--all", f"--account={account}", f"--states={LIVE_STATES}", "--format=%i"]
            argv += [f"--user={user}"] if user else []
            what = f"user {user}'s association with account {account}" if user else f"account {account}"
        jobs = [line for line in _run(module, argv, "count live jobs").splitlines() if line.strip()]
        if jobs:
            refused.append((what, len(jobs)))
    return refused


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cluster=dict(type="str", required=True),
            accounts=dict(type="list", elements="dict", default=[]),
            users=dict(type="list", elements="dict", default=[]),
            qos=dict(type="list", elements="dict", default=[]),
            prune=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    want = {
        "qos": [{"name": q["name"], "limits": q.get("limits") or {}} for q in p["qos"]],
        "accounts": [
            {
                "name": a["name"],
                "parent": a.get("parent") or ROOT_ACCOUNT,
                "fairshare": int(a.get("fairshare") or 1),
                "qos": list(a.get("qos") or []),
                "default_qos": a.get("default_qos"),
            }
            for a in p["accounts"]
        ],
        "users": [
            {
                "name": u["name"],
                "accounts": list(u["accounts"]),
                "default_account": u.get("default_account") or u["accounts"][0],
            }
            for u in p["users"]
        ],
    }
    commands, removals = plan(p["cluster"], want, read_state(module, p["cluster"]), p["prune"])
    refused = live_jobs(module, removals)
    if refused:
        module.fail_json(
            msg="not removed while it has jobs (let them end or cancel them, then deploy again): "
            + "; ".join(f"{what}: {n} job(s)" for what, n in refused),
            refused=[{"what": what, "jobs": n} for what, n in refused],
            commands=commands,
        )
    unknown = [u["name"] for u in want["users"] if module.run_command(["getent", "passwd", u["name"]])[0] != 0]
    if unknown:
        # slurmctld matches a job to its association by uid, and learns the uid of a user added
        # before their login existed only hourly or when reconfigured (its background thread).
        module.warn(
            f"no login on this host for {', '.join(unknown)}: Slurm refuses their jobs until the site's "
            "directory knows them and slurmctld has looked again (hourly, or at `scontrol reconfigure`)"
        )
    diff = {"prepared": "".join(f"sacctmgr --immediate {' '.join(c)}\n" for c in commands)}
    if not commands:
        module.exit_json(changed=False, commands=[], msg="policy: nothing to change")
    if not module.check_mode:
        for command in commands:
            _run(module, ["sacctmgr", "--immediate", *command], "apply the policy")
    module.exit_json(
        changed=True,
        commands=commands,
        diff=diff,
        msg=f"policy: {len(commands)} change(s)" + (f", {len(removals)} removal(s)" if removals else ""),
    )


if __name__ == "__main__":
    main()
