"""The podctl command line: exit codes, output forms, and no tracebacks on user errors."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from podctl.cli import main
from tests.helpers.repo import DATA, SIM_SITE


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def test_check_clean_site_exits_0() -> None:
    code, out = run("check", str(SIM_SITE))
    assert code == 0 and "ok (4 nodes" in out


def test_check_errors_exit_2_with_positions() -> None:
    code, out = run("check", str(DATA / "invalid-many-errors.yaml"))
    assert code == 2
    assert "invalid-many-errors.yaml:21:14: error: nodes[1].profile: unknown profile 'dgx-h1000'" in out
    assert "did you mean 'dgx-h100'?" in out


def test_warnings_exit_0_or_1_with_strict() -> None:
    path = str(DATA / "valid-warning-oversubscribed.yaml")
    assert run("check", path)[0] == 0
    assert run("check", "--strict", path)[0] == 1
    assert run("check", "--strict", str(SIM_SITE))[0] == 0


def test_check_json_output() -> None:
    code, out = run("check", "-o", "json", str(DATA / "invalid-unknown-key.yaml"))
    assert code == 2
    data = json.loads(out)
    assert data["ok"] is False
    (diag,) = data["diagnostics"]
    assert (diag["path"], diag["code"], diag["line"], diag["column"]) == ("nodes[1].profle", "unknown-key", 18, 5)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    code, out = run("check", str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such file" in out and "podctl init" in out


def test_plan_text_and_json() -> None:
    code, out = run("plan", str(SIM_SITE))
    assert code == 0 and "4 nodes" in out and "Deploy stages" in out
    code, out = run("plan", "-o", "json", str(SIM_SITE))
    data = json.loads(out)
    assert data["nodes"]["total"] == 4
    assert data["fabrics"]["compute"]["switches"] == {"leaf": 2, "spine": 1, "core": 0}
    assert data["fabrics"]["compute"]["cables"]["node-leaf"] == 6
    assert data["stages"]["slurm"][1] == {"what": "munge, slurmd", "where": "node[01-03]"}


def test_uneven_pod_gets_updn_from_init_plan_and_inventory(tmp_path: Path) -> None:
    # 37 SUs fill spine blocks of 32 and 5 SUs, a tree OpenSM's ftree refuses (its routing
    # falls back to minhop): init writes updn with the reason, plan says why, the inventory
    # gives the fabric role updn, and a site that asks ftree anyway is warned.
    site = tmp_path / "site.yaml"
    code, _ = run("init", "--profile", "dgx-h100", "--scalable-units", "37", "-o", str(site))
    assert code == 0
    compute = yaml.safe_load(site.read_text())["fabrics"]["compute"]
    assert compute["routing_engine"] == "updn"
    assert "# updn: 37 SUs fill spine blocks of 32 + 5 SUs" in site.read_text()
    assert run("check", "--strict", str(site))[0] == 0

    code, out = run("plan", "-o", "json", str(site))
    fabric = json.loads(out)["fabrics"]["compute"]
    assert fabric["routing_engine"] == "updn"
    assert fabric["routing_advice"]["engine"] == "updn"
    assert "ERR AB09" in fabric["routing_advice"]["reason"]

    asks_ftree = tmp_path / "ftree.yaml"
    asks_ftree.write_text(site.read_text().replace("routing_engine: updn", "routing_engine: ftree", 1))
    code, out = run("check", "-o", "json", str(asks_ftree))
    (warning,) = json.loads(out)["diagnostics"]
    assert (warning["code"], warning["path"]) == ("routing-engine", "fabrics.compute.routing_engine")
    assert "set routing_engine: updn" in warning["hint"]
    code, out = run("plan", str(asks_ftree))
    assert "the plan calls for updn, not ftree" in out

    # Left out, the engine is the plan's, and so is what the fabric role renders into opensm.conf.
    unset = tmp_path / "unset.yaml"
    unset.write_text(site.read_text().replace("    routing_engine: updn\n", "", 1))
    assert run("check", "--strict", str(unset))[0] == 0
    code, _ = run("inventory", str(unset), "-o", str(tmp_path / "inv"))
    assert code == 0
    inventory = yaml.safe_load((tmp_path / "inv" / "group_vars" / "all" / "podctl.yml").read_text())
    compute = inventory["podctl_fabrics"]["compute"]
    assert compute["routing_engine"] == "updn"
    # updn's roots: the cores, which its root_guid_file names by GUID.
    assert len(compute["root_switches"]) == 152 and compute["root_switches"][0] == "ib-core-01-01"
    assert inventory["podctl_fabrics"]["storage"]["routing_engine"] == "updn"


def test_plan_on_a_broken_site_exits_2() -> None:
    code, out = run("plan", str(DATA / "invalid-unknown-profile.yaml"))
    assert code == 2 and "unknown profile 'simm'" in out


def test_inventory_command(tmp_path: Path) -> None:
    code, out = run("inventory", str(SIM_SITE), "-o", str(tmp_path / "inv"))
    assert code == 0 and "wrote 6 files" in out
    assert (tmp_path / "inv" / "host_vars" / "node03.yml").exists()


def test_schema_is_a_valid_draft_2020_12_schema_that_accepts_the_sim_site() -> None:
    code, out = run("schema")
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(yaml.safe_load(SIM_SITE.read_text()), schema, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize(
    "profile,units,nodes,expect_nodes",
    [
        ("dgx-a100", 7, None, 140),
        ("dgx-h100", 4, 127, 127),
        ("dgx-h200", 1, None, 32),
        ("dgx-h100", 42, None, 1344),
    ],
)
def test_init_writes_a_site_that_passes_check(
    tmp_path: Path, profile: str, units: int, nodes: int | None, expect_nodes: int
) -> None:
    out = tmp_path / "site.yaml"
    args = ["init", "--profile", profile, "--scalable-units", str(units), "-o", str(out)]
    if nodes:
        args += ["--nodes", str(nodes)]
    assert run(*args)[0] == 0
    code, text = run("check", "--strict", str(out))
    assert code == 0, text
    code, plan = run("plan", "-o", "json", str(out))
    groups = {g["group"]: g["count"] for g in json.loads(plan)["nodes"]["groups"]}
    assert groups["gpu"] == expect_nodes
    assert out.read_text().startswith("# yaml-language-server: $schema=")


def test_init_refuses_to_overwrite_and_bad_arguments(tmp_path: Path) -> None:
    out = tmp_path / "site.yaml"
    out.write_text("mine")
    code, msg = run("init", "--profile", "dgx-h100", "--scalable-units", "2", "-o", str(out))
    assert code == 2 and "--force" in msg and out.read_text() == "mine"
    code, msg = run("init", "--profile", "sim", "--scalable-units", "2")
    assert code == 2 and "dgx-a100" in msg
    code, msg = run("init", "--profile", "dgx-h100", "--scalable-units", "0")
    assert code == 2 and "between 1 and 64" in msg
    code, msg = run("init", "--profile", "dgx-h100", "--scalable-units", "1", "--nodes", "33")
    assert code == 2 and "between 1 and 32" in msg


@pytest.mark.parametrize(
    "example,args",
    [
        ("dgx-a100-superpod-140.yaml", ["--profile", "dgx-a100", "--scalable-units", "7", "--name", "superpod-a100"]),
        (
            "dgx-h100-4su-127.yaml",
            ["--profile", "dgx-h100", "--scalable-units", "4", "--nodes", "127", "--name", "h100-pod"],
        ),
    ],
)
def test_reference_examples_are_what_init_writes(example: str, args: list[str]) -> None:
    path = SIM_SITE.parents[1] / "examples" / example
    code, text = run("init", *args, "--schema-ref", "../../podctl/schema/site.schema.json")
    assert code == 0
    assert text == path.read_text(), f"regenerate {example} with podctl init"


def test_the_sim_on_its_own_reports_errors_as_every_podctl_command_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # `python -m podctl.sim` and `podctl sim`: one error path (podctl.cliopts.CommandGroup), whose -v
    # the sim's PODCTL_DEBUG switches on too.
    from podctl.sim import cli as sim_cli
    from podctl.sim.errors import SimError

    def no_podman(command: str) -> None:
        raise SimError("podman is not installed; install podman 4.4 or later")

    monkeypatch.setattr(sim_cli, "_podman", no_podman)
    monkeypatch.delenv("PODCTL_DEBUG", raising=False)
    for group, args in ((sim_cli.standalone, ["status"]), (main, ["sim", "status"])):
        result = CliRunner().invoke(group, args)
        assert result.exit_code == 2 and "error: podman is not installed; install podman" in result.output
        assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    for args, env in ((["-v", "status"], {}), (["status"], {"PODCTL_DEBUG": "1"})):
        result = CliRunner().invoke(sim_cli.standalone, args, env=env)
        assert isinstance(result.exception, SimError), (args, env, result.output)
    assert isinstance(CliRunner().invoke(main, ["-v", "sim", "status"]).exception, SimError)
