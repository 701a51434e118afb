"""Which measurement of which check stands for each reference figure.

A profile's reference table names figures; a check's JSON envelope carries
measurements. This table is the one place that joins the two, so that a
figure nobody measures cannot be declared (the schema lists these names).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str
    check: str  # the node-side check: health, burnin, collectives, smoke
    scope: str  # "node" (one host) or "pod" (a job across hosts)
    measurement: str  # the measurement's figure name in the check's envelope
    per_device: bool  # judged on every device (GPU) rather than once per host
    description: str
    # The same quantity as NVIDIA's nccl-tests measure it (check "nccl_tests"), when the site names an
    # nccl-tests build: judged against the same reference row, shown beside podctl's own figure.
    nccl_tests: str | None = None


FIGURES: dict[str, Figure] = {
    f.name: f
    for f in (
        Figure(
            "gemm_bf16_tflops",
            "burnin",
            "node",
            "gemm_bf16_tflops",
            True,
            "bf16 GEMM throughput of each GPU (median over the burn-in)",
        ),
        Figure(
            "gemm_bf16_tflops_sustained",
            "burnin",
            "node",
            "gemm_bf16_tflops_sustained",
            True,
            "bf16 GEMM throughput of each GPU held for the whole burn-in, under its power limit",
        ),
        Figure(
            "hbm_bandwidth",
            "burnin",
            "node",
            "hbm_bandwidth",
            True,
            "device-to-device copy bandwidth of each GPU, bytes read + written",
        ),
        Figure(
            "gemm_fp32_gflops",
            "burnin",
            "node",
            "gemm_fp32_gflops",
            False,
            "fp32 GEMM throughput on the CPU cores (GPU-less profiles)",
        ),
        Figure(
            "memory_bandwidth",
            "burnin",
            "node",
            "memory_bandwidth",
            False,
            "host memory copy bandwidth (GPU-less profiles)",
        ),
        Figure(
            "allreduce_busbw_node",
            "collectives",
            "node",
            "all_reduce_busbw_8GiB",
            False,
            "all_reduce bus bandwidth across the host's GPUs at 8 GiB",
            nccl_tests="nccl_all_reduce_busbw_8GiB",
        ),
        Figure(
            "allreduce_busbw_node_1g",
            "collectives",
            "node",
            "all_reduce_busbw_1GiB",
            False,
            "all_reduce bus bandwidth across the host's GPUs at 1 GiB",
            nccl_tests="nccl_all_reduce_busbw_1GiB",
        ),
        Figure(
            "allreduce_busbw_cpu",
            "collectives",
            "node",
            "all_reduce_busbw_16MiB",
            False,
            "all_reduce bus bandwidth over gloo between local ranks at 16 MiB (GPU-less profiles)",
        ),
        Figure(
            "allreduce_busbw_multinode",
            "collectives",
            "pod",
            "all_reduce_busbw_8GiB",
            False,
            "all_reduce bus bandwidth between nodes at 8 GiB, judged on every test a node was in: "
            "all nodes, localization rounds and pairs",
            nccl_tests="nccl_all_reduce_busbw_8GiB",
        ),
        Figure(
            "allreduce_busbw_multinode_cpu",
            "collectives",
            "pod",
            "all_reduce_busbw_16MiB",
            False,
            "all_reduce bus bandwidth over gloo between nodes at 16 MiB, one rank per node (GPU-less profiles); "
            "judged on every test a node was in: all nodes, localization rounds and pairs",
        ),
        Figure(
            "smoke_mfu",
            "smoke",
            "node",
            "smoke_mfu",
            True,
            "model FLOPs utilisation of the training smoke test, per GPU",
        ),
        Figure(
            "smoke_tflops_per_node",
            "smoke",
            "node",
            "smoke_tflops_per_node",
            False,
            "training smoke throughput per node (GPU-less profiles)",
        ),
    )
}

# The suites of `podctl validate SITE`, in the order they run. A suite runs the node-side
# check of its name (validation/<suite>.py), but conformance, which podctl runs itself.
SUITES = ("conformance", "health", "burnin", "collectives", "smoke")
# `--local` certifies one host: no conformance.
LOCAL_SUITES = SUITES[1:]
# The suites run on every node over SSH; the others run from the controller or through Slurm.
NODE_SUITES = ("health", "burnin", "collectives")
# Names earlier releases used, still accepted on the command line.
SUITE_ALIASES = {"nccl": "collectives"}


NCCL_TESTS_CHECK = "nccl_tests"


def suite_of(figure: str) -> str:
    """The suite whose run measures `figure`."""
    return FIGURES[figure].check
