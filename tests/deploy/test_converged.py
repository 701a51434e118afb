"""The records of a converged deploy (podctl.runtime.converged and the collection's `converged` module).

The module runs here as Ansible runs it on a node (a script given its arguments in a file),
against files in a temporary folder; the sim tests (test_deploy_sim.py, the conformance tests)
run it on the pod's nodes through ansible-playbook.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from podctl.core.assets import collection_dir
from podctl.derive.inventory import controller_inputs, write_inventory
from podctl.derive.site import load_site
from podctl.runtime import converged
from tests.helpers.repo import SIM_SITE
from tests.helpers.roles import collection_plugin

MODULE = collection_dir() / "plugins" / "modules" / "converged.py"


def _module(tmp_path: Path, **args: Any) -> dict[str, Any]:
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, check=False)
    out = json.loads(proc.stdout)
    assert proc.returncode == (1 if out.get("failed") else 0), proc.stderr
    return out


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "a.conf").write_text("a = 1\n")
    (root / "etc" / "b.conf").write_text("b = 2\n")
    (root / "tools" / "venv" / "lib").mkdir(parents=True)
    (root / "tools" / "venv" / "lib" / "x.py").write_text("x = 1\n")
    return {
        "record": str(tmp_path / "record" / "converged.json"),
        "resources": {
            "files": [str(root / "etc" / "a.conf"), str(root / "etc" / "b.conf"), str(root / "etc")],
            "trees": [str(root / "tools")],
            "users": ["root"],
            "groups": ["root"],
        },
        "root": root,
    }


def _seal(tmp_path: Path, node: dict[str, Any], fingerprint: str = "f1") -> dict[str, Any]:
    return _module(tmp_path, state="present", fingerprint=fingerprint, resources=node["resources"], path=node["record"])


def _verify(tmp_path: Path, node: dict[str, Any], fingerprint: str = "f1") -> dict[str, Any]:
    return _module(tmp_path, state="verified", fingerprint=fingerprint, path=node["record"])


def test_a_node_as_its_record_says_is_converged_and_the_record_is_roots_alone(tmp_path: Path, node: dict) -> None:
    sealed = _seal(tmp_path, node)
    assert sealed["changed"] and sealed["resources"] == 8  # 3 files, a tree, a user, a group, host name, packages
    assert os.stat(node["record"]).st_mode & 0o777 == 0o600
    answer = _verify(tmp_path, node)
    assert answer["converged"] is True and answer["why"] == [] and not answer["changed"]


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda root: (root / "etc" / "a.conf").write_text("a = 2\n"), "a.conf: its content changed"),
        (lambda root: (root / "etc" / "b.conf").chmod(0o600), "b.conf"),
        (lambda root: (root / "etc" / "b.conf").unlink(), "b.conf: was file"),
        (lambda root: (root / "tools" / "venv" / "lib" / "planted.py").write_text(""), "venv/lib/planted.py added"),
        (lambda root: (root / "etc").chmod(0o700), "/etc: was directory"),
        # Given to another owner, the content and mode left as they were.
        (
            lambda root: os.chown(root / "etc" / "a.conf", 65534, 65534),
            "a.conf: was file 644 0:0 sha256, now file 644 65534:65534",
        ),
        (lambda root: os.chown(root / "tools" / "venv" / "lib" / "x.py", 65534, -1), "venv/lib/x.py changed"),
        # Edited in place with the same size, and its mtime set back: the ctime tells.
        (lambda root: _edit_keeping_size_and_mtime(root / "tools" / "venv" / "lib" / "x.py"), "venv/lib/x.py changed"),
        (lambda root: (root / "tools" / "venv" / "evil").symlink_to("/etc/shadow"), "venv/evil added"),
        (lambda root: (root / "tools" / "venv" / "lib" / "x.py").unlink(), "venv/lib/x.py removed"),
    ],
    ids=[
        "content",
        "mode",
        "removed",
        "file added to the tree",
        "folder mode",
        "chown of a file",
        "chown in a tree",
        "in-place edit in a tree",
        "link added to a tree",
        "removed from a tree",
    ],
)
def test_each_kind_of_change_is_named(tmp_path: Path, node: dict, change: Any, named: str) -> None:
    _seal(tmp_path, node)
    change(node["root"])
    answer = _verify(tmp_path, node)
    assert answer["converged"] is False
    assert any(named in why for why in answer["why"]), answer["why"]
    # No digest of a file's content is shown (a record may cover a secret's file).
    assert not re.search(r"[0-9a-f]{16}", " ".join(answer["why"])), answer["why"]


def _edit_keeping_size_and_mtime(path: Path) -> None:
    before = path.stat()
    time.sleep(0.01)  # a ctime the clock can tell from the seal's
    path.write_text(path.read_text().replace("1", "2"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns


def test_the_records_digests_are_keyed_with_the_nodes_own_key(tmp_path: Path, node: dict) -> None:
    """A secret's file in the record says nothing of the secret: its digest is an HMAC under a key of
    the node's own (root's alone, beside the record), never the content's plain hash."""
    secret = node["root"] / "etc" / "a.conf"
    _seal(tmp_path, node)
    key = Path(node["record"]).parent / "record.key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    text = Path(node["record"]).read_text()
    assert hashlib.sha256(secret.read_bytes()).hexdigest()[:16] not in text
    first = json.loads(text)["snapshot"]["file:" + str(secret)]
    # Another node (another key) holds another digest for the same content.
    other = tmp_path / "other"
    other.mkdir()
    _module(other, state="present", fingerprint="f1", resources=node["resources"], path=str(other / "r" / "c.json"))
    assert json.loads((other / "r" / "c.json").read_text())["snapshot"]["file:" + str(secret)] != first
    # A record whose key is gone proves nothing.
    key.unlink()
    answer = _verify(tmp_path, node)
    assert answer["converged"] is False and "key is gone" in answer["why"][0]


def test_other_inputs_or_no_record_are_not_converged(tmp_path: Path, node: dict) -> None:
    missing = _verify(tmp_path, node)
    assert "no record" in missing["why"][0] and missing["inputs_same"] is None
    _seal(tmp_path, node)
    other = _verify(tmp_path, node, fingerprint="f2")
    assert "inputs changed" in other["why"][0] and other["inputs_same"] is False
    # What the node holds changed, not the inputs: a run on this node alone would bring it back.
    (node["root"] / "etc" / "a.conf").write_text("a = 3\n")
    held = _verify(tmp_path, node)
    assert held["converged"] is False and held["inputs_same"] is True
    Path(node["record"]).write_text("{not json")
    unreadable = _verify(tmp_path, node)
    assert "unreadable" in unreadable["why"][0] and unreadable["inputs_same"] is None


def test_forgetting_removes_the_record_and_check_mode_keeps_it(tmp_path: Path, node: dict) -> None:
    _seal(tmp_path, node)
    kept = _module(tmp_path, state="absent", path=node["record"], _ansible_check_mode=True)
    assert kept["changed"] and Path(node["record"]).exists()
    gone = _module(tmp_path, state="absent", path=node["record"])
    assert gone["changed"] and not Path(node["record"]).exists()
    assert not _module(tmp_path, state="absent", path=node["record"])["changed"]


def test_an_unknown_resource_kind_fails_with_the_known_ones(tmp_path: Path, node: dict) -> None:
    out = _module(tmp_path, state="present", fingerprint="f", resources={"sockets": ["x"]}, path=node["record"])
    assert out["failed"] and "sockets" in out["msg"] and "files" in out["msg"]


def _event(host: str, action: str, res: dict[str, Any], role: str = "os", kind: str = "runner_on_ok") -> dict:
    return {"event": kind, "event_data": {"host": host, "resolved_action": action, "role": role, "res": res}}


def test_the_collector_takes_each_hosts_resources_from_the_runs_results() -> None:
    collector = converged.ResourceCollector(tools_path="/opt/podctl-validation")
    for event in [
        # As ansible-runner reports them (fields of a real run's job_events).
        _event("node01", "ansible.builtin.template", {"dest": "/etc/chrony/chrony.conf", "changed": False}),
        _event("node01", "ansible.builtin.file", {"path": "/etc/podctl", "state": "directory"}),
        _event(
            "node01",
            "ansible.builtin.copy",
            {"results": [{"dest": "/etc/a"}, {"skipped": True, "item": "b"}, {"dest": "/etc/c"}]},
        ),
        _event("node01", "ansible.builtin.blockinfile", {"invocation": {"module_args": {"path": "/etc/hosts"}}}),
        _event("node01", "ansible.builtin.systemd_service", {"name": "chrony", "state": "started"}),
        _event("node01", "ansible.builtin.user", {"name": "slurm"}),
        _event("node01", "ansible.builtin.group", {"name": "munge"}),
        _event("node01", "ansible.builtin.command", {"stdout": "/etc/not-a-resource", "cmd": ["true"]}),
        _event("node01", "ansible.builtin.command", {"cmd": ["nft", "list", "table", "inet", "podctl_monitoring"]}),
        _event("node01", "ansible.builtin.template", {"dest": "/etc/failed"}, kind="runner_on_failed"),
        # Done on another host for this one (delegate_to): that host's, not this one's.
        _event("node01", "ansible.builtin.copy", {"dest": "/srv/pw", "_ansible_delegated_vars": {"ansible_host": "x"}}),
        _event("node02", "ansible.builtin.pip", {"name": ["torch"]}, role="validation_tools"),
    ]:
        collector.feed(event)
    assert collector.resources() == {
        "node01": {
            "files": ["/etc/a", "/etc/c", "/etc/chrony/chrony.conf", "/etc/hosts", "/etc/podctl"],
            "services": ["chrony"],
            "users": ["slurm"],
            "groups": ["munge"],
            "nft_tables": ["inet podctl_monitoring"],
        },
        "node02": {"trees": ["/opt/podctl-validation"]},
    }


def _fingerprint(inventory: Path, inputs: list[tuple[Path, bool]], stages=("os", "slurm"), hosts=("a", "b")) -> str:
    return converged.fingerprint(inventory, inputs, stages, hosts)


def test_the_fingerprint_follows_every_input_and_nothing_else(tmp_path: Path) -> None:
    site = load_site(SIM_SITE)
    one, two = tmp_path / "one", tmp_path / "two"
    write_inventory(site, one, sim=True)
    write_inventory(site, two, sim=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch.whl").write_bytes(b"w" * 10)
    secret = tmp_path / "password"
    secret.write_text("s1")
    inputs = [(wheels, False), (secret, True)]
    base = _fingerprint(one, inputs)
    # Rendered twice, in two folders: the same.
    assert _fingerprint(two, inputs) == base
    assert _fingerprint(one, inputs, hosts=("b", "a")) == base
    different = {
        "stages": _fingerprint(one, inputs, stages=("os",)),
        "hosts": _fingerprint(one, inputs, hosts=("a",)),
    }
    (two / "hosts.yml").write_text((two / "hosts.yml").read_text() + "# edited\n")
    different["inventory"] = _fingerprint(two, inputs)
    secret.write_text("s2")
    different["controller file"] = _fingerprint(one, inputs)
    (wheels / "numpy.whl").write_bytes(b"n")
    different["wheel folder"] = _fingerprint(one, inputs)
    assert len({base, *different.values()}) == len(different) + 1, different


def test_the_controller_inputs_are_the_controller_paths_the_inventory_names(tmp_path: Path) -> None:
    site = load_site(SIM_SITE)
    write_inventory(site, tmp_path / "inv", sim=True)
    named = {str(p) for p, _ in controller_inputs(site)}
    text = "".join(p.read_text() for p in (tmp_path / "inv").rglob("*.yml"))
    # Every path of this controller's that the inventory names for the roles (the repository,
    # podctl's state folder) is an input of the fingerprint, and the other way round.
    controller_roots = [str(Path(SIM_SITE).resolve().parents[2]), str(Path.home())]
    found = {
        word.strip("'\"")
        for word in text.split()
        if any(word.strip("'\"").startswith(root + "/") for root in controller_roots)
    }
    assert found == named, (found, named)


def test_a_folder_snapshot_says_what_is_mounted_on_it() -> None:
    module = collection_plugin("modules", "converged")
    mounts = module._mounts()
    assert mounts["/proc"].startswith("proc ")
    assert module._file("/proc", module.Keyed(b"k" * 32), mounts).endswith("with " + mounts["/proc"] + " mounted")
    assert "mounted" not in module._file("/proc/self", mounts)


def test_the_summary_names_each_reason_once_with_its_hosts() -> None:
    verdicts = converged.Verdicts(
        {
            "node01": converged.HostVerdict(False, ["the inputs changed"]),
            "node02": converged.HostVerdict(False, ["the inputs changed"]),
            "node03": converged.HostVerdict(True, []),
            "head01": converged.HostVerdict(False, ["file:/etc/a: was x, now y", "service:b: was up, now down"]),
        },
        1.0,
        Path("."),
    )
    assert not verdicts.converged
    assert verdicts.summary() == ["head01: file:/etc/a: was x, now y (and 1 more)", "node[01-02]: the inputs changed"]
    assert converged.Verdicts({h: converged.HostVerdict(True, [], 5) for h in ("a", "b")}, 1.0, Path(".")).converged
    assert not converged.Verdicts({}, 1.0, Path(".")).converged


def _verdicts(**hosts: converged.HostVerdict) -> converged.Verdicts:
    return converged.Verdicts(hosts, 1.0, Path("."))


def test_a_run_goes_to_the_hosts_that_differ_alone_only_while_the_inputs_are_the_same() -> None:
    held = converged.HostVerdict(True, [], 5, True)
    edited = converged.HostVerdict(False, ["file:/etc/a: its content changed"], 5, True)
    replaced = converged.HostVerdict(False, ["no record (...)"], 0, None)
    unasked = converged.HostVerdict(False, ["could not be asked: unreachable"])
    other_inputs = converged.HostVerdict(False, ["the inputs changed since ..."], 5, False)
    # A hand edit on one node, a node replaced, a node that could not be asked: those alone.
    assert _verdicts(head01=held, node01=held, node02=edited).drifted_alone() == ["node02"]
    assert _verdicts(head01=held, node02=edited, node01=replaced, node03=unasked).drifted_alone() == [
        "node01",
        "node02",
        "node03",
    ]
    # Every host, when any host's record was made by a run of other inputs (the site or podctl
    # changed: the holding hosts may need what that run would change), when none holds, or when
    # every host holds (nothing runs).
    assert _verdicts(head01=held, node01=other_inputs, node02=edited).drifted_alone() is None
    assert _verdicts(node01=edited, node02=replaced).drifted_alone() is None
    assert _verdicts(node01=held, node02=held).drifted_alone() is None
    assert converged.record_json(_verdicts(head01=held, node02=edited))["ran_alone"] == ["node02"]


def test_a_file_task_whose_result_is_censored_leaves_its_host_without_a_record() -> None:
    """A file written under no_log names no path in the run's events: the host's record would miss
    it, so the host keeps none (its next deploy runs every task) and the task is named."""
    collector = converged.ResourceCollector()
    censored = {
        "censored": "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
    }
    for event in [
        _event("head01", "ansible.builtin.template", censored | {"changed": True}),
        _event("head01", "ansible.builtin.copy", {"results": [{"dest": "/etc/a"}, censored]}),
        # no_log on a task that writes no file (reading a secret) costs nothing.
        _event("node01", "ansible.builtin.slurp", censored),
        _event("node01", "podctl.pod.secret_file", {"path": "/etc/podctl/secrets/x.pass", "changed": False}),
        _event("node01", "podctl.pod.root_tree", {"trees": ["/etc/slurm", "/etc/munge"], "changed": False}),
    ]:
        event["event_data"]["task"] = "Configure | " + event["event_data"]["resolved_action"]
        collector.feed(event)
    assert collector.unrecorded == {
        "head01": ["Configure | ansible.builtin.template", "Configure | ansible.builtin.copy"]
    }
    assert collector.resources()["node01"] == {
        "files": ["/etc/podctl/secrets/x.pass"],
        "trees": ["/etc/munge", "/etc/slurm"],
    }
    target = converged.Target(Path("/nonexistent"), Path("/nonexistent"), None, ["head01"])  # type: ignore[arg-type]
    # Every host of the run unrecorded: nothing is run, and each is named with its tasks.
    skipped = converged.seal(target, "f", collector.resources(), collector.unrecorded)
    assert list(skipped) == ["head01"] and "'Configure | ansible.builtin.template'" in skipped["head01"]


def test_a_large_tree_is_kept_as_one_digest_and_still_sees_an_edit_in_place(tmp_path: Path, node: dict) -> None:
    """The validation tools' virtualenv holds some 25,000 entries: kept entry by entry it made each
    node's record megabytes and its check slower, so a tree past the module's NAMED_ENTRIES is one
    keyed digest of every entry's line (ctime and inode included), its difference told by count."""
    lib = node["root"] / "tools" / "venv" / "lib"
    for i in range(2100):
        (lib / f"m{i}.py").write_text("x = 1\n")
    _seal(tmp_path, node)
    record = json.loads(Path(node["record"]).read_text())
    assert record["trees"][str(node["root"] / "tools")] == {}
    assert _verify(tmp_path, node)["converged"] is True
    _edit_keeping_size_and_mtime(lib / "m7.py")
    answer = _verify(tmp_path, node)
    assert answer["converged"] is False and answer["why"] == [f"tree:{node['root'] / 'tools'}: its content changed"]
