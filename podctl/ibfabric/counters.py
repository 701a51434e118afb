"""Port error counters, the evidence a bad cable leaves: perfquery, ibqueryerrors and sysfs.

Three sources, each read into `PortCounters` records keyed by node and port,
with counters named as perfquery names them (`SymbolErrorCounter`,
`LinkDownedCounter`, ...):

- `perfquery [-x] [-E]`: one record per `# Port counters: Lid <lid> port <n>`
  header, then `Name:.....value` lines. perfquery names the port by LID;
  give `node` (a GUID) where the caller knows whose LID it is.
- `ibqueryerrors`: `Errors for 0x<guid> "<desc>"` (a CA's header may have no
  GUID), then `GUID 0x<guid> port <n|ALL>: [Counter == value] ...` for the
  ports over threshold, and a `## Summary` of nodes and ports checked.
- sysfs, per node: `/sys/class/infiniband/<dev>/ports/<n>/counters/<file>`,
  one number per file, named after the device (`mlx5_0`).

Tool output is input from outside: as in podctl.ibfabric.formats, every
expression runs in linear time, a line over 64 KiB is refused, errors name
the file and line, and the tools' stderr lines are skipped with a warning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from podctl.ibfabric.identity import parse_guid
from podctl.ibfabric.topofile import (
    CablingError,
    guid_key,
    is_command_echo,
    is_stderr_line,
    not_output,
    numbered_lines,
    read_text,
    skipped,
)

# The counters that count errors (IBA PortCounters, and PortRcvErrorDetails from perfquery -E);
# the others (data, packets, PortXmitWait) count traffic and congestion.
ERROR_COUNTERS: tuple[str, ...] = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
    "PortLocalPhysicalErrors",
    "PortMalformedPktErrors",
    "PortBufferOverrunErrors",
    "PortDLIDMappingErrors",
    "PortVLMappingErrors",
    "PortLoopingErrors",
)

# sysfs file -> perfquery name
SYSFS_NAMES: dict[str, str] = {
    "symbol_error": "SymbolErrorCounter",
    "link_error_recovery": "LinkErrorRecoveryCounter",
    "link_downed": "LinkDownedCounter",
    "port_rcv_errors": "PortRcvErrors",
    "port_rcv_remote_physical_errors": "PortRcvRemotePhysicalErrors",
    "port_rcv_switch_relay_errors": "PortRcvSwitchRelayErrors",
    "port_xmit_discards": "PortXmitDiscards",
    "port_xmit_constraint_errors": "PortXmitConstraintErrors",
    "port_rcv_constraint_errors": "PortRcvConstraintErrors",
    "local_link_integrity_errors": "LocalLinkIntegrityErrors",
    "excessive_buffer_overrun_errors": "ExcessiveBufferOverrunErrors",
    "VL15_dropped": "VL15Dropped",
    "port_xmit_data": "PortXmitData",
    "port_rcv_data": "PortRcvData",
    "port_xmit_packets": "PortXmitPkts",
    "port_rcv_packets": "PortRcvPkts",
    "unicast_xmit_packets": "PortUnicastXmitPkts",
    "unicast_rcv_packets": "PortUnicastRcvPkts",
    "multicast_xmit_packets": "PortMulticastXmitPkts",
    "multicast_rcv_packets": "PortMulticastRcvPkts",
    "port_xmit_wait": "PortXmitWait",
}
# perfquery of OFED 1.x (before infiniband-diags 1.5) printed shorter names; read as the modern ones.
OLD_PERFQUERY_NAMES: dict[str, str] = {
    "SymbolErrors": "SymbolErrorCounter",
    "LinkRecovers": "LinkErrorRecoveryCounter",
    "LinkDowned": "LinkDownedCounter",
    "RcvErrors": "PortRcvErrors",
    "RcvRemotePhysErrors": "PortRcvRemotePhysicalErrors",
    "RcvSwRelayErrors": "PortRcvSwitchRelayErrors",
    "XmtDiscards": "PortXmitDiscards",
    "XmtConstraintErrors": "PortXmitConstraintErrors",
    "RcvConstraintErrors": "PortRcvConstraintErrors",
    "LinkIntegrityErrors": "LocalLinkIntegrityErrors",
    "ExcBufOverrunErrors": "ExcessiveBufferOverrunErrors",
    "XmtData": "PortXmitData",
    "RcvData": "PortRcvData",
    "XmtPkts": "PortXmitPkts",
    "RcvPkts": "PortRcvPkts",
    "XmtWait": "PortXmitWait",
}
ALL_PORTS = 255  # the PortSelect that means "every port together"
_MAX_COUNTER_FILE = 4096


@dataclass(frozen=True)
class PortCounters:
    node: str  # "0x<guid>"; "lid <n>" where perfquery names the port by LID alone; an RDMA device ("mlx5_0")
    port: int | None  # None: all ports together (ibqueryerrors "port ALL", perfquery's PortSelect 255)
    counters: Mapping[str, int]  # every counter read, by its perfquery name
    source: str  # "file:line" where the record starts; sysfs: its counters folder
    desc: str = ""  # the node description, where the tool gives it
    guid: int | None = None  # sysfs: the device's node_guid, where the folder has it

    @property
    def errors(self) -> dict[str, int]:
        return {name: self.counters[name] for name in ERROR_COUNTERS if name in self.counters}

    @property
    def nonzero_errors(self) -> dict[str, int]:
        return {name: value for name, value in self.errors.items() if value}


@dataclass(frozen=True)
class Counters:
    ports: tuple[PortCounters, ...]
    warnings: tuple[str, ...] = ()
    summary: Mapping[str, int] = field(default_factory=dict)  # ibqueryerrors: nodes_checked, bad_nodes, ...

    def nonzero_errors(self) -> dict[tuple[str, int | None], dict[str, int]]:
        """(node, port) -> its error counters that are not 0, for the ports that have any."""
        return {(p.node, p.port): p.nonzero_errors for p in self.ports if p.nonzero_errors}


def _number(text: str) -> int:
    return int(text, 16) if text.startswith(("0x", "0X")) else int(text)


# -- perfquery ---------------------------------------------------------------

_PQ_HEAD = re.compile(r"#?+\s*+([A-Za-z][A-Za-z ]{0,60}+):\s*+Lid (\d{1,6}+) port (\d{1,3}+)(?:\s.*+)?+")
_PQ_VALUE = re.compile(r"([A-Za-z][A-Za-z0-9]{0,63}+):\.*+\s*+(0x[0-9a-fA-F]{1,16}+|\d{1,20}+)")
_PQ_EXPECTED = (
    "expected '# Port counters: Lid <lid> port <n>' and 'Name:.....value' lines; run `perfquery -x LID PORT > FILE`"
)


def parse_perfquery(text: str, source: str = "<perfquery>", node: str | None = None) -> Counters:
    """perfquery output, one record per header; `node` (e.g. "0x<guid>") names the node instead of its LID."""
    ports: list[PortCounters] = []
    warnings: list[str] = []
    record: dict[str, int] | None = None
    head: tuple[str, int | None, str] = ("", None, "")
    for lineno, line in numbered_lines(text, source, "perfquery"):
        stripped = line.strip()
        if not stripped:
            continue
        if match := _PQ_HEAD.fullmatch(stripped):
            if record is not None:
                ports.append(PortCounters(head[0], head[1], record, head[2]))
            _, lid, port = match.groups()
            head = (node or f"lid {int(lid)}", None if int(port) == ALL_PORTS else int(port), f"{source}:{lineno}")
            record = {}
            continue
        if (match := _PQ_VALUE.fullmatch(stripped)) and record is not None:
            name, value = match.groups()
            record[OLD_PERFQUERY_NAMES.get(name, name)] = _number(value)
            continue
        if is_command_echo(stripped, "perfquery"):
            skipped(warnings, source, lineno, stripped, "perfquery")
            continue
        if is_stderr_line(stripped):
            skipped(warnings, source, lineno, stripped, "perfquery")
            continue
        if match:
            raise CablingError(f"{source}:{lineno}: a counter before any '# Port counters: Lid <lid> port <n>' line")
        raise not_output("perfquery", source, lineno, stripped, _PQ_EXPECTED)
    if record is not None:
        ports.append(PortCounters(head[0], head[1], record, head[2]))
    return Counters(tuple(ports), tuple(warnings))


# -- ibqueryerrors -----------------------------------------------------------

# "Errors for" (over threshold) and, with --counters/-r, "Data Counters for"; a CA's header may lack the GUID.
_QE_NODE = re.compile(r'(?:Errors|Data Counters) for\s++(?:0x([0-9a-fA-F]{1,16}+)\s++)?+"([^"]*+)"(?:\s.*+)?+')
# With -c (64-bit counters) each value is followed by a readable form: "[PortXmitDiscards == 2846 (2.779K)]".
_QE_VALUE = r"\[\w{1,64}+ == \d{1,20}+(?:\s*+\([^()\[\]]{0,24}+\))?+\]"
_QE_PORT = re.compile(r"GUID 0x([0-9a-fA-F]{1,16}+) port (\d{1,3}+|ALL):((?:\s*+" + _QE_VALUE + r")*+)\s*+")
_QE_COUNTER = re.compile(r"\[(\w{1,64}+) == (\d{1,20}+)")
_QE_NODES = re.compile(r"##\s*+Summary:\s*+(\d{1,9}+) nodes checked,\s*+(\d{1,9}+) bad nodes found")
_QE_PORTS = re.compile(r"##\s*+(\d{1,9}+) ports checked,\s*+(\d{1,9}+) ports have errors beyond threshold")
_QE_EXPECTED = "expected 'Errors for ...', 'GUID 0x<guid> port <n>: [Counter == n] ...' or '## ...' lines"


def parse_ibqueryerrors(text: str, source: str = "<ibqueryerrors>") -> Counters:
    """ibqueryerrors output: the ports over threshold, with their counters, and the summary."""
    ports: list[PortCounters] = []
    warnings: list[str] = []
    summary: dict[str, int] = {}
    desc: str | None = None
    for lineno, line in numbered_lines(text, source, "ibqueryerrors"):
        stripped = line.strip()
        if not stripped or stripped.startswith("Link info:"):
            continue
        if match := _QE_NODE.fullmatch(stripped):
            desc = match.group(2)
        elif match := _QE_PORT.fullmatch(stripped):
            guid, port, counters = match.groups()
            ports.append(
                PortCounters(
                    guid_key(int(guid, 16)),
                    None if port == "ALL" else int(port),
                    {name: int(value) for name, value in _QE_COUNTER.findall(counters)},
                    f"{source}:{lineno}",
                    desc or "",  # a port line pasted without its header names its port by GUID alone
                )
            )
        elif match := _QE_NODES.fullmatch(stripped):
            summary["nodes_checked"], summary["bad_nodes"] = (int(n) for n in match.groups())
        elif match := _QE_PORTS.fullmatch(stripped):
            summary["ports_checked"], summary["ports_with_errors"] = (int(n) for n in match.groups())
        elif stripped.startswith("##"):
            continue  # "## Thresholds:", "## Suppressed:" and what they list
        elif is_stderr_line(stripped) or is_command_echo(stripped, "ibqueryerrors"):
            skipped(warnings, source, lineno, stripped, "ibqueryerrors")
        else:
            raise not_output("ibqueryerrors", source, lineno, stripped, _QE_EXPECTED)
    return Counters(tuple(ports), tuple(warnings), summary)


# -- sysfs -------------------------------------------------------------------


def read_sysfs_counters(root: str) -> Counters:
    """Every `<root>/<dev>/ports/<n>/counters/*` file (root: /sys/class/infiniband or a copy of it)."""
    if not os.path.isdir(root):
        raise CablingError(f"{root}: no such folder; copy /sys/class/infiniband of the node there first")
    ports: list[PortCounters] = []
    for device in sorted(os.listdir(root)):
        ports_dir = os.path.join(root, device, "ports")
        if not os.path.isdir(ports_dir):
            continue
        guid_file = os.path.join(root, device, "node_guid")
        guid = _guid_of(guid_file) if os.path.isfile(guid_file) else None
        for port in sorted(os.listdir(ports_dir), key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p)):
            folder = os.path.join(ports_dir, port, "counters")
            if not port.isdigit() or not os.path.isdir(folder):
                continue
            counters = {
                SYSFS_NAMES.get(name, name): _counter_file(os.path.join(folder, name))
                for name in sorted(os.listdir(folder))
                if os.path.isfile(os.path.join(folder, name))
            }
            ports.append(PortCounters(device, int(port), counters, folder, guid=guid))
    return Counters(tuple(ports))


def _small_file(path: str) -> str:
    text = read_text(path, "")
    if len(text) > _MAX_COUNTER_FILE:
        raise CablingError(f"{path}:1: {len(text)} characters; a sysfs counter file holds one number")
    return text.strip()


def _counter_file(path: str) -> int:
    text = _small_file(path)
    if not text.isdigit() or len(text) > 20:
        raise CablingError(f"{path}:1: {text[:40]!r} is not a counter value (a decimal number)")
    return int(text)


def _guid_of(path: str) -> int | None:
    return parse_guid(_small_file(path))


def read_perfquery(path: str, node: str | None = None) -> Counters:
    return parse_perfquery(read_text(path, f"save `perfquery -x LID PORT > {path}` there first"), path, node)


def read_ibqueryerrors(path: str) -> Counters:
    return parse_ibqueryerrors(read_text(path, f"save `ibqueryerrors > {path}` there first"), path)
