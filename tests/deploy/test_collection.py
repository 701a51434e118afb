"""The roles as an Ansible collection: built with ansible-galaxy, and deploying without the podctl CLI.

The sim test uses the session's deployed pod (tests/conftest.py: `sim_pod`):
it installs the built collection into a folder of its own, takes files and a
service away from a node, and runs `ansible-playbook -i <podctl's inventory>
podctl.pod.site` with nothing of podctl but its rendered inventory: the node
is configured again, and the pod conforms.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from podctl.core.assets import collection_dir
from tests.helpers.repo import SIM_SITE

BIN = Path(sys.executable).parent


def _build(out: Path) -> Path:
    proc = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", str(collection_dir()), "--output-path", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = out.glob("podctl-pod-*.tar.gz")
    return tarball


@pytest.mark.ansible
def test_the_collection_builds_with_every_role_and_stage(tmp_path: Path) -> None:
    tarball = _build(tmp_path)
    names = tarfile.open(tarball).getnames()
    for role in ("os", "fabric", "storage", "slurm", "monitoring", "validation_tools"):
        assert f"roles/{role}/tasks/main.yml" in names and f"roles/{role}/meta/argument_specs.yml" in names
    # What every role imports (its package install).
    assert "roles/_common/tasks/packages.yml" in names and "roles/_common/meta/argument_specs.yml" in names
    for playbook in ("site", "os", "fabric", "storage", "slurm", "monitoring", "validation_tools"):
        assert f"playbooks/{playbook}.yml" in names
    assert "MANIFEST.json" in names and not any("/molecule/" in n for n in names)


@pytest.mark.ansible
def test_the_built_collections_playbook_passes_syntax_check(tmp_path: Path) -> None:
    # What a team without podctl's CLI runs: the built collection, installed, over podctl's inventory.
    collections = tmp_path / "collections"
    _install(_build(tmp_path), collections)
    inventory = tmp_path / "inventory"
    proc = subprocess.run(
        [str(BIN / "podctl"), "inventory", str(SIM_SITE), "-o", str(inventory)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_NOCOLOR": "1"}
    for playbook in ("podctl.pod.site", "podctl.pod.slurm"):
        proc = _ansible_playbook("--syntax-check", "-i", str(inventory), playbook, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # ... found in the installed collection, not in this checkout.
        name = playbook.rsplit(".", 1)[1]
        assert f"playbook: {collections}/ansible_collections/podctl/pod/playbooks/{name}.yml" in proc.stdout
    # The check can fail: a playbook that is not YAML is refused.
    broken = collections / "ansible_collections" / "podctl" / "pod" / "playbooks" / "slurm.yml"
    broken.write_text(broken.read_text() + "\n  - : [\n")
    proc = _ansible_playbook("--syntax-check", "-i", str(inventory), "podctl.pod.site", cwd=tmp_path, env=env)
    assert proc.returncode != 0


def _ansible_playbook(*args: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "ansible-playbook"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _install(tarball: Path, collections: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "--force", str(tarball), "-p", str(collections)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.sim
@pytest.mark.deploy
@pytest.mark.long  # a whole deploy through ansible-playbook alone (about 4 min): make test-long
def test_the_collection_deploys_the_sim_pod_without_the_cli(sim_pod, tmp_path: Path) -> None:
    from podctl.core.state import private_key_for
    from podctl.derive.site import load_site
    from tests.helpers.simpod import podctl

    collections = tmp_path / "collections"
    _install(_build(tmp_path), collections)
    podctl("inventory", str(sim_pod.site), "-o", str(tmp_path / "inventory"))
    # What a lost node looks like: its Slurm and time configuration gone, chrony stopped.
    try:
        broken = sim_pod.sh("node01", "rm -f /etc/slurm/topology.conf /etc/chrony/chrony.conf && systemctl stop chrony")
        assert broken.returncode == 0, broken.stderr
        key = private_key_for(load_site(sim_pod.site), None, "podctl sim up")
        env = {
            **os.environ,
            "ANSIBLE_COLLECTIONS_PATH": str(collections),
            "ANSIBLE_PRIVATE_KEY_FILE": str(key),
            "ANSIBLE_HOST_KEY_CHECKING": "False",  # the sim's host keys change on every `sim up`
            "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
            # What an Ansible team's ansible.cfg sets for speed, as podctl deploy does.
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_FORKS": "10",
            "ANSIBLE_NOCOLOR": "1",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        proc = _ansible_playbook(
            "-i", str(tmp_path / "inventory"), "podctl.pod.site", cwd=tmp_path, env=env, timeout=1800
        )
        assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
        recap = proc.stdout[proc.stdout.index("PLAY RECAP") :]
        assert "failed=0" in recap and "unreachable=0" in recap
        node01 = next(line for line in recap.splitlines() if line.startswith("node01"))
        assert "changed=0" not in node01, recap
        assert sim_pod.sh("node01", "test -s /etc/slurm/topology.conf && systemctl is-active chrony").returncode == 0
        # The health gate drained node01 while chrony was stopped, if it ran then (that is its
        # job); the repaired node comes back by hand, as an operator would.
        sim_pod.resume("node01")
        rc, data, _ = sim_pod.validate("after-collection", "--suite", "conformance")
        assert rc == 0, data["failures"]
    finally:
        sim_pod.resume("node01")
