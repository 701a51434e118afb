"""The counter parsers on the second corpus of real output (tests/data/ibcounters/SOURCES.md):
ibqueryerrors with -c's readable values, --counters' "Data Counters for", a port line pasted without
its header; perfquery with the command above it, of old OFED's names, from a web page and a C
comment; sysfs state and rate values. Figures by hand from the files, as SOURCES.md lists them."""

from __future__ import annotations

import html
import re

import pytest

from podctl.ibfabric.counters import parse_ibqueryerrors, parse_perfquery, read_ibqueryerrors, read_perfquery
from podctl.ibfabric.evidence import over_threshold
from podctl.ibfabric.formats import CablingError
from tests.helpers.repo import REPO
from validation.health import _sysfs_state, parse_ib_rate

DATA = REPO / "tests" / "data" / "ibcounters"


def _unwrap_html(text: str) -> str:
    lines = [html.unescape(re.sub(r"<[^>]+>", "", line)).strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


def test_ibqueryerrors_linux_rdma_with_its_command_line():
    text = (DATA / "ibqueryerrors-linuxrdma-1.txt").read_text()
    counters = parse_ibqueryerrors("\n".join(line.removeprefix("> ").removeprefix(">") for line in text.splitlines()))
    assert len(counters.ports) == 15 and counters.summary == {
        "nodes_checked": 4,
        "bad_nodes": 4,
        "ports_checked": 43,
        "ports_with_errors": 14,
    }
    assert counters.warnings and "# ibqueryerrors" in counters.warnings[0]
    switch = {p.port: p for p in counters.ports if p.desc == "MF0;ys23ib4:SX6036/U1"}
    assert switch[None].counters["LinkDownedCounter"] == 48 and "SymbolErrorCounter" not in switch[None].counters
    assert switch[5].counters["SymbolErrorCounter"] == 65535 and switch[7].counters["LinkErrorRecoveryCounter"] == 7
    # Link flaps on ports 1-8: evidence on each by podctl's thresholds.
    assert [p for p in range(1, 9) if over_threshold(switch[p].counters)] == list(range(1, 9))


def test_ibqueryerrors_64_bit_values_with_their_readable_form_and_no_header():
    counters = read_ibqueryerrors(str(DATA / "ibqueryerrors-ucx-1.txt"))
    (port,) = counters.ports
    assert port.port is None and port.desc == "" and port.node == "0x1070fd0300370ea2"
    assert dict(port.counters) == {
        "LinkDownedCounter": 25,
        "PortRcvErrors": 26,
        "PortXmitDiscards": 2846,
        "PortXmitWait": 14681376621,
    }


def test_ibqueryerrors_data_counters_and_link_info():
    counters = read_ibqueryerrors(str(DATA / "ibqueryerrors-klemming-1.txt"))
    assert [(p.port, p.desc) for p in counters.ports] == [
        (1, "klemming-tegner-rtr-2 HCA-1"),
        (2, "klemming-tegner-rtr-2 HCA-1"),
    ]
    assert counters.ports[0].counters["PortXmitData"] == 19892634015130
    assert counters.ports[1].counters["PortRcvData"] == 14084187130334
    assert all(not p.nonzero_errors for p in counters.ports)


def test_perfquery_with_the_command_above_it():
    counters = read_perfquery(str(DATA / "perfquery-infinibanddiags-1.txt"))
    (port,) = counters.ports
    assert (port.node, port.port) == ("lid 10", 1) and not port.nonzero_errors
    assert len(port.counters) == 25  # every Name:....value line, PortSelect and CounterSelect included
    assert counters.warnings and "perfquery -x 10 1" in counters.warnings[0]


def test_old_ofed_names_from_a_web_page_and_a_c_comment():
    with pytest.raises(CablingError, match="remove the HTML"):
        read_perfquery(str(DATA / "perfquery-ompi-1.txt"))
    ompi = parse_perfquery(_unwrap_html((DATA / "perfquery-ompi-1.txt").read_text()), "ompi")
    assert ompi.ports[0].nonzero_errors == {
        "SymbolErrorCounter": 7836,
        "LinkErrorRecoveryCounter": 255,
        "PortRcvErrors": 24058,
        "PortRcvRemotePhysicalErrors": 6159,
        "PortXmitDiscards": 3176,
    }
    assert ompi.ports[0].counters["PortXmitData"] == 1930
    with pytest.raises(CablingError, match="remove the comment marks"):
        read_perfquery(str(DATA / "perfquery-tacc-1.txt"))
    tacc = parse_perfquery(
        "\n".join(line.removeprefix("// ") for line in (DATA / "perfquery-tacc-1.txt").read_text().splitlines())
    )
    assert (tacc.ports[0].node, tacc.ports[0].port) == ("lid 936", 1) and not tacc.ports[0].nonzero_errors
    assert tacc.ports[0].counters["PortRcvData"] == 2411533950


def test_sysfs_state_and_rate_values_as_the_health_check_reads_them():
    text = _unwrap_html((DATA / "sysfs-state-ompi-2.txt").read_text())
    states = re.findall(r"(?m)^state:\s+(\d: \w+)", text)
    assert [_sysfs_state(s) for s in states] == ["DOWN", "ACTIVE"]
    assert [parse_ib_rate(r) for r in re.findall(r"rate:\s+(.*)", text)] == [40.0, 56.0]
    assert parse_ib_rate((DATA / "sysfs-state-azhpc-4.txt").read_text()) == 5.0
