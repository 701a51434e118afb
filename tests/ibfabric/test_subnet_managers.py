"""A fabric's subnet managers in the site's order: the first is master (OpenSM's sm_priority)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from podctl.cli import main
from podctl.core.hostlist import HostlistError, expand_in_order
from tests.helpers.repo import REPO
from tests.helpers.roles import render_templates

H100 = REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml"


def test_a_hostlist_keeps_the_order_written() -> None:
    assert expand_in_order("head02,head01") == ("head02", "head01")
    assert expand_in_order("b[2-3],a1,b2") == ("b2", "b3", "a1")
    with pytest.raises(HostlistError):
        expand_in_order("head[01-")


@pytest.mark.parametrize(("written", "master"), [("head[01-02]", "head01"), ("head02,head01", "head02")])
def test_the_first_subnet_manager_listed_is_master_in_plan_and_in_opensm_conf(tmp_path, written, master) -> None:
    site = tmp_path / "site.yaml"
    text = H100.read_text()
    assert text.count("subnet_managers: head[01-02]") == 2
    site.write_text(text.replace("subnet_managers: head[01-02]", f"subnet_managers: {written}"))
    standby = "head02" if master == "head01" else "head01"
    out = CliRunner().invoke(main, ["plan", str(site)]).output
    assert f"subnet managers: {master} (priority 14, master), {standby} (priority 13);" in out, out
    for host, priority in ((master, 14), (standby, 13)):
        conf = render_templates(site, "fabric", host, {"opensm.conf": "opensm.conf.j2"}, tmp_path / host)
        assert re.findall(r"(?m)^sm_priority (\d+)$", conf["opensm.conf"]) == [str(priority)], host


def _sim_without_sm(instead: str = "") -> str:
    """The sim site with no subnet manager of its own: no node of the role, none listed (or `instead`)."""
    from tests.helpers.repo import SIM_SITE

    text = SIM_SITE.read_text()
    assert text.count(", subnet-manager") == 1 and text.count("    subnet_managers: head01\n") == 1
    return text.replace(", subnet-manager", "").replace("    subnet_managers: head01\n", instead)


def test_a_fabric_no_one_manages_is_refused_unless_the_site_says_it_is_managed_elsewhere() -> None:
    from podctl.derive.site import check_site_text

    refused = check_site_text(_sim_without_sm(), "site.yaml")
    assert [(d.path, d.code) for d in refused.errors] == [("fabrics.compute", "no-subnet-manager")]
    assert "subnet_managers: external" in (refused.errors[0].hint or "")
    external = check_site_text(_sim_without_sm("    subnet_managers: external\n"), "site.yaml")
    assert external.errors == [] and external.site is not None
    fabric = external.site.fabrics["compute"]
    assert fabric.external_sm and fabric.subnet_managers == ()
