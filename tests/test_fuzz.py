"""Property tests: no input, however broken, makes the loader or `podctl check` raise."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podctl.cli import main
from podctl.derive.site import check_site_text
from tests.helpers.repo import DATA, REPO

SOURCES = [
    REPO / "inventory" / "sim" / "site.yaml",
    DATA / "valid-custom-profile.yaml",
    REPO / "inventory" / "examples" / "dgx-h100-4su-127.yaml",
]
TEXTS = [p.read_text() for p in SOURCES]
DOCS = [yaml.safe_load(t) for t in TEXTS]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(
        ["", "node[01-99]", "node[", "10.0.0.1", "10.0.0.0/8", "999.1.1.1", "sim", "dgx-h100", "NDR", "compute", "auto"]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=10,
)


def _paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "rename", "duplicate"]))
        key = path[-1]
        if action == "replace":
            parent[key] = draw(values)
        elif action == "delete":
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = parent.pop(key)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return yaml.safe_dump(doc, sort_keys=False)


@st.composite
def mutated_texts(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 5))):
        pos = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "swap"]))
        if op == "insert":
            text = text[:pos] + draw(st.text(max_size=5)) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 30)) :]
        else:
            text = (
                text[:pos]
                + draw(st.sampled_from([":", "- ", "[", "{", "\t", "&a", "*a", "!!binary ", "<<: "]))
                + text[pos:]
            )
    return text


def _assert_well_formed(text: str) -> None:
    result = check_site_text(text, "fuzz.yaml")
    for diag in result.diagnostics:
        assert isinstance(diag.render(), str)
        assert diag.location is None or diag.location.line >= 1
    assert (result.site is None) == bool(result.errors)


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(mutated_documents())
def test_structurally_mutated_sites_never_raise(text: str) -> None:
    _assert_well_formed(text)


@FUZZ
@given(mutated_texts())
def test_textually_mutated_sites_never_raise(text: str) -> None:
    _assert_well_formed(text)


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_text_never_raises(text: str) -> None:
    _assert_well_formed(text)


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=300))
def test_cli_check_on_binary_junk_prints_no_traceback(tmp_path_factory, data: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("junk")) / "site.yaml"
    path.write_bytes(data)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code in (0, 1, 2)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
