"""No trailing-newline loophole: every pattern anchors at the true end of the string.

Python's `$` (and so jsonschema's `pattern`) also matches before a final
newline: `^[a-z]+$` accepts "batch\\n". The schema's patterns end in
(?![\\s\\S]) instead, and podctl's own writers match whole strings.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from podctl.core import yamlout
from podctl.derive.site import schema
from tests.helpers.repo import DATA, REPO
from tests.helpers.schema_fields import _resolve, instances, string_fields

TRUE_END = r"(?![\s\S])"
BASES = [
    yaml.safe_load(p.read_text())
    for p in (
        REPO / "inventory" / "sim" / "site.yaml",
        DATA / "valid-every-field.yaml",
        DATA / "valid-custom-profile.yaml",
        DATA / "valid-index-url-vault.yaml",
        DATA / "valid-index-url-file.yaml",
    )
]


def _patterns(node: Any, where: str = "") -> list[tuple[str, str]]:
    out = []
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            out.append((where, node["pattern"]))
        for key, value in node.items():
            out += _patterns(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _patterns(value, f"{where}[{i}]")
    return out


PATTERNS = _patterns(schema())


def test_the_schema_has_patterns() -> None:
    assert len(PATTERNS) >= 25


@pytest.mark.parametrize(("where", "pattern"), PATTERNS, ids=[w for w, _ in PATTERNS])
def test_every_pattern_ends_at_the_true_end(where: str, pattern: str) -> None:
    assert pattern.startswith("^") and pattern.endswith(TRUE_END), f"{where}: {pattern}"
    assert not re.search(r"(?<!\\)\$", pattern), f"{where}: a bare $ matches before a final newline: {pattern}"


def _branches(node: Any) -> list[Any]:
    """`node` and, where it is a choice (oneOf, anyOf), each of its branches."""
    node = _resolve(node)
    return [node] + [_resolve(b) for key in ("oneOf", "anyOf") for b in node.get(key, [])]


def _field_patterns() -> list[tuple[tuple[str, ...], str]]:
    out = []
    for field in sorted(set(string_fields())):
        nodes: list[Any] = [schema()]
        for step in field:
            nodes = [b for n in nodes for b in _branches(n)]
            if step == "[]":
                nodes = [n["items"] for n in nodes if "items" in n]
            elif step == "{}":
                nodes = [n["additionalProperties"] for n in nodes if isinstance(n.get("additionalProperties"), dict)]
            elif step == "<key>":
                nodes = [n["propertyNames"] for n in nodes if "propertyNames" in n]
            else:
                nodes = [n["properties"][step] for n in nodes if step in n.get("properties", {})]
        out += [(field, b["pattern"]) for n in nodes for b in _branches(n) if "pattern" in b]
    return out


FIELD_PATTERNS = _field_patterns()


@pytest.mark.parametrize(("field", "pattern"), FIELD_PATTERNS, ids=["/".join(f) for f, _ in FIELD_PATTERNS])
def test_valid_values_with_a_newline_do_not_match(field: tuple[str, ...], pattern: str) -> None:
    values = {str(at[-1]) if field[-1] == "<key>" else _get(doc, at) for doc in BASES for at in instances(doc, field)}
    values = {v for v in values if isinstance(v, str)}  # a field of several forms: its string one here
    assert values, f"no example of {field} in the base sites"
    for value in values:
        assert re.search(pattern, value), f"{value!r} should match {pattern}"
        for hostile in (value + "\n", value + "\nallow 0.0.0.0/0", "\n" + value):
            assert re.search(pattern, hostile) is None, f"{hostile!r} matches {pattern}"


def _get(doc: Any, at: tuple[Any, ...]) -> Any:
    for step in at:
        doc = doc[step]
    return doc


@pytest.mark.parametrize("text", ["batch\n", "compute\n", "7d\n", "node01\n", "a\nb", "yes\n", "x: y\n"])
def test_the_inventory_writer_never_writes_a_newline_as_a_plain_scalar(text: str) -> None:
    dumped = yamlout.dump({"key": text, "list": [text], text.strip() or "k": 1})
    assert yamlout.load(dumped) == {"key": text, "list": [text], text.strip() or "k": 1}
    assert yaml.safe_load(dumped.replace("!unsafe ", "")) == yamlout.load(dumped)


def test_init_refuses_a_pod_name_that_would_inject_yaml() -> None:
    from podctl.core.errors import PodctlError
    from podctl.derive.init import render_site

    with pytest.raises(PodctlError, match="--name"):
        render_site("dgx-h100", 1, None, "pod\nextra: 1", "schema.json")
