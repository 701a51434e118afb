"""tc command construction and parsing for fault injection (no podman)."""

from __future__ import annotations

import pytest

from podctl.sim import fault
from podctl.sim.errors import SimError


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("50mbit", 50_000_000),
        ("50Mbit", 50_000_000),
        ("1gbit", 1_000_000_000),
        ("1.5gbit", 1_500_000_000),
        ("10mbps", 80_000_000),
        ("1mibit", 1_048_576),
        ("64kbit", 64_000),
        ("100000", 100_000),
    ],
)
def test_parse_rate(text, bits):
    assert fault.parse_rate(text) == bits


@pytest.mark.parametrize(
    ("text", "needle"), [("fast", "not a rate"), ("50furlongs", "unknown unit"), ("1kbit", "too slow")]
)
def test_parse_rate_rejects(text, needle):
    with pytest.raises(SimError, match=needle):
        fault.parse_rate(text)


def test_tbf_command_for_50mbit():
    assert fault.tbf_command("eth0", 50_000_000) == [
        "tc",
        "qdisc",
        "replace",
        "dev",
        "eth0",
        "root",
        "tbf",
        "rate",
        "50000000bit",
        "burst",
        "25000b",
        "latency",
        "50ms",
    ]


def test_burst_covers_one_timer_tick_and_has_a_floor():
    assert fault.burst_bytes(10_000_000_000) == 10_000_000_000 // 8 // 250
    assert fault.burst_bytes(100_000) == 8 * 1024


def test_commands_run_in_the_node_namespace_from_the_host():
    assert fault.in_netns(4242, fault.tc_clear_command("eth0")) == [
        "nsenter",
        "-t",
        "4242",
        "-n",
        "tc",
        "qdisc",
        "del",
        "dev",
        "eth0",
        "root",
    ]


def test_parse_ip_link_finds_the_veth_peer():
    out = (
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN\\    link/loopback 00:00\n"
        "2: eth0@if7: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\\    link/ether 02:50\n"
        "7: vethbccddc9d@if2: <BROADCAST,MULTICAST,UP> mtu 1500 master cni-podman1\n"
    )
    assert fault.parse_ip_link(out) == [(1, "lo", None), (2, "eth0", 7), (7, "vethbccddc9d", 2)]


def test_parse_ip_addr():
    out = (
        "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n"
        "2: eth0    inet 10.89.0.11/24 brd 10.89.0.255 scope global eth0\\       valid_lft forever\n"
    )
    assert fault.parse_ip_addr(out) == {"lo": ["127.0.0.1"], "eth0": ["10.89.0.11"]}
