"""The exporters' firewall (the monitoring role's podctl-monitoring.nft) loaded by the real nft on
a host of its own, and packets sent to it from another host.

Two network namespaces this test makes, joined by a veth pair: one is the sim site's compute
node02 with the rules the role renders for it, the other every other host, whose end holds both an
address of a private /30 (a stranger) and the Prometheus host's management address. Every address
exists only inside the two namespaces, which are deleted at the end. Needs root, nft and ip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from podctl.derive.site import load_site
from tests.helpers.repo import SIM_SITE, cannot_run_here
from tests.helpers.roles import render_templates

pytestmark = pytest.mark.deploy

EXPORTER_HOST = "node02"
NODE_EXPORTER_PORT = 9100
SSH_PORT = 22  # not an exporter's: the rules must let it through
# The /30 joining the two namespaces: the exporter host's end, and a stranger's.
EXPORTER_ADDRESS, STRANGER_ADDRESS = "10.255.47.1", "10.255.47.2"
CONNECT_TIMEOUT_S = 1.5

LISTEN = """
import socket, sys
listening = []
for port in sys.argv[1:]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", int(port)))
    sock.listen(8)
    listening.append(sock)
print("listening", flush=True)
sys.stdin.read()  # until the test ends it
"""

CONNECT = """
import socket, sys
address, port, source, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
try:
    socket.create_connection((address, port), timeout=timeout, source_address=(source, 0)).close()
except OSError as exc:
    print(type(exc).__name__, exc)
    sys.exit(1)
"""


@dataclass(frozen=True)
class Hosts:
    exporter: str  # the namespace of the exporter host
    other: str  # the namespace of every other host
    prometheus_address: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _in(namespace: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, *argv]


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    for tool in ("nft", "ip"):
        if shutil.which(tool) is None:
            cannot_run_here(f"{tool} is not installed")
    if os.geteuid() != 0:
        cannot_run_here("network namespaces need root")
    site = load_site(SIM_SITE)
    assert site.monitoring is not None
    prometheus_address = str(site.node(site.monitoring.prometheus_host).address)
    made = Hosts(f"podctl-fw-{os.getpid()}-exporter", f"podctl-fw-{os.getpid()}-other", prometheus_address)
    try:
        for namespace in (made.exporter, made.other):
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", made.exporter, "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", made.other)
        _ip("-n", made.exporter, "addr", "add", f"{EXPORTER_ADDRESS}/30", "dev", "v0")
        _ip("-n", made.other, "addr", "add", f"{STRANGER_ADDRESS}/30", "dev", "v1")
        _ip("-n", made.other, "addr", "add", f"{prometheus_address}/32", "dev", "v1")
        _ip("-n", made.exporter, "link", "set", "v0", "up")
        _ip("-n", made.other, "link", "set", "v1", "up")
        _ip("-n", made.exporter, "route", "add", f"{prometheus_address}/32", "dev", "v0")
        yield made
    finally:
        for namespace in (made.exporter, made.other):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False, timeout=30)


def _connects(hosts: Hosts, source: str, port: int) -> tuple[bool, str]:
    """Whether a TCP connection from `source` (an address of the other namespace) to the exporter
    host's `port` opens within CONNECT_TIMEOUT_S, and why not."""
    argv = [sys.executable, "-c", CONNECT, EXPORTER_ADDRESS, str(port), source, str(CONNECT_TIMEOUT_S)]
    proc = subprocess.run(_in(hosts.other, *argv), capture_output=True, text=True, timeout=30, check=False)
    return proc.returncode == 0, proc.stdout + proc.stderr


def test_the_exporters_answer_the_prometheus_host_and_drop_every_other_host(hosts: Hosts, tmp_path: Path) -> None:
    rules = render_templates(
        SIM_SITE, "monitoring", EXPORTER_HOST, {"podctl-monitoring.nft": "podctl-monitoring.nft.j2"}, tmp_path
    )["podctl-monitoring.nft"]
    assert f"ip saddr {hosts.prometheus_address} accept" in rules, rules
    path = tmp_path / "podctl-monitoring.nft"
    path.write_text(rules)
    subprocess.run(_in(hosts.exporter, "nft", "-f", str(path)), check=True, capture_output=True, timeout=30)
    with subprocess.Popen(
        _in(hosts.exporter, sys.executable, "-c", LISTEN, str(NODE_EXPORTER_PORT), str(SSH_PORT)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as listener:
        try:
            assert listener.stdout is not None and listener.stdout.readline() == "listening\n"
            # The stranger reaches the host (SSH is no exporter's port), but not its exporter.
            assert _connects(hosts, STRANGER_ADDRESS, SSH_PORT) == (True, "")
            opened, why = _connects(hosts, STRANGER_ADDRESS, NODE_EXPORTER_PORT)
            assert not opened and "TimeoutError" in why, why or f"{STRANGER_ADDRESS} reached the node exporter"
            assert _connects(hosts, hosts.prometheus_address, NODE_EXPORTER_PORT) == (True, "")
        finally:
            listener.kill()  # and waited for, on leaving the with
    # What nft made of the file: the exporters' chain ends in a drop, not in the chain's way out.
    listed = subprocess.run(
        _in(hosts.exporter, "nft", "-j", "list", "table", "inet", "podctl_monitoring"),
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    exporters = [
        item["rule"]["expr"]
        for item in json.loads(listed)["nftables"]
        if "rule" in item and item["rule"]["chain"] == "exporters"
    ]
    assert exporters and exporters[-1] == [{"drop": None}], exporters
