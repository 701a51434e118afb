"""Collective benchmark: nccl-tests bandwidth conventions, result checks, a real gloo run."""

from __future__ import annotations

import pytest
import torch

from validation.collectives import Case, bandwidths, bus_factor, sweep_sizes


@pytest.mark.parametrize(
    ("collective", "n", "factor"),
    [
        # all_reduce: 2(n-1)/n
        ("all_reduce", 1, 0.0),
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_reduce", 16, 1.875),
        # all_gather, reduce_scatter, all_to_all: (n-1)/n
        ("all_gather", 2, 0.5),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 2, 0.5),
        ("reduce_scatter", 8, 0.875),
        ("all_to_all", 4, 0.75),
        ("all_to_all", 8, 0.875),
        # broadcast, reduce, sendrecv: 1
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_bus_factor_by_hand(collective: str, n: int, factor: float) -> None:
    assert bus_factor(collective, n) == pytest.approx(factor)


def test_bandwidths_are_bytes_over_time_in_1e9() -> None:
    # 8 ranks, 4e9 bytes in 2 s: algbw 2 GB/s for every collective.
    assert bandwidths("all_reduce", 4_000_000_000, 2.0, 8) == pytest.approx((2.0, 3.5))
    assert bandwidths("all_gather", 4_000_000_000, 2.0, 8) == pytest.approx((2.0, 1.75))
    assert bandwidths("reduce_scatter", 4_000_000_000, 2.0, 8) == pytest.approx((2.0, 1.75))
    assert bandwidths("all_to_all", 4_000_000_000, 2.0, 8) == pytest.approx((2.0, 1.75))


def test_bandwidths_reproduce_nccl_tests_row() -> None:
    # The fixture's 1 GiB out-of-place row on 2 GPUs: 3313.52 us -> algbw = busbw = 324.05 GB/s.
    algbw, busbw = bandwidths("all_reduce", 1073741824, 3313.52e-6, 2)
    assert round(algbw, 2) == 324.05 and round(busbw, 2) == 324.05


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        bus_factor("all_scatter", 8)
    with pytest.raises(ValueError):
        bandwidths("all_reduce", 1024, 0.0, 8)


def test_sweep_sizes_double_and_align() -> None:
    assert sweep_sizes(1 << 20, 8 << 20, 2, 64) == [1 << 20, 2 << 20, 4 << 20, 8 << 20]
    # 3 ranks of 4-byte elements, patterns of 4: multiples of 48 bytes
    assert sweep_sizes(1000, 4000, 2, 48) == [960, 1968, 3984]


def _emulate(collective: str, n: int) -> list[Case]:
    """Fill every rank's inputs, then compute what a correct collective delivers, in plain torch."""
    cases = [Case(collective, 4096, torch.float32, torch.device("cpu"), r, n) for r in range(n)]
    for c in cases:
        c.fill()
    if collective == "all_reduce":
        total = sum(c.buf.clone() for c in cases)
        for c in cases:
            c.buf.copy_(total)
    elif collective == "reduce_scatter":
        total = sum(c.inp for c in cases)
        for r, c in enumerate(cases):
            c.out.copy_(total.chunk(n)[r])
    elif collective == "all_gather":
        full = torch.cat([c.inp for c in cases])
        for c in cases:
            c.out.copy_(full)
    else:
        for r, c in enumerate(cases):
            c.out.copy_(torch.cat([src.inp.chunk(n)[r] for src in cases]))
    return cases


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
@pytest.mark.parametrize("n", [2, 3])
def test_result_check_accepts_right_and_catches_wrong(collective: str, n: int) -> None:
    cases = _emulate(collective, n)
    assert all(c.verify() for c in cases)
    victim = cases[-1]
    out = victim.buf if collective == "all_reduce" else victim.out
    out[len(out) // 2 + 1] += 1.0  # one element off by one
    assert not victim.verify()


def test_all_reduce_expected_values_by_hand() -> None:
    # Two ranks hold (1,2,3,4)x and (2,4,6,8)x; the sum is (3,6,9,12) repeated.
    cases = _emulate("all_reduce", 2)
    assert cases[0].buf[:8].tolist() == [3, 6, 9, 12, 3, 6, 9, 12]


def test_two_gloo_processes_small_sweep_correct(run_module) -> None:
    code, envelope, stderr = run_module(
        "collectives",
        "--local-procs",
        "2",
        "--cpu",
        "--min-bytes",
        "4K",
        "--max-bytes",
        "32K",
        "--repeats",
        "3",
        "--chunk-ms",
        "2",
        "--warmup-iters",
        "1",
        "--expect-world-size",
        "2",
        "--min-busbw",
        "all_reduce:32KiB=1000000",
    )
    assert envelope["check"] == "collectives"
    assert envelope["details"]["world_size"] == 2
    assert envelope["details"]["backend"] == "gloo"
    assert envelope["details"]["correct"] is True
    sweep = envelope["details"]["sweep"]
    assert set(sweep) == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    for rows in sweep.values():
        assert [r["size_bytes"] for r in rows] == [4096, 8192, 16384, 32768]
        assert all(r["correct"] and r["busbw_gbps"] > 0 for r in rows)
    figures = {m["figure"] for m in envelope["measurements"]}
    assert "all_reduce_busbw_32KiB" in figures and "all_to_all_busbw_4KiB" in figures
    # The impossible threshold is the only error, and makes the run fail.
    errors = [f["message"] for f in envelope["findings"] if f["severity"] == "error"]
    assert len(errors) == 1 and "32KiB" in errors[0], errors
    assert envelope["status"] == "fail" and code == 1


def test_env_launch_as_srun_would_start_one_rank(run_module) -> None:
    from validation.launch import free_port

    slurm = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_LOCALID": "0",
        "SLURM_TASKS_PER_NODE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    code, envelope, _ = run_module(
        "collectives",
        "--cpu",
        "--collectives",
        "all_reduce",
        "--min-bytes",
        "4K",
        "--max-bytes",
        "8K",
        "--repeats",
        "2",
        "--chunk-ms",
        "1",
        extra_env=slurm,
    )
    assert code == 0 and envelope["status"] == "pass"
    assert envelope["details"]["world_size"] == 1 and "launch" not in envelope["details"]
    assert [r["size_bytes"] for r in envelope["details"]["sweep"]["all_reduce"]] == [4096, 8192]
