"""The slurm role's interface and the files it renders, without a pod.

Starts: ansible-playbook on localhost (connection local), which renders the
role's templates from the sim site's inventory into a temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podctl.core.assets import roles_dir
from tests.helpers.roles import render_templates

pytestmark = pytest.mark.deploy

REPO = Path(__file__).resolve().parents[2]
# The console script next to this interpreter (podctl has no __main__).
ROLE = roles_dir() / "slurm"
SIM_SITE = REPO / "inventory" / "sim" / "site.yaml"
TEMPLATES = ["slurm.conf", "gres.conf", "cgroup.conf", "topology.conf", "mpi.conf"]


def test_defaults_match_argument_specs() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    options = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    assert all(name.startswith("podctl_slurm_") for name in defaults)
    private = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert all(name.startswith("_podctl_slurm_") for name in private)


def test_every_handler_listens_and_each_file_restarts_only_its_daemon() -> None:
    heard: dict[str, list[dict]] = {}
    for h in yaml.safe_load((ROLE / "handlers" / "main.yml").read_text()):
        for topic in [h["listen"]] if isinstance(h["listen"], str) else h["listen"]:
            heard.setdefault(topic, []).append(h)
    # A file only slurmd reads: the rolling slurmd restart before Slurm 23.11, the reconfigure
    # (which starts slurmd anew in place) from 23.11 on; each handler's `when` says which.
    roll, reconfigure = heard.pop("podctl_slurm | slurmd config changed")
    assert "not (_podctl_slurm_reconfigure_restarts | bool)" in roll["when"]
    assert reconfigure["name"] == "Reconfigure slurm"
    assert any("_podctl_slurm_reconfigure_restarts" in w for w in reconfigure["when"])
    handlers = {topic: hs[-1] for topic, hs in heard.items()}
    assert handlers["podctl_slurm | slurm.conf changed"]["ansible.builtin.command"]["argv"] == [
        "scontrol",
        "reconfigure",
    ]
    # slurmdbd restarts in place when its file changes, before slurmctld starts (accounting.yml).
    assert "podctl_slurm | slurmdbd.conf changed" not in handlers
    dbd = {t["name"]: t for t in yaml.safe_load((ROLE / "tasks" / "accounting.yml").read_text())}
    service = dbd["Accounting | slurmdbd is enabled and running on its current configuration"]
    assert "restarted" in service["ansible.builtin.systemd_service"]["state"]
    assert handlers["podctl_slurm | munge key changed"]["ansible.builtin.script"]["cmd"].startswith("restart-munge.sh ")
    # Before 23.11 a file only slurmd reads restarts slurmd alone, rolling: a batch at a time, under
    # the gate's mark (files/restart-slurmd.sh; its behaviour is tested below).
    assert roll["throttle"] == "{{ podctl_slurm_restart_batch | int }}"
    assert roll["ansible.builtin.script"]["cmd"].startswith("restart-slurmd.sh ")
    # A setting only a restart applies: slurmctld first (handlers run in file order), then the same roll.
    ordered = [h["name"] for h in yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())]
    restart_all = [h["name"] for h in yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
                   if "podctl_slurm | daemon settings changed" in h["listen"]]  # fmt: skip
    assert restart_all == ["Restart slurmctld", roll["name"]]
    assert ordered.index("Restart slurmctld") < ordered.index(roll["name"]) < ordered.index("Reconfigure slurm")


# Ansible's templating, in a process of its own: importing it patches the interpreter (sys.intern),
# which breaks torch in later tests of the same worker.
_RENDER = """
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
job = json.load(sys.stdin)
variables = {**{k: trust_as_template(v) for k, v in job["role_vars"].items()}, **job["variables"]}
print(Templar(loader=DataLoader(), variables=variables).template(trust_as_template(job["text"])), end="")
"""


def _handler_script(name: str, variables: dict[str, object]) -> str:
    """A script handler's command line as Ansible renders it for a host with these variables (and
    the role's own derived ones, vars/main.yml), to run with bash: the role's file with the
    rendered arguments."""
    handler = next(h for h in yaml.safe_load((ROLE / "handlers" / "main.yml").read_text()) if h["name"] == name)
    role_vars = {
        k: v for k, v in yaml.safe_load((ROLE / "vars" / "main.yml").read_text()).items() if isinstance(v, str)
    }
    job = json.dumps({"text": handler["ansible.builtin.script"]["cmd"], "role_vars": role_vars, "variables": variables})
    line = subprocess.run([sys.executable, "-c", _RENDER], input=job, capture_output=True, text=True, check=True).stdout
    script, _, args = line.partition(" ")
    assert handler["ansible.builtin.script"]["executable"] == "/bin/bash"
    return f"bash {ROLE / 'files' / script} {args}"


MARK = "gate --mark munge --for 120 --by podctl deploy: munge restart"
RESTART = ["systemctl restart munge", "systemctl is-active --quiet munge"]


@pytest.mark.parametrize(
    ("gate", "munge_comes_back", "calls", "rc"),
    [
        ("installed", True, [MARK, *RESTART, "gate --unmark"], 0),
        # A first deploy restarts munge before the gate is installed; a head node has no gate.
        ("absent", True, RESTART, 0),
        ("none on this node", True, RESTART, 0),
        # An older gate without --mark: munge restarts all the same, and nothing is unmarked.
        ("cannot mark", True, [MARK, *RESTART], 0),
        # munge not back: the deploy fails on the node and the mark stays until it expires.
        ("installed", False, [MARK, *RESTART], 1),
    ],
)
def test_a_munge_restart_pauses_the_gate_for_munge_alone_while_it_runs(
    tmp_path: Path, gate: str, munge_comes_back: bool, calls: list[str], rc: int
) -> None:
    log, bin_dir, program = tmp_path / "calls", tmp_path / "bin", tmp_path / "podctl-healthcheck"
    bin_dir.mkdir()
    fakes = {
        bin_dir
        / "systemctl": f'echo "systemctl $*" >> {log}\n[ "$1" = is-active ] && exit {0 if munge_comes_back else 3}',
        program: f'echo "gate $*" >> {log}\n[ "$1" = --mark ] && exit {2 if gate == "cannot mark" else 0}',
    }
    for path, body in fakes.items():
        if path != program or gate not in ("absent", "none on this node"):
            path.write_text(f"#!/bin/sh\n{body}\nexit 0\n")
            path.chmod(0o755)
    script = _handler_script(
        "Restart munge, the node's health gate paused for munge meanwhile",
        {
            "_podctl_slurm_is_compute": gate != "none on this node",
            "podctl_slurm_health_check": {"program": str(program)},
            "podctl_slurm_health_expect": {},
        },
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert (proc.returncode != 0) == bool(rc), proc.stderr
    assert (log.read_text().splitlines() if log.exists() else []) == calls


ROLL = "Restart slurmd, a batch of nodes at a time, each until slurmctld has it back"


def _roll(
    tmp_path: Path, sinfo_answers: list[str], timeout_s: int, gate: bool = True
) -> tuple[int, str, str, list[str]]:
    """The slurmd handler run for node07 against stand-ins for systemctl, sinfo (answering
    `sinfo_answers` in turn, then the last one) and the gate: (exit, stdout, stderr, calls)."""
    log, bin_dir, program = tmp_path / "calls", tmp_path / "bin", tmp_path / "podctl-healthcheck"
    bin_dir.mkdir()
    answers = tmp_path / "answers"
    answers.write_text("".join(f"{a}\n" for a in sinfo_answers))
    fakes = {
        bin_dir / "systemctl": "exit 0",
        bin_dir / "sinfo": f"head -1 {answers}; [ $(wc -l < {answers}) -gt 1 ] && sed -i 1d {answers}",
        program: "exit 0",
    }
    for path, body in fakes.items():
        path.write_text(f'#!/bin/bash\necho "{path.name} $*" >> {log}\n{body}\nexit 0\n')
        path.chmod(0o755)
    script = _handler_script(
        ROLL,
        {
            "_podctl_slurm_is_compute": gate,
            "podctl_slurm_health_check": {"program": str(program)},
            "podctl_slurm_health_expect": {},
            "inventory_hostname": "node07",
            "podctl_slurm_restart_timeout_s": timeout_s,
        },
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr, log.read_text().splitlines() if log.exists() else []


def test_a_slurmd_restart_waits_until_slurmctld_has_the_node_back_with_the_gate_paused(tmp_path: Path) -> None:
    # Not responding (idle*), then unknown, then back: a drained node is registered, so back.
    rc, out, err, calls = _roll(tmp_path, ["idle*", "unk", "drain"], 30)
    assert rc == 0, err
    assert calls[:2] == ["podctl-healthcheck --mark slurmd --for 90 --by podctl deploy: slurmd restart",
                         "systemctl restart slurmd"]  # fmt: skip
    assert calls.count("sinfo --noheader --Node --nodes node07 --format %t") == 3
    assert calls[-1] == "podctl-healthcheck --unmark"
    # The restart's window, which the day-2 tests read from the run's events.
    assert re.fullmatch(r"slurmd restarted at [\d.]+, back at [\d.]+ \(drain\)\n", out), out


def test_a_slurmd_not_back_in_time_fails_the_node_naming_what_sinfo_said(tmp_path: Path) -> None:
    rc, _, err, calls = _roll(tmp_path, ["down*"], 2)
    assert rc == 1
    assert "slurmd on node07 not back within 2 s (sinfo: down*)" in err
    assert "podctl-healthcheck --unmark" not in calls  # the mark expires on its own, 60 s past the deadline


def test_a_slurmd_restart_on_a_node_without_the_gate_touches_no_gate(tmp_path: Path) -> None:
    rc, _, err, calls = _roll(tmp_path, ["idle"], 30, gate=False)
    assert rc == 0, err
    assert calls[0] == "systemctl restart slurmd"
    assert not [c for c in calls if c.startswith("podctl-healthcheck")]


@pytest.mark.parametrize("args", [["", "node07"], ["", "node07", "30s"], ["", "node07", "30; reboot"]])
def test_the_slurmd_script_refuses_what_is_not_its_three_arguments(tmp_path: Path, args: list[str]) -> None:
    proc = subprocess.run(["bash", str(ROLE / "files" / "restart-slurmd.sh"), *args], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert proc.returncode == 2 and "usage: restart-slurmd.sh GATE NODE TIMEOUT_S" in proc.stderr


def test_every_task_touching_a_secret_hides_it_and_every_file_it_writes_is_recorded() -> None:
    """A task that holds the munge key or the database password in its arguments or result is
    no_log; one that writes a file with a secret in it is not (its path must reach the deploy's
    record: tests/deploy/test_role_interfaces.py) and shows no diff; the password's own file is
    made by podctl.pod.secret_file, which returns no secret."""
    markers = ["__podctl_slurm_munge_slurp", "__podctl_slurm_db_password", "podctl.pod.secret_file", "slurmdbd.conf.j2"]
    touching = []
    for name in ("munge.yml", "accounting.yml"):
        for task in yaml.safe_load((ROLE / "tasks" / name).read_text()):
            text = yaml.safe_dump(task)
            if "ansible.builtin.slurp" in task or any(marker in text for marker in markers):
                touching.append(task["name"])
                if "ansible.builtin.template" in task:
                    assert task.get("diff") is False and "no_log" not in task, task["name"]
                elif "podctl.pod.secret_file" in task:
                    assert "no_log" not in task and "content" not in task["podctl.pod.secret_file"], task["name"]
                else:
                    assert task.get("no_log") is True, task["name"]
    assert len(touching) >= 6, touching


@pytest.fixture
def sim_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """podctl's state holds the record of the sim pod `podctl sim up` made for the sim site."""
    from podctl.core import state
    from podctl.derive.site import load_site

    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path / "state"))
    state.write_pod_record("sim", {n.hostname: str(n.address) for n in load_site(SIM_SITE).nodes})


def render(tmp_path: Path, overrides: dict) -> dict[str, str]:
    """Render the role's templates for node01 with the sim inventory's facts (`podctl inventory`,
    which asks podctl's state whether the nodes are a sim pod's) plus `overrides`."""
    return render_templates(
        SIM_SITE, "slurm", "node01", {name: f"{name}.j2" for name in TEMPLATES}, tmp_path, overrides
    )


@pytest.mark.ansible
@pytest.mark.usefixtures("sim_record")
def test_sim_renders_linuxproc_no_gres_and_the_site_topology(tmp_path: Path) -> None:
    files = render(tmp_path, {})
    conf = files["slurm.conf"].splitlines()
    assert "ProctrackType=proctrack/linuxproc" in conf
    assert "TaskPlugin=task/none" in conf
    assert "TopologyPlugin=topology/tree" in conf
    assert "SelectType=select/cons_tres" in conf
    assert not any(line.startswith("GresTypes") for line in conf)
    assert (
        "NodeName=node[01-03] CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1843 State=UNKNOWN" in conf
    )
    assert "CredType=cred/munge" in conf and "CryptoType" not in " ".join(conf)
    assert "PartitionName=batch Nodes=node[01-03] Default=YES MaxTime=02:00:00 State=UP" in conf
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf
    assert "SwitchName=su01 Nodes=node[01-03]" in files["topology.conf"]
    assert "Name=gpu" not in files["gres.conf"]


@pytest.mark.ansible
def test_a_site_file_cannot_switch_off_slurms_cgroup_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The sim site's own profile says `emulated: true`; without the record of a pod `podctl sim up`
    # made, its nodes get the cgroup plugins a real node gets.
    monkeypatch.setenv("PODCTL_STATE_DIR", str(tmp_path / "no-sim-here"))
    conf = render(tmp_path, {})["slurm.conf"].splitlines()
    assert "ProctrackType=proctrack/cgroup" in conf
    assert "TaskPlugin=task/cgroup,task/affinity" in conf


@pytest.mark.ansible
def test_gpu_nodes_on_real_hardware_get_cgroups_and_gres(tmp_path: Path) -> None:
    gpu_nodes = [
        {
            "names": "dgx[001-004]",
            "cpus": 112,
            "sockets": 2,
            "cores_per_socket": 28,
            "threads_per_core": 2,
            "real_memory_mb": 2000000,
            "gpus": 8,
            "gpu_type": "h100",
            "gres": [{"file": "/dev/nvidia[0-3]", "cores": "0-27"}, {"file": "/dev/nvidia[4-7]", "cores": "28-55"}],
        }
    ]
    files = render(tmp_path, {"podctl_emulated": False, "podctl_slurm_nodes": gpu_nodes})
    conf = files["slurm.conf"].splitlines()
    assert "ProctrackType=proctrack/cgroup" in conf
    assert "TaskPlugin=task/cgroup,task/affinity" in conf
    assert "GresTypes=gpu" in conf
    assert "MpiDefault=pmix" in conf  # MPI jobs start through srun and Slurm's PMIx plugin
    # PMIx's data in each rank's own hash store (mpi.conf).
    assert "PMIxEnv=PMIX_MCA_gds=hash" in files["mpi.conf"].splitlines()
    assert (
        "NodeName=dgx[001-004] CPUs=112 Sockets=2 CoresPerSocket=28 ThreadsPerCore=2 RealMemory=2000000 Gres=gpu:h100:8 "
        "State=UNKNOWN" in conf
    )
    assert [line for line in files["gres.conf"].splitlines() if not line.startswith("#")] == [
        "NodeName=dgx[001-004] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-27",
        "NodeName=dgx[001-004] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=28-55",
    ]
    assert "ConstrainDevices=yes" in files["cgroup.conf"]


def _restart_settings_changed(
    tmp_path: Path, before: str, after: str, changed: bool = True, slurm: str = "22.05.8-4+deb12u1"
) -> bool:
    """The role's own task that judges a slurm.conf change (configure.yml), run by ansible-playbook on
    a stand-in of the template task's registered result, for a node whose slurm-client is `slurm`."""
    tasks = yaml.safe_load((ROLE / "tasks" / "configure.yml").read_text())
    (task,) = [
        t for t in tasks if t["name"] == "Configure | slurm.conf settings only a restart applies, changed on this host"
    ]
    registered = {"changed": changed, "diff": [{"before": before, "after": after}]}
    playbook = tmp_path / "judge.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Judge",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars_files": [str(ROLE / "vars" / "main.yml")],
                    "vars": {
                        "__podctl_slurm_conf": registered,
                        "__podctl_slurm_installed": {"rc": 0, "stdout": slurm},
                    },
                    "tasks": [
                        task,
                        {
                            "name": "Say",
                            "ansible.builtin.debug": {"msg": "JUDGED={{ __podctl_slurm_restart_settings_changed }}"},
                        },
                    ],
                }
            ]
        )
    )
    env = {**os.environ, "ANSIBLE_LOCALHOST_WARNING": "False", "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (judged,) = re.findall(r"JUDGED=(\w+)", proc.stdout)
    return judged == "True"


CONF = """# Rendered by the podctl slurm role
ClusterName=sim
SelectType=select/cons_tres
ProctrackType=proctrack/linuxproc
HealthCheckInterval=30
NodeName=node[01-03] CPUs=2 RealMemory=1900 State=UNKNOWN
PartitionName=batch Nodes=node[01-03] Default=YES MaxTime=02:00:00 State=UP
"""


@pytest.mark.ansible
@pytest.mark.parametrize(
    ("old", "new", "restarts"),
    [
        ("MaxTime=02:00:00", "MaxTime=04:00:00", False),  # a partition limit: scontrol reconfigure
        ("HealthCheckInterval=30", "HealthCheckInterval=60", False),
        ("# Rendered", "# Edited", False),  # a comment
        ("ProctrackType=proctrack/linuxproc", "ProctrackType=proctrack/cgroup", True),  # a plugin
        ("SelectType=select/cons_tres", "SelectType=select/linear", True),
        ("NodeName=node[01-03]", "NodeName=node[01-04]", True),  # a node added
        ("CPUs=2", "CPUs=4", True),  # a node's hardware
        ("HealthCheckInterval=30\n", "HealthCheckInterval=30\nGresTypes=gpu\n", True),  # a line added
    ],
    ids=["partition", "gate-interval", "comment", "proctrack", "select", "node-added", "node-cpus", "gres-added"],
)
def test_which_slurm_conf_changes_restart_the_daemons(tmp_path: Path, old: str, new: str, restarts: bool) -> None:
    """Slurm 22.05: every key but those a reconfigure rereads needs the restarts."""
    assert old in CONF
    assert _restart_settings_changed(tmp_path, CONF, CONF.replace(old, new)) is restarts


@pytest.mark.ansible
@pytest.mark.parametrize(
    ("old", "new", "restarts"),
    [
        ("MaxTime=02:00:00", "MaxTime=04:00:00", False),
        ("ProctrackType=proctrack/linuxproc", "ProctrackType=proctrack/cgroup", False),  # a plugin
        ("SelectType=select/cons_tres", "SelectType=select/linear", False),
        ("CPUs=2", "CPUs=4", False),  # a node's hardware
        ("HealthCheckInterval=30\n", "HealthCheckInterval=30\nSlurmdPort=6820\n", True),  # a port
        ("HealthCheckInterval=30\n", "HealthCheckInterval=30\nAuthType=auth/slurm\n", True),  # the authentication
    ],
    ids=["partition", "proctrack", "select", "node-cpus", "port", "auth"],
)
def test_from_slurm_23_11_only_ports_and_authentication_need_restarts(
    tmp_path: Path, old: str, new: str, restarts: bool
) -> None:
    """Slurm 24.11: a reconfigure starts the daemons anew in place, which takes every key but the
    listening ports and the authentication."""
    assert old in CONF
    assert _restart_settings_changed(tmp_path, CONF, CONF.replace(old, new), slurm="24.11.5-4+deb13u1") is restarts


@pytest.mark.ansible
def test_a_first_slurm_conf_restarts_nothing(tmp_path: Path) -> None:
    # No daemon ran on a configuration before; the service tasks start them.
    assert _restart_settings_changed(tmp_path, "", CONF) is False
    assert _restart_settings_changed(tmp_path, CONF, CONF.replace("CPUs=2", "CPUs=4"), changed=False) is False
