"""Passive node health: what the hardware says about itself, in seconds.

    python3 -m validation.health --expect-gpus 8 --expect-gpu-model H100 \
        --expect-gpu-memory-gib 80 --expect-cores 224 --expect-memory-gib 2048 \
        --expect-hcas 8 --expect-hca-rate-gbps 400

Parts: GPUs through NVML (count, model, memory, driver, ECC, row remapping,
NVLink, PCIe), XID events from the kernel log, InfiniBand ports from sysfs,
CPU cores and memory from /proc. A part that does not apply here (no NVML
and no GPUs expected, no HCA and none expected) is reported as skipped in
details["parts"]; a mismatch against an expectation is an error finding.

Why one module of this size: each part (GPUs through NVML, XID events, HCA
ports, CPU and memory) is small, and the check runs as one process that must
start fast on a node with nothing but the standard library and NVML.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from validation import nvml as nvml_util
from validation.result import CheckArgumentParser, Report, emit, parse_args, run_check

GIB = 1024**3


@dataclass(frozen=True)
class Expectations:
    gpus: int | None = None
    gpu_model: str | None = None
    gpu_memory_gib: float | None = None
    nvlinks_per_gpu: int | None = None
    driver: str | None = None
    cores: int | None = None
    memory_gib: float | None = None
    hcas: int | None = None
    hca_rate_gbps: float | None = None
    pcie_width: int | None = None
    # Installed memory is never all visible: the kernel, firmware and the
    # GPU driver keep some back, so sizes are compared with a tolerance.
    memory_tolerance: float = 0.06


def _compare_size(
    report: Report, what: str, actual: float, expected: float, tolerance: float, device: str | None
) -> None:
    if actual < expected * (1.0 - tolerance):
        report.error(f"{what} is {actual:.1f} GiB, expected {expected:g} GiB (tolerance {tolerance:.0%})", device)
    elif actual > expected * (1.0 + tolerance):
        report.warning(f"{what} is {actual:.1f} GiB, more than the expected {expected:g} GiB", device)


# --------------------------------------------------------------------------- GPUs


def check_gpus(report: Report, nvml: ModuleType | None, why_no_nvml: str | None, exp: Expectations) -> dict:
    """GPU part. `nvml` is pynvml (or a fake in tests); None when NVML is unavailable."""
    part: dict[str, Any] = {"status": "checked"}
    if nvml is None:
        if exp.gpus:
            report.error(f"expected {exp.gpus} GPUs but NVML is unavailable: {why_no_nvml}")
            part["status"] = "failed"
        else:
            report.info(f"GPU part skipped: {why_no_nvml}")
            part["status"] = "skipped"
        part["reason"] = why_no_nvml
        return part

    count = int(nvml_util.query(nvml.nvmlDeviceGetCount, default=0))
    part["driver"] = nvml_util.text(nvml_util.query(nvml.nvmlSystemGetDriverVersion, default="unknown"))
    cuda = nvml_util.query(nvml.nvmlSystemGetCudaDriverVersion)
    part["cuda_driver"] = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None
    report.measure("gpu_count", count, "GPUs")
    if exp.gpus is not None and count != exp.gpus:
        report.error(f"found {count} GPUs, expected {exp.gpus}")
    if count == 0 and not exp.gpus:
        part["status"] = "skipped"
        report.info("GPU part skipped: NVML reports no GPUs")
        return part
    if exp.driver and part["driver"] != exp.driver:
        report.error(f"driver is {part['driver']}, expected {exp.driver}")

    gpus = []
    for index in range(count):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        gpus.append(_check_one_gpu(report, nvml, handle, index, exp))
    part["gpus"] = gpus

    active_counts = {g["label"]: g["nvlink"]["active"] for g in gpus if g["nvlink"]["links"] > 0}
    if active_counts and exp.nvlinks_per_gpu is None:
        most = max(active_counts.values())
        for label, active in active_counts.items():
            if active < most:
                report.error(f"{active} NVLinks active, other GPUs of this node have {most}", label)
    if exp.nvlinks_per_gpu is not None and not active_counts and count:
        report.error(f"expected {exp.nvlinks_per_gpu} NVLinks per GPU, NVML reports none")
    return part


def _check_one_gpu(report: Report, nvml: ModuleType, handle: Any, index: int, exp: Expectations) -> dict:
    q = nvml_util.query
    label = f"gpu{index}"
    name = nvml_util.text(q(nvml.nvmlDeviceGetName, handle, default="unknown"))
    memory = q(nvml.nvmlDeviceGetMemoryInfo, handle)
    memory_gib = memory.total / GIB if memory is not None else None
    pci = q(nvml.nvmlDeviceGetPciInfo, handle)
    gpu: dict[str, Any] = {
        "label": label,
        "index": index,
        "name": name,
        "uuid": nvml_util.text(q(nvml.nvmlDeviceGetUUID, handle, default="")),
        "pci_bus_id": nvml_util.text(pci.busId) if pci is not None else None,
        "memory_gib": round(memory_gib, 2) if memory_gib is not None else None,
    }
    if exp.gpu_model and exp.gpu_model.lower() not in name.lower():
        report.error(f"model is {name!r}, expected one containing {exp.gpu_model!r}", label)
    if memory_gib is not None:
        report.measure("gpu_memory_gib", round(memory_gib, 2), "GiB", label)
        if exp.gpu_memory_gib is not None:
            _compare_size(report, "GPU memory", memory_gib, exp.gpu_memory_gib, exp.memory_tolerance, label)

    # ECC: volatile counts are since the driver loaded, aggregate over the board's life.
    ecc_mode = q(nvml.nvmlDeviceGetEccMode, handle)
    gpu["ecc_enabled"] = bool(ecc_mode[0]) if ecc_mode is not None else None
    if gpu["ecc_enabled"] is False:
        report.warning("ECC is disabled", label)
    ecc = nvml_util.ecc_counts(nvml, handle)
    gpu["ecc"] = ecc
    if ecc.get("volatile_uncorrected"):
        report.error(f"{ecc['volatile_uncorrected']} uncorrected ECC errors since boot", label)
    if ecc.get("aggregate_uncorrected"):
        report.warning(f"{ecc['aggregate_uncorrected']} uncorrected ECC errors over the board's life", label)

    # Row remapping (A100 and later): pending needs a GPU reset, failure means RMA.
    rows = q(nvml.nvmlDeviceGetRemappedRows, handle)
    if rows is not None:
        corrected, uncorrected, pending, failed = (int(v) for v in rows)
        gpu["row_remap"] = {
            "corrected_rows": corrected,
            "uncorrected_rows": uncorrected,
            "pending": bool(pending),
            "failure": bool(failed),
        }
        if pending:
            report.error("row remapping pending: the GPU needs a reset", label)
        if failed:
            report.error("row remapping failed: the GPU is out of spare rows (RMA)", label)
    else:
        gpu["row_remap"] = None

    states = []
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = q(nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is not None:
            states.append(int(state))
    active = sum(1 for s in states if s == 1)
    gpu["nvlink"] = {"links": len(states), "active": active, "states": states}
    if states:
        report.measure("nvlink_active_links", active, "links", label)
        if active < len(states):
            report.error(f"{len(states) - active} of {len(states)} NVLinks are down", label)
    if exp.nvlinks_per_gpu is not None and states and active != exp.nvlinks_per_gpu:
        report.error(f"{active} NVLinks active, expected {exp.nvlinks_per_gpu}", label)

    pcie = {
        "current_gen": q(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        "max_gen": q(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        "current_width": q(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        "max_width": q(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
    }
    gpu["pcie"] = pcie
    if pcie["current_width"] is not None:
        report.measure("pcie_link_width", pcie["current_width"], "lanes", label)
    if pcie["current_width"] is not None and pcie["max_width"] and pcie["current_width"] < pcie["max_width"]:
        report.warning(f"PCIe link runs x{pcie['current_width']} of x{pcie['max_width']}", label)
    if exp.pcie_width is not None and pcie["current_width"] is not None and pcie["current_width"] < exp.pcie_width:
        report.error(f"PCIe link runs x{pcie['current_width']}, expected x{exp.pcie_width}", label)
    if pcie["current_gen"] is not None and pcie["max_gen"] and pcie["current_gen"] < pcie["max_gen"]:
        # An idle GPU lowers its link speed to save power; only width is a fault at rest.
        report.info(f"PCIe link at gen {pcie['current_gen']} of {pcie['max_gen']} (normal when idle)", label)

    # Clock-event reasons at rest: a hardware or thermal slowdown now means cooling or power delivery.
    mask = q(nvml_util.throttle_reasons_fn(nvml), handle)
    gpu["clock_event_reasons"] = nvml_util.decode_throttle_reasons(int(mask)) if mask is not None else None
    for reason in gpu["clock_event_reasons"] or ():
        if reason in nvml_util.HARDWARE_THROTTLES or reason == "sw_thermal_slowdown":
            report.error(f"clocks held down: {reason}", label)
    return gpu


# --------------------------------------------------------------------------- XIDs

# Severity per XID code, after NVIDIA's XID catalogue. Codes not listed are
# warnings: worth a look, not proof of broken hardware.
XID_CATALOGUE: dict[int, tuple[str, str]] = {
    13: ("warning", "graphics engine exception (usually the application)"),
    31: ("warning", "GPU memory page fault (usually the application)"),
    43: ("warning", "GPU stopped processing (usually the application)"),
    45: ("info", "preemptive cleanup after an earlier error"),
    48: ("error", "double-bit ECC error"),
    61: ("error", "internal micro-controller breakpoint/warning"),
    62: ("error", "internal micro-controller halt"),
    63: ("warning", "ECC page retirement or row remapping recorded"),
    64: ("error", "ECC page retirement or row remapping failure"),
    74: ("error", "NVLink error"),
    79: ("error", "GPU has fallen off the bus"),
    92: ("warning", "high single-bit ECC error rate"),
    94: ("warning", "contained ECC error (application affected)"),
    95: ("error", "uncontained ECC error"),
    119: ("error", "GSP RPC timeout"),
    120: ("error", "GSP error"),
    140: ("error", "unrecovered ECC error"),
}

_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\): "
    r"(?P<code>\d+),\s*(?P<message>.*)$"
)
_PID_RE = re.compile(r"pid=(?P<pid>'?<?[\w-]+>?'?)")


@dataclass(frozen=True)
class XidEvent:
    code: int
    pci: str
    message: str
    prefix: str  # whatever the log put before "NVRM:" (timestamp, host, "kernel:")
    pid: str | None = None

    @property
    def severity(self) -> str:
        return XID_CATALOGUE.get(self.code, ("warning", ""))[0]

    @property
    def meaning(self) -> str:
        return XID_CATALOGUE.get(self.code, ("", "not in podctl's catalogue"))[1]


def parse_xid_events(log_text: str) -> list[XidEvent]:
    """Every `NVRM: Xid (PCI:dddd:bb:dd): code, ...` line of a kernel log."""
    events = []
    for line in log_text.splitlines():
        match = _XID_RE.search(line)
        if not match:
            continue
        message = match.group("message").strip()
        pid = _PID_RE.search(message)
        events.append(
            XidEvent(
                code=int(match.group("code")),
                pci=match.group("pci").lower(),
                message=message,
                prefix=line[: match.start()].strip(),
                pid=pid.group("pid").strip("'") if pid else None,
            )
        )
    return events


def pci_key(bus_id: str) -> str:
    """'00000000:3B:00.0' and '0000:3b:00' both become '3b:00' (bus:device)."""
    parts = bus_id.lower().split(":")
    return ":".join(parts[-2:]).split(".")[0]


def read_kernel_log() -> tuple[str | None, str]:
    """This boot's kernel log: (text, source) or (None, why it could not be read)."""
    attempts: list[tuple[str, list[str]]] = []
    if shutil.which("journalctl"):
        attempts.append(("journalctl", ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "-q"]))
    if shutil.which("dmesg"):
        attempts.append(("dmesg", ["dmesg"]))
    problems = []
    for source, command in attempts:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60, errors="replace")
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"{source}: {exc}")
            continue
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout, source
        problems.append(f"{source}: exit {done.returncode} {done.stderr.strip()[:200]}")
    return None, "; ".join(problems) or "neither journalctl nor dmesg is installed"


def xid_key(event: XidEvent) -> str:
    return f"{event.prefix}|{event.code}|{event.pci}|{event.message[:80]}"


def check_xids(
    report: Report,
    log_text: str | None,
    source: str,
    gpu_labels: dict[str, str],
    state: Path | None = None,
) -> dict:
    """XID events of this boot's kernel log as findings. With `state` (a JSON file of the
    events seen by the last run), only events not seen before count: the health gate runs
    every few minutes, and an XID it reported once has already drained the node."""
    part: dict[str, Any] = {"source": source}
    if log_text is None:
        report.warning(f"kernel log unreadable, XIDs not checked ({source})")
        part["status"] = "skipped"
        return part
    events = parse_xid_events(log_text)
    if state is not None:
        seen = _read_seen(state)
        keys = [xid_key(e) for e in events]
        _write_seen(state, keys)
        part["seen_before"] = sum(1 for k in keys if k in seen)
        events = [e for e, k in zip(events, keys, strict=True) if k not in seen]
    part["status"] = "checked"
    part["events"] = [
        {
            "code": e.code,
            "pci": e.pci,
            "severity": e.severity,
            "pid": e.pid,
            "message": e.message[:300],
            "when": e.prefix,
        }
        for e in events
    ]
    by_device_code: dict[tuple[str, int], list[XidEvent]] = {}
    for event in events:
        by_device_code.setdefault((event.pci, event.code), []).append(event)
    for (pci, code), group in sorted(by_device_code.items()):
        first = group[0]
        device = gpu_labels.get(pci_key(pci), f"pci:{pci}")
        report.find(
            first.severity,
            f"XID {code} x{len(group)} ({first.meaning}): {first.message[:160]}",
            device,
        )
    report.measure("xid_events", len(events), "events")
    return part


def _read_seen(state: Path) -> set[str]:
    try:
        data = json.loads(state.read_text())
    except (OSError, ValueError):
        return set()
    return {k for k in data.get("seen", []) if isinstance(k, str)} if isinstance(data, dict) else set()


def _write_seen(state: Path, keys: list[str]) -> None:
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp = state.with_name(f".{state.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"seen": keys}))
    os.replace(tmp, state)


# --------------------------------------------------------------------------- InfiniBand


@dataclass(frozen=True)
class IbPort:
    device: str
    port: int
    state: str
    phys_state: str
    rate_gbps: float | None
    link_layer: str
    # sysfs counters/<file> -> value: symbol_error, link_downed, port_rcv_errors, ... (podctl places
    # the error counters on the plan's cables as evidence; see podctl.ibfabric.evidence)
    counters: dict[str, int] = field(default_factory=dict)


def parse_ib_rate(text: str) -> float | None:
    """'400 Gb/sec (4X NDR)' -> 400.0"""
    match = re.match(r"\s*([\d.]+)\s*Gb/sec", text)
    return float(match.group(1)) if match else None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _sysfs_state(text: str) -> str:
    """'4: ACTIVE' -> 'ACTIVE'"""
    return text.split(":", 1)[-1].strip() if text else "unknown"


def _counters(folder: Path) -> dict[str, int]:
    """A port's sysfs counters that read as numbers (some need privileges; those are left out)."""
    out: dict[str, int] = {}
    try:
        names = sorted(p.name for p in folder.iterdir() if p.is_file())
    except OSError:
        return out
    for name in names[:64]:
        text = _read(folder / name)
        if text.isdigit() and len(text) <= 20:
            out[name] = int(text)
    return out


def read_ib_ports(sysfs_root: Path, device_filter: str | None = None) -> list[IbPort] | None:
    """Ports of every HCA under <sysfs>/class/infiniband; None when that folder is absent."""
    base = sysfs_root / "class" / "infiniband"
    if not base.is_dir():
        return None
    pattern = re.compile(device_filter) if device_filter else None
    ports = []
    for device in sorted(base.iterdir()):
        if pattern and not pattern.search(device.name):
            continue
        ports_dir = device / "ports"
        if not ports_dir.is_dir():
            continue
        for port_dir in sorted(ports_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            ports.append(
                IbPort(
                    device=device.name,
                    port=int(port_dir.name) if port_dir.name.isdigit() else 0,
                    state=_sysfs_state(_read(port_dir / "state")),
                    phys_state=_sysfs_state(_read(port_dir / "phys_state")),
                    rate_gbps=parse_ib_rate(_read(port_dir / "rate")),
                    link_layer=_read(port_dir / "link_layer") or "unknown",
                    counters=_counters(port_dir / "counters"),
                )
            )
    return ports


def check_ib(report: Report, ports: list[IbPort] | None, exp: Expectations) -> dict:
    part: dict[str, Any] = {}
    if not ports:
        severity = "error" if exp.hcas else "info"
        report.find(severity, "no HCA: /sys/class/infiniband is absent or empty")
        part["status"] = "failed" if exp.hcas else "skipped"
        return part
    part["status"] = "checked"
    part["ports"] = [p.__dict__ for p in ports]
    devices = sorted({p.device for p in ports})
    report.measure("hca_count", len(devices), "HCAs")
    if exp.hcas is not None and len(devices) != exp.hcas:
        report.error(f"found {len(devices)} HCAs ({', '.join(devices)}), expected {exp.hcas}")
    for port in ports:
        label = f"{port.device}/{port.port}"
        if port.rate_gbps is not None:
            report.measure("hca_port_rate_gbps", port.rate_gbps, "Gb/s", label)
        if port.state != "ACTIVE":
            severity = "error" if exp.hcas else "warning"
            report.find(severity, f"port state {port.state} (physical {port.phys_state})", label)
        elif exp.hca_rate_gbps is not None and (port.rate_gbps or 0) < exp.hca_rate_gbps:
            report.error(f"port rate {port.rate_gbps} Gb/s, expected {exp.hca_rate_gbps:g}", label)
    return part


# --------------------------------------------------------------------------- CPU and memory


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo as {field: kB}."""
    values = {}
    for line in text.splitlines():
        match = re.match(r"(\S+):\s+(\d+)", line)
        if match:
            values[match.group(1)] = int(match.group(2))
    return values


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model, logical CPUs, physical cores and sockets from /proc/cpuinfo (x86 and Arm)."""
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    models: set[str] = set()
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    logical = 0
    for block in blocks:
        fields = {}
        for line in block.splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip()
        if "processor" not in fields:
            continue
        logical += 1
        model = fields.get("model name") or fields.get("CPU part")
        if model:
            models.add(model)
        if "physical id" in fields and "core id" in fields:
            cores.add((fields["physical id"], fields["core id"]))
            sockets.add(fields["physical id"])
    return {
        "model": sorted(models)[0] if models else None,
        "logical": logical,
        "physical_cores": len(cores) or None,
        "sockets": len(sockets) or None,
    }


def check_cpu_memory(report: Report, exp: Expectations, proc_root: Path) -> dict:
    cpuinfo = parse_cpuinfo(_read(proc_root / "cpuinfo"))
    online = os.cpu_count() or cpuinfo["logical"]
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else online
    cpu = {**cpuinfo, "online": online, "usable_by_this_process": usable}
    report.measure("cpu_logical_cores", online, "cores")
    if usable < online:
        report.info(f"this process may use {usable} of {online} CPUs (cgroup or affinity)")
    # "Cores" as nproc counts them: logical CPUs online. A VM's vCPUs each count once.
    if exp.cores is not None and online != exp.cores:
        report.error(f"{online} logical CPUs online, expected {exp.cores}")

    meminfo = parse_meminfo(_read(proc_root / "meminfo"))
    memory: dict[str, Any] = {}
    if "MemTotal" in meminfo:
        total_gib = meminfo["MemTotal"] * 1024 / GIB
        memory = {
            "total_gib": round(total_gib, 2),
            "available_gib": round(meminfo.get("MemAvailable", 0) * 1024 / GIB, 2),
        }
        report.measure("memory_gib", round(total_gib, 2), "GiB")
        if exp.memory_gib is not None:
            _compare_size(report, "memory (MemTotal)", total_gib, exp.memory_gib, exp.memory_tolerance, None)
    else:
        report.warning(f"could not read MemTotal from {proc_root / 'meminfo'}")
    return {"cpu": cpu, "memory": memory}


# --------------------------------------------------------------------------- main


def run(
    report: Report,
    exp: Expectations,
    kernel_log: Path | None,
    sysfs_root: Path,
    proc_root: Path,
    hca_filter: str | None,
    nvml: ModuleType | None = None,
    why_no_nvml: str | None = None,
    xid_state: Path | None = None,
) -> None:
    parts: dict[str, Any] = {}
    report.details["parts"] = parts
    report.details["expectations"] = {k: v for k, v in exp.__dict__.items() if v is not None}

    parts["gpu"] = check_gpus(report, nvml, why_no_nvml, exp)
    gpu_labels = {pci_key(g["pci_bus_id"]): g["label"] for g in parts["gpu"].get("gpus", []) if g.get("pci_bus_id")}

    if kernel_log is not None:
        log_text, source = kernel_log.read_text(errors="replace"), str(kernel_log)
    else:
        log_text, source = read_kernel_log()
    parts["xid"] = check_xids(report, log_text, source, gpu_labels, xid_state)

    parts["infiniband"] = check_ib(report, read_ib_ports(sysfs_root, hca_filter), exp)
    parts.update(check_cpu_memory(report, exp, proc_root))


def build_parser() -> argparse.ArgumentParser:
    p = CheckArgumentParser(prog="python3 -m validation.health", description=__doc__.split("\n\n")[0])
    p.add_argument("--expect-gpus", type=int)
    p.add_argument("--expect-gpu-model", help="substring of the NVML name, e.g. H200")
    p.add_argument("--expect-gpu-memory-gib", type=float)
    p.add_argument("--expect-nvlinks", type=int, help="active NVLinks per GPU")
    p.add_argument("--expect-driver", help="exact NVIDIA driver version")
    p.add_argument("--expect-cores", type=int, help="logical CPUs online (nproc --all)")
    p.add_argument("--expect-memory-gib", type=float)
    p.add_argument("--expect-hcas", type=int)
    p.add_argument("--expect-hca-rate-gbps", type=float)
    p.add_argument("--expect-pcie-width", type=int, help="PCIe lanes per GPU link, e.g. 16")
    p.add_argument(
        "--xid-state", type=Path, help="JSON file of the XIDs seen by the last run: report only new ones (health gate)"
    )
    p.add_argument("--memory-tolerance", type=float, default=0.06, help="fraction (default 0.06)")
    p.add_argument("--hca-filter", help="regex on HCA names to consider, e.g. '^mlx5_[0-7]$'")
    p.add_argument("--kernel-log", type=Path, help="read XIDs from this file instead of journalctl/dmesg")
    p.add_argument("--sysfs-root", type=Path, default=Path("/sys"))
    p.add_argument("--proc-root", type=Path, default=Path("/proc"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv, "health")
    if isinstance(args, int):
        return args
    exp = Expectations(
        gpus=args.expect_gpus,
        gpu_model=args.expect_gpu_model,
        gpu_memory_gib=args.expect_gpu_memory_gib,
        nvlinks_per_gpu=args.expect_nvlinks,
        driver=args.expect_driver,
        cores=args.expect_cores,
        memory_gib=args.expect_memory_gib,
        hcas=args.expect_hcas,
        hca_rate_gbps=args.expect_hca_rate_gbps,
        pcie_width=args.expect_pcie_width,
        memory_tolerance=args.memory_tolerance,
    )

    def body(report: Report) -> None:
        nvml, why = nvml_util.load()
        run(report, exp, args.kernel_log, args.sysfs_root, args.proc_root, args.hca_filter, nvml, why, args.xid_state)

    return emit(run_check("health", body))


if __name__ == "__main__":
    sys.exit(main())
