"""Burn-in: the odd-one-out rule, and the CPU path end to end (short)."""

from __future__ import annotations

import argparse
import json

import pytest

from validation import burnin
from validation.burnin import odd_ones_out
from validation.result import Report


@pytest.mark.parametrize(
    ("hashes", "odd"),
    [
        ({"gpu0": "a"}, []),
        ({"gpu0": "a", "gpu1": "a", "gpu2": "a"}, []),
        ({"gpu0": "a", "gpu1": "a", "gpu2": "b", "gpu3": "a"}, ["gpu2"]),
        ({"gpu0": "a", "gpu1": "b"}, ["gpu0", "gpu1"]),  # a tie: neither can be trusted
        ({"gpu0": "a", "gpu1": "b", "gpu2": "c", "gpu3": "c"}, ["gpu0", "gpu1"]),
    ],
)
def test_odd_ones_out(hashes: dict[str, str], odd: list[str]) -> None:
    assert odd_ones_out(hashes) == odd


def test_cpu_burnin_measures_and_checks_determinism(capsys) -> None:
    code = burnin.main(
        [
            "--cpu",
            # 3 s leaves room for three 0.1 s chunks when the host is busy: CI #7 ran this
            # beside the sim part, and 1.5 s gave one.
            "--duration",
            "3",
            "--warmup",
            "0.3",
            "--chunk",
            "0.1",
            "--gemm-size",
            "256",
            "--mem-mib",
            "32",
            "--hbm-duration",
            "0.5",
        ]
    )
    envelope = json.loads(capsys.readouterr().out)
    assert code == 0 and envelope["status"] == "pass", envelope["findings"]
    figures = {m["figure"]: m for m in envelope["measurements"]}
    gemm, memory = figures["gemm_fp32_gflops"], figures["memory_bandwidth"]
    assert gemm["unit"] == "GFLOP/s" and gemm["value"] > 0 and gemm["samples"] >= 3
    assert gemm["spread"]["min"] <= gemm["value"] <= gemm["spread"]["max"]
    assert memory["unit"] == "GB/s" and memory["value"] > 0
    details = envelope["details"]
    assert details["determinism"]["mismatches"] == {"cpu": 0}
    assert details["determinism"]["checks_per_device"]["cpu"] >= 3
    assert details["determinism"]["reference_rows_relative_error"]["cpu"] < 1e-4
    assert len(details["gemm_output_sha256"]["cpu"]) == 64


def test_numpy_fallback_without_torch() -> None:
    args = argparse.Namespace(gemm_size=128, seed=1, warmup=0.1, mem_mib=8)
    report = Report("burnin", host="t")
    burnin._numpy_burnin(report, args, 0.3)
    assert {m.figure for m in report.measurements} == {"gemm_fp32_gflops", "memory_bandwidth"}
    assert report.details["determinism"]["mismatches"] == {"cpu": 0}


def test_determinism_report_flags_a_disagreeing_device() -> None:
    class Fake:
        def __init__(self, label: str, digest: str, mismatches: int = 0) -> None:
            self.label, self.output_hash, self.mismatches = label, digest, mismatches
            self.chunks_checked, self.reference_rows_error = 10, 1e-3

    report = Report("burnin", host="t")
    burnin._report_determinism(report, [Fake("gpu0", "x"), Fake("gpu1", "y"), Fake("gpu2", "x", mismatches=3)], "GPUs")
    errors = {(f.device, f.message.split(" ")[0]) for f in report.findings if f.severity == "error"}
    assert errors == {("gpu1", "GEMM"), ("gpu2", "GEMM")}
    assert report.details["determinism"]["identical_across_devices"] is False


def test_nvml_sampling_flags_hardware_throttling_and_new_ecc_errors() -> None:
    import time
    from types import SimpleNamespace

    from validation import nvml as nvml_util

    ecc = {"uncorrected": 0}
    fake = SimpleNamespace(
        NVML_CLOCK_SM=0,
        NVML_TEMPERATURE_GPU=0,
        NVML_VOLATILE_ECC=0,
        NVML_AGGREGATE_ECC=1,
        NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetTemperature=lambda h, kind: 61 + h,
        nvmlDeviceGetPowerUsage=lambda h: 690_000,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        # gpu1 reports SW power cap (normal under load) plus HW slowdown (not normal)
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4 | (0x8 if h == 1 else 0),
        nvmlDeviceGetTotalEccErrors=lambda h, err, kind: ecc["uncorrected"] if (h == 1 and err == 1) else 0,
    )
    handles = {"gpu0": 0, "gpu1": 1}
    before = {label: nvml_util.ecc_counts(fake, h) for label, h in handles.items()}
    sampler = nvml_util.Sampler(fake, handles, interval_s=0.01)
    sampler.start()
    deadline = time.monotonic() + 10
    while sampler.sample_count < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    ecc["uncorrected"] = 1  # one uncorrected error appears during the run
    sampler.stop()
    assert sampler.sample_count >= 3
    report = Report("burnin", host="t")
    burnin._report_sampling(report, fake, handles, sampler, before)
    errors = {(f.device, f.message.split(":")[0]) for f in report.findings if f.severity == "error"}
    assert errors == {("gpu1", "clocks throttled by hardware"), ("gpu1", "1 uncorrected ECC errors during burn-in")}
    clocks = [m for m in report.measurements if m.figure == "sm_clock_mhz"]
    assert [(m.device, m.value) for m in clocks] == [("gpu0", 1980.0), ("gpu1", 1980.0)]
    assert report.details["telemetry"]["gpu1"]["power_limit_w"] == 700.0
