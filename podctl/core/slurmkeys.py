"""The keys each supported release's Slurm knows, read from that release's own man pages.

podctl lets a site add Slurm settings of its own (slurm.config, slurm.cgroup_config, a partition's
options), and refuses a key its release's Slurm does not know before any node sees it. The lists
are never typed by hand: `make slurm-keys` reads slurm.conf(5) and cgroup.conf(5) as Debian ships
them with each release's Slurm (tests/helpers/slurm_man.py) and writes slurm-keys.json beside this
module; a test reads the same pages again and fails when the file differs.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

KEYS_FILE = "slurm-keys.json"
# Where each list comes from: (man page, its .SH sections holding the keys, or () for all of them).
SOURCES = {
    "slurm.conf": ("slurm.conf.5", ("PARAMETERS",)),
    "partition": ("slurm.conf.5", ("PARTITION CONFIGURATION",)),
    "cgroup.conf": ("cgroup.conf.5", ()),
}
_KEY = re.compile(r"\\fB([A-Z][A-Za-z0-9]*)\\f[RP]")


def keys_from_man(roff: str, sections: tuple[str, ...] = ()) -> list[str]:
    """The keys a man page (roff source) describes: each `.TP` entry whose tag starts with a bold
    CamelCase word, outside any indented block (.RS/.RE: a key's values are listed there), in the
    given sections (all when none)."""
    keys: list[str] = []
    section, depth = "", 0
    lines = roff.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SH"):
            section, depth = line[3:].strip().strip('"'), 0
        elif line.startswith(".RS"):
            depth += 1
        elif line.startswith(".RE"):
            depth = max(0, depth - 1)
        elif line.startswith(".TP") and depth == 0 and (not sections or section in sections) and i + 1 < len(lines):
            found = _KEY.match(lines[i + 1])
            if found and found.group(1) not in keys:
                keys.append(found.group(1))
    return keys


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, object]]:
    return json.loads(resources.files("podctl.core").joinpath(KEYS_FILE).read_text(encoding="utf-8"))


def releases() -> tuple[str, ...]:
    """The Slurm releases ("24.11") the table covers."""
    return tuple(_table())


def known_keys(release: str, where: str) -> dict[str, str]:
    """The keys release `release` knows in `where` (a SOURCES name), lower case -> as the man page
    writes it (Slurm reads keys without regard to case); empty for a release the table lacks."""
    entry = _table().get(release, {})
    return {key.lower(): key for key in entry.get(where, [])}  # type: ignore[union-attr]


# What podctl writes itself, and the site key that decides it (None: podctl's own choice, which no
# site key changes). A site's own settings may not name these (tests/deploy/test_slurm_settings.py
# checks the table against every key the slurm role renders).
PODCTL_SETS: dict[str, dict[str, str | None]] = {
    "slurm.conf": {
        "ClusterName": "slurm.cluster_name",
        "SlurmctldHost": "slurm.controllers",
        "StateSaveLocation": "slurm.controllers (several share storage)",
        "SelectType": "slurm.select_type",
        "SelectTypeParameters": "slurm.select_type",
        "TopologyPlugin": "slurm.select_type",
        "GresTypes": "slurm.gres",
        "JobAcctGatherType": "slurm.accounting",
        "JobAcctGatherFrequency": "slurm.accounting",
        "AccountingStorageType": "slurm.accounting",
        "AccountingStorageHost": "slurm.accounting",
        "AccountingStoragePort": "slurm.accounting",
        "AccountingStorageEnforce": "slurm.accounting.policy",
        "AccountingStorageTRES": "slurm.accounting.policy",
        "PriorityType": "slurm.accounting.policy",
        "PriorityWeightFairshare": "slurm.accounting.policy.priority.fairshare",
        "PriorityWeightAge": "slurm.accounting.policy.priority.age",
        "PriorityWeightQOS": "slurm.accounting.policy.priority.qos",
        "PriorityWeightJobSize": "slurm.accounting.policy.priority.job_size",
        "PriorityWeightPartition": "slurm.accounting.policy.priority.partition",
        "PriorityDecayHalfLife": "slurm.accounting.policy.priority.decay_half_life",
        "HealthCheckProgram": "slurm.health_check",
        "HealthCheckInterval": "slurm.health_check.interval",
        "HealthCheckNodeState": "slurm.health_check.node_states",
        "Prolog": "slurm.health_check.prolog",
        "PrologEpilogTimeout": "slurm.health_check.timeout",
        "NodeName": "nodes",
        "PartitionName": "slurm.partitions",
        "AuthType": None,
        "CredType": None,
        "MailProg": None,
        "SlurmUser": None,
        "SlurmctldPort": None,
        "SlurmdPort": None,
        "SlurmdSpoolDir": None,
        "SlurmctldPidFile": None,
        "SlurmdPidFile": None,
        "SlurmctldLogFile": None,
        "MpiDefault": None,
        "ProctrackType": None,
        "TaskPlugin": None,
        "SlurmdParameters": None,
        "ReturnToService": None,
        "SlurmctldTimeout": None,
        "SlurmdTimeout": None,
        "SchedulerType": None,
        "JobCompType": None,
    },
    "partition": {
        "PartitionName": "slurm.partitions[].name",
        "Nodes": "slurm.partitions[].nodes",
        "Default": "slurm.partitions[].default",
        "MaxTime": "slurm.partitions[].max_time",
        "State": None,
    },
    "cgroup.conf": {
        "CgroupPlugin": None,
        "ConstrainCores": None,
        "ConstrainRAMSpace": None,
        "ConstrainDevices": None,
    },
}
# Where each kind of setting goes, as a site's message names it.
FILES = {"slurm.conf": "slurm.conf", "partition": "a PartitionName line of slurm.conf", "cgroup.conf": "cgroup.conf"}
# What a value may not hold: it is written as KEY=VALUE on a line of its own (or among the options
# of a PartitionName line), and Slurm's parser splits settings at whitespace, takes `#` to the end
# of the line as a comment, joins a line ending in `\` with the next, and reads quotes as its own.
_VALUE_PROBLEMS = (
    (re.compile(r"[\n\r\v\f\x85\u2028\u2029]"), "holds a line break: what follows would be a line of its own"),
    (re.compile(r"#"), "holds a '#': Slurm reads the rest of the line as a comment"),
    (re.compile(r"\s"), "holds whitespace: Slurm would read what follows as another setting"),
    (re.compile(r"\\"), "holds a backslash: at a line's end it joins the next line to it"),
    (re.compile(r"[\"']"), "holds a quote, which Slurm's parser reads as its own"),
    (re.compile(r"[\x00-\x1f\x7f]"), "holds a control character"),
)


def setting_value(value: object) -> str:
    """A site's value as slurm.conf writes it: YES/NO for YAML's booleans, numbers as written."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return str(value)


def value_problem(text: str) -> str | None:
    """Why `text` cannot be a Slurm setting's value (it would change more than that setting), or None."""
    if not text:
        return "is empty"
    return next((why for pattern, why in _VALUE_PROBLEMS if pattern.search(text)), None)
