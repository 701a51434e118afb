"""Built-in hardware profiles: valid against the schema, with reference rows that cite a source."""

from __future__ import annotations

from podctl.derive.site import builtin_profiles


def test_builtin_profiles_exist() -> None:
    assert set(builtin_profiles()) == {"dgx-a100", "dgx-h100", "dgx-h200", "hgx-h200-2", "sim"}


def test_profiles_declare_their_hardware() -> None:
    p = builtin_profiles()
    assert p["dgx-h100"].gpus.count == 8 and p["dgx-h100"].compute_hcas.count == 8
    assert p["dgx-h100"].compute_hcas.gbps == 400 and p["dgx-a100"].compute_hcas.gbps == 200
    assert p["hgx-h200-2"].gpus.count == 2 and p["hgx-h200-2"].compute_hcas.count == 0
    assert p["sim"].gpus is None and p["sim"].emulated


def test_reference_rows_have_sources_and_sane_bounds() -> None:
    for profile in builtin_profiles().values():
        figures = [r.figure for r in profile.reference]
        assert len(figures) == len(set(figures)), profile.name
        for row in profile.reference:
            assert row.source and 0 <= row.tolerance < 1 and 0 < row.bound <= row.value


def test_schema_names_exactly_the_figures_podctl_measures() -> None:
    from podctl.derive.site import schema
    from podctl.validate.figures import FIGURES

    assert schema()["$defs"]["reference"]["properties"]["figure"]["enum"] == sorted(FIGURES)


def test_hca_names_one_per_hca_and_the_dgx_h100_layout() -> None:
    for profile in builtin_profiles().values():
        names = profile.compute_hcas.names + profile.storage_hcas.names
        assert len(profile.compute_hcas.names) == profile.compute_hcas.count, profile.name
        assert len(profile.storage_hcas.names) == profile.storage_hcas.count, profile.name
        assert len(names) == len(set(names)), profile.name
    # DGX H100/H200 User Guide, Network Modules table: GPU 0..7's ConnectX-7, in rail order.
    h100 = builtin_profiles()["dgx-h100"]
    assert h100.compute_hcas.names == ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")
    assert h100.storage_hcas.names == ("mlx5_1", "mlx5_2")  # the default: the names compute leaves free
    assert builtin_profiles()["dgx-h200"].compute_hcas.names == h100.compute_hcas.names
    assert builtin_profiles()["dgx-a100"].compute_hcas.names == tuple(f"mlx5_{n}" for n in range(8))


def test_each_gpu_profile_offers_slurm_a_type_and_the_dgx_h100_its_cores() -> None:
    from podctl.derive.sitefile.profiles import slurm_gpu_type

    types = {name: p.gpus.slurm_type for name, p in builtin_profiles().items() if p.gpus}
    assert types == {"dgx-a100": "a100", "dgx-h100": "h100", "dgx-h200": "h200", "hgx-h200-2": "h200"}
    assert builtin_profiles()["dgx-h100"].gpus.cores == ("0-55",) * 4 + ("56-111",) * 4
    assert builtin_profiles()["dgx-a100"].gpus.cores == ()  # no public source for all eight seen
    # A model's first word, lower-cased, made of what Slurm's type takes.
    assert slurm_gpu_type("RTX 6000-Ada") == "rtx_6000"
    assert slurm_gpu_type("4090") == "gpu_4090"


def test_gres_lines_group_the_gpus_next_to_the_same_cores() -> None:
    from podctl.derive.facts import gres_lines

    assert gres_lines(("0-55",) * 4 + ("56-111",) * 4, 8) == [
        {"file": "/dev/nvidia[0-3]", "cores": "0-55"},
        {"file": "/dev/nvidia[4-7]", "cores": "56-111"},
    ]
    assert gres_lines(("0-7", "8-15", "0-7"), 3) == [
        {"file": "/dev/nvidia0", "cores": "0-7"},
        {"file": "/dev/nvidia1", "cores": "8-15"},
        {"file": "/dev/nvidia2", "cores": "0-7"},
    ]
    assert gres_lines((), 2) == [{"file": "/dev/nvidia[0-1]", "cores": ""}]
    assert gres_lines((), 1) == [{"file": "/dev/nvidia0", "cores": ""}]
    assert gres_lines((), 0) == []
