"""Building the site's Slurm policy (slurm.accounting.policy): accounts, users, QoS, fair share.

Every name the policy uses is one it declares, or one Slurm has from the start (the account root,
the QoS normal); the account tree has no loop; a partition that ties itself to QoS or accounts
(its QOS, AllowQos, DenyQos, AllowAccounts, DenyAccounts options) names ones the policy has.
"""

from __future__ import annotations

from podctl.core.model import PRIORITY_WEIGHTS, QOS_LIMITS, Partition, SlurmAccount, SlurmPolicy, SlurmQos, SlurmUser
from podctl.core.suggest import did_you_mean
from podctl.core.yamlsource import PathKey

# What Slurm has before any policy: the account every other descends from, and the QoS every
# association gets unless told otherwise.
ROOT_ACCOUNT = "root"
BUILTIN_QOS = "normal"
# Partition options that name QoS or accounts (slurm.conf(5), PARTITION CONFIGURATION), lower case.
_PARTITION_QOS_OPTIONS = ("qos", "allowqos", "denyqos")
_PARTITION_ACCOUNT_OPTIONS = ("allowaccounts", "denyaccounts")


def tres_text(given: dict) -> str:
    """A TRES mapping as sacctmgr takes and prints it: name=count, comma-separated, in name order."""
    return ",".join(f"{name}={given[name]}" for name in sorted(given))


class SlurmPolicySection:
    """The policy part of SlurmSection (see slurm.py)."""

    def slurm_policy(self, path: PathKey, given: dict) -> SlurmPolicy:
        qos = self.policy_qos(path + ("qos",), given.get("qos", []))
        qos_names = {q.name for q in qos} | {BUILTIN_QOS}
        accounts = self.policy_accounts(path + ("accounts",), given.get("accounts", []), qos_names)
        users = self.policy_users(path + ("users",), given.get("users", []), {a.name for a in accounts})
        priority = given.get("priority", {})
        return SlurmPolicy(
            accounts=accounts,
            users=users,
            qos=qos,
            priority_weights=tuple((key, int(priority.get(site_key, d))) for key, site_key, d in PRIORITY_WEIGHTS),
            decay_half_life=priority.get("decay_half_life", SlurmPolicy.decay_half_life),
            prune=given.get("prune", False),
        )

    def _unique(self, path: PathKey, entries: list[dict], what: str) -> dict[str, int]:
        """Each entry's name once; returns name -> index of its first entry."""
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            if entry["name"] in seen:
                self.report.error(
                    path + (i, "name"),
                    f"{what} {entry['name']!r} is already declared in {path[-1]}[{seen[entry['name']]}]",
                    code="duplicate",
                )
            seen.setdefault(entry["name"], i)
        return seen

    def _known(self, path: PathKey, name: str, known: set[str], what: str, hint: str) -> bool:
        if name in known:
            return True
        self.report.error(
            path, f"{what} {name!r} is not in the policy", did_you_mean(name, known) or hint, code="policy"
        )
        return False

    def policy_qos(self, path: PathKey, declared: list[dict]) -> tuple[SlurmQos, ...]:
        self._unique(path, declared, "QoS")
        names = {q["name"] for q in declared} | {BUILTIN_QOS}
        out = []
        for i, q in enumerate(declared):
            for j, other in enumerate(q.get("preempt", [])):
                if other == q["name"]:
                    self.report.error(path + (i, "preempt", j), f"QoS {other!r} cannot preempt itself", code="policy")
                else:
                    self._known(path + (i, "preempt", j), other, names, "QoS", "declare it under qos")
            limits = []
            for key, option in QOS_LIMITS.items():
                if key not in q:
                    continue
                value = q[key]
                if isinstance(value, dict):
                    text = tres_text(value)
                elif isinstance(value, list):
                    text = ",".join(value)
                else:
                    text = str(value)
                if text:
                    limits.append((option, text))
            out.append(SlurmQos(name=q["name"], limits=tuple(limits)))
        return tuple(out)

    def policy_accounts(self, path: PathKey, declared: list[dict], qos_names: set[str]) -> tuple[SlurmAccount, ...]:
        first = self._unique(path, declared, "account")
        names = set(first) | {ROOT_ACCOUNT}
        out = []
        for i, a in enumerate(declared):
            apath = path + (i,)
            if a["name"] == ROOT_ACCOUNT:
                self.report.error(
                    apath + ("name",),
                    "the account root is Slurm's own: every account descends from it",
                    "give the site's accounts names of their own (their parent defaults to root)",
                    code="policy",
                )
            parent = a.get("parent", ROOT_ACCOUNT)
            self._known(apath + ("parent",), parent, names, "parent account", "declare it under accounts, or use root")
            qos = tuple(a.get("qos", ()))
            for j, name in enumerate(qos):
                self._known(apath + ("qos", j), name, qos_names, "QoS", "declare it under qos")
            default_qos = a.get("default_qos")
            if default_qos is not None and self._known(
                apath + ("default_qos",), default_qos, qos_names, "QoS", "declare it under qos"
            ):
                if qos and default_qos not in qos:
                    self.report.error(
                        apath + ("default_qos",),
                        f"default_qos {default_qos!r} is not one of the account's qos {list(qos)}",
                        "add it to qos, or pick one of them",
                        code="policy",
                    )
            out.append(SlurmAccount(a["name"], parent, a.get("fairshare", 1), qos, default_qos))
        self._account_loops(path, out, first)
        return tuple(out)

    def _account_loops(self, path: PathKey, accounts: list[SlurmAccount], index: dict[str, int]) -> None:
        """An account that is its own ancestor: Slurm's tree would have no way to root."""
        parent = {a.name: a.parent for a in accounts}
        for a in accounts:
            if a.name == ROOT_ACCOUNT:
                continue  # refused by name already
            seen, at = [a.name], a.parent
            while at in parent and at not in seen:
                seen.append(at)
                at = parent[at]
            if at == a.name:
                self.report.error(
                    path + (index[a.name], "parent"),
                    f"account {a.name!r} is its own ancestor: {' -> '.join(seen + [a.name])}",
                    "give one account of the loop a parent outside it (root at the top)",
                    code="policy",
                )

    def policy_users(self, path: PathKey, declared: list[dict], accounts: set[str]) -> tuple[SlurmUser, ...]:
        self._unique(path, declared, "user")
        out = []
        for i, u in enumerate(declared):
            upath = path + (i,)
            names = tuple(u["accounts"])
            for j, name in enumerate(names):
                self._known(upath + ("accounts", j), name, accounts, "account", "declare it under accounts")
            default = u.get("default_account", names[0])
            if default not in names:
                self.report.error(
                    upath + ("default_account",),
                    f"default_account {default!r} is not one of the user's accounts {list(names)}",
                    "add it to accounts, or pick one of them",
                    code="policy",
                )
            out.append(SlurmUser(u["name"], names, default))
        return tuple(out)

    def policy_preemption(self, path: PathKey, declared: list[dict], config: tuple[tuple[str, str], ...]) -> None:
        """A QoS that preempts others does so only under PreemptType=preempt/qos (slurm.config)."""
        preempt_type = next((value for key, value in config if key.lower() == "preempttype"), "preempt/none")
        for i, q in enumerate(declared):
            if q.get("preempt") and preempt_type.lower() != "preempt/qos":
                self.report.warning(
                    path + (i, "preempt"),
                    f"QoS {q['name']!r} preempts {', '.join(q['preempt'])}, but PreemptType is {preempt_type}: "
                    "Slurm will preempt nothing",
                    "set PreemptType: preempt/qos (and a PreemptMode) in slurm.config",
                    code="policy",
                )

    def policy_partitions(self, path: PathKey, partitions: tuple[Partition, ...], policy: SlurmPolicy) -> None:
        """A partition's QoS and account options name what the policy has."""
        qos = {q.name for q in policy.qos} | {BUILTIN_QOS}
        accounts = {a.name for a in policy.accounts} | {ROOT_ACCOUNT}
        for i, partition in enumerate(partitions):
            for key, value in partition.options:
                lower = key.lower()
                if lower in _PARTITION_QOS_OPTIONS:
                    known, what = qos, "QoS"
                elif lower in _PARTITION_ACCOUNT_OPTIONS:
                    known, what = accounts, "account"
                else:
                    continue
                for name in value.split(","):
                    if name.lower() != "all":
                        self._known(
                            path + ("partitions", i, "options", key),
                            name,
                            known,
                            what,
                            f"declare it under slurm.accounting.policy.{'qos' if what == 'QoS' else 'accounts'}",
                        )
