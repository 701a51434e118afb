"""On the deployed sim pod, as an attacker on a node would try it: what root runs or reads is
root's, every file the deploy manages is in the node's record (secrets included), and a user
cannot drain a node.

Runs on the session's shared pod after the tests of tests/conftest.py's SIM_ORDER; each test
leaves the pod as it found it (a deploy on head01 alone brings its record back).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.simpod import Pod, podctl

pytestmark = pytest.mark.sim

SECRET = "/etc/podctl/secrets/slurmdbd-storage.pass"
WEB_CONFIG = "/etc/prometheus/podctl-web.yml"
EVIL_SPANK = "/etc/slurm/plugstack.conf.d/evil.conf"


def _deploy(pod: Pod, expect_rc: int = 0) -> tuple[dict[str, Any], str]:
    proc = podctl("deploy", str(pod.site), "--runs-dir", str(pod.runs_dir), timeout=1200, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == expect_rc, f"rc {proc.returncode}\n{out[-5000:]}"
    run_dir = sorted(p for p in pod.runs_dir.iterdir() if p.name.endswith("-deploy"))[-1]
    return json.loads((run_dir / "recap.json").read_text()), out


def _entry(lines: list[str], prefix: str) -> str:
    """The line that starts with prefix (a folder's changes are named on one line), or ""."""
    return next((line for line in lines if line.startswith(prefix)), "")


def test_the_daemons_accounts_cannot_replace_what_root_runs_or_reads(sim_pod: Pod) -> None:
    # slurm writes /var/log/slurm (slurmctld's and slurmdbd's logs), on the same file system as
    # /etc: a rename from there over slurm.conf is what owning /etc/slurm allowed.
    rename = (
        "runuser -u slurm -- python3 -c \"import os; open('/var/log/slurm/x.conf', 'w').write('Prolog=/tmp/p\\n'); "
        "os.rename('/var/log/slurm/x.conf', '/etc/slurm/slurm.conf')\""
    )
    try:
        tried = sim_pod.sh("head01", rename)
        assert tried.returncode != 0 and "Permission denied" in tried.stderr, tried
        assert "Prolog=/tmp/p" not in sim_pod.ssh("head01", "cat /etc/slurm/slurm.conf")
    finally:
        sim_pod.sh("head01", "rm -f /var/log/slurm/x.conf")
    for host, account, path in [
        ("head01", "slurm", "/etc/slurm/plugstack.conf.d/x.conf"),
        ("head01", "slurm", "/etc/podctl/secrets/x"),
        ("head01", "munge", "/etc/munge/x"),
        ("head01", "prometheus", "/etc/prometheus/x.yml"),
        ("node01", "slurm", "/var/lib/slurm/slurmd/x"),  # slurmd's spool: slurmd runs as root
        ("node01", "slurm", "/var/lib/slurm/x"),
        ("node01", "munge", "/etc/munge/x"),
    ]:
        made = sim_pod.sh(host, f"runuser -u {account} -- touch {path}")
        assert made.returncode != 0, f"{account} could write {path} on {host}"
    # slurmd logs to the journal, not into the slurm account's folder.
    assert sim_pod.sh("node01", "test -e /var/log/slurm/slurmd.log").returncode != 0


def test_what_is_changed_by_hand_in_a_managed_file_or_folder_is_named_and_run_on(sim_pod: Pod) -> None:
    """A web user added to the login, a line added to slurmdbd.conf (both written by tasks that
    handle a secret) and a SPANK plugin dropped into plugstack.conf.d (which no task writes):
    conformance names each on head01, and the next deploy runs head01 alone."""
    # From a pod as the deploy leaves it (a test before may have left a record behind).
    _deploy(sim_pod)
    web = sim_pod.ssh("head01", f"cat {WEB_CONFIG}")
    assert "basic_auth_users:" in web
    tamper = (
        f"sed -i 's/^basic_auth_users:$/basic_auth_users:\\n  eve: $2y$10$0000000000000000000000000000000000000000000000000000/' {WEB_CONFIG}"
        " && echo DebugFlags=DB_QUERY >> /etc/slurm/slurmdbd.conf"
        f" && echo 'optional /tmp/evil.so' > {EVIL_SPANK}"
    )
    assert sim_pod.sh("head01", tamper).returncode == 0
    converged = False
    try:
        rc, data, out = sim_pod.validate("tampered", "--suite", "conformance")
        assert rc == 1 and set(data["failures"]) == {"head01"}, data["failures"]
        reasons = " | ".join(data["failures"]["head01"])
        # One line per folder: "/etc/slurm: plugstack.conf.d/evil.conf added, ... since the last deploy".
        slurm_tree = _entry(data["failures"]["head01"], "conformance: /etc/slurm: ")
        assert "plugstack.conf.d/evil.conf added" in slurm_tree and "since the last deploy" in slurm_tree, reasons
        assert "podctl-web.yml" in reasons and "slurmdbd.conf" in reasons, reasons
        assert "eve" not in reasons and "$2y$" not in reasons  # a secret's file: that it changed, not how

        recap, out = _deploy(sim_pod)
        converged = True
        assert recap["ran_alone"] == ["head01"], recap.get("converged_hosts")
        why = recap["converged_hosts"]["head01"]["why"]
        assert "podctl-web.yml changed" in _entry(why, "tree:/etc/prometheus: "), why
        assert "file:/etc/slurm/slurmdbd.conf: its content changed" in why, why
        assert "plugstack.conf.d/evil.conf added" in _entry(why, "tree:/etc/slurm: "), why
        # The deploy wrote its own files back; the dropped file is no task's, and stays for a person.
        assert "eve:" not in sim_pod.ssh("head01", f"cat {WEB_CONFIG}")
        assert "DebugFlags" not in sim_pod.ssh("head01", "cat /etc/slurm/slurmdbd.conf")
    finally:
        sim_pod.sh("head01", f"rm -f {EVIL_SPANK}")
        if not converged:  # leave the pod as the deploy makes it for the tests after
            _deploy(sim_pod)


def test_a_link_where_a_secret_goes_is_refused_by_the_deploy_naming_it(sim_pod: Pod) -> None:
    shadow = sim_pod.ssh("head01", "stat -c '%u %a %s' /etc/shadow")
    assert sim_pod.sh("head01", f"mv {SECRET} /root/secret.saved && ln -s /etc/shadow {SECRET}").returncode == 0
    try:
        _, out = _deploy(sim_pod, expect_rc=1)
        assert f"{SECRET} is a symbolic link (to /etc/shadow)" in out, out[-4000:]
        assert sim_pod.ssh("head01", "stat -c '%u %a %s' /etc/shadow") == shadow
    finally:
        sim_pod.sh("head01", f"rm -f {SECRET} && mv /root/secret.saved {SECRET}")
    # Put back, and the deploy on head01 alone converges it again (the SPANK file of the test
    # before is gone too), restarting nothing: the password is the one slurmdbd has.
    before = sim_pod.daemons()["head01"]
    recap, _ = _deploy(sim_pod)
    assert recap["ran_alone"] == ["head01"] and recap["hosts"]["head01"]["changed"] == 0, recap["hosts"]["head01"]
    assert sim_pod.daemons()["head01"] == before


def test_a_user_filling_tmp_on_an_idle_node_does_not_drain_it(sim_pod: Pod, tmp_path: Path) -> None:
    # As slurmd runs the gate, on an idle node, with the node's own expectations except /tmp's
    # limit, set between its free space before and after a user writes 256 MiB there.
    sim_pod.wait_idle()
    free_gib = float(sim_pod.ssh("node01", "stat -f -c '%a %S' /tmp | awk '{print $1 * $2 / 2^30}'"))
    expect = json.loads(sim_pod.ssh("node01", "cat /etc/podctl/health.json"))
    expect["free_space"] = [{"path": "/tmp", "min_free_gib": round(free_gib - 0.125, 3)}]
    expect["textfile_dir"] = "/root/gate-test/textfile"
    setup = (
        "mkdir -p /root/gate-test/textfile /root/gate-test/state && cat > /root/gate-test/expect.json <<'EOF'\n"
        + json.dumps(expect)
        + "\nEOF\nrunuser -u nobody -- dd if=/dev/zero of=/tmp/fill bs=1M count=256 status=none"
    )
    try:
        assert sim_pod.sh("node01", setup).returncode == 0
        gate = sim_pod.sh(
            "node01",
            "/usr/local/sbin/podctl-healthcheck --expect /root/gate-test/expect.json "
            "--state /root/gate-test/state --print",
        )
        record = json.loads(gate.stdout)
        assert record["status"] == "pass" and "drain" not in record, record
        assert any(w.startswith("/tmp has ") for w in record["warnings"]), record
        state = sim_pod.ssh("head01", "sinfo -h -n node01 -o %T").strip()
        assert state == "idle", state
    finally:
        sim_pod.sh("node01", "rm -rf /tmp/fill /root/gate-test")
