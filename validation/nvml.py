"""Thin, failure-tolerant access to NVML (nvidia-ml-py's `pynvml`).

Every query goes through `query`, which turns "not supported on this GPU"
and friends into a default instead of an exception: a health check must
report what it could not read, not die on it. Functions take the NVML
module as a parameter so tests can hand in a fake.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

# NVML clock-event ("throttle") reason bits, from nvml.h. Hardware-side
# slowdowns mean the node is unhealthy (cooling, power delivery); the
# software power cap is the normal state of a GPU running flat out.
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
HARDWARE_THROTTLES = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def throttle_reasons_fn(nvml: ModuleType) -> Callable[..., Any]:
    """The NVML call for the current clock-event reasons (renamed from "throttle" in newer
    drivers); one that raises (and so reads as unknown through `query`) where neither exists."""

    def missing(*_: Any) -> Any:
        raise NotImplementedError("this NVML has no clock-event reasons")

    return (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        or missing
    )


def decode_throttle_reasons(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def load() -> tuple[ModuleType | None, str | None]:
    """Import and initialise pynvml; (module, None) or (None, why not)."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML could not start: {exc}"
    return pynvml, None


def query(fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
    """Call an NVML function; any NVML error (not supported, no permission) gives `default`."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVMLError subclasses are generated per error code
        return default


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def ecc_counts(nvml: ModuleType, handle: Any) -> dict[str, int | None]:
    """Corrected/uncorrected ECC totals, volatile (since boot) and aggregate (lifetime)."""
    counts: dict[str, int | None] = {}
    for kind_name, kind in (("volatile", nvml.NVML_VOLATILE_ECC), ("aggregate", nvml.NVML_AGGREGATE_ECC)):
        for err_name, err in (
            ("corrected", nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ("uncorrected", nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
        ):
            value = query(nvml.nvmlDeviceGetTotalEccErrors, handle, err, kind)
            counts[f"{kind_name}_{err_name}"] = None if value is None else int(value)
    return counts


def handle_for_torch_device(nvml: ModuleType, torch_index: int) -> tuple[Any, int | None]:
    """The NVML handle of torch's cuda:<index>, matched by UUID.

    CUDA and NVML number GPUs differently unless CUDA_DEVICE_ORDER=PCI_BUS_ID,
    and CUDA_VISIBLE_DEVICES renumbers CUDA's side only.
    """
    import torch

    props = torch.cuda.get_device_properties(torch_index)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        handle = query(nvml.nvmlDeviceGetHandleByUUID, f"GPU-{uuid}")
        if handle is not None:
            return handle, query(nvml.nvmlDeviceGetIndex, handle)
    handle = query(nvml.nvmlDeviceGetHandleByIndex, torch_index)
    return handle, torch_index if handle is not None else None


class Sampler(threading.Thread):
    """Samples SM clock, temperature, power and throttle reasons while a load runs."""

    def __init__(self, nvml: ModuleType, handles: dict[str, Any], interval_s: float = 0.5) -> None:
        super().__init__(name="nvml-sampler", daemon=True)
        self.nvml = nvml
        self.handles = handles
        self.interval_s = interval_s
        self._stop_event = threading.Event()
        self.samples: dict[str, dict[str, list[float]]] = {
            label: {"sm_clock_mhz": [], "temperature_c": [], "power_w": []} for label in handles
        }
        self.throttle_counts: dict[str, dict[str, int]] = {label: {} for label in handles}
        self.sample_count = 0

    def run(self) -> None:
        nvml = self.nvml
        reasons_fn = throttle_reasons_fn(nvml)
        while not self._stop_event.is_set():
            for label, handle in self.handles.items():
                series = self.samples[label]
                clock = query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
                if clock is not None:
                    series["sm_clock_mhz"].append(float(clock))
                temp = query(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
                if temp is not None:
                    series["temperature_c"].append(float(temp))
                power = query(nvml.nvmlDeviceGetPowerUsage, handle)
                if power is not None:
                    series["power_w"].append(float(power) / 1000.0)
                mask = query(reasons_fn, handle)
                if mask is not None:
                    for name in decode_throttle_reasons(int(mask)):
                        counts = self.throttle_counts[label]
                        counts[name] = counts.get(name, 0) + 1
            self.sample_count += 1
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5 * self.interval_s + 5)
