"""`podctl validate --local`: what the health check is told to expect of this host's HCAs."""

from __future__ import annotations

import re

from podctl.derive.site import builtin_profiles
from podctl.validate.local import plan_local


def _health_argv(profile: str) -> list[str]:
    (check,) = plan_local(builtin_profiles()[profile], ("health",), "quick", None)
    return check.argv


def test_health_counts_only_the_profiles_hcas() -> None:
    argv = _health_argv("dgx-h100")
    assert argv[argv.index("--expect-hcas") + 1] == "10"
    pattern = re.compile(argv[argv.index("--hca-filter") + 1])
    considered = [f"mlx5_{n}" for n in range(14) if pattern.search(f"mlx5_{n}")]
    # 8 compute HCAs as the DGX H100 user guide names them, 2 storage HCAs by default; mlx5_1x are not mlx5_1.
    assert considered == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_2",
        "mlx5_3",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_9",
        "mlx5_10",
        "mlx5_11",
    ]


def test_emulated_or_hca_less_profiles_expect_no_hca_filter() -> None:
    assert "--hca-filter" not in _health_argv("sim") and "--expect-hcas" not in _health_argv("sim")
    assert "--hca-filter" not in _health_argv("hgx-h200-2")
