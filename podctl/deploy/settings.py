"""The Ansible settings a deploy runs with, as environment variables for ansible-runner.

Fast (the default) is chosen for a pod: every host in flight at once, one SSH
connection per host kept open across stages and runs, modules piped through
it instead of copied, and facts gathered once and cached beside the run
directories. `--ansible-defaults` is the baseline the benchmark compares
against: 5 forks, no pipelining, no multiplexing, facts gathered in every play.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MAX_FORKS = 256
DEFAULT_FORKS = 5  # Ansible's own default
CONTROL_PERSIST_S = 600
FACT_CACHE_TIMEOUT_S = 86400
SERVER_ALIVE_INTERVAL_S = 5


@dataclass(frozen=True)
class AnsibleSettings:
    forks: int
    envvars: dict[str, str]


def control_path_dir() -> Path:
    # Unix socket paths are limited to ~108 bytes: keep the directory short.
    return Path("/tmp") / f"podctl-ssh-{os.getuid()}"


def ansible_settings(*, hosts: int, fast: bool, fact_cache_dir: Path, roles_path: Path,
                     private_key: Path | None, host_key_checking: bool) -> AnsibleSettings:
    env: dict[str, str] = {
        "ANSIBLE_ROLES_PATH": str(roles_path),
        "ANSIBLE_HOST_KEY_CHECKING": str(host_key_checking),
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "True",
    }
    if private_key is not None:
        env["ANSIBLE_PRIVATE_KEY_FILE"] = str(private_key)
    known_hosts = "" if host_key_checking else " -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no"
    # A node that dies mid-task (power cut) sends no FIN: without keepalives its
    # SSH session, multiplexed or not, would hang the play instead of failing.
    known_hosts += f" -o ServerAliveInterval={SERVER_ALIVE_INTERVAL_S} -o ServerAliveCountMax=3"
    if fast:
        forks = max(1, min(hosts, MAX_FORKS))
        env.update({
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_SSH_ARGS": f"-o ControlMaster=auto -o ControlPersist={CONTROL_PERSIST_S}s{known_hosts}",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_path_dir()),
            "ANSIBLE_GATHERING": "smart",
            "ANSIBLE_CACHE_PLUGIN": "jsonfile",
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(fact_cache_dir),
            "ANSIBLE_CACHE_PLUGIN_TIMEOUT": str(FACT_CACHE_TIMEOUT_S),
        })
    else:
        forks = DEFAULT_FORKS
        env.update({
            "ANSIBLE_PIPELINING": "False",
            # Ansible's stock ssh_args multiplex (ControlPersist=60s); the baseline turns that off.
            "ANSIBLE_SSH_ARGS": f"-o ControlMaster=no -o ControlPath=none{known_hosts}",
            "ANSIBLE_GATHERING": "implicit",
            "ANSIBLE_CACHE_PLUGIN": "memory",
        })
    return AnsibleSettings(forks=forks, envvars=env)
