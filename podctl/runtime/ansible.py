"""Running Ansible: the one home of what deploy and conformance hand to it.

Settings. Fast (the default) is chosen for a pod: every host in flight at
once, one SSH connection per host kept open across stages and runs, modules
piped through it instead of copied, and facts gathered once and cached beside
the run directories. `--ansible-defaults` is the baseline the benchmark
compares against: 5 forks, no pipelining, no multiplexing, facts gathered in
every play.

Running. `run_playbook` is the only call of ansible-runner: it finds the
Ansible installed beside this Python, points Ansible at podctl's collection,
writes extra variables itself (tagged !unsafe: data, never templates), and
leaves behind artifacts with the environment scrubbed and URL secrets
redacted.

Values are data. What podctl passes to Ansible besides the inventory (paths
of playbooks, run and report folders, keys) is refused if it holds a `{`:
every Jinja marker starts with one, and Ansible would evaluate it, as root,
on this machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podctl.core import assets, yamlout
from podctl.core.cohost import crowding
from podctl.core.errors import PodctlError
from podctl.core.fsio import OutputError, private_folder
from podctl.core.redact import redact_tree

MAX_FORKS = 256
DEFAULT_FORKS = 5  # Ansible's own default
CONTROL_PERSIST_S = 600
# Mitogen's strategy for podctl's fast settings: tasks in order across hosts, as Ansible's linear.
MITOGEN_STRATEGY = "mitogen_linear"
FACT_CACHE_TIMEOUT_S = 86400
SERVER_ALIVE_INTERVAL_S = 5
# Keepalives unanswered before a node is taken for dead: 15 s for a pod's own machines. A sim pod
# past the density its host runs well (podctl.core.cohost) gets that many times longer: at 32 nodes on 2
# cores (load ~80) two nodes' sshd, busy installing Slurm, answered late and their sessions were
# dropped mid-task ("Data could not be sent to remote host").
SERVER_ALIVE_COUNT = 3
TEMPLATE_START = "{"
# The `command` artifact records the whole environment podctl ran with: keep
# what explains the run, drop the rest (it may hold tokens), mask anything
# that looks like a credential.
_KEEP_ENV = re.compile(r"(ANSIBLE_.*|PATH|HOME|LANG|LC_.*|VIRTUAL_ENV|PYTHONPATH|AWX_.*)")
_SECRET_ENV = re.compile(r"(PASS|TOKEN|SECRET|CREDENTIAL|AUTH)", re.IGNORECASE)


class AnsibleError(PodctlError):
    """Ansible could not be run as asked; the message says why and what to do."""


def refuse_templates(values: Mapping[str, object]) -> None:
    """AnsibleError naming the first value holding a '{' (every Jinja marker starts with one)."""
    for what, value in values.items():
        if TEMPLATE_START in str(value):
            raise AnsibleError(
                f"{what} {str(value)!r} holds a '{{', which Ansible would read as the start of "
                "a template; use a path without braces"
            )


@dataclass(frozen=True)
class AnsibleSettings:
    forks: int
    envvars: dict[str, str]


# A Unix socket's path holds at most 107 bytes (sun_path's 108, its NUL included); longer, bind()
# fails, and Mitogen then waits for a connection that never comes. The longest names bound in
# podctl's control folders: OpenSSH binds a master at <ControlPath>.<16 random> before renaming
# it, and conformance's testinfra has ControlPath <folder>/ti-%C (%C: 40 hex; Ansible's own is
# <folder>/<10 hex>); Mitogen binds <TMPDIR>/mitogen_unix_<8 random>.sock.
UNIX_SOCKET_PATH_BYTES = 107
TESTINFRA_CONTROL_NAME = "ti-%C"
CONTROL_SOCKET_NAME_BYTES = len("/ti-") + 40 + len(".") + 16
MITOGEN_SOCKET_NAME_BYTES = len("/mitogen_unix_") + 8 + len(".sock")


def _runtime_folder(session_name: str, home_name: str, what: str, socket_name_bytes: int) -> Path:
    """A folder of this user's alone for `what`, or an error (podctl.core.fsio.private_folder):
    $XDG_RUNTIME_DIR/<session_name> in a login session, else (or when that path is too long for
    the sockets bound in it) ~/.ansible/<home_name>; never a shared /tmp, where another user could
    make the folder first or connect to a socket in it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    candidates = [Path(runtime) / session_name] if runtime else []
    candidates.append(Path.home() / ".ansible" / home_name)
    for folder in candidates:
        if len(os.fsencode(folder.absolute())) + socket_name_bytes <= UNIX_SOCKET_PATH_BYTES:
            return private_folder(folder.absolute(), what)
    longest = UNIX_SOCKET_PATH_BYTES - socket_name_bytes
    raise OutputError(
        f"no folder for {what} is short enough: {' and '.join(map(str, candidates))} would put the sockets "
        f"bound in it past the {UNIX_SOCKET_PATH_BYTES} bytes a Unix socket's path may have; set XDG_RUNTIME_DIR "
        f"to a folder of yours (mode 0700) whose path has at most {longest - len(session_name) - 1} bytes"
    )


def control_path_dir() -> Path:
    """The folder of SSH's multiplexed sockets, which carry root's module payloads (the munge key on
    stdin, the database password)."""
    return _runtime_folder("podctl-ssh", "cp", "SSH's control sockets", CONTROL_SOCKET_NAME_BYTES)


def temp_dir() -> Path:
    """TMPDIR of the Ansible that podctl runs. Mitogen binds its control socket (mitogen_unix_*.sock)
    in tempfile's folder, makes it 0600 only after bind(), and never asks who connected: whoever
    reaches it drives root on every node. Ansible's controller keeps its own temporary files there."""
    return _runtime_folder(
        "podctl-tmp", "podctl-tmp", "Ansible's temporary files and Mitogen's control socket", MITOGEN_SOCKET_NAME_BYTES
    )


def ansible_settings(
    *,
    hosts: int,
    fast: bool,
    fact_cache_dir: Path,
    roles_path: Path,
    private_key: Path | None,
    known_hosts: tuple[Path, ...] = (),
    emulated_nodes: int = 0,
    vault_env: Mapping[str, str] | None = None,
    mitogen: bool = True,
) -> AnsibleSettings:
    """Host keys are always checked: against `known_hosts` when given (a sim pod's own file, see
    podctl.core.state.pod_known_hosts), else against the user's and the system's known_hosts as ssh
    reads them. `fast` with `mitogen`: Mitogen's strategy (one Python interpreter per host for the
    whole run, modules sent once), over the same OpenSSH and its options; without it, OpenSSH's
    multiplexing and pipelining (`podctl deploy --no-mitogen`)."""
    env: dict[str, str] = {
        "ANSIBLE_ROLES_PATH": str(roles_path),
        "ANSIBLE_COLLECTIONS_PATH": str(assets.collections_path()),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "True",
        "TMPDIR": str(temp_dir()),
    }
    if private_key is not None:
        env["ANSIBLE_PRIVATE_KEY_FILE"] = str(private_key)
    # How Ansible opens the site's !vault values (podctl.derive.secrets.vault_env).
    env.update(vault_env or {})
    known = " ".join(str(p) for p in known_hosts)
    ssh_known = " -o StrictHostKeyChecking=yes" + (f" -o {shlex.quote('UserKnownHostsFile=' + known)}" if known else "")
    # A node that dies mid-task (power cut) sends no FIN: without keepalives its
    # SSH session, multiplexed or not, would hang the play instead of failing.
    alive = SERVER_ALIVE_COUNT * crowding(emulated_nodes)
    ssh_known += f" -o ServerAliveInterval={SERVER_ALIVE_INTERVAL_S} -o ServerAliveCountMax={alive}"
    if fast:
        forks = max(1, min(hosts, MAX_FORKS))
        env.update(
            {
                "ANSIBLE_PIPELINING": "True",
                "ANSIBLE_SSH_ARGS": f"-o ControlMaster=auto -o ControlPersist={CONTROL_PERSIST_S}s{ssh_known}",
                "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_path_dir()),
                "ANSIBLE_GATHERING": "smart",
                "ANSIBLE_CACHE_PLUGIN": "jsonfile",
                "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(fact_cache_dir),
                "ANSIBLE_CACHE_PLUGIN_TIMEOUT": str(FACT_CACHE_TIMEOUT_S),
            }
        )
        if mitogen:
            env.update({"ANSIBLE_STRATEGY_PLUGINS": str(mitogen_strategies()), "ANSIBLE_STRATEGY": MITOGEN_STRATEGY})
    else:
        forks = DEFAULT_FORKS
        env.update(
            {
                "ANSIBLE_PIPELINING": "False",
                # Ansible's stock ssh_args multiplex (ControlPersist=60s); the baseline turns that off.
                "ANSIBLE_SSH_ARGS": f"-o ControlMaster=no -o ControlPath=none{ssh_known}",
                "ANSIBLE_GATHERING": "implicit",
                "ANSIBLE_CACHE_PLUGIN": "memory",
            }
        )
    return AnsibleSettings(forks=forks, envvars=env)


def mitogen_strategies() -> Path:
    """The folder of Mitogen's strategy plugins (the `mitogen` package, in podctl's deploy extra)."""
    try:
        import ansible_mitogen
    except ImportError as exc:
        raise AnsibleError(
            "Mitogen is not installed: pip install 'podctl[deploy]', or run with --no-mitogen (plain Ansible over "
            "OpenSSH)"
        ) from exc
    return Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"


def run_environment(settings: AnsibleSettings) -> dict[str, str]:
    """The settings' variables, with this Python's bin folder on PATH: podctl run from a
    virtualenv without activating it (.venv/bin/podctl) must find the Ansible beside it."""
    env = dict(settings.envvars)
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        env["PATH"] = bin_dir + os.pathsep + path
    return env


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in env.items():
        if not _KEEP_ENV.fullmatch(key):
            continue
        out[key] = "<redacted>" if _SECRET_ENV.search(key) and not key.endswith("_FILE") else value
    return out


def scrub_command_artifact(artifact_dir: Path) -> None:
    path = artifact_dir / "command"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return
    env = data.get("env")
    if isinstance(env, dict):
        data["env"] = scrub_env({str(k): str(v) for k, v in env.items()})
        data["env_note"] = "podctl kept only the Ansible-related variables"
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")


# In an artifact folder podctl has scrubbed and redacted.
REDACTED_MARK = ".podctl-redacted"


def redact_run(artifact_dir: Path) -> None:
    """Scrub the environment from a run's artifacts and redact URL secrets in them; marked done."""
    if not artifact_dir.is_dir():
        return
    scrub_command_artifact(artifact_dir)
    redact_tree(artifact_dir)
    (artifact_dir / REDACTED_MARK).touch()


def redact_leftovers(runs_root: Path) -> int:
    """Redact the artifacts of earlier runs under `runs_root` (`<run>/artifacts/<ident>`) that were
    never marked done: a podctl killed before it could. How many it redacted."""
    leftovers = [d for d in runs_root.glob("*/artifacts/*") if d.is_dir() and not (d / REDACTED_MARK).exists()]
    for folder in leftovers:
        redact_run(folder)
    return len(leftovers)


def stdout_tail(artifact_dir: Path, lines: int = 15) -> str:
    """The last lines ansible-playbook printed in a run."""
    try:
        text = (artifact_dir / "stdout").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no output recorded)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class PlaybookRun:
    status: str  # ansible-runner's: successful, failed, canceled, timeout
    rc: int
    artifact_dir: Path


def run_playbook(
    *,
    private_data_dir: Path,
    ident: str,
    playbook: Path,
    inventory: Path,
    settings: AnsibleSettings,
    extravars: Mapping[str, object] | None = None,
    limit: list[str] | None = None,
    options: list[str] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> PlaybookRun:
    """Run one playbook through ansible-runner; its artifacts land in private_data_dir/artifacts/ident."""
    try:
        import ansible_runner
    except ImportError as exc:
        raise AnsibleError("ansible-runner is not installed; pip install 'podctl[deploy]'") from exc
    refuse_templates(
        {
            "the playbook": playbook,
            "the inventory": inventory,
            "the run folder": private_data_dir,
            **{f"ANSIBLE setting {k}": v for k, v in settings.envvars.items()},
        }
    )
    cmdline = list(options or [])
    if extravars:
        # Written here, tagged as data: ansible-runner's own extravars file would be read as templates.
        extra = private_data_dir / "podctl-extravars.yml"
        extra.write_text(yamlout.dump(dict(extravars)), encoding="utf-8")
        cmdline += ["-e", f"@{extra}"]
    artifact_dir = private_data_dir / "artifacts" / ident
    scrubbed = False

    def event_handler(event: dict[str, Any]) -> bool:
        nonlocal scrubbed
        if not scrubbed:
            scrub_command_artifact(artifact_dir)
            scrubbed = True
        if on_event is not None:
            on_event(event)
        return True  # keep the event on disk (job_events/)

    # A run killed outright (SIGKILL, a power cut) left its artifacts as they were: the next run
    # redacts them before it starts. SIGTERM stops this run the way --max-fail-percent does.
    redact_leftovers(private_data_dir.parent)
    terminated = []

    def cancelled() -> bool:
        return bool(terminated) or (cancel is not None and cancel())

    handler = None
    if threading.current_thread() is threading.main_thread():
        handler = signal.signal(signal.SIGTERM, lambda *_: terminated.append(True))
    try:
        runner = ansible_runner.run(
            private_data_dir=str(private_data_dir),
            ident=ident,
            playbook=str(playbook),
            inventory=str(inventory),
            envvars=run_environment(settings),
            forks=settings.forks,
            limit=",".join(limit) if limit else None,
            cmdline=" ".join(shlex.quote(c) for c in cmdline) or None,
            event_handler=event_handler,
            cancel_callback=cancelled,
            # podctl chooses the fact cache itself (settings above); ansible-runner's
            # default would point it into this run's artifacts and lose it.
            fact_cache_type="podctl",
            quiet=True,
            rotate_artifacts=0,
        )
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)
        # A secret in a URL (a package index token) is needed on the nodes, never in what the run
        # leaves: redacted however the run ended (Ctrl-C included).
        redact_run(artifact_dir)
    if terminated:
        raise KeyboardInterrupt
    return PlaybookRun(
        status=str(runner.status), rc=int(runner.rc if runner.rc is not None else -1), artifact_dir=artifact_dir
    )
