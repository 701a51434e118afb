"""Built-in hardware profiles: valid against the schema, with reference rows that cite a source."""

from __future__ import annotations

from podctl.site import builtin_profiles


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
    from podctl.site import schema
    from podctl.validate.figures import FIGURES

    assert schema()["$defs"]["reference"]["properties"]["figure"]["enum"] == sorted(FIGURES)
