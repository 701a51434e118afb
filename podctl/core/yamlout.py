"""A small, fast, deterministic YAML writer for the inventory's plain data.

PyYAML's representer walks every value in Python and took most of the time
to render a 1,344-node inventory. Our data is only mappings, lists, strings,
numbers, booleans and null, so a direct writer is short and several times
faster. Anything not plainly safe is written as a JSON string, which YAML
reads back unchanged; multi-line text becomes a literal block.

Values are data. Ansible evaluates any string of an inventory that holds a
Jinja marker (`{{`, `{%`, `{#`), and every such marker begins with `{`: a
string with a `{` in it is written with Ansible's `!unsafe` tag, which makes
Ansible treat it as text, never as a template. Strings without one cannot be
templates, and stay plain so that tools reading the inventory as JSON
(testinfra through `ansible-inventory`) see plain strings.
"""

from __future__ import annotations

import json
import re

import yaml

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@\[\],:+-]*")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# Plain scalars that YAML 1.1 (Ansible's loader) would read as something other than a string.
_SPECIAL = re.compile(
    r"(y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|"
    r"null|Null|NULL|~)"
)
UNSAFE_TAG = "!unsafe"
VAULT_TAG = "!vault"


class Vaulted(str):
    """ansible-vault ciphertext: written with its tag, as a literal block, for Ansible to open."""


# Line breaks YAML 1.1 knows beyond \n and \r, which JSON's encoder leaves as they are.
_YAML_BREAKS = {"\x85": "\\x85", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _quoted(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    for char, escape in _YAML_BREAKS.items():
        quoted = quoted.replace(char, escape)
    return quoted


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    if (
        _PLAIN.fullmatch(text)
        and not _SPECIAL.fullmatch(text)
        and ": " not in text
        and not text.endswith(":")
        and "," not in text
        and "[" not in text
    ):
        return text
    return f"{UNSAFE_TAG} {_quoted(text)}" if "{" in text else _quoted(text)


def _key(key: object) -> str:
    text = str(key)
    if "{" in text:
        # Keys name hosts, groups and fabrics, which the site loader allows no braces in.
        raise ValueError(f"inventory key {text!r} holds a brace; the site loader should have refused it")
    return text if _KEY.fullmatch(text) and not _SPECIAL.fullmatch(text) else _quoted(text)


def _emit(value: object, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            item = value[key]
            if isinstance(item, dict) and item:
                out.append(f"{pad}{_key(key)}:\n")
                _emit(item, indent + 2, out)
            elif isinstance(item, list) and item:
                out.append(f"{pad}{_key(key)}:\n")
                _emit(item, indent, out)
            else:
                out.append(f"{pad}{_key(key)}: {_inline(item, indent + 2)}\n")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and item:
                lines: list[str] = []
                _emit(item, indent + 2, lines)
                first = lines[0]
                out.append(f"{pad}- {first[indent + 2 :]}")
                out.extend(lines[1:])
            elif isinstance(item, list) and item:
                out.append(f"{pad}-\n")
                _emit(item, indent + 2, out)
            else:
                out.append(f"{pad}- {_inline(item, indent + 2)}\n")
    else:
        out.append(f"{pad}{_inline(value, indent)}\n")


def _inline(value: object, indent: int) -> str:
    if isinstance(value, Vaulted):
        lines = value.strip().split("\n")
        if not all(line.strip() and all(c.isalnum() or c in ";.$_-" for c in line.strip()) for line in lines):
            raise ValueError("a vault value holds something other than ansible-vault's ciphertext")
        return f"{VAULT_TAG} |\n" + "\n".join(" " * indent + line.strip() for line in lines)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    if isinstance(value, str) and "\n" in value and not value.startswith(" "):
        body = value[:-1] if value.endswith("\n") else value
        chomp = "" if value.endswith("\n") else "-"
        if (
            "\n\n" not in value
            and all(line == line.rstrip() for line in body.split("\n"))
            and not any(c in value for c in "\r\x85\u2028\u2029")
        ):
            pad = " " * indent
            tag = f"{UNSAFE_TAG} " if "{" in value else ""
            return f"{tag}|{chomp}\n" + "\n".join(pad + line if line else line for line in body.split("\n"))
    return _scalar(value)


def dump(data: dict) -> str:
    out: list[str] = []
    _emit(data, 0, out)
    return "".join(out)


class _Reader(yaml.SafeLoader):
    """PyYAML's safe loader that reads `!unsafe` strings back as plain strings."""


_Reader.add_constructor(UNSAFE_TAG, lambda loader, node: loader.construct_scalar(node))
_Reader.add_constructor(VAULT_TAG, lambda loader, node: Vaulted(loader.construct_scalar(node)))


def load(text: str) -> object:
    """Read back what `dump` wrote (tests, and podctl reading its own inventory)."""
    return yaml.load(text, Loader=_Reader)  # noqa: S506 - a SafeLoader subclass
