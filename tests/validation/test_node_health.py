"""Passive health check: XID parsing, GPU rules on a fake NVML, sysfs InfiniBand, this host."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from validation import health
from validation.health import Expectations, parse_cpuinfo, parse_ib_rate, parse_meminfo, parse_xid_events
from validation.result import Report

GIB = 1024**3


# --------------------------------------------------------------------------- XIDs


def test_xid_parser_on_realistic_log(data_dir: Path) -> None:
    events = parse_xid_events((data_dir / "kernel-log-xid.txt").read_text())
    assert [(e.code, e.pci) for e in events] == [
        (79, "0000:3b:00"),
        (13, "0000:b7:00"),
        (13, "0000:b7:00"),
        (48, "0000:18:00"),
        (63, "0000:18:00"),
        (74, "0000:9a:00"),
        (999, "0000:9a:00"),
    ]
    fallen = events[0]
    assert fallen.pid == "0" and fallen.message.endswith("GPU has fallen off the bus.")
    assert fallen.prefix == "[ 8123.451233]"
    assert fallen.severity == "error"
    assert events[1].severity == "warning" and events[1].pid == "48211"
    assert events[3].pid == "<unknown>" and "double bit error" in events[3].message
    assert events[3].prefix == "2026-11-02T03:14:15+0000 dgx-a017 kernel:"
    assert events[6].severity == "warning" and events[6].meaning == "not in podctl's catalogue"


def test_xid_parser_ignores_other_driver_lines() -> None:
    text = (
        "[    4.873312] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07\n"
        "[    8.1] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
        "[    9.0] NVRM: Xid (0000:03:00): 31, Ch 00000010, engmask 00000101\n"  # old layout without PCI:
    )
    events = parse_xid_events(text)
    assert [(e.code, e.pci) for e in events] == [(31, "0000:03:00")]


def test_xid_findings_name_the_gpu_by_pci_address(data_dir: Path) -> None:
    report = Report("health", host="t")
    part = health.check_xids(report, (data_dir / "kernel-log-xid.txt").read_text(), "file", {"3b:00": "gpu3"})
    assert part["status"] == "checked" and len(part["events"]) == 7
    by_message = {f.message.split(" (")[0]: f for f in report.findings}
    assert by_message["XID 79 x1"].device == "gpu3" and by_message["XID 79 x1"].severity == "error"
    assert by_message["XID 13 x2"].device == "pci:0000:b7:00" and by_message["XID 13 x2"].severity == "warning"
    assert report.status == "fail"


def test_unreadable_kernel_log_is_a_warning_and_a_skipped_part() -> None:
    report = Report("health", host="t")
    part = health.check_xids(report, None, "dmesg: Operation not permitted", {})
    assert part["status"] == "skipped"
    assert report.findings[0].severity == "warning" and report.status == "pass"


# --------------------------------------------------------------------------- GPUs on a fake NVML


class _NotSupported(Exception):
    pass


def _fake_nvml(broken_gpu: int | None) -> SimpleNamespace:
    """Two H200s; `broken_gpu` has uncorrected ECC errors, a pending row remap and a link down."""

    def ecc(handle, err, kind):
        if handle == broken_gpu and err == 1 and kind == 0:
            return 2
        return 0

    def nvlink(handle, link):
        if link >= 18:
            raise _NotSupported()
        return 0 if (handle == broken_gpu and link == 5) else 1

    return SimpleNamespace(
        NVML_VOLATILE_ECC=0,
        NVML_AGGREGATE_ECC=1,
        NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        NVML_NVLINK_MAX_LINKS=36,
        nvmlDeviceGetCount=lambda: 2,
        nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlSystemGetCudaDriverVersion=lambda: 13000,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: "NVIDIA H200",
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}",
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=143771 * 1024 * 1024),
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=f"00000000:0{6 + h}:00.0"),
        nvmlDeviceGetEccMode=lambda h: (1, 1),
        nvmlDeviceGetTotalEccErrors=ecc,
        nvmlDeviceGetRemappedRows=lambda h: (0, 1, 1, 0) if h == broken_gpu else (0, 0, 0, 0),
        nvmlDeviceGetNvLinkState=nvlink,
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetCurrPcieLinkWidth=lambda h: 8 if h == broken_gpu else 16,
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: 16,
        # gpu_idle (0x1) is the normal state at rest; hw_slowdown (0x8) + hw_thermal (0x40) is not.
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x49 if h == broken_gpu else 0x1,
    )


def test_healthy_gpus_match_expectations() -> None:
    report = Report("health", host="t")
    exp = Expectations(gpus=2, gpu_model="H200", gpu_memory_gib=141, nvlinks_per_gpu=18)
    part = health.check_gpus(report, _fake_nvml(None), None, exp)
    assert report.findings == [] and report.status == "pass"
    assert part["driver"] == "580.159.04" and part["cuda_driver"] == "13.0"
    assert [g["nvlink"]["active"] for g in part["gpus"]] == [18, 18]
    assert part["gpus"][1]["pci_bus_id"] == "00000000:07:00.0"


def test_broken_gpu_gives_errors_on_that_gpu_only() -> None:
    report = Report("health", host="t")
    health.check_gpus(report, _fake_nvml(1), None, Expectations(gpus=2))
    errors = [(f.device, f.message) for f in report.findings if f.severity == "error"]
    assert {device for device, _ in errors} == {"gpu1"}
    text = " | ".join(m for _, m in errors)
    assert "2 uncorrected ECC errors" in text
    assert "row remapping pending" in text
    assert "1 of 18 NVLinks are down" in text
    assert "17 NVLinks active, other GPUs of this node have 18" in text
    assert "clocks held down: hw_slowdown" in text and "clocks held down: hw_thermal_slowdown" in text
    assert "gpu_idle" not in text


def test_pcie_width_below_the_expected_is_an_error_and_otherwise_a_warning() -> None:
    report = Report("health", host="t")
    health.check_gpus(report, _fake_nvml(1), None, Expectations(gpus=2, pcie_width=16))
    assert ("gpu1", "PCIe link runs x8, expected x16") in [(f.device, f.message) for f in report.findings]
    report = Report("health", host="t")
    health.check_gpus(report, _fake_nvml(1), None, Expectations(gpus=2))
    width = [f for f in report.findings if "PCIe" in f.message]
    assert [(f.severity, f.message) for f in width] == [("warning", "PCIe link runs x8 of x16")]


def test_an_nvml_without_clock_event_reasons_is_not_a_crash() -> None:
    fake = _fake_nvml(None)
    del fake.nvmlDeviceGetCurrentClocksEventReasons
    report = Report("health", host="t")
    part = health.check_gpus(report, fake, None, Expectations(gpus=2))
    assert report.status == "pass" and part["gpus"][0]["clock_event_reasons"] is None


def test_with_a_state_file_only_new_xids_count(data_dir: Path, tmp_path: Path) -> None:
    log = (data_dir / "kernel-log-xid.txt").read_text()
    state = tmp_path / "xid.json"
    first = Report("health", host="t")
    health.check_xids(first, log, "file", {}, state)
    assert any("XID 79" in f.message for f in first.findings)
    again = Report("health", host="t")
    part = health.check_xids(again, log, "file", {}, state)
    assert not [f for f in again.findings if f.message.startswith("XID")] and part["seen_before"] == 7
    later = log + "[ 9000.000001] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"
    third = Report("health", host="t")
    health.check_xids(third, later, "file", {}, state)
    assert [f.message[:10] for f in third.findings if f.message.startswith("XID")] == ["XID 79 x1 "]


@pytest.mark.parametrize(
    ("exp", "needle"),
    [
        (Expectations(gpus=8), "found 2 GPUs, expected 8"),
        (Expectations(gpu_model="B200"), "expected one containing 'B200'"),
        (Expectations(gpu_memory_gib=80), "GPU memory is 140.4 GiB, more than the expected 80"),
        (Expectations(gpu_memory_gib=192), "GPU memory is 140.4 GiB, expected 192 GiB"),
        (Expectations(nvlinks_per_gpu=12), "18 NVLinks active, expected 12"),
        (Expectations(driver="570.1"), "driver is 580.159.04, expected 570.1"),
    ],
)
def test_gpu_mismatches_are_findings(exp: Expectations, needle: str) -> None:
    report = Report("health", host="t")
    health.check_gpus(report, _fake_nvml(None), None, exp)
    assert any(needle in f.message for f in report.findings), [f.message for f in report.findings]


def test_no_nvml_skips_when_no_gpus_expected_and_fails_otherwise() -> None:
    report = Report("health", host="t")
    assert health.check_gpus(report, None, "no driver", Expectations(gpus=0))["status"] == "skipped"
    assert report.status == "pass"
    report = Report("health", host="t")
    assert health.check_gpus(report, None, "no driver", Expectations(gpus=8))["status"] == "failed"
    assert report.status == "fail"


# --------------------------------------------------------------------------- InfiniBand


def _hca(root: Path, device: str, port: int, state: str, rate: str) -> None:
    d = root / "class" / "infiniband" / device / "ports" / str(port)
    d.mkdir(parents=True)
    (d / "state").write_text(state + "\n")
    (d / "phys_state").write_text("5: LinkUp\n" if "ACTIVE" in state else "3: Disabled\n")
    (d / "rate").write_text(rate + "\n")
    (d / "link_layer").write_text("InfiniBand\n")


def test_ib_rate_parsing() -> None:
    assert parse_ib_rate("400 Gb/sec (4X NDR)") == 400.0
    assert parse_ib_rate("212.5 Gb/sec (4X HDR)") == 212.5
    assert parse_ib_rate("garbage") is None


def test_ib_ports_from_sysfs(tmp_path: Path) -> None:
    _hca(tmp_path, "mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)")
    _hca(tmp_path, "mlx5_1", 1, "1: DOWN", "10 Gb/sec (4X SDR)")
    _hca(tmp_path, "mlx5_2", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)")
    ports = health.read_ib_ports(tmp_path)
    assert [(p.device, p.state, p.rate_gbps) for p in ports] == [
        ("mlx5_0", "ACTIVE", 400.0),
        ("mlx5_1", "DOWN", 10.0),
        ("mlx5_2", "ACTIVE", 200.0),
    ]
    report = Report("health", host="t")
    health.check_ib(report, ports, Expectations(hcas=4, hca_rate_gbps=400))
    errors = {(f.device, f.message) for f in report.findings if f.severity == "error"}
    assert (None, "found 3 HCAs (mlx5_0, mlx5_1, mlx5_2), expected 4") in errors
    assert ("mlx5_1/1", "port state DOWN (physical Disabled)") in errors
    assert ("mlx5_2/1", "port rate 200.0 Gb/s, expected 400") in errors
    assert len(errors) == 3
    assert [p.device for p in health.read_ib_ports(tmp_path, r"^mlx5_[02]$")] == ["mlx5_0", "mlx5_2"]


def test_no_hca_is_a_finding_and_a_skipped_part(tmp_path: Path) -> None:
    report = Report("health", host="t")
    part = health.check_ib(report, health.read_ib_ports(tmp_path), Expectations())
    assert part["status"] == "skipped" and report.findings[0].message.startswith("no HCA")
    assert report.status == "pass"
    report = Report("health", host="t")
    health.check_ib(report, None, Expectations(hcas=8))
    assert report.status == "fail"


# --------------------------------------------------------------------------- CPU, memory, this host


def test_cpuinfo_counts_physical_cores_and_sockets() -> None:
    block = "processor\t: {p}\nmodel name\t: AMD EPYC 9654\nphysical id\t: {s}\ncore id\t\t: {c}\n"
    text = "\n".join(block.format(p=p, s=p // 4, c=p % 2) for p in range(8))  # 2 sockets, 2 cores, 2 threads
    info = parse_cpuinfo(text)
    assert info == {"model": "AMD EPYC 9654", "logical": 8, "physical_cores": 4, "sockets": 2}


def test_meminfo() -> None:
    assert parse_meminfo("MemTotal:       24681640 kB\nMemFree: 100 kB\nHugePages_Total:       0\n") == {
        "MemTotal": 24681640,
        "MemFree": 100,
        "HugePages_Total": 0,
    }


def _health(capsys, *args: str) -> tuple[int, dict]:
    code = health.main(list(args))
    return code, json.loads(capsys.readouterr().out)


def test_this_host_matching_expectations_passes(capsys, data_dir: Path) -> None:
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    code, envelope = _health(
        capsys,
        "--expect-cores",
        str(os.cpu_count()),
        "--expect-memory-gib",
        f"{memory_gib:.1f}",
        "--expect-gpus",
        "0",
        "--expect-hcas",
        "0",
        "--kernel-log",
        str(data_dir / "kernel-log-xid.txt"),
        "--sysfs-root",
        "/nonexistent",
    )
    # The sample log carries fatal XIDs: only those may be errors here.
    errors = [f["message"] for f in envelope["findings"] if f["severity"] == "error"]
    assert errors and all(m.startswith("XID") for m in errors)
    parts = envelope["details"]["parts"]
    assert parts["gpu"]["status"] == "skipped" and parts["infiniband"]["status"] == "skipped"
    figures = {m["figure"]: m["value"] for m in envelope["measurements"]}
    assert figures["cpu_logical_cores"] == os.cpu_count()


def test_this_host_clean_log_passes(capsys, tmp_path: Path) -> None:
    (tmp_path / "kern.log").write_text("[    1.0] Linux version 6.1.0\n")
    code, envelope = _health(
        capsys,
        "--expect-cores",
        str(os.cpu_count()),
        "--expect-gpus",
        "0",
        "--kernel-log",
        str(tmp_path / "kern.log"),
        "--sysfs-root",
        str(tmp_path),
    )
    assert code == 0 and envelope["status"] == "pass", envelope["findings"]


def test_this_host_wrong_expectations_fail(capsys, tmp_path: Path) -> None:
    (tmp_path / "kern.log").write_text("")
    code, envelope = _health(
        capsys,
        "--expect-cores",
        "9999",
        "--expect-memory-gib",
        "99999",
        "--kernel-log",
        str(tmp_path / "kern.log"),
        "--sysfs-root",
        str(tmp_path),
    )
    assert code == 1 and envelope["status"] == "fail"
    errors = [f["message"] for f in envelope["findings"] if f["severity"] == "error"]
    assert any("expected 9999" in m for m in errors)
    assert any("expected 99999 GiB" in m for m in errors)


def test_health_as_a_module_prints_one_json_object(run_module) -> None:
    code, envelope, _ = run_module("health", "--expect-cores", "9999")
    assert code == 1 and envelope["check"] == "health" and envelope["status"] == "fail"
