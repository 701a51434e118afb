"""The previous release, end to end in make test-long: a Debian 12 pod with Slurm 22.05 (the sim
site with `os: {release: "12"}`) deployed, re-run without a change (by the records, then every
task: changed 0, nothing restarted), its drift checked by the records, and certified by podctl
(the installed wheel).

The long tier, not make test: a second pod's install and certification cost CI 630 s of its
2,400 (docs/testing.md). The shared pod of the other sim tests runs the default, Debian 13 with
Slurm 24.11, and carries the whole matrix (faults, day 2, the gate, rolling changes); in make
test, Slurm 22.05's daemons read every example site's configuration and the slurm role's 22.05
rows are checked apart. Its own pod, on its own /24, brought up before the shared pod
(tests/conftest.py's SIM_ORDER), so the two never run at once, and removed after.

One head and two compute nodes: every role's head and compute paths, a multi-node job through
Slurm, and a pair for the collectives, without a third compute node's install and certification,
which walk the same paths (fault localization among three, on the shared pod).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from tests.helpers.repo import cannot_run_here
from tests.helpers.simpod import ALLREDUCE, MPI_USER, MPI_USER_UID, Pod, certify, daemons_changed, podctl, sim_site_copy

# A second pod's install and certification (about 10 min on CI's machine): make test-long.
pytestmark = [pytest.mark.sim, pytest.mark.long]

POD = "simdeb12"
COMPUTE = ("node01", "node02")


@pytest.fixture(scope="module")
def previous_pod(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        cannot_run_here("the sim needs root")
    base = tmp_path_factory.mktemp(POD)
    site = base / "site.yaml"
    text = sim_site_copy(POD, "10.89.14.", "172.25.0.0/16", len(COMPUTE))
    site.write_text(text.replace("\nnodes:\n", '\nos: {distribution: debian, release: "12"}\n\nnodes:\n', 1))
    podctl("sim", "up", str(site), timeout=600)
    try:
        yield Pod(site, base, name=POD)
    finally:
        if not os.environ.get("PODCTL_KEEP_POD"):
            podctl("sim", "down", "--pod", POD, timeout=300, check=False)


def test_a_debian_12_pod_with_slurm_22_05_deploys_reruns_unchanged_and_is_certified(previous_pod: Pod) -> None:
    pod = previous_pod
    runs: Path = pod.base / "runs"
    podctl("deploy", str(pod.site), "--runs-dir", str(runs), timeout=1800)
    # A no-change re-run on 22.05, by the records (one look per node) and then every task
    # (--full): changed 0 on every host, and no daemon restarted.
    before = pod.daemons()
    for extra in ([], ["--full"]):
        podctl("deploy", str(pod.site), "--runs-dir", str(runs), *extra, timeout=1800)
        (rerun,) = sorted(p for p in runs.iterdir() if p.name.endswith("-deploy"))[-1:]
        recap = json.loads((rerun / "recap.json").read_text())
        # By the records: converged, nothing run; with --full: every task, the records not asked.
        assert recap.get("converged") == (None if extra else True), recap.get("converged_hosts")
        assert {host: r["changed"] for host, r in recap["hosts"].items()} == {host: 0 for host in pod.hosts()}, recap
    changed = daemons_changed(before, pod.daemons())
    assert not changed, "\n".join(changed)
    # The drift check after a deploy that converged every node: by the records, with no drift.
    rc, _, out = pod.validate("drift", "--suite", "conformance")
    assert rc == 0 and "every host is as the last deploy left it" in out, out[-3000:]
    for host in pod.hosts():
        found = pod.ssh(
            host, ". /etc/os-release && echo $ID $VERSION_ID && dpkg-query -W -f='${Version}\\n' slurm-client"
        )
        release, slurm = found.strip().splitlines()
        assert release == "debian 12", (host, found)
        assert slurm.startswith("22.05."), (host, found)
    assert pod.hosts() == ["head01", *COMPUTE]
    # The site's policy on 22.05 (docs/slurm.md): its accounts in accounting, enforced, and an MPI
    # job of a policy user across both compute nodes through 22.05's PMIx plugin.
    tree = pod.ssh("head01", "sacctmgr -nP show association format=Account,User,ParentName,Share").split()
    assert {"research||root|60", "teaching||root|40", "teaching|bob||1"} <= set(tree), tree
    config = pod.ssh("head01", "scontrol show config")
    assert any(
        line.split() == ["AccountingStorageEnforce", "=", "associations,limits,qos,safe"]
        for line in config.splitlines()
    )
    pod.add_logins({MPI_USER: MPI_USER_UID})
    run = pod.sh(
        "head01",
        f"cd /tmp && runuser -u {MPI_USER} -- srun -N 2 -n 4 --chdir=/tmp --time=2 python3 -c {shlex.quote(ALLREDUCE)}",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(line.split()[:3] for line in run.stdout.splitlines() if line.strip()) == [
        [str(k), "4", "10"] for k in range(4)
    ], run.stdout
    certify(pod, 1)
