"""The subnet manager's routes as a check of validate (check `routes`): what a sim pod's validate
collects itself is judged, not refused; an HCA no table routes is named by its cable."""

from __future__ import annotations

import re
from pathlib import Path

from podctl.derive.facts import cached_plan, hca_names
from podctl.derive.site import load_site
from podctl.ibfabric.formats import topology_from_plan, write_ibnetdiscover
from podctl.ibfabric.lft import write_lfts
from podctl.localize.routing import Router
from podctl.validate.cabling import names_by_guid, routes_run
from tests.helpers.repo import SIM_SITE


def _dumps(tmp_path: Path, drop: str | None = None) -> tuple[Path, Path]:
    """The sim site's fabric as planned, in ibnetdiscover's format, and its tables routed by podctl's
    model in dump_lfts.sh's, with the entries for `drop` (an HCA's description) left out."""
    site = load_site(SIM_SITE)
    fabric = site.fabrics["compute"]
    plan, names = cached_plan(fabric), hca_names(site, "compute")
    topo = topology_from_plan(plan, fabric.rate, names)
    lfts = write_lfts(topo, Router(plan).tables(), plan, names)
    if drop is not None:
        blocks = re.split(r"(?m)^(?=Unicast lids)", lfts)
        kept = []
        for block in blocks:
            lines = [line for line in block.splitlines(keepends=True) if f"'{drop}'" not in line]
            removed = len(block.splitlines()) - len(lines)
            text = "".join(lines)
            count = re.search(r"(\d+) valid lids dumped", text)
            if count and removed:
                text = text.replace(count[0], f"{int(count[1]) - removed} valid lids dumped")
            kept.append(text)
        lfts = "".join(kept)
    (tmp_path / "topo.txt").write_text(write_ibnetdiscover(topo))
    (tmp_path / "lfts.txt").write_text(lfts)
    return tmp_path / "topo.txt", tmp_path / "lfts.txt"


def test_tables_that_route_every_hca_pass_and_are_followed(tmp_path: Path) -> None:
    site = load_site(SIM_SITE)
    topo, lfts = _dumps(tmp_path)
    run, forwarding, notes = routes_run(site, lfts, names_by_guid(site, topo))
    assert (run.check, run.scope, run.node, run.status) == ("routes", "fabric", "fabric", "pass")
    assert forwarding and "every route followed" in run.envelope["findings"][0]["message"]
    assert notes[0].startswith(f"routes: {lfts}: ")


def test_an_hca_no_table_routes_fails_the_check_naming_its_cable(tmp_path: Path) -> None:
    site = load_site(SIM_SITE)
    topo, lfts = _dumps(tmp_path, drop="node02 mlx5_0")
    run, forwarding, _ = routes_run(site, lfts, names_by_guid(site, topo))
    assert run.status == "fail" and forwarding is None  # localization then follows the model
    messages = [f["message"] for f in run.envelope["findings"]]
    assert messages == [
        "no table routes node02 mlx5_0 (rail 1, its cable at ib-leaf-su01-r1[2]): the subnet manager gave its "
        "port no LID; is the port down or its cable out?"
    ]
    assert run.envelope["details"]["unrouted"] == [{"host": "node02", "rail": 1}]
