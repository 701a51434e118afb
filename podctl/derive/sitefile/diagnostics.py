"""From text to data the builder can trust: YAML, then every string, then the schema.

Every problem is collected with its YAML path and file position; nothing stops
at the first error. What is refused here is refused whatever the schema says:
template markers and control characters in any string or key (values are data),
non-finite numbers, and integers written as floats.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from podctl.core.errors import Diagnostic, Severity
from podctl.core.redact import redact_urls
from podctl.core.suggest import closest, did_you_mean
from podctl.core.yamlsource import PathKey, Source, format_path

SCHEMA_RESOURCE = "site.schema.json"


@cache
def schema() -> dict[str, Any]:
    text = resources.files("podctl.schema").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    return json.loads(text)


# JSON Schema counts 8.0 as an integer; the model would then carry a float into
# ranges and counts. An integer field takes integers only, and says so.
_StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


@cache
def site_validator() -> jsonschema.protocols.Validator:
    return _StrictValidator(schema())


@cache
def profile_validator() -> jsonschema.protocols.Validator:
    root = schema()
    return _StrictValidator({"$defs": root["$defs"], "$ref": "#/$defs/profile"})


# -- values are data ---------------------------------------------------------------------
#
# Every string of a site reaches Ansible (and through it config files on every node) and
# the terminal. Whatever the schema allows in a field, none may carry a template marker
# (Ansible would evaluate it, as root, on the controller) or a control character (a
# newline starts a new line in the config file the value lands in).

TEMPLATE_MARKERS = ("{{", "{%", "{#")
# Free text that podctl never writes into a configuration line may span lines, and so does
# ansible-vault's ciphertext (hex lines under a header: the schema holds it to that).
MULTILINE_KEYS = frozenset({"description", "vault"})
MAX_STRING = 2048
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def text_problem(text: str, multiline: bool = False) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) for a site string that is not plain data, else None."""
    if len(text) > MAX_STRING:
        return (f"is {len(text):,} characters long, more than the {MAX_STRING:,} a site value may have", "shorten it")
    for marker in TEMPLATE_MARKERS:
        if marker in text:
            return (
                f"contains the template marker {marker!r}",
                "podctl passes site values to Ansible as data, never as templates: write the value itself",
            )
    allowed = "\n\t" if multiline else ""
    if text.isascii():
        bad = next((m.group() for m in _ASCII_CONTROL.finditer(text) if m.group() not in allowed), None)
    else:
        bad = next((c for c in text if c not in allowed and unicodedata.category(c) in _CONTROL_CATEGORIES), None)
    if bad is not None:
        where = text.index(bad)
        return (
            f"contains the control character {bad!r} at position {where}",
            "a value is one line of plain text: a newline here would start a new line in the config "
            "file it is written to",
        )
    return None


def data_diagnostics(data: object, report: Reporter, path: PathKey = ()) -> None:
    """Template markers and control characters in any string or key; non-finite numbers."""
    if isinstance(data, dict):
        for key, value in data.items():
            child = path + (key,)
            if isinstance(key, str) and (problem := text_problem(key)):
                report.error(child, f"key {_short(key)} {problem[0]}", problem[1], code="unsafe-text", key=True)
            if isinstance(value, str):
                problem = text_problem(value, multiline=key in MULTILINE_KEYS)
                if problem:
                    report.error(child, f"{_short(value)} {problem[0]}", problem[1], code="unsafe-text")
            else:
                data_diagnostics(value, report, child)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            if isinstance(item, str):
                if problem := text_problem(item):
                    report.error(path + (i,), f"{_short(item)} {problem[0]}", problem[1], code="unsafe-text")
            else:
                data_diagnostics(item, report, path + (i,))
    elif isinstance(data, float) and not math.isfinite(data):
        report.error(path, f"{data!r} is not a finite number", "write a number such as 0.05", code="not-finite")


def kind_name(value: object) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)


class Reporter:
    def __init__(self, source: Source, sink: list[Diagnostic]) -> None:
        self.source = source
        self.sink = sink

    def add(
        self,
        severity: Severity,
        path: PathKey,
        message: str,
        hint: str | None = None,
        *,
        code: str = "invalid",
        key: bool = False,
    ) -> None:
        self.sink.append(
            Diagnostic(severity, format_path(path), message, self.source.locate(path, key=key), hint, code)
        )

    def error(
        self, path: PathKey, message: str, hint: str | None = None, *, code: str = "invalid", key: bool = False
    ) -> None:
        self.add(Severity.ERROR, path, message, hint, code=code, key=key)

    def warning(self, path: PathKey, message: str, hint: str | None = None, *, code: str = "warning") -> None:
        self.add(Severity.WARNING, path, message, hint, code=code)


_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def schema_diagnostics(data: dict, report: Reporter) -> None:
    errors = sorted(site_validator().iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    # A value already refused as unsafe text need not be refused again for its form.
    unsafe = {d.path for d in report.sink if d.code == "unsafe-text"}
    for err in errors:
        _report_schema_error(err, report, unsafe)


def _branch_errors(err: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """The errors of the oneOf/anyOf branch `err`'s value was meant for: the branch whose own type
    and required keys it meets, with the fewest errors (a `{vault: ...}` is judged as a vault
    value, not also as a URL and a file)."""
    branches: dict[int, list[jsonschema.ValidationError]] = {}
    for sub in err.context or []:
        branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)

    def misfit(subs: list[jsonschema.ValidationError]) -> tuple[int, int]:
        shallow = [e for e in subs if not e.relative_path and e.validator in ("type", "required")]
        return (len(shallow), len(subs))

    return min(branches.values(), key=misfit) if branches else []


def _report_schema_error(err: jsonschema.ValidationError, report: Reporter, unsafe: set[str]) -> None:
    path: PathKey = tuple(err.absolute_path)
    if format_path(path) in unsafe:
        return
    inst = err.instance
    sch = err.schema if isinstance(err.schema, dict) else {}
    v = err.validator
    if v == "additionalProperties" and isinstance(inst, dict):
        known = list(sch.get("properties", {}))
        for extra in sorted(set(inst) - set(known), key=str):
            hint = did_you_mean(extra, known) or (f"known keys here: {', '.join(known)}" if known else None)
            report.error(path + (extra,), f"unknown key {extra!r}", hint, code="unknown-key", key=True)
    elif v == "required" and isinstance(inst, dict):
        extras = set(inst) - set(sch.get("properties", {}))
        for missing in err.validator_value:
            # A misspelt key is already reported with its did-you-mean; saying that the
            # key it was meant to be is missing as well only repeats it.
            if missing not in inst and not any(closest(str(x), [missing]) for x in extras):
                report.error(path, f"missing required key {missing!r}", _required_hint(missing), code="missing-key")
    elif v == "type":
        want = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        names = " or ".join(_TYPE_NAMES.get(w, w) for w in want)
        hint = (
            f"write {int(inst)}, without a decimal point"
            if "integer" in want and isinstance(inst, float) and inst.is_integer()
            else None
        )
        report.error(path, f"expected {names}, got {kind_name(inst)} {_short(inst)}", hint, code="type")
    elif v in ("enum", "const"):
        choices = err.validator_value if v == "enum" else [err.validator_value]
        # One choice written two ways (release: 13 or "13") is shown once.
        shown = ", ".join(dict.fromkeys(str(c) for c in choices))
        report.error(
            path,
            f"{_short(inst)} is not one of: {shown}",
            did_you_mean(inst, [str(c) for c in choices]) or sch.get("x-hint"),
            code="enum",
        )
    elif v == "propertyNames":
        report.error(path, f"invalid name {_short(inst)}: {err.message}", code="name")
    elif v in ("oneOf", "not") and "x-message" in sch:
        report.error(path, sch["x-message"], code="choice")
    elif v in ("oneOf", "anyOf") and _branch_errors(err):
        for sub in _branch_errors(err):
            _report_schema_error(sub, report, unsafe)
    elif v == "pattern":
        hint = "encrypt it again: ansible-vault encrypt_string --name KEY 'VALUE'" if path[-1:] == ("vault",) else None
        report.error(
            path, f"{_short(inst)} does not have the expected form ({_pattern_help(path)})", hint, code="pattern"
        )
    else:
        report.error(path, err.message, code=v)


def _short(value: object) -> str:
    # A value a diagnostic quotes may be an index URL with its token (podctl.core.redact).
    text = redact_urls(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


def _pattern_help(path: PathKey) -> str:
    last = next((p for p in reversed(path) if isinstance(p, str)), "")
    return {
        "cidr": "an IPv4 network such as 10.0.0.0/16",
        "supernet": "an IPv4 network such as 172.16.0.0/12",
        "address": "an IPv4 address such as 10.0.0.10",
        "gateway": "an IPv4 address such as 10.0.0.1",
        "hosts": "a hostlist such as dgx[001-032]",
        "nodes": "a hostlist such as dgx[001-032]",
        "name": "lower-case letters, digits and dashes, starting with a letter",
        "group": "lower-case letters, digits and underscores, starting with a letter",
        "mountpoint": "an absolute path of letters, digits and . _ + @ - such as /shared/home",
        "vault": "ansible-vault's ciphertext as `ansible-vault encrypt_string` prints it, under `!vault |`",
        "export": "an absolute path of letters, digits and . _ + @ - such as /export/home",
        "path": "an absolute path of letters, digits and . _ + @ - such as /opt/podctl-validation",
        "nccl_tests_path": "an absolute path such as /opt/nccl-tests/build",
        "ntp": "a hostname or an IP address, such as ntp1.example.com or 10.0.0.1",
        "dns": "an IP address such as 10.0.0.2 (resolv.conf takes addresses)",
        "server": "a hostname or an IP address; for Lustre optionally with its LNet network, as 10.0.0.5@o2ib",
        "prometheus_host": "the hostname of a node of this site",
        "profile": "a profile name: lower-case letters, digits and dashes",
        "options": "one mount option of letters, digits and _ . = : / + @ -, such as vers=4.2",
        "packages": "a pip requirement such as torch or numpy>=1.26, without options or URLs",
        "services": "a systemd unit name of letters, digits and @ . _ -, such as nvidia-fabricmanager",
        "index_url": "an http(s) URL without spaces",
        "model": "letters, digits, spaces and . _ ( ) + -",
        "unit": "a unit such as GB/s or TFLOP/s",
        "retention": "a duration such as 15d",
        "scrape_interval": "a duration such as 15s",
        "max_time": "UNLIMITED, minutes, or [days-]hours:minutes:seconds",
        "names": "an RDMA device name such as mlx5_0",
    }.get(last, "see `podctl schema`")


def _required_hint(key: str) -> str | None:
    return {
        "apiVersion": "add `apiVersion: podctl/v1alpha1`",
        "kind": "add `kind: Site`",
        "nodes": "list node groups: - {group: compute, hosts: 'dgx[001-032]', profile: dgx-h100, roles: [compute], address: 10.0.1.1}",
        "networks": "add `networks: {management: {cidr: 10.0.0.0/16}}`",
    }.get(key)
