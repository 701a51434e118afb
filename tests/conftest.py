from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SIM_SITE = REPO / "inventory" / "sim" / "site.yaml"


@pytest.fixture
def sim_site_path() -> Path:
    return SIM_SITE
