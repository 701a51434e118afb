"""Conformance of a deployed pod, one set of tests per host of the inventory.

Not part of podctl's own test suite: run.py runs this file in a subprocess,

    python -m pytest test_conformance.py --hosts=ansible://all --ansible-inventory=INV \
        --ssh-identity-file=KEY --junitxml=...

with the tolerances in the environment (common.py). Configuration files are
not compared here: drift.py runs the roles themselves in check mode. What a
host must run, mount and hold is derived from its inventory variables (the
site model podctl rendered), never from what it happens to run.

A test that finds a problem fails with pytest.fail(one line per finding,
pytrace=False): run.py turns each line into a finding of the host's
envelope, so every line is written to be read in a certification report.

Why one module of this size: pytest runs it as one file in a subprocess on
the controller; its tests share per-host fixtures and caches.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections import Counter
from typing import Any

import pytest
import testinfra

from podctl.core import platforms
from podctl.validate.conformance.common import DEFAULT_TIME_TOLERANCE_S, ENV_TIME_TOLERANCE

MUNGE_KEY = "/etc/munge/munge.key"
SLURM_GROUPS = ("role_controller", "role_login", "role_compute")  # the hosts playbooks/slurm.yml configures
COMPUTE_GROUP = "role_compute"  # the slurm role's podctl_slurm_compute_group
# chronyd's Reference ID when it serves from its own clock (`local stratum`).
CHRONY_LOCAL_REFID = "7F7F0101"
# sinfo's compact states, as a report would say them.
SLURM_STATES = {
    "alloc": "allocated to a job",
    "mix": "partly allocated",
    "comp": "completing a job",
    "drain": "drained",
    "drng": "draining",
    "down": "down",
    "fail": "failed",
    "failg": "failing",
    "maint": "in maintenance",
    "resv": "reserved",
    "unk": "in an unknown state",
    "futr": "a future node",
    "plnd": "planned for a job",
    "pow_dn": "powered down",
    "pow_up": "powering up",
    "inval": "invalid",
    "blocked": "blocked",
    "npc": "not ready",
}
SLURM_FLAGS = {
    "*": "not responding",
    "~": "powered off",
    "#": "powering up",
    "!": "pending power down",
    "%": "powering down",
    "$": "in a maintenance reservation",
    "@": "pending reboot",
    "^": "rebooting",
    "-": "planned for a job",
}


class Unreachable(Exception):
    pass


# ---------------------------------------------------------------------------
# Per-host access, cached for the session: one reachability probe per host,
# its inventory variables, and the cross-host facts (munge keys, sinfo).

_REACH: dict[str, str | None] = {}
_MUNGE: dict[str, tuple[str | None, str | None]] = {}  # host -> (sha256, problem reaching it)
_SINFO: dict[str, Any] = {}
_SLURM_PACKAGES: dict[str, dict[str, str] | None] = {}  # host -> {package: version}, None unreachable


def _name(host: Any) -> str:
    return str(host.backend.host)


def _ssh_problem(exc: RuntimeError) -> str:
    result = exc.args[0] if exc.args else None
    stderr = getattr(result, "stderr", "") or str(exc)
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    return lines[-1] if lines else "ssh exited 255"


def _sh(host: Any, command: str, *args: str) -> Any:
    try:
        return host.run(command, *args)
    except RuntimeError as exc:  # ssh exits 255: the connection, not the command, failed
        raise Unreachable(f"{_name(host)} stopped answering over SSH ({_ssh_problem(exc)})") from exc


def _reach(host: Any) -> str | None:
    name = _name(host)
    if name not in _REACH:
        try:
            result = host.run("true")
            _REACH[name] = None if result.rc == 0 else f"a command on it exited {result.rc}: {result.stderr.strip()}"
        except RuntimeError as exc:
            _REACH[name] = _ssh_problem(exc)
    return _REACH[name]


@pytest.fixture(scope="session", autouse=True)
def _probe_every_host(request: pytest.FixtureRequest) -> None:
    """Reach every host at once before the first test: an unreachable host costs
    one SSH timeout in parallel with the others instead of one after another,
    and each host's multiplexed connection is open when its tests start."""
    from concurrent.futures import ThreadPoolExecutor

    hosts = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        host = callspec.params.get("_testinfra_host") if callspec else None
        if host is not None:
            hosts[_name(host)] = host
    runner = getattr(next(iter(hosts.values())).backend, "ansible_runner", None) if hosts else None
    if runner is not None:
        _ = runner.inventory  # `ansible-inventory --list` once, not in every thread
    with ThreadPoolExecutor(max_workers=min(32, max(1, len(hosts)))) as pool:
        list(pool.map(_reach, hosts.values()))


def _other(request: pytest.FixtureRequest, name: str) -> Any:
    """Another host of the inventory, reached the way the `host` fixture reaches its own."""
    opt = request.config.option
    return testinfra.get_host(
        f"ansible://{name}",
        ansible_inventory=opt.ansible_inventory,
        ssh_config=opt.ssh_config,
        ssh_identity_file=opt.ssh_identity_file,
        force_ansible=opt.force_ansible,
    )


def _plain(value: Any) -> Any:
    """Inventory values as written: `ansible-inventory --list` wraps the strings podctl tagged
    `!unsafe` (those holding a brace) as {"__ansible_unsafe": text}."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class Node:
    def __init__(self, host: Any) -> None:
        self.host = host
        self.vars: dict[str, Any] = _plain(host.ansible.get_variables())
        self.name: str = self.vars["inventory_hostname"]
        self.groups: list[str] = list(self.vars.get("group_names", []))

    def sh(self, command: str, *args: str) -> Any:
        return _sh(self.host, command, *args)

    @property
    def slurm(self) -> dict[str, Any] | None:
        return self.vars.get("podctl_slurm") or None

    @property
    def runs_slurm(self) -> bool:
        return self.slurm is not None and any(g in self.groups for g in SLURM_GROUPS)

    @property
    def emulated(self) -> bool:
        return bool(self.vars.get("podctl_emulated", False))


@pytest.fixture
def node(host: Any) -> Node:
    problem = _reach(host)
    if problem is not None:
        pytest.skip(f"unreachable: {problem}")
    return Node(host)


def _fail(problems: list[str]) -> None:
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _guard(test: Any) -> Any:
    """A host that stops answering mid-test fails that test with the reason, not a traceback."""
    import functools

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return test(*args, **kwargs)
        except Unreachable as exc:
            pytest.fail(str(exc), pytrace=False)

    return wrapper


# ---------------------------------------------------------------------------


def test_reachable(host: Any) -> None:
    problem = _reach(host)
    if problem is not None:
        pytest.fail(f"{_name(host)} cannot be reached over SSH: {problem}", pytrace=False)


def expected_services(node: Node) -> list[tuple[str, str]]:
    """(unit, why) for each service the host's roles call for."""
    out = [("chrony", "every node keeps time")]
    slurm = node.slurm
    if slurm is not None and node.runs_slurm:
        out.append(("munge", "it runs Slurm"))
        if COMPUTE_GROUP in node.groups:
            out.append(("slurmd", "it is a compute node"))
        controllers = list(slurm.get("controllers") or [])
        if node.name in controllers:
            out.append(("slurmctld", "it is a Slurm controller"))
        dbd_host = slurm.get("dbd_host") or (controllers[0] if controllers else None)
        if slurm.get("accounting") and node.name == dbd_host:
            out.append(("slurmdbd", "it keeps Slurm accounting"))
            out.append(("mariadb", "slurmdbd stores accounting in it"))
    monitoring = node.vars.get("podctl_monitoring") or None
    if monitoring is not None:
        if "node" in (monitoring.get("exporters") or []):
            out.append(("prometheus-node-exporter", "the site's monitoring lists the node exporter"))
        if node.name == monitoring.get("prometheus_host"):
            out.append(("prometheus", "it is the site's Prometheus host"))
            out.append(("prometheus-alertmanager", "it is the site's Prometheus host"))
    return out


def _systemctl_show(node: Node, units: list[str]) -> list[dict[str, str]]:
    result = node.sh(
        "systemctl show --property=Id,LoadState,ActiveState,UnitFileState " + " ".join(shlex.quote(u) for u in units)
    )
    blocks: list[dict[str, str]] = []
    for chunk in result.stdout.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in chunk.splitlines() if "=" in line)
        blocks.append(props)
    if len(blocks) != len(units):
        pytest.fail(
            f"systemctl show answered {len(blocks)} unit(s) for {len(units)}: {result.stderr.strip()}", pytrace=False
        )
    return blocks


@_guard
def test_services_active(node: Node) -> None:
    expected = expected_services(node)
    problems = []
    for (unit, why), props in zip(expected, _systemctl_show(node, [u for u, _ in expected])):
        if props.get("LoadState") == "not-found":
            problems.append(f"{unit} is not installed (needed because {why})")
            continue
        active = props.get("ActiveState", "?")
        if active != "active":
            problems.append(f"{unit} is not active ({active})")
        elif props.get("UnitFileState") not in ("enabled", "enabled-runtime", "static", "alias", "generated"):
            problems.append(f"{unit} is active but not enabled at boot ({props.get('UnitFileState', '?')})")
    _fail(problems)


# ---------------------------------------------------------------------------
# Munge key: same on every Slurm host, never read.


def _slurm_hosts(node: Node) -> list[str]:
    groups = node.vars.get("groups", {})
    return sorted({h for g in SLURM_GROUPS for h in groups.get(g, [])})


def _munge_of(request: pytest.FixtureRequest, name: str, host: Any | None = None) -> tuple[str | None, str | None]:
    if name not in _MUNGE:
        host = host or _other(request, name)
        problem = _reach(host)
        if problem is not None:
            _MUNGE[name] = (None, problem)
        else:
            try:
                result = _sh(host, "sha256sum -- %s", MUNGE_KEY)
                _MUNGE[name] = (result.stdout.split()[0] if result.rc == 0 and result.stdout else None, None)
            except Unreachable as exc:
                _MUNGE[name] = (None, str(exc))
    return _MUNGE[name]


@_guard
def test_munge_key(node: Node, request: pytest.FixtureRequest) -> None:
    if not node.runs_slurm:
        pytest.skip("not a Slurm host")
    result = node.sh("stat -c '%%a %%U %%G' -- %s", MUNGE_KEY)
    if result.rc != 0:
        pytest.fail(f"munge key {MUNGE_KEY} is missing", pytrace=False)
    mode, owner, _group = result.stdout.split()
    problems = []
    if mode != "400":
        problems.append(f"munge key {MUNGE_KEY} has mode 0{mode}, expected 0400")
    if owner != "munge":
        problems.append(f"munge key {MUNGE_KEY} is owned by {owner}, expected munge")
    mine, _ = _munge_of(request, node.name, node.host)
    if mine is None:
        problems.append(f"munge key {MUNGE_KEY} cannot be read by root")
        _fail(problems)
    others = {h: _munge_of(request, h)[0] for h in _slurm_hosts(node) if h != node.name}
    known = {h: s for h, s in {**others, node.name: mine}.items() if s is not None}
    counts = Counter(known.values())
    top = max(counts.values())
    primary = ((node.slurm or {}).get("controllers") or [None])[0]
    leaders = [s for s, c in counts.items() if c == top]
    # The key most hosts share; on a tie, the primary controller's (it generated the pod's key).
    reference = known.get(primary) if len(leaders) > 1 and known.get(primary) in leaders else leaders[0]
    if mine != reference:
        if known.get(primary) == reference and primary != node.name:
            problems.append(f"munge key differs from {primary}'s")
        else:
            holders = sorted(h for h, s in known.items() if s == reference)
            problems.append(f"munge key differs from the one on {', '.join(holders)}")
    _fail(problems)


@_guard
def test_os_release(node: Node) -> None:
    """The node runs the OS the site names for it (os, nodes[].os): the roles chose their packages
    and Slurm's behaviour by what they found there."""
    expected = node.vars.get("podctl_os")
    if not expected:
        pytest.skip("the inventory names no OS for this host")
    result = node.sh('. /etc/os-release && printf \'%s %s\' "$ID" "$VERSION_ID"')
    found = result.stdout.strip() if result.rc == 0 else ""
    want = f"{expected['distribution']} {expected['release']}"
    if found != want:
        _fail([f"runs {found or 'an OS without /etc/os-release'}, but the site names {want} for it"])


# The packages of Slurm's daemons and commands, with the daemon each one is for the version rule.
_SLURM_DAEMON_PACKAGES = {
    "slurmdbd": "slurmdbd",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "slurm-client": "commands",
}


def _slurm_packages_of(request: pytest.FixtureRequest, name: str, host: Any | None = None) -> dict[str, str] | None:
    if name not in _SLURM_PACKAGES:
        host = host or _other(request, name)
        found: dict[str, str] | None = None
        if _reach(host) is None:
            try:
                result = _sh(
                    host,
                    "dpkg-query --show --showformat='${db:Status-Abbrev} ${Package} ${Version}\\n' "
                    + " ".join(_SLURM_DAEMON_PACKAGES),
                )
                found = {}
                for line in result.stdout.splitlines():
                    fields = line.split()
                    if len(fields) == 3 and fields[0] == "ii":
                        found[fields[1]] = fields[2]
            except Unreachable:
                found = None
        _SLURM_PACKAGES[name] = found
    return _SLURM_PACKAGES[name]


@_guard
def test_slurm_version_rule(node: Node, request: pytest.FixtureRequest) -> None:
    """Slurm's version rule over what is installed on the pod's Slurm hosts (podctl.core.platforms):
    slurmdbd >= slurmctld >= slurmd and the commands, at most two major releases apart. Each line
    that involves this node is its finding."""
    if not node.runs_slurm:
        pytest.skip("not a Slurm host")
    installed = {
        name: _slurm_packages_of(request, name, node.host if name == node.name else None) or {}
        for name in _slurm_hosts(node)
    }
    _fail(slurm_version_findings(node.name, installed))


def slurm_version_findings(name: str, installed: dict[str, dict[str, str]]) -> list[str]:
    """The version rule's problems that involve host `name`, from each Slurm host's installed
    packages (package -> version). slurm-client counts as the commands only where no daemon is."""
    daemons: list[platforms.SlurmDaemon] = []
    for host, packages in installed.items():
        for package, daemon in _SLURM_DAEMON_PACKAGES.items():
            if package in packages and (daemon != "commands" or len(packages) == 1):
                try:
                    version = platforms.SlurmVersion.parse(packages[package])
                except ValueError:
                    continue
                daemons.append(platforms.SlurmDaemon(host, daemon, version))
    mine = re.compile(rf"\bon {re.escape(name)}\b")
    return [p for p in platforms.slurm_rule_problems(daemons) if mine.search(p)]


# ---------------------------------------------------------------------------


def _mounts(node: Node) -> list[dict[str, Any]]:
    names = set(node.vars.get("podctl_mounts") or [])
    return [m for m in node.vars.get("podctl_storage_mounts") or [] if m.get("name") in names]


@_guard
def test_storage_mounted(node: Node) -> None:
    mounts = _mounts(node)
    if not mounts:
        pytest.skip("the site gives this host no shared mount")
    result = node.sh("findmnt --noheadings --pairs --output TARGET,FSTYPE,SOURCE")
    if result.rc != 0:
        pytest.fail(f"findmnt failed: {(result.stderr or result.stdout).strip()[-200:]}", pytrace=False)
    present: dict[str, dict[str, str]] = {}
    for line in result.stdout.splitlines():
        fields = dict(part.split("=", 1) for part in shlex.split(line) if "=" in part)
        if "TARGET" in fields:
            present[fields["TARGET"]] = fields
    problems = []
    for m in mounts:
        where = f"{m['mountpoint']} (mount {m['name']}, {m['type']} {m['server']}:{m['export']})"
        found = present.get(m["mountpoint"])
        if found is None:
            problems.append(f"{where} is not mounted")
        # The sim's kernel has no NFS or Lustre client: a bind mount stands in there.
        elif not node.emulated and not found.get("FSTYPE", "").startswith(m["type"]):
            problems.append(f"{where} is mounted as {found.get('FSTYPE')} from {found.get('SOURCE')}, not {m['type']}")
    _fail(problems)


# ---------------------------------------------------------------------------
# Time


def _tolerance() -> float:
    return float(os.environ.get(ENV_TIME_TOLERANCE) or DEFAULT_TIME_TOLERANCE_S)


def parse_chrony_tracking(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def chrony_offset_s(system_time: str) -> float | None:
    """'0.000012345 seconds fast of NTP time' -> 1.2345e-05 (slow: negative)."""
    parts = system_time.split()
    try:
        value = float(parts[0])
    except (IndexError, ValueError):
        return None
    return -value if "slow" in parts else value


@_guard
def test_time_in_sync(node: Node) -> None:
    tolerance = _tolerance()
    problems = []
    # The node's clock against the controller's (this process's), corrected
    # for the round trip: what a job spanning nodes and the controller sees.
    before = time.time()
    result = node.sh("date +%s.%N")
    after = time.time()
    try:
        remote = float(result.stdout.strip())
    except ValueError:
        pytest.fail(f"cannot read the node's clock: {result.stdout.strip()!r} {result.stderr.strip()}", pytrace=False)
    offset = remote - (before + after) / 2
    slack = (after - before) / 2
    if abs(offset) - slack > tolerance:
        problems.append(
            f"clock is {abs(offset):.3f} s {'ahead of' if offset > 0 else 'behind'} the controller's "
            f"(tolerance {tolerance:g} s)"
        )
    active = node.sh("systemctl is-active chrony").stdout.strip()
    if active != "active":
        problems.append(f"time is not kept in sync: chrony is {active or 'not running'}")
        _fail(problems)
    tracking = node.sh("chronyc -n tracking")
    if tracking.rc != 0:
        problems.append(f"chronyc tracking failed: {tracking.stderr.strip() or tracking.stdout.strip()}")
        _fail(problems)
    fields = parse_chrony_tracking(tracking.stdout)
    refid = fields.get("Reference ID", "").split()[0] if fields.get("Reference ID") else ""
    serves = node.vars.get("ansible_host") in (node.vars.get("podctl_ntp_servers") or [])
    leap = fields.get("Leap status", "?")
    if leap != "Normal":
        problems.append(f"chrony is not synchronised (leap status {leap}, reference {fields.get('Reference ID', '?')})")
    elif refid == CHRONY_LOCAL_REFID and not serves:
        problems.append(
            "chrony follows its own clock, not the pod's NTP servers "
            f"({', '.join(node.vars.get('podctl_ntp_servers') or [])})"
        )
    offset_chrony = chrony_offset_s(fields.get("System time", ""))
    if offset_chrony is None:
        problems.append(f"chronyc tracking gave no system time offset: {fields.get('System time', '')!r}")
    elif abs(offset_chrony) > tolerance:
        problems.append(
            f"chrony reports the clock {abs(offset_chrony):.3f} s "
            f"{'fast' if offset_chrony > 0 else 'slow'} of NTP time (tolerance {tolerance:g} s)"
        )
    _fail(problems)


# ---------------------------------------------------------------------------
# Slurm node state, asked once of the primary controller.


def _sinfo(request: pytest.FixtureRequest, node: Node) -> tuple[dict[str, tuple[str, str]] | None, str]:
    controller = ((node.slurm or {}).get("controllers") or [None])[0]
    if "result" not in _SINFO:
        if controller is None:
            _SINFO["result"] = (None, "the site names no Slurm controller")
        else:
            host = node.host if controller == node.name else _other(request, controller)
            problem = _reach(host)
            if problem is not None:
                _SINFO["result"] = (None, f"{controller} cannot be reached: {problem}")
            else:
                try:
                    result = _sh(host, "sinfo --noheader --Node --format %s", "%N|%t|%E")
                except Unreachable as exc:
                    result = None
                    _SINFO["result"] = (None, str(exc))
                if result is not None and result.rc != 0:
                    _SINFO["result"] = (
                        None,
                        f"sinfo on {controller} failed: {(result.stderr or result.stdout).strip()[-300:]}",
                    )
                elif result is not None:
                    states: dict[str, tuple[str, str]] = {}
                    for line in result.stdout.splitlines():
                        parts = line.split("|", 2)
                        if len(parts) == 3:
                            states.setdefault(parts[0].strip(), (parts[1].strip(), parts[2].strip()))
                    _SINFO["result"] = (states, "")
    return _SINFO["result"]


def describe_slurm_state(name: str, state: str, reason: str) -> str:
    base = state.rstrip("".join(SLURM_FLAGS))
    flags = [SLURM_FLAGS[c] for c in state[len(base) :] if c in SLURM_FLAGS]
    words = ", ".join([SLURM_STATES.get(base, base)] + flags)
    why = reason if reason and reason != "none" else "no reason given"
    return f"{name} is {words} in Slurm (state {state}): {why}"


@_guard
def test_idle_in_slurm(node: Node, request: pytest.FixtureRequest) -> None:
    if node.slurm is None:
        pytest.skip("the site runs no Slurm")
    controller = (node.slurm.get("controllers") or [None])[0]
    compute = COMPUTE_GROUP in node.groups
    if not compute and node.name != controller:
        pytest.skip("not a compute node")
    states, problem = _sinfo(request, node)
    if states is None:
        if node.name == controller:
            pytest.fail(f"cannot read node states from Slurm: {problem}", pytrace=False)
        pytest.skip(f"cannot ask Slurm: {problem}")  # the controller's own test names the fault
    if not compute:
        return
    if node.name not in states:
        pytest.fail(f"{node.name} is not known to Slurm (sinfo on {controller} does not list it)", pytrace=False)
    state, reason = states[node.name]
    if state != "idle":
        pytest.fail(describe_slurm_state(node.name, state, reason), pytrace=False)


__all__ = ["describe_slurm_state", "parse_chrony_tracking", "chrony_offset_s"]
