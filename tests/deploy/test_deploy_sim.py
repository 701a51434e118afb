"""`podctl deploy` end to end on the test pod (1 head + 3 compute): every stage.

Uses the session's shared sim pod (see conftest.py), deployed once by its fixture with
real Ansible through ansible-runner, which installs and starts inside the containers chrony,
munge, slurmctld, slurmdbd + MariaDB, slurmd (Debian's Slurm), Prometheus,
Alertmanager, node_exporter and the Slurm exporter, and pip-installs torch
from the wheel folder `make sim-wheels` makes into a virtualenv on each compute node's local
disk, root's alone (the validation-tools stage). The tests run in order
and build on each other (one pod, deployed once, and these tests first): the first deploy, a
node edited by hand and put right alone, the pod's behaviour (Slurm jobs, accounting, Prometheus
targets, the munge key), a partition change that must reconfigure rather than restart, under a
job that runs through it and completes, a deploy limited to one node, then re-runs that must
change and restart nothing on any node (every task under each strategy, then by the records),
and (make test-long) a node killed mid-run.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from podctl.core import state
from tests.helpers.repo import REPO
from tests.helpers.simpod import ALLREDUCE, MPI_USER, MPI_USER_UID, RECONFIGURED_IN_PLACE, daemons_changed, podctl
from tests.helpers.simpod import SIM_IPOIB_SUPERNET_PREFIX as IPOIB_SUPERNET_PREFIX
from tests.helpers.simpod import SIM_POD as POD
from tests.helpers.simpod import SIM_SUBNET_PREFIX as SUBNET_PREFIX
from tests.helpers.simpod import Pod as DeployPod

pytestmark = [pytest.mark.deploy, pytest.mark.sim]

ALL_STAGES = ["os", "fabric", "storage", "slurm", "monitoring", "validation-tools"]
OTHERS = ["head01", "node01", "node02"]
COMPUTE = ["node01", "node02", "node03"]
ALL = ["head01", *COMPUTE]
HEAD_ADDRESS = f"{SUBNET_PREFIX}10"


def _newest_run(runs_dir: Path) -> Path:
    runs = sorted(p for p in runs_dir.iterdir() if p.name.endswith("-deploy"))
    assert runs, f"no run directory under {runs_dir}"
    return runs[-1]


def _deploy(pod: DeployPod, *extra: str, expect_rc: int = 0) -> tuple[dict[str, Any], str]:
    proc = podctl("deploy", str(pod.site), "--runs-dir", str(pod.runs_dir), *extra, timeout=1200, check=False)
    assert proc.returncode == expect_rc, f"rc {proc.returncode}\n{proc.stdout[-5000:]}\n{proc.stderr[-3000:]}"
    run_dir = _newest_run(pod.runs_dir)
    assert str(run_dir) in proc.stdout  # the run directory is named in the output
    return json.loads((run_dir / "recap.json").read_text()), proc.stdout


def test_first_deploy(deploy_pod: DeployPod) -> None:
    # The shared pod's fixture ran the first deploy; its run is the only one so far.
    run_dirs = [p for p in deploy_pod.runs_dir.iterdir() if p.name.endswith("-deploy")]
    assert len(run_dirs) == 1, run_dirs
    assert str(run_dirs[0]) in deploy_pod.first_deploy_stdout  # the run directory is named in the output
    recap = json.loads((run_dirs[0] / "recap.json").read_text())
    assert recap["stages"] == ALL_STAGES
    for host, r in recap["hosts"].items():
        assert r["failed"] == 0 and r["unreachable"] == 0, host
    run_dir = _newest_run(deploy_pod.runs_dir)
    assert (run_dir / "inventory" / "hosts.yml").is_file()
    assert list((run_dir / "artifacts" / "deploy" / "job_events").glob("*.json"))
    assert (run_dir / "artifacts" / "deploy" / "stdout").stat().st_size > 0
    assert "PRIVATE KEY" not in "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    # The Makefile's tiers deploy with podctl installed from its wheel (PODCTL_TEST_PODCTL, which
    # the sim_nodes fixture requires under them): the modules that ran are the installed ones.
    installed = os.environ.get("PODCTL_TEST_PODCTL")
    if installed:
        where = subprocess.run(
            [str(Path(installed).parent / "python"), "-c", "import podctl; print(podctl.__file__)"],
            capture_output=True,
            text=True,
            check=True,
            cwd="/",
        ).stdout.strip()
        assert REPO not in Path(where).resolve().parents, f"the deploy's podctl is the checkout's: {where}"


def _counts(recap: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    return {host: (r["ok"], r["changed"], r["failed"]) for host, r in recap["hosts"].items()}


def test_a_node_edited_by_hand_is_put_right_alone_and_nothing_restarts(deploy_pod: DeployPod) -> None:
    # Nothing podctl is given changed; node02's PAM limits were edited by hand. Its record says so
    # and every other host's holds: every task runs on node02 alone, puts the file back, and no
    # service restarts anywhere.
    limits = "/etc/security/limits.d/90-podctl-hpc.conf"
    before = deploy_pod.daemons()
    deploy_pod.ssh("node02", f"echo '# edited by hand' >> {limits}")
    recap, _ = _deploy(deploy_pod)
    assert recap["ran_alone"] == ["node02"], recap.get("converged_hosts")
    assert any(limits in why for why in recap["converged_hosts"]["node02"]["why"]), recap["converged_hosts"]
    assert _counts(recap)["node02"][1:] == (1, 0) and list(recap["hosts"]) == ["node02"], recap["hosts"]
    assert "# edited by hand" not in deploy_pod.ssh("node02", f"cat {limits}")
    # The others kept their records, and node02 has a new one: the next deploy runs nothing.
    again, _ = _deploy(deploy_pod)
    assert again["converged"] is True, again.get("converged_hosts")
    changed = daemons_changed(before, deploy_pod.daemons())
    assert not changed, "\n".join(changed)


@pytest.mark.parametrize("strategy", [[], ["--no-mitogen"]], ids=["mitogen", "openssh"])
def test_a_node_whose_host_key_changed_is_refused(
    deploy_pod: DeployPod, strategy: list[str], tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pod's state, copied, with node01's host key swapped for node02's: a node that answers
    # with a key other than the one recorded is an impostor to every strategy, and nothing runs.
    pod_state = state.pod_dir(POD)
    copy = tmp_path / "state" / "sim" / POD
    copy.parent.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(pod_state), str(copy)], check=True)
    entries = [line.split()[:3] for line in (copy / "known_hosts").read_text().splitlines() if line.strip()]
    key_of = {(names.split(",")[1], kind): key for names, kind, key in entries}  # address,name[,fqdn]
    assert {("node01", kind) for _, kind, _ in entries} <= set(key_of) and ("node02", "ssh-ed25519") in key_of
    swapped = [
        f"{names} {kind} {key_of[('node02', kind)] if names.split(',')[1] == 'node01' else key}\n"
        for names, kind, key in entries
    ]
    assert swapped != [f"{' '.join(e)}\n" for e in entries]
    (copy / "known_hosts").write_text("".join(swapped))
    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path / "state"))
    # No SSH master connection of an earlier run (made when the key was right) to ride on.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp))
    runs = tmp_path / "runs"
    proc = podctl(
        "deploy", str(deploy_pod.site), "--only", "os", "--limit", "node01", "--runs-dir", str(runs), *strategy,
        timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode != 0, proc.stdout[-3000:]
    events = "".join(p.read_text(errors="replace") for p in runs.rglob("job_events/*.json"))
    # Not one task ran on node01: the only `ok` is a role's argument check, which Ansible runs on
    # the controller before the role's first task reaches the node.
    ran = [
        e["event_data"].get("task_action")
        for e in (json.loads(p.read_text()) for p in runs.rglob("job_events/*.json"))
        if e["event"] == "runner_on_ok"
    ]
    assert set(ran) <= {"ansible.builtin.validate_argument_spec"}, ran
    said = (proc.stdout + proc.stderr + events).lower()
    assert "host key" in said or "host identification has changed" in said, said[-3000:]


def test_rendered_files_on_the_nodes(deploy_pod: DeployPod) -> None:
    ib0 = deploy_pod.ssh("node01", "cat /etc/systemd/network/60-podctl-ib0.network")
    assert f"Address={IPOIB_SUPERNET_PREFIX}0.1/24" in ib0 and "MTUBytes=4092" in ib0
    assert "routing_engine ftree" in deploy_pod.ssh("head01", "cat /etc/opensm/opensm.conf")
    assert "ipoib" in deploy_pod.ssh("head01", "cat /etc/opensm/partitions.conf")
    unit = deploy_pod.ssh("node02", "cat /etc/systemd/system/home-shared.mount")
    assert "What=head01:/export/home" in unit and "Options=rw,hard,vers=4.2,_netdev" in unit
    assert f"allow {SUBNET_PREFIX}0/24" in deploy_pod.ssh("head01", "cat /etc/chrony/chrony.conf")
    assert f"server {SUBNET_PREFIX}10 iburst" in deploy_pod.ssh("node03", "cat /etc/chrony/chrony.conf")
    assert deploy_pod.ssh("node01", "id -u munge; id -u slurm; id -u prometheus").split() == ["900", "901", "902"]
    assert f"{SUBNET_PREFIX}13 node03.sim.podctl.internal node03" in deploy_pod.ssh("node01", "cat /etc/hosts")
    assert "memlock unlimited" in deploy_pod.ssh("node01", "cat /etc/security/limits.d/90-podctl-hpc.conf")


TOOLS = "/opt/podctl-validation"
EXEC = "/usr/local/sbin/podctl-validation-exec"


def _release_of(pod: DeployPod, host: str) -> str:
    from podctl.derive.site import load_site

    return load_site(pod.site).node(host).platform.release


def test_validation_tools_on_every_compute_node(deploy_pod: DeployPod) -> None:
    # On each compute node's local disk (from the wheel folder), root's alone; run as root runs them
    # (-I -B: nothing written beside the package, which the record of the install would not hold).
    python = f"{TOOLS}/venv/bin/python"
    for host in COMPUTE:
        out = deploy_pod.ssh(
            host, f"cd / && {python} -I -B -c 'import torch, validation; print(torch.__version__, validation.__file__)'"
        )
        # Debian 13: Debian's own torch through the system site-packages; Debian 12: the wheel folder's.
        torch = "2.6.0+debian" if _release_of(deploy_pod, host) == "13" else "2.13.0+cpu"
        assert out.split() == [torch, f"{TOOLS}/src/validation/__init__.py"], (host, out)
        # Nothing under the tools, or the launcher, is anyone's but root's, or writable by anyone else.
        others = deploy_pod.ssh(
            host, f"find {TOOLS} {EXEC} \\( ! -user root -o \\( -perm /022 ! -type l \\) \\) -print"
        )
        assert others == "", (host, others)
    assert "usage" in deploy_pod.ssh("node02", f"cd /tmp && {EXEC} {python} -m validation.health --help")


def test_root_runs_no_module_planted_where_the_gate_runs_nor_in_the_tools(deploy_pod: DeployPod) -> None:
    """The attacks on the gate, on a deployed node under slurmd: a module planted in slurmd's working
    folder (the slurm account's /var/log/slurm) never runs; a file of the tools another user could
    write is refused, and the gate says so in its record and drains nobody; the next deploy finds
    the tools are not what it installed and puts them back, restarting nothing."""
    canary = "/run/podctl-test-ran-as-root"
    plant = (
        "install -d -o slurm -g slurm /var/log/slurm/validation && "
        "printf '' > /var/log/slurm/validation/__init__.py && "
        f'printf \'open("{canary}", "w")\\n\' > /var/log/slurm/validation/health.py && '
        "chown -R slurm:slurm /var/log/slurm/validation"
    )
    gate = "cd /var/log/slurm && PYTHONPATH=/var/log/slurm /usr/local/sbin/podctl-healthcheck --no-drain --print"
    try:
        assert deploy_pod.sh("node01", plant).returncode == 0
        record = json.loads(deploy_pod.ssh("node01", gate))
        assert record["status"] == "pass" and record["refused"] is None, record
        assert deploy_pod.sh("node01", f"test -e {canary}").returncode == 1, "the planted module ran as root"
    finally:
        deploy_pod.sh("node01", f"rm -rf /var/log/slurm/validation {canary}")
    # node02: a module of the tools another user could have written (a squashed or user-owned file),
    # and a .pth file planted in the virtualenv's site-packages (its import lines run at every start).
    site_packages = deploy_pod.ssh("node02", f"ls -d {TOOLS}/venv/lib/python3*/site-packages").strip()
    deploy_pod.ssh(
        "node02",
        f"chown nobody {TOOLS}/src/validation/health.py && echo 'import os' > {site_packages}/zz-planted.pth",
    )
    record = json.loads(deploy_pod.ssh("node02", "/usr/local/sbin/podctl-healthcheck --print"))
    assert record["status"] == "error" and "owned by uid 65534" in (record["refused"] or ""), record
    prom = deploy_pod.ssh("node02", "cat /var/lib/prometheus/node-exporter/podctl_health.prom")
    assert "podctl_health_refused 1" in prom
    assert _sinfo_states(deploy_pod)["node02"] == "idle"  # a refusal is an alert, never a drain
    before = deploy_pod.daemons()
    recap, _ = _deploy(deploy_pod, "--only", "validation-tools", "--limit", "node02")
    assert recap["hosts"]["node02"]["changed"] > 0 and recap["hosts"]["node02"]["failed"] == 0, recap
    assert not daemons_changed(before, deploy_pod.daemons())
    assert deploy_pod.sh("node02", f"test -e {site_packages}/zz-planted.pth").returncode == 1
    others = deploy_pod.ssh("node02", f"find {TOOLS} \\( ! -user root -o \\( -perm /022 ! -type l \\) \\) -print")
    assert others == ""
    record = json.loads(deploy_pod.ssh("node02", "/usr/local/sbin/podctl-healthcheck --print"))
    assert record["status"] == "pass", record


def _sinfo_states(pod: DeployPod) -> dict[str, str]:
    out = pod.ssh("head01", "sinfo --noheader --Node --format '%N %t'")
    return dict(line.split() for line in out.splitlines() if line.strip())


def test_every_compute_node_idle_and_srun_runs_on_three(deploy_pod: DeployPod) -> None:
    assert _sinfo_states(deploy_pod) == {n: "idle" for n in COMPUTE}
    out = deploy_pod.ssh("head01", "srun -N3 --job-name=podctl-e2e hostname")
    assert sorted(out.split()) == COMPUTE


def test_sacct_lists_the_job(deploy_pod: DeployPod) -> None:
    def listed() -> bool:
        out = deploy_pod.ssh("head01", "sacct --allusers --noheader --parsable2 --format JobName,State,NodeList")
        return any(line.startswith("podctl-e2e|COMPLETED|node[01-03]") for line in out.splitlines())

    _wait_for(listed, 60, "sacct to list the srun job")


# A normal user on every node, with the same uid everywhere, as a site's directory would give one.
def test_an_mpi_job_starts_through_srun_and_pmix_across_the_nodes_as_a_user(deploy_pod: DeployPod) -> None:
    config = deploy_pod.ssh("head01", "scontrol show config")
    assert any(line.split() == ["MpiDefault", "=", "pmix"] for line in config.splitlines()), config
    # A user of the site's policy (inventory/sim/site.yaml): Slurm refuses anyone else's job.
    deploy_pod.add_logins({MPI_USER: MPI_USER_UID})
    # No --mpi: MpiDefault. Six ranks on three nodes, wired up by Slurm's PMIx plugin alone.
    run = deploy_pod.sh(
        "head01",
        f"cd /tmp && runuser -u {MPI_USER} -- srun -N 3 -n 6 --chdir=/tmp --time=2 python3 -c {shlex.quote(ALLREDUCE)}",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rows = sorted(line.split() for line in run.stdout.splitlines() if line.strip())
    assert [row[:3] for row in rows] == [[str(k), "6", "21"] for k in range(6)], run.stdout + run.stderr
    assert {row[3] for row in rows} == set(COMPUTE)


# The sim site's policy (inventory/sim/site.yaml): alice in research, bob in teaching; carol in none.
POLICY_LOGINS = {"alice": 2101, "bob": 2102, "carol": 2103}


def _as(user: str, command: str) -> str:
    return f"cd /tmp && runuser -u {user} -- {command}"


def _job_state(pod: DeployPod, job: str) -> str:
    return pod.ssh("head01", f"squeue -h -j {job} -o '%T %r'").strip()


def test_the_sites_policy_decides_who_runs_under_which_limits_and_in_which_order(deploy_pod: DeployPod) -> None:
    deploy_pod.add_logins(POLICY_LOGINS)
    tree = deploy_pod.ssh("head01", "sacctmgr -nP show association format=Account,User,ParentName,Share")
    for row in ("research||root|60", "teaching||root|40", "research|alice||1", "teaching|bob||1"):
        assert row in tree.splitlines(), tree
    # Someone in no account of the policy is refused at submission, with Slurm's reason.
    refused = deploy_pod.sh("head01", _as("carol", "sbatch --wrap true"))
    assert refused.returncode != 0, refused.stdout
    assert "Invalid account or account/partition combination specified" in refused.stderr, refused.stderr
    # Over the QoS's limits: the job waits, and says which limit holds it.
    over_nodes = deploy_pod.ssh("head01", _as("alice", "sbatch --parsable --qos=interactive -N2 --wrap true")).strip()
    over_wall = deploy_pod.ssh(
        "head01", _as("alice", "sbatch --parsable --qos=interactive -N1 --time=01:30:00 --wrap true")
    ).strip()
    _wait_for(lambda: _job_state(deploy_pod, over_nodes) == "PENDING QOSMaxNodePerUserLimit", 30, "the node limit")
    _wait_for(lambda: _job_state(deploy_pod, over_wall) == "PENDING QOSMaxWallDurationPerJobLimit", 30, "MaxWall")
    deploy_pod.ssh("head01", f"scancel {over_nodes} {over_wall}")
    # Fair share: alice uses the pod (on a fresh pod bob's account has used nothing). Then, behind a
    # job that holds every node, the user with the lower fair-share factor submits first and the
    # other second, each a job that needs all three nodes: the second goes first.
    deploy_pod.ssh("head01", _as("alice", "srun -N1 --time=1 sleep 3"))
    share = deploy_pod.ssh("head01", "sshare -a -n -P -o Account,User,RawUsage,FairShare")
    fair = {
        row.split("|")[1]: float(row.split("|")[3]) for row in share.splitlines() if row.split("|")[1] in POLICY_LOGINS
    }
    # sshare: the account tree, each level indented under its parent.
    assert {row.split("|")[0] for row in share.splitlines()} >= {"root", " research", " teaching", "  research"}, share
    assert fair["alice"] != fair["bob"], share
    low, high = sorted(("alice", "bob"), key=lambda user: fair[user])
    blocker = deploy_pod.ssh("head01", "sbatch --parsable -N3 --time=1 --wrap 'sleep 8'").strip()
    _wait_for(lambda: _job_state(deploy_pod, blocker).startswith("RUNNING"), 60, "the job before them to run")
    jobs = {
        user: deploy_pod.ssh("head01", _as(user, "sbatch --parsable -N3 --time=1 --wrap 'sleep 2'")).strip()
        for user in (low, high)
    }
    assert all(job.isdigit() for job in jobs.values()), jobs
    # sprio: each waiting job's weighted fair-share factor (the scheduler's, once it has seen them).
    factors = ""

    def both_weighed() -> bool:
        nonlocal factors
        factors = deploy_pod.ssh("head01", "sprio -h -o '%i %u %F'")
        return {line.split()[0] for line in factors.splitlines() if line.strip()} >= set(jobs.values())

    _wait_for(both_weighed, 10, f"sprio to list jobs {jobs}")
    weighted = {line.split()[1]: int(line.split()[2]) for line in factors.splitlines() if line.strip()}
    assert weighted[high] > weighted[low], factors
    listed = ",".join(jobs.values())
    _wait_for(
        lambda: deploy_pod.ssh("head01", f"sacct -n -X -P -j {listed} -o State").split() == ["COMPLETED"] * 2,
        120,
        "both jobs to complete",
    )
    starts = dict(
        line.split("|") for line in deploy_pod.ssh("head01", f"sacct -n -X -P -j {listed} -o JobID,Start").split()
    )
    assert starts[jobs[high]] < starts[jobs[low]], (share, starts)


def test_a_policy_change_rolls_out_once_under_a_running_job_and_never_takes_an_account_in_use(
    deploy_pod: DeployPod,
) -> None:
    deploy_pod.add_logins(POLICY_LOGINS)
    text = deploy_pod.site.read_text()
    changed = text.replace("name: teaching, fairshare: 40", "name: teaching, fairshare: 30").replace(
        "max_jobs_per_user: 2 }", "max_jobs_per_user: 3 }"
    )
    assert changed.count("fairshare: 30") == 1 and changed.count("max_jobs_per_user: 3") == 1
    # bob's job runs across the changes, until the test lets it end.
    done = "/home/shared/podctl-test-policy-done"
    deploy_pod.ssh("head01", f"rm -f {done}")
    job = deploy_pod.ssh(
        "head01", _as("bob", f"sbatch --parsable -N1 --wrap 'until [ -e {done} ]; do sleep 1; done'")
    ).strip()
    # An account made by hand, which podctl did not create: left alone (the site says no prune).
    deploy_pod.ssh("head01", "sacctmgr -i add account handmade")
    try:
        _wait_for(lambda: _job_state(deploy_pod, job).startswith("RUNNING"), 60, "bob's job to run")
        _policy_change_under_a_running_job(deploy_pod, changed, job)
    finally:
        deploy_pod.site.write_text(changed)
        deploy_pod.ssh("head01", f"touch {done}")
        _wait_for(lambda: not _job_state(deploy_pod, job), 60, f"job {job} to end")
        deploy_pod.ssh("head01", "sacctmgr -i delete account handmade")
    assert deploy_pod.ssh("head01", f"sacct -n -X -P -j {job} -o State").strip() == "COMPLETED"


def _policy_change_under_a_running_job(deploy_pod: DeployPod, changed: str, job: str) -> None:
    daemons = deploy_pod.daemons()
    deploy_pod.site.write_text(changed)
    shown = (
        "sacctmgr -nP show qos interactive format=MaxJobsPU; sacctmgr -nP show assoc account=teaching format=User,Share"
    )
    # --check --diff: the sacctmgr commands that would run, and nothing run.
    # (The changes are shown on standard error, with the progress; the recap on standard output.)
    checked = podctl(
        "deploy", str(deploy_pod.site), "--runs-dir", str(deploy_pod.runs_dir), "--only", "slurm", "--check", "--diff"
    )
    stdout = checked.stdout + checked.stderr
    flat = stdout.replace("\n", " ")
    assert "sacctmgr --immediate modify qos where name=interactive set MaxJobsPerUser=3" in flat, stdout
    assert "modify account where name=teaching" in flat and "Fairshare=30" in flat, stdout
    assert deploy_pod.ssh("head01", shown).split() == ["2", "|40", "bob|1"]
    recap, _ = _deploy(deploy_pod, "--only", "slurm")
    assert recap["hosts"]["head01"]["changed"] >= 1
    assert deploy_pod.ssh("head01", shown).split() == ["3", "|30", "bob|1"]
    # No daemon restarted for it (slurmdbd told slurmctld), and bob's job runs on.
    assert not daemons_changed(daemons, deploy_pod.daemons())
    assert _job_state(deploy_pod, job).startswith("RUNNING")
    assert "handmade" in deploy_pod.ssh("head01", "sacctmgr -nP show account format=Account").split()
    # bob taken out of the site while his job runs, and teaching's share changed beside it: refused
    # before anything changes, naming bob's association and its jobs.
    removed = changed.replace("        - { name: bob, accounts: [teaching] }\n", "").replace(
        "name: teaching, fairshare: 30", "name: teaching, fairshare: 20"
    )
    assert removed.count("name: bob") == 0 and removed.count("fairshare: 20") == 1
    deploy_pod.site.write_text(removed)
    failed = podctl(
        "deploy", str(deploy_pod.site), "--runs-dir", str(deploy_pod.runs_dir), "--only", "slurm", check=False
    )
    assert failed.returncode != 0, failed.stdout
    refused = failed.stdout + failed.stderr
    flat = " ".join(refused.split())
    assert "user bob's association with account teaching: 1 job(s)" in flat, refused
    assert deploy_pod.ssh("head01", shown).split() == ["3", "|30", "bob|1"]


def _monitoring_password(pod: DeployPod) -> str:
    """The login the deploy generated on this controller (the test pod's site is named after it)."""
    return state.monitoring_password_path(pod.name).read_text().strip()


def _prometheus(pod: DeployPod, path: str) -> Any:
    """GET a path of Prometheus from this controller, with the login; its JSON."""
    token = base64.b64encode(f"podctl:{_monitoring_password(pod)}".encode()).decode()
    request = urllib.request.Request(f"http://{HEAD_ADDRESS}:9090{path}", headers={"Authorization": f"Basic {token}"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=5) as response:
        return json.load(response)


def test_prometheus_reports_every_node_exporter_up(deploy_pod: DeployPod) -> None:
    expected = {f"{h}:9100" for h in ["head01", *COMPUTE]}

    def all_up() -> bool:
        targets = _prometheus(deploy_pod, "/api/v1/targets")["data"]["activeTargets"]
        health = {t["labels"]["instance"]: t["health"] for t in targets if t["labels"]["job"] == "node"}
        return set(health) == expected and set(health.values()) == {"up"}

    _wait_for(all_up, 90, "every node_exporter target up")
    rules = {r["name"]: r for g in _prometheus(deploy_pod, "/api/v1/rules")["data"]["groups"] for r in g["rules"]}
    assert rules["NodeDown"]["query"] == 'up{job="node"} == 0'


# Run on a node: what answers there, without the login, from where it runs.
PROBE = r"""
import concurrent.futures, json, socket, sys, urllib.error, urllib.request
def http(method, url, data=None):
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=5)
        return "answered"
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return type(exc).__name__
def connect(address):
    host, port = address.split(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return "open"
    except socket.timeout:
        return "timeout"
    except OSError as exc:
        return type(exc).__name__
silence = json.dumps({"matchers": [{"name": "alertname", "value": "PodctlNodeCannotDrain", "isRegex": False}],
    "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2099-01-01T00:00:00Z", "createdBy": "x", "comment": "x"})
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    ports = dict(zip(sys.argv[1:], pool.map(connect, sys.argv[1:])))
print(json.dumps({"silence": http("POST", "http://head01:9093/api/v2/silences", silence.encode()),
    "alerts": http("GET", "http://head01:9090/api/v1/alerts"), "ports": ports}))
"""


def _probe(pod: DeployPod, host: str, *addresses: str, user: str = "root") -> dict[str, Any]:
    command = f"python3 -c {shlex.quote(PROBE)} {' '.join(addresses)}"
    if user != "root":
        command = f"runuser -u {user} -- {command}"
    proc = pod.sh(host, command)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_monitoring_answers_behind_its_login_and_exporters_answer_prometheus_alone(deploy_pod: DeployPod) -> None:
    # A compute node: Alertmanager refuses a silence without the login, Prometheus its API; no
    # exporter of another node answers it (dropped: a connection that times out).
    node01 = _probe(deploy_pod, "node01", "node02:9100", "node03:9100", "head01:9100", "head01:9341")
    assert node01["silence"] == 401 and node01["alerts"] == 401, node01
    assert set(node01["ports"].values()) == {"timeout"}, node01
    # A login user on the Prometheus host (the attack): refused too, and its address
    # opens no exporter for that user (the output rules refuse at once).
    login = _probe(deploy_pod, "head01", "node01:9100", "head01:9100", "head01:9341", user="nobody")
    assert login["silence"] == 401 and login["alerts"] == 401, login
    assert set(login["ports"].values()) == {"ConnectionRefusedError"}, login
    # The probe can see an open port: root on the Prometheus host reaches every exporter.
    assert set(_probe(deploy_pod, "head01", "node02:9100", "head01:9341")["ports"].values()) == {"open"}

    # Prometheus still scrapes every target, itself and the Slurm exporter included, and no other.
    # (Within five minutes of the first deploy, `up` also holds the series of the Debian package's
    # own configuration, which Prometheus ran with until the role's replaced it: not a target.)
    targets = {(f"{h}:9100", "node") for h in ALL} | {(f"{HEAD_ADDRESS}:9090", "prometheus"), ("head01:9341", "slurm")}
    active = _prometheus(deploy_pod, "/api/v1/targets")["data"]["activeTargets"]
    assert {(t["labels"]["instance"], t["labels"]["job"]) for t in active} == targets, active

    def every_target_up() -> bool:
        series = _prometheus(deploy_pod, "/api/v1/query?query=up")["data"]["result"]
        up = {(s["metric"]["instance"], s["metric"]["job"]): s["value"][1] for s in series}
        return all(up.get(target) == "1" for target in targets)

    _wait_for(every_target_up, 60, "up == 1 for every target")

    # Secrets: the web config holds hashes; the passwords are in no run's artifacts.
    modes = deploy_pod.ssh(
        "head01",
        "cd /etc/prometheus && stat -c '%n %U:%G %a' alertmanager.yml podctl-web.yml podctl-prometheus.password",
    )
    assert modes.split("\n")[:3] == [
        f"{f} root:prometheus 640" for f in ("alertmanager.yml", "podctl-web.yml", "podctl-prometheus.password")
    ], modes
    password_file = state.monitoring_password_path(deploy_pod.name)
    assert (password_file.stat().st_mode & 0o777, password_file.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    secrets = [
        _monitoring_password(deploy_pod),
        deploy_pod.ssh("head01", "cat /etc/prometheus/podctl-prometheus.password").strip(),
    ]
    assert all(len(secret) == 32 for secret in secrets)
    on_head = deploy_pod.sh("head01", f"grep -rlF -e {secrets[0]} -e {secrets[1]} /etc /var/log /var/lib/prometheus")
    assert on_head.stdout.strip() == "/etc/prometheus/podctl-prometheus.password", on_head.stdout
    for path in deploy_pod.runs_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not any(secret in text for secret in secrets), f"a monitoring password in {path}"
    assert "PodctlNodeCannotDrain" not in json.dumps(_silences(deploy_pod))


def _silences(pod: DeployPod) -> Any:
    proc = pod.sh(
        "head01",
        "/usr/local/lib/podctl/podctl-monitoring-get --user prometheus --password-file "
        "/etc/prometheus/podctl-prometheus.password alertmanager /api/v2/silences",
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _munge_key(pod: DeployPod) -> tuple[str, str]:
    b64 = pod.ssh("head01", "base64 -w0 /etc/munge/munge.key").strip()
    hexa = pod.ssh("head01", "od -An -v -tx1 /etc/munge/munge.key | tr -d ' \\n'").strip()
    assert len(b64) >= 40 and len(hexa) >= 64
    return b64, hexa


def _assert_key_in_no_artifact(pod: DeployPod) -> None:
    b64, hexa = _munge_key(pod)
    needles = [b64, b64[:40], hexa[:64], hexa.upper()[:64]]
    scanned = 0
    for path in pod.runs_dir.rglob("*"):
        if path.is_file():
            scanned += 1
            text = path.read_text(errors="replace").replace("\\/", "/")
            for needle in needles:
                assert needle not in text, f"munge key found in {path}"
    assert scanned > 10


def test_munge_key_identical_everywhere_mode_0400_and_in_no_artifact(deploy_pod: DeployPod) -> None:
    digests = set()
    for host in ["head01", *COMPUTE]:
        owner, mode, digest = deploy_pod.ssh(
            host, "stat -c '%U %a' /etc/munge/munge.key && sha256sum < /etc/munge/munge.key"
        ).split()[:3]
        assert (owner, mode) == ("munge", "400"), host
        digests.add(digest)
    assert len(digests) == 1
    _assert_key_in_no_artifact(deploy_pod)


def test_a_partition_change_is_reconfigured_under_a_running_job_which_completes(deploy_pod: DeployPod) -> None:
    def main_pids() -> dict[str, str]:
        return {n: deploy_pod.ssh(n, "systemctl show --property MainPID --value slurmd").strip() for n in COMPUTE}

    before = main_pids()
    assert all(pid not in ("", "0") for pid in before.values()), before
    daemons = deploy_pod.daemons()
    # A job that runs across the change, on every compute node, until the test lets it end.
    done = "/home/shared/podctl-test-across-done"
    deploy_pod.ssh("head01", f"rm -f {done}")
    wrap = f"srun sh -c 'until [ -e {done} ]; do sleep 1; done'"
    job = deploy_pod.ssh("head01", f'sbatch --parsable -N3 --job-name=podctl-across --wrap "{wrap}"').strip()
    assert job.isdigit(), job
    _wait_for(lambda: deploy_pod.ssh("head01", f"squeue -h -j {job} -o %T").strip() == "RUNNING", 60, "the job to run")
    # Edited as a person would, in place: the other tests on this pod read the site file's text.
    text = deploy_pod.site.read_text()
    assert text.count('max_time: "02:00:00"') == 1
    deploy_pod.site.write_text(text.replace('max_time: "02:00:00"', 'max_time: "04:00:00"'))
    recap, _ = _deploy(deploy_pod, "--only", "slurm")
    events = [
        json.loads(p.read_text())
        for p in (_newest_run(deploy_pod.runs_dir) / "artifacts" / "deploy" / "job_events").glob("*.json")
    ]
    ran = {e["event_data"].get("task") for e in events if e.get("event") == "runner_on_ok"}
    assert "Reconfigure slurm" in ran and not any(t and t.startswith("Restart") for t in ran), ran
    assert recap["hosts"]["node01"]["changed"] >= 1
    # Before 23.11 a reconfigure rereads the files in the same processes; from 23.11 on slurmctld
    # and slurmd each start a new process under the same unit (scontrol(1)), which systemd does not
    # count as a restart. Either way no unit restarted, and the job runs on.
    in_place = deploy_pod.reconfigures_in_place()
    if in_place:
        assert all(pid != before[n] for n, pid in main_pids().items()), (before, main_pids())
    else:
        assert main_pids() == before
    after = deploy_pod.daemons()
    changed = daemons_changed(daemons, after, RECONFIGURED_IN_PLACE if in_place else frozenset())
    assert not changed, "\n".join(changed)
    assert "MaxTime=04:00:00" in deploy_pod.ssh("head01", "scontrol show partition batch")
    assert deploy_pod.ssh("head01", f"squeue -h -j {job} -o %T").strip() == "RUNNING"  # untouched by the change
    # The job ends as it would have without the change; no node was drained meanwhile.
    deploy_pod.ssh("head01", f"touch {done}")
    _wait_for(
        lambda: deploy_pod.ssh("head01", f"sacct -n -X -P -j {job} -o State,ExitCode").strip() == "COMPLETED|0:0",
        60,
        f"job {job} COMPLETED 0:0 in sacct",
    )
    assert _sinfo_states(deploy_pod) == {n: "idle" for n in COMPUTE}
    assert "podctl" not in deploy_pod.ssh("head01", "sinfo -h -R -o '%E'")


def test_a_deploy_limited_to_one_node_touches_that_node_alone(deploy_pod: DeployPod) -> None:
    # Replacing a node (docs/day2.md) deploys it alone: the stages whose controller or Prometheus
    # host lies outside the limit must still run there, change nothing and restart nothing.
    daemons = deploy_pod.daemons()
    recap, _ = _deploy(deploy_pod, "--limit", "node02", "--only", "os,slurm,monitoring")
    assert set(recap["hosts"]) == {"node02"}
    assert recap["hosts"]["node02"]["changed"] == 0 and recap["hosts"]["node02"]["failed"] == 0, recap["hosts"]
    changed = daemons_changed(daemons, deploy_pod.daemons())
    assert not changed, "\n".join(changed)


def _mitogen_on(pod: DeployPod, host: str) -> bool:
    """Whether Mitogen's interpreter runs on `host` now: its bootstrap names it
    `python3(mitogen:USER@CONTROLLER:PID)` there."""
    return "(mitogen:" in pod.sh(host, "ps -eo args").stdout


def _mitogen_on_node_while(pod: DeployPod, host: str, run: Any) -> tuple[bool, Any]:
    """Whether Mitogen's interpreter ran on `host` while `run()` ran, and run()'s result. Mitogen's
    bootstrap names its interpreter on the node `python3(mitogen:USER@CONTROLLER:PID)` for the
    whole run; a task under plain Ansible is an ordinary python3 that ends with the task."""
    seen, done = threading.Event(), threading.Event()

    def watch() -> None:
        while not done.is_set() and not seen.is_set():
            if _mitogen_on(pod, host):
                seen.set()
            done.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = run()
    finally:
        done.set()
        watcher.join(timeout=30)
    return seen.is_set(), result


def test_rerun_changes_nothing_restarts_nothing_and_reports_hardware_gates(deploy_pod: DeployPod) -> None:
    before = deploy_pod.daemons()
    # node02's record stands for three stages on node02 alone (the test above), the others' for
    # the partition change's slurm stage: other inputs than a whole deploy's. The next deploy runs
    # every task on every host, under Mitogen's strategy (the default), and changes nothing.
    mitogen, (recap, stdout) = _mitogen_on_node_while(deploy_pod, "node01", lambda: _deploy(deploy_pod))
    assert mitogen, "no Mitogen interpreter on node01 during a default deploy"
    assert recap["converged"] is False and recap["ran_alone"] is None, recap.get("converged_hosts")
    # The run left its records: the next deploy asks each node's record once and runs nothing.
    looked, looked_stdout = _deploy(deploy_pod)
    assert looked["converged"] is True, looked.get("converged_hosts")
    assert {h: (r["ok"], r["changed"], r["failed"]) for h, r in looked["hosts"].items()} == {h: (1, 0, 0) for h in ALL}
    assert all(v["resources"] > 20 for v in looked["converged_hosts"].values()), looked["converged_hosts"]
    assert "nothing to change" in looked_stdout.replace("\n", " ")
    after = deploy_pod.daemons()
    # A running pod is production: a run that changes nothing restarts nothing, on any node.
    changed = daemons_changed(before, after)
    assert not changed, "\n".join(changed)
    assert {"slurmd.service", "munge.service", "chrony.service"} <= set(after["node01"])
    assert {"slurmctld.service", "slurmdbd.service", "prometheus.service"} <= set(after["head01"])
    for host, r in recap["hosts"].items():
        assert r["changed"] == 0, (host, r)
        # sysctl (read-only /proc/sys) and the storage stand-in on every node; no HCA on fabric members
        assert r["skipped_by_hardware"] >= 2, (host, r)
        assert any(g.startswith("os: sysctl") for g in r["hardware_gates"]), r["hardware_gates"]
    assert any(g.startswith("fabric:") for g in recap["hosts"]["node01"]["hardware_gates"])
    assert "skipped-by-hardware" in stdout.replace("\n", "") or "skipped-by-har" in stdout


@pytest.mark.long  # two more deploys of every task (about 4 min): make test-long
def test_every_task_under_plain_ansible_over_openssh_gives_mitogens_recap(deploy_pod: DeployPod) -> None:
    # --full: every task, the records not asked. Each strategy seen at work on a node (Mitogen's
    # interpreter gone with its connection before the OpenSSH run starts).
    before = deploy_pod.daemons()
    mitogen, (recap, _) = _mitogen_on_node_while(deploy_pod, "node01", lambda: _deploy(deploy_pod, "--full"))
    _wait_for(lambda: not _mitogen_on(deploy_pod, "node01"), 30, "Mitogen to leave node01")
    openssh, (plain, _) = _mitogen_on_node_while(
        deploy_pod, "node01", lambda: _deploy(deploy_pod, "--full", "--no-mitogen")
    )
    assert mitogen and not openssh, f"Mitogen's interpreter on node01: default {mitogen}, --no-mitogen {openssh}"
    assert _counts(plain) == _counts(recap)
    assert all(r["changed"] == 0 for r in recap["hosts"].values()), recap["hosts"]
    changed = daemons_changed(before, deploy_pod.daemons())
    assert not changed, "\n".join(changed)


def _wait_for(predicate, deadline_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.long  # two more deploys and a fresh node (about 6 min): make test-long
def test_killed_node_fails_alone_and_rerun_converges(deploy_pod: DeployPod) -> None:
    before = {p.name for p in deploy_pod.runs_dir.iterdir()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "podctl.cli", "deploy", str(deploy_pod.site), "--runs-dir", str(deploy_pod.runs_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def node03_inside_os_role() -> bool:
        new = [p for p in deploy_pod.runs_dir.iterdir() if p.name not in before and p.name.endswith("-deploy")]
        if not new:
            return False
        for path in (new[0] / "artifacts" / "deploy" / "job_events").glob("*.json"):
            try:
                data = json.loads(path.read_text()).get("event_data", {})
            except (OSError, json.JSONDecodeError):
                continue
            if data.get("host") == "node03" and "/roles/os/" in str(data.get("task_path", "")):
                return True
        return False

    try:
        _wait_for(node03_inside_os_role, 300, "node03 to start the os role")
        podctl("sim", "fault", "--pod", POD, "node03", "--kill", timeout=120)
        stdout, stderr = proc.communicate(timeout=1200)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, f"{stdout[-4000:]}\n{stderr[-3000:]}"
    run_dir = _newest_run(deploy_pod.runs_dir)
    recap = json.loads((run_dir / "recap.json").read_text())
    node03 = recap["hosts"]["node03"]
    assert node03["unreachable"] + node03["failed"] >= 1
    assert node03["failures"] and node03["failures"][0]["stage"] == "os"
    failed_task = node03["failures"][0]["task"]
    recap_rows = [line for line in stdout.splitlines() if "node03" in line]
    assert any(failed_task[:20] in line for line in recap_rows) or failed_task[:20] in stdout
    for host in OTHERS:  # the others finished every stage, with nothing left to change
        r = recap["hosts"][host]
        assert (r["failed"], r["unreachable"], r["changed"]) == (0, 0, 0), (host, r)
    assert recap["stages"] == ALL_STAGES

    podctl("sim", "up", str(deploy_pod.site), timeout=600)  # brings node03 back (a fresh node)
    recap, _ = _deploy(deploy_pod)
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap["hosts"].values())
    assert all(recap["hosts"][h]["changed"] == 0 for h in ["node01", "node02"])
    _wait_for(lambda: _sinfo_states(deploy_pod) == {n: "idle" for n in COMPUTE}, 120, "every node idle again")


def test_zz_munge_key_in_no_artifact_of_any_run(deploy_pod: DeployPod) -> None:
    # The first deploy, the re-run and the partition change at least.
    assert len([p for p in deploy_pod.runs_dir.iterdir() if p.name.endswith("-deploy")]) >= 3
    _assert_key_in_no_artifact(deploy_pod)
