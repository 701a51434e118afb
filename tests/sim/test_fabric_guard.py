"""A sim pod's ibsim has no authority and answers root alone (issue 41, finding 4).

Components started: the real ibsim podctl finds (podctl's build of 0.12, or Debian's), served as
`podctl sim up` serves it (podctl.sim.fabric.serve) on the sim site's fabric, in a network
namespace this test makes (`unshare --net`, standing in for the SM host's container); the real
ibnetdiscover run in that namespace through umad2sim, once as root and once as `nobody`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from podctl.derive.site import load_site
from podctl.ibfabric import emulated
from podctl.ibfabric.ibsim import IbsimError, SimulatedFabric, find_install, guard
from podctl.ibfabric.ibsim.install import need_tools
from podctl.ibfabric.ibsim.process import wait_for
from podctl.sim import fabric
from tests.helpers.repo import SIM_SITE, cannot_run_here

pytestmark = pytest.mark.fabric

TOOLS = ("unshare", "nsenter", "setpriv", "nft", "ip", "timeout", "ibnetdiscover")


@pytest.fixture
def netns() -> Iterator[int]:
    """The pid of a process alone in a network namespace of its own, its loopback up."""
    if os.geteuid() != 0:
        cannot_run_here("a network namespace of the test's own needs root")
    missing = [tool for tool in TOOLS if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if missing:
        cannot_run_here(f"not installed: {', '.join(missing)} (make fabric-setup)")
    try:
        find_install()
        need_tools("ibnetdiscover")
        guard.account()
    except IbsimError as exc:
        cannot_run_here(f"the guarded fabric needs ibsim and its account: {exc}")
    holder = subprocess.Popen(["unshare", "--net", "--", "sh", "-c", "ip link set lo up && exec sleep 600"])
    try:
        wait_for(
            lambda: os.path.basename(os.readlink(f"/proc/{holder.pid}/exe")) == "sleep",
            10,
            "a network namespace with its loopback up",
            lambda: None if holder.poll() is None else f"unshare ended ({holder.returncode})",
        )
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def _client(fabric_: SimulatedFabric, netns_pid: int, work: Path, as_nobody: bool) -> subprocess.CompletedProcess:
    """ibnetdiscover in the namespace, as root or as `nobody`, reaching ibsim as OpenSM's unit does."""
    work.mkdir(mode=0o777)
    work.chmod(0o777)  # umad2sim writes its stand-in sysfs into the working folder
    drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] if as_nobody else []
    return subprocess.run(
        ["nsenter", "-t", str(netns_pid), "-n", "--", *drop, "timeout", "20", "ibnetdiscover"],
        env=fabric_.client_env(),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def test_nobody_in_the_sm_hosts_namespace_cannot_reach_ibsim_and_root_can(netns: int, tmp_path: Path):
    network = emulated.network(load_site(SIM_SITE))
    served = fabric.serve(network, tmp_path / "fabric", netns)
    try:
        # No authority: an account of its own, no capabilities at all, no way to gain any.
        status = _status(served.pid)
        uid, gid = guard.account()
        assert status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(gid)] * 4, status
        assert status["Groups"] == "", status
        for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(status[caps], 16) == 0, (caps, status[caps])
        assert status["NoNewPrivs"] == "1"
        assert os.readlink(f"/proc/{served.pid}/ns/net") == os.readlink(f"/proc/{netns}/ns/net")

        # Root there reaches it, as OpenSM and the fabric checks do.
        root = _client(served, netns, tmp_path / "root", as_nobody=False)
        assert root.returncode == 0, root.stderr
        assert '"node01 mlx5_0"' in root.stdout and "Switch" in root.stdout

        # `nobody` there is refused at its first datagram: it attaches to nothing, reads nothing.
        nobody = _client(served, netns, tmp_path / "nobody", as_nobody=True)
        assert nobody.returncode != 0 and "Switch" not in nobody.stdout, nobody.stdout[-400:]
        assert "Operation not permitted" in nobody.stderr, nobody.stderr[-400:]
        assert served.attached() == []

        # Nor can it lift the rules that refuse it.
        lift = subprocess.run(
            ["nsenter", "-t", str(netns), "-n", "--", "setpriv", "--reuid=nobody", "--regid=nogroup"]
            + ["--clear-groups", "--", "nft", "delete", "table", "inet", guard.TABLE],
            capture_output=True,
            text=True,
            check=False,
        )
        assert lift.returncode != 0
        rules = subprocess.run(
            ["nsenter", "-t", str(netns), "-n", "--", "nft", "list", "table", "inet", guard.TABLE],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "meta skuid != 0" in rules.stdout
    finally:
        served.stop()
    assert not served.running
