"""The site loader over tests/data: each invalid file names the exact diagnostics it must produce."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from podctl.core.errors import Severity, SiteError
from podctl.core.model import VALIDATION_EXEC, Site
from podctl.derive.site import check_site_file, check_site_text, load_site
from tests.helpers.repo import DATA, REPO, SIM_SITE

EXPECT = re.compile(r"^# expect: (error|warning) (\S+) (\S+)(?: (.*))?$", re.M)


def _expectations(path: Path) -> list[tuple[str, str, str, str | None]]:
    return [(m[1], "" if m[2] == "<root>" else m[2], m[3], m[4]) for m in EXPECT.finditer(path.read_text())]


INVALID = sorted(DATA.glob("invalid-*.yaml"))
VALID = sorted(DATA.glob("valid-*.yaml"))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_file_reports_exactly_the_expected_diagnostics(path: Path) -> None:
    expected = _expectations(path)
    assert expected, f"{path.name} has no '# expect:' lines"
    result = check_site_file(path)
    assert result.site is None
    for severity, ypath, code, text in expected:
        matches = [d for d in result.diagnostics if d.severity.value == severity and d.path == ypath and d.code == code]
        assert matches, f"no {severity} {code} at {ypath!r}; got:\n" + "\n".join(d.render() for d in result.diagnostics)
        if text:
            assert any(text in d.render() for d in matches), [d.render() for d in matches]
        for d in matches:  # every diagnostic points into the file
            assert d.location is not None and d.location.file == str(path) and d.location.line >= 1


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_file_loads_with_only_the_expected_warnings(path: Path) -> None:
    result = check_site_file(path)
    assert not result.errors, [d.render() for d in result.errors]
    assert result.site is not None
    expected = {(p, c) for s, p, c, _ in _expectations(path) if s == "warning"}
    got = {(d.path, d.code) for d in result.warnings}
    assert got == expected


def test_positions_point_at_the_offending_token() -> None:
    result = check_site_file(DATA / "invalid-unknown-key.yaml")
    (diag,) = result.errors
    line = (DATA / "invalid-unknown-key.yaml").read_text().splitlines()[diag.location.line - 1]
    assert line[diag.location.column - 1 :].startswith("profle:")


def test_many_errors_are_all_reported_in_one_run() -> None:
    result = check_site_file(DATA / "invalid-many-errors.yaml")
    assert len(result.errors) >= 4


def test_sim_site_model() -> None:
    site = load_site(SIM_SITE)
    assert [n.hostname for n in site.nodes] == ["head01", "node01", "node02", "node03"]
    assert [str(n.address) for n in site.nodes] == ["10.89.0.10", "10.89.0.11", "10.89.0.12", "10.89.0.13"]
    assert site.fabrics["compute"].nodes == ("node01", "node02", "node03")
    assert site.fabrics["compute"].rails == 2
    assert [str(r) for r in site.ipoib.rails] == ["172.30.0.0/24", "172.30.1.0/24"]
    assert site.slurm.controllers == ("head01",) and site.slurm.accounting
    assert site.monitoring.prometheus_host == "head01"
    assert {m.mountpoint for m in site.storage} == {"/home/shared", "/scratch"}


def test_load_site_raises_with_every_error() -> None:
    with pytest.raises(SiteError) as info:
        load_site(DATA / "invalid-many-errors.yaml")
    assert len([d for d in info.value.diagnostics if d.severity is Severity.ERROR]) >= 4
    assert "invalid-many-errors.yaml:" in str(info.value)


@pytest.mark.parametrize(
    "text,code",
    [
        ("", "empty"),
        ("# only a comment\n", "empty"),
        ("- a\n- b\n", "type"),
        ("just a string", "type"),
        ("Null", "type"),
        ("~\n", "type"),
        ("apiVersion: podctl/v1alpha1\nkind: Site\nmetadata: {name: x}\nnodes: [\n", "yaml-syntax"),
        ("kind: Site\n", "api-version"),
        ("{a: 1, a: 2}", "duplicate-key"),
        ("\x00\x01binary", "yaml-syntax"),
    ],
)
def test_broken_documents_become_diagnostics(text: str, code: str) -> None:
    result = check_site_text(text, "t.yaml")
    assert result.site is None
    assert code in {d.code for d in result.errors}


def test_binary_file_is_an_encoding_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.yaml"
    path.write_bytes(b"apiVersion: \xff\xfe\x00garbage")
    result = check_site_file(path)
    assert [d.code for d in result.errors] == ["encoding"]


def test_yaml_anchors_and_merge_keys_are_understood(tmp_path: Path) -> None:
    text = SIM_SITE.read_text().replace(
        "  - group: compute\n    hosts: node[01-03]\n    profile: sim\n    roles: [compute, storage-client]\n",
        "  - &c\n    group: compute\n    hosts: node[01-03]\n    profile: sim\n    roles: [compute, storage-client]\n",
    )
    result = check_site_text(text, "anchors.yaml")
    assert not result.errors, [d.render() for d in result.errors]


def test_every_example_and_test_file_references_the_schema() -> None:
    files = list((REPO / "inventory").rglob("*.yaml")) + INVALID + VALID
    assert files
    for path in files:
        assert path.read_text().startswith("# yaml-language-server: $schema="), path


def _tools_site(tmp_path: Path, tools: str, replace: tuple[str, str] = ("", "")) -> Site:
    text = re.sub(r"(?m)^  tools:\n(?:    .*\n)+", "", SIM_SITE.read_text() + "\n")
    assert "tools:" not in text
    text = text.replace(*replace) + tools
    (tmp_path / "sub").mkdir(exist_ok=True)
    path = tmp_path / "sub" / "site.yaml"
    path.write_text(text)
    return load_site(path)


def test_validation_tools_defaults() -> None:
    # Root runs them: on each compute node's local disk, whatever storage the nodes share.
    sim = load_site(SIM_SITE).validation.tools
    assert (sim.path, sim.packages) == ("/opt/podctl-validation", ("torch", "numpy"))
    assert sim.wheels == REPO / ".cache" / "validation-wheels"
    assert sim.python == "/opt/podctl-validation/venv/bin/python"
    assert sim.argv("validation.health", "--x") == [
        VALIDATION_EXEC,
        "/opt/podctl-validation/venv/bin/python",
        "-m",
        "validation.health",
        "--x",
    ]
    gpu = load_site(DATA / "valid-custom-profile.yaml").validation.tools
    assert (gpu.path, gpu.packages) == ("/opt/podctl-validation", ("torch", "numpy", "nvidia-ml-py"))
    assert gpu.wheels is None and gpu.index_url is None


def test_validation_tools_explicit(tmp_path: Path) -> None:
    site = _tools_site(
        tmp_path, "  tools:\n    path: /opt/tools/\n    wheels: ../wheels\n    packages: [torch==2.13.0]\n"
    )
    tools = site.validation.tools
    assert (tools.path, tools.packages) == ("/opt/tools", ("torch==2.13.0",))
    assert tools.wheels == tmp_path / "wheels"  # relative to the site file's folder
    assert tools.python == "/opt/tools/venv/bin/python"
    local = _tools_site(
        tmp_path, "  tools:\n    path: /srv/podctl/x\n    index_url: https://pypi.example/simple\n"
    ).validation.tools
    assert (local.path, local.index_url, local.wheels) == ("/srv/podctl/x", "https://pypi.example/simple", None)


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("/tmp/podctl-validation", "under /tmp"),
        ("/var/tmp/x", "under /var/tmp"),
        ("/dev/shm/x", "under /dev/shm"),
        ("/home/alice/tools", "under /home"),
        ("/home/shared/podctl-validation", "on shared storage 'home'"),
        ("/scratch", "on shared storage 'scratch'"),
    ],
)
def test_validation_tools_where_others_write_are_refused(tmp_path: Path, where: str, why: str) -> None:
    with pytest.raises(SiteError) as info:
        _tools_site(tmp_path, f"  tools:\n    path: {where}\n")
    (diag,) = info.value.diagnostics
    assert (diag.path, diag.code) == ("validation.tools.path", "untrusted-path")
    assert why in diag.message and "local disk, owned by root" in (diag.hint or "")


def test_validation_tools_index_url_beside_wheels_is_a_warning(tmp_path: Path) -> None:
    text = SIM_SITE.read_text().replace(
        "    wheels: ../../.cache/validation-wheels\n",
        "    wheels: ../../.cache/validation-wheels\n    index_url: https://x/simple\n",
    )
    result = check_site_text(text, "t.yaml")
    assert not result.errors
    assert [(d.path, d.code) for d in result.warnings] == [("validation.tools.index_url", "ignored")]


def test_hca_names_given_and_by_default() -> None:
    profile = load_site(DATA / "valid-custom-profile.yaml").profiles["pcie-l40s"]
    assert profile.compute_hcas.names == ("mlx5_0", "mlx5_2")
    assert profile.storage_hcas.names == ("mlx5_1",)  # the first name compute leaves free
    assert load_site(SIM_SITE).profiles["sim"].compute_hcas.names == ("mlx5_0", "mlx5_1")
