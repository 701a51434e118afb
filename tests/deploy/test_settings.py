from __future__ import annotations

from pathlib import Path

import pytest

from podctl.runtime.ansible import DEFAULT_FORKS, MAX_FORKS, MITOGEN_STRATEGY, ansible_settings

pytestmark = pytest.mark.deploy


def _settings(hosts: int, fast: bool, known_hosts: tuple[Path, ...] = (), mitogen: bool = True):
    return ansible_settings(
        hosts=hosts,
        fast=fast,
        fact_cache_dir=Path("/r/cache/pod/facts"),
        roles_path=Path("/p/roles"),
        private_key=Path("/k/id"),
        known_hosts=known_hosts,
        mitogen=mitogen,
    )


@pytest.mark.parametrize(("hosts", "forks"), [(1, 1), (4, 4), (140, 140), (5000, MAX_FORKS)])
def test_fast_forks_sized_to_pod(hosts: int, forks: int) -> None:
    assert _settings(hosts, fast=True).forks == forks


def test_fast_settings() -> None:
    env = _settings(4, fast=True).envvars
    assert env["ANSIBLE_PIPELINING"] == "True"
    assert "ControlMaster=auto" in env["ANSIBLE_SSH_ARGS"] and "ControlPersist=" in env["ANSIBLE_SSH_ARGS"]
    assert env["ANSIBLE_GATHERING"] == "smart"
    assert env["ANSIBLE_CACHE_PLUGIN"] == "jsonfile"
    assert env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] == "/r/cache/pod/facts"
    assert env["ANSIBLE_PRIVATE_KEY_FILE"] == "/k/id"
    assert env["ANSIBLE_ROLES_PATH"] == "/p/roles"


def test_fast_settings_run_mitogens_strategy_from_mitogens_own_plugin_folder() -> None:
    import ansible_mitogen

    env = _settings(4, fast=True).envvars
    assert env["ANSIBLE_STRATEGY"] == MITOGEN_STRATEGY and MITOGEN_STRATEGY.startswith("mitogen_")
    # Ansible finds a strategy by its file name in the plugin folders it is given.
    plugins = Path(env["ANSIBLE_STRATEGY_PLUGINS"])
    assert plugins.is_relative_to(Path(ansible_mitogen.__file__).parent), plugins
    assert (plugins / f"{MITOGEN_STRATEGY}.py").is_file(), sorted(p.name for p in plugins.glob("*"))


@pytest.mark.parametrize(("fast", "mitogen"), [(True, False), (False, True)])
def test_without_mitogen_ansible_keeps_its_own_strategy(fast: bool, mitogen: bool) -> None:
    env = _settings(4, fast=fast, mitogen=mitogen).envvars
    assert "ANSIBLE_STRATEGY" not in env and "ANSIBLE_STRATEGY_PLUGINS" not in env


def test_ansible_defaults() -> None:
    s = _settings(140, fast=False)
    assert s.forks == DEFAULT_FORKS
    assert s.envvars["ANSIBLE_PIPELINING"] == "False"
    assert "ControlMaster=no" in s.envvars["ANSIBLE_SSH_ARGS"]
    assert s.envvars["ANSIBLE_GATHERING"] == "implicit"
    assert s.envvars["ANSIBLE_CACHE_PLUGIN"] == "memory"


@pytest.mark.parametrize("fast", [True, False])
def test_host_keys_are_always_checked_a_sim_pod_against_its_own_file(fast: bool) -> None:
    real = _settings(4, fast=fast).envvars
    assert real["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert "StrictHostKeyChecking=yes" in real["ANSIBLE_SSH_ARGS"]
    assert "UserKnownHostsFile" not in real["ANSIBLE_SSH_ARGS"]  # ssh's own files: the user's and the system's
    sim = _settings(4, fast=fast, known_hosts=(Path("/state/sim/pod/known_hosts"),)).envvars
    assert sim["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert "StrictHostKeyChecking=yes" in sim["ANSIBLE_SSH_ARGS"]
    assert "UserKnownHostsFile=/state/sim/pod/known_hosts" in sim["ANSIBLE_SSH_ARGS"]
    assert "/dev/null" not in sim["ANSIBLE_SSH_ARGS"] and "StrictHostKeyChecking=no" not in sim["ANSIBLE_SSH_ARGS"]


def test_a_crowded_sim_pod_allows_its_nodes_longer_to_answer_keepalives(monkeypatch) -> None:
    # A real pod takes a node silent for 15 s for dead. 32 emulated nodes on 2 cores (48 to a core
    # pair's 3) had two sessions dropped mid-task: there the allowance grows with the crowding.
    monkeypatch.setattr("os.cpu_count", lambda: 2)

    def alive(emulated: int) -> str:
        args = ansible_settings(
            hosts=32,
            fast=True,
            fact_cache_dir=Path("/r"),
            roles_path=Path("/p"),
            private_key=None,
            emulated_nodes=emulated,
        ).envvars["ANSIBLE_SSH_ARGS"]
        return args.split("ServerAliveCountMax=")[1].split()[0]

    assert alive(0) == "3" and alive(4) == "6"  # 4 nodes on 2 cores: twice the measured 3
    assert alive(32) == str(3 * 11)  # ceil(32 / 3)
    assert alive(3) == "3"
