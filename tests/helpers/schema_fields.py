"""The string fields of the site schema, found by walking the schema itself.

A field path is a tuple of steps: a property name, ITEM for the items of a
list, VALUE for the values of a mapping with free keys, KEY for those keys.
Tests derive their hostile cases from these paths, so a string field added to
the schema later is covered without anyone remembering to add a case.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from podctl.derive.site import schema

ITEM, VALUE, KEY = "[]", "{}", "<key>"


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        ref = node["$ref"].split("/")[-1]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**schema()["$defs"][ref], **extra}
    return node


def _is_string(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    choices = node.get("enum", [node["const"]] if "const" in node else [])
    return (
        kind == "string"
        or (isinstance(kind, list) and "string" in kind)
        or ("pattern" in node and "type" not in node)
        or (bool(choices) and all(isinstance(c, str) for c in choices))
    )


def string_fields(node: dict[str, Any] | None = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    node = _resolve(node if node is not None else schema())
    if _is_string(node):
        yield path
    for name, child in node.get("properties", {}).items():
        yield from string_fields(child, path + (name,))
    if isinstance(node.get("items"), dict):
        yield from string_fields(node["items"], path + (ITEM,))
    if isinstance(node.get("additionalProperties"), dict):
        yield from string_fields(node["additionalProperties"], path + (VALUE,))
    if isinstance(node.get("propertyNames"), dict):
        yield path + (KEY,)
    for key in ("oneOf", "anyOf", "allOf"):
        for child in node.get(key, []):
            yield from string_fields(child, path)


def instances(doc: Any, field: tuple[str, ...], at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Concrete paths in `doc` of `field`; a KEY step yields the path of the key itself."""
    if not field:
        if isinstance(doc, str):
            yield at
        return
    step, rest = field[0], field[1:]
    if step == ITEM and isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from instances(item, rest, at + (i,))
    elif step == VALUE and isinstance(doc, dict):
        for key, value in doc.items():
            yield from instances(value, rest, at + (key,))
    elif step == KEY and isinstance(doc, dict) and not rest:
        for key in doc:
            yield at + (key,)
    elif isinstance(doc, dict) and step in doc:
        yield from instances(doc[step], rest, at + (step,))


def get(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def replace(doc: Any, path: tuple[Any, ...], value: str, key: bool = False) -> None:
    """Set the string at `path` (or rename the key at `path`, with key=True) to `value`."""
    parent = get(doc, path[:-1])
    if key:
        parent[value] = parent.pop(path[-1])
    else:
        parent[path[-1]] = value
