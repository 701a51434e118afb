"""The site files the fabric tests plan from, by a short name, each loaded once."""

from __future__ import annotations

from podctl.core.model import Site
from podctl.derive.site import load_site
from tests.helpers.repo import REPO, SIM_SITE

SITES = {
    "sim": SIM_SITE,
    "h100-127": REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml",
    "a100-140": REPO / "inventory" / "examples" / "dgx-a100-superpod-140.yaml",
}


_SITES: dict[str, Site] = {}


def loaded_site(name: str) -> Site:
    """The Site of SITES[name], loaded the first time it is asked for."""
    if name not in _SITES:
        _SITES[name] = load_site(SITES[name])
    return _SITES[name]
