"""A deploy that would change nothing costs one look per node.

After a deploy run succeeds, each node keeps a record (the collection's `converged` module, in
/var/lib/podctl/converged.json, root's alone) of two things:

- the **fingerprint** of what the run was made of: podctl itself (its playbooks, roles and the
  validation package), the rendered inventory, the controller files the roles copy (named by
  `podctl.derive.inventory.controller_inputs`), the stages and the hosts;
- a **snapshot** of every resource the run's tasks managed on that node, taken from the run's
  own events (each file, folder and link a file task wrote or checked, secrets' files included,
  every service, user and group), plus whole trees (each folder a role declares root's alone with
  `podctl.pod.root_tree`, and the validation tools), the package database and the hostname. Its
  digests are keyed with a key of the node's own.

The next deploy (and conformance's drift check) first asks every node, in one task, whether its
record's fingerprint is the one podctl computes now and whether a new snapshot of the same
resources matches. If every node says yes, running the roles again would find nothing to do:
the deploy stops there. Any difference (an edited site, a new podctl, a file changed by hand, a
service stopped, a package installed or removed) and the whole run goes ahead as before, every
task, and its success writes a new record. A run that starts forgets the record first, so a run
that stops half-way leaves none.

What the record does not see: effects of the roles that are no file, service, user, group or
package (a database row the slurm role added, a kernel setting applied at run time). `podctl
deploy --full` runs every task whatever the records say; docs/deploy.md says when to use it.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from podctl.core import assets
from podctl.core.errors import PodctlError
from podctl.core.hostlist import fold as fold_hostlist
from podctl.runtime.ansible import AnsibleSettings, run_playbook

PLAYBOOK = "converged.yml"
# Bumped when what goes into a fingerprint changes: every record then differs once.
FINGERPRINT_VERSION = "1"
# Actions whose results name a file, folder or link on the node (dest or path).
FILE_ACTIONS = frozenset({"template", "copy", "file", "blockinfile", "lineinfile", "assemble", "secret_file"})
# The collection's check of the folders a role owns whole: its result names them (`trees`).
TREE_ACTION = "root_tree"
_KIND_OF_ACTION = {"systemd_service": "services", "systemd": "services", "service": "services", "user": "users",
                   "group": "groups"}  # fmt: skip
_SKIP_DIRS = frozenset({"__pycache__"})


class ConvergedError(PodctlError):
    pass


def _hash_tree(digest: Any, root: Path, content: bool) -> None:
    """Every file under root by relative path: its content, or (content=False) its size and mtime."""
    if root.is_file():
        digest.update(b"F" + (root.read_bytes() if content else str(root.stat().st_size).encode()))
        return
    if not root.is_dir():
        digest.update(b"absent")
        return
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if _SKIP_DIRS.intersection(rel.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        digest.update(str(rel).encode() + b"\0")
        if content:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        else:
            st = path.stat()
            digest.update(f"{st.st_size} {st.st_mtime_ns}".encode())


def fingerprint(
    inventory_dir: Path,
    controller_inputs: Iterable[tuple[Path, bool]],
    stages: Iterable[str],
    hosts: Iterable[str],
    playbooks_dir: Path | None = None,
) -> str:
    """What a deploy run is made of, as one hex digest.

    controller_inputs: (path, by_content) for each controller file or folder the roles copy;
    a folder of wheels is compared by names, sizes and times (by_content False)."""
    digest = hashlib.sha256(f"podctl converged {FINGERPRINT_VERSION}\n".encode())
    for label, root, content in (
        ("podctl", assets.collections_path(), True),
        ("validation", assets.validation_package(), True),
        ("playbooks", playbooks_dir, True),
        ("inventory", inventory_dir, True),
    ):
        if root is not None:
            digest.update(f"\n[{label}]\n".encode())
            _hash_tree(digest, Path(root), content)
    for path, content in sorted(controller_inputs):
        digest.update(f"\n[controller {path}]\n".encode())
        _hash_tree(digest, path, content)
    digest.update(("\n[stages] " + ",".join(stages) + "\n[hosts] " + ",".join(sorted(hosts))).encode())
    return digest.hexdigest()


@dataclass
class ResourceCollector:
    """ansible-runner events of a run -> per host, the resources its tasks managed there.

    tools_path: the validation tools' folder, kept whole (a tree) on the hosts where the
    validation_tools role ran.

    A file task whose result Ansible censored (no_log) names no path: the host's record would miss
    that file, so the host is `unrecorded` (its task named) and keeps no record of the run. The
    collection writes no file under no_log (a secret's file through `secret_file`, which returns
    no secret; tests/deploy/test_collection.py holds every role to it): this is the guard behind
    that rule."""

    tools_path: str | None = None
    hosts: dict[str, dict[str, set[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    unrecorded: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def feed(self, event: dict[str, Any]) -> None:
        if event.get("event") != "runner_on_ok":
            return
        data = event.get("event_data") or {}
        host = data.get("host")
        if not isinstance(host, str):
            return
        action = str(data.get("resolved_action") or data.get("task_action") or "").rsplit(".", 1)[-1]
        if data.get("role") == "validation_tools" and self.tools_path:
            self.hosts[host]["trees"].add(self.tools_path)
        res = data.get("res") or {}
        if "_ansible_delegated_vars" in res:
            return  # done on another host (the controller, the Slurm primary): not this one's
        if table := _nft_table_checked(action, res):
            self.hosts[host]["nft_tables"].add(table)
            return
        if action == TREE_ACTION:
            self.hosts[host]["trees"].update(t for t in res.get("trees") or [] if isinstance(t, str) and t)
            return
        kind = "files" if action in FILE_ACTIONS else _KIND_OF_ACTION.get(action)
        if kind is None:
            return
        items = res.get("results") if isinstance(res.get("results"), list) else [res]
        for item in items:
            if kind == "files" and isinstance(item, dict) and "censored" in item:
                self.unrecorded[host].append(str(data.get("task") or action))
            elif isinstance(item, dict) and not item.get("skipped") and "_ansible_delegated_vars" not in item:
                name = _resource_name(kind, action, item)
                if name:
                    self.hosts[host][kind].add(name)

    def resources(self) -> dict[str, dict[str, list[str]]]:
        return {h: {k: sorted(v) for k, v in kinds.items()} for h, kinds in self.hosts.items()}


def _nft_table_checked(action: str, res: dict[str, Any]) -> str | None:
    """A role's check that its nftables table is loaded (`nft list table FAMILY NAME`): the table
    lives in the kernel alone, so the record keeps it (what nft lists) too."""
    cmd = res.get("cmd")
    words = cmd.split() if isinstance(cmd, str) else cmd
    if action == "command" and isinstance(words, list) and len(words) == 5 and words[:3] == ["nft", "list", "table"]:
        return f"{words[3]} {words[4]}"
    return None


def _resource_name(kind: str, action: str, item: dict[str, Any]) -> str | None:
    args = (item.get("invocation") or {}).get("module_args") or {}
    if kind == "files":
        value = item.get("dest") or item.get("path") or args.get("dest") or args.get("path")
    else:
        value = item.get("name") or args.get("name")
    return value if isinstance(value, str) and value and "\n" not in value else None


@dataclass
class HostVerdict:
    converged: bool
    why: list[str]
    resources: int = 0
    # Its record was made by a run of the same inputs (True), of others (False); None: no record
    # could be read, or the host could not be asked.
    inputs_same: bool | None = None


@dataclass
class Verdicts:
    hosts: dict[str, HostVerdict]
    seconds: float
    run_dir: Path

    @property
    def converged(self) -> bool:
        return bool(self.hosts) and all(v.converged for v in self.hosts.values())

    @property
    def resources(self) -> int:
        return sum(v.resources for v in self.hosts.values())

    def drifted_alone(self) -> list[str] | None:
        """The hosts a run must touch when it can leave the others be: those not as their records
        say, when some host is and no host's record was made by a run of other inputs. A record that
        holds proves this run's inputs are the ones that host was converged with (the site, podctl,
        the files it copies, the stages and the hosts are in the fingerprint), so a host that
        differs in what it holds, or keeps no record (replaced, or forgotten by a run that stopped),
        is brought back by a run on it alone. None: every host runs (the inputs changed, or no host
        holds, or every host does)."""
        held = [h for h, v in self.hosts.items() if v.converged]
        rest = [h for h, v in self.hosts.items() if not v.converged]
        if not held or not rest or any(self.hosts[h].inputs_same is False for h in rest):
            return None
        return sorted(rest)

    def summary(self) -> list[str]:
        """A line per reason of the hosts that are not as their records say (hosts sharing their only
        reason, such as a changed site, on one line)."""
        by_reason: dict[str, list[str]] = defaultdict(list)
        for host, verdict in sorted(self.hosts.items()):
            if not verdict.converged:
                more = f" (and {len(verdict.why) - 1} more)" if len(verdict.why) > 1 else ""
                by_reason[f"{verdict.why[0] if verdict.why else 'no answer'}{more}"].append(host)
        return [f"{fold_hostlist(hosts)}: {reason}" for reason, hosts in by_reason.items()]


@dataclass(frozen=True)
class Target:
    """Which hosts to ask or write, through which inventory and settings; the run's folder keeps
    ansible-runner's artifacts."""

    private_dir: Path
    inventory_dir: Path
    settings: AnsibleSettings
    hosts: list[str]
    limited: bool = False


def _run(
    target: Target,
    ident: str,
    extravars: dict[str, object],
    on_event: Callable[[dict[str, Any]], None] | None,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Run the collection's converged.yml; each host's module result, and each failed host's why."""
    target.private_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    problems: dict[str, str] = {}

    def handler(event: dict[str, Any]) -> None:
        data = event.get("event_data") or {}
        host = data.get("host")
        kind = event.get("event")
        if isinstance(host, str):
            res = data.get("res") or {}
            if kind == "runner_on_ok":
                results[host] = res
            elif kind in ("runner_on_failed", "runner_on_unreachable"):
                problems[host] = str(res.get("msg") or kind).strip().splitlines()[0][:300] if res else str(kind)
        if on_event is not None:
            on_event(event)

    run_playbook(
        private_data_dir=target.private_dir,
        ident=ident,
        playbook=assets.playbooks_dir() / PLAYBOOK,
        inventory=target.inventory_dir,
        settings=target.settings,
        extravars=extravars,
        limit=target.hosts if target.limited else None,
        on_event=handler,
    )
    return results, problems


def verify(target: Target, print_: str, on_event: Callable[[dict[str, Any]], None] | None = None) -> Verdicts:
    """Ask every host whether it is as the last deploy that converged it left it (nothing changes)."""
    started = time.monotonic()
    results, problems = _run(
        target,
        "converged",
        {"podctl_converged_state": "verified", "podctl_converged_fingerprint": print_},
        on_event,
    )
    verdicts = {}
    for host in target.hosts:
        res = results.get(host)
        if res is None:
            verdicts[host] = HostVerdict(False, [f"could not be asked: {problems.get(host, 'no answer')}"])
        else:
            why = [str(w) for w in res.get("why") or []]
            same = res.get("inputs_same")
            verdicts[host] = HostVerdict(
                bool(res.get("converged")) and not why,
                why,
                int(res.get("resources") or 0),
                same if isinstance(same, bool) else None,
            )
    return Verdicts(verdicts, time.monotonic() - started, target.private_dir)


def seal(
    target: Target,
    print_: str,
    resources: dict[str, dict[str, list[str]]],
    unrecorded: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """Write each host's record after a run that succeeded; the hosts it did not write, and why. A
    host where a file task's result was censored (`ResourceCollector.unrecorded`) keeps none: its
    record could not name that file."""
    skipped = {
        h: f"task(s) {', '.join(repr(t) for t in tasks[:3])} wrote a file under no_log, which a record cannot name"
        for h, tasks in (unrecorded or {}).items()
        if tasks and h in target.hosts
    }
    if skipped:
        rest = [h for h in target.hosts if h not in skipped]
        if not rest:
            return skipped
        target = replace(target, hosts=rest, limited=True)
    results, problems = _run(
        target,
        "seal",
        {
            "podctl_converged_state": "present",
            "podctl_converged_fingerprint": print_,
            "podctl_converged_resources": {h: resources.get(h, {}) for h in target.hosts},
        },
        None,
    )
    return skipped | {h: problems.get(h, "no answer") for h in target.hosts if h not in results}


def forget_play() -> list[str]:
    """The wrapper playbook's first play: every host forgets its record before the run changes it."""
    return [
        "- name: Forget the record of the last converged deploy (a run that stops half-way leaves none)",
        f"  ansible.builtin.import_playbook: {(assets.playbooks_dir() / PLAYBOOK).resolve()}",
        "  vars:",
        "    podctl_converged_state: absent",
    ]


def record_json(verdicts: Verdicts) -> dict[str, object]:
    """recap.json's account of what the records said: whether any task ran, and on which hosts
    alone (`ran_alone`: null when every host ran, or none)."""
    return {
        "converged": verdicts.converged,
        "ran_alone": verdicts.drifted_alone(),
        "converged_seconds": round(verdicts.seconds, 2),
        "converged_hosts": {
            h: {"converged": v.converged, "resources": v.resources, "why": v.why} for h, v in verdicts.hosts.items()
        },
    }
