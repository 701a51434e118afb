"""Site values are data: never a template, never an extra config line.

Cases come from the schema itself (tests/helpers/schema_fields.py: string_fields): every string
field of every base site below gets a value with template markers, a trailing
newline, an embedded newline and console markup. Each is refused by `podctl
check` at that field's path, or is free text (brackets are plain text). The
sim test skips the loader: every string of a rendered inventory gets markup and
a template appended, and podctl's render path (the roles in check mode against
the sim pod, as conformance runs them) must run nothing and render each value
whole on one line (the `!unsafe` tagging of podctl's writer); the same
inventory written without the tags does run it, which shows the test can fail.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from podctl.core import yamlout
from podctl.core.errors import PodctlError
from podctl.core.yamlsource import format_path
from podctl.derive.inventory import render, write_inventory
from podctl.derive.site import MULTILINE_KEYS, check_site_text, load_site
from tests.helpers.repo import DATA, REPO
from tests.helpers.schema_fields import KEY, get, instances, replace, string_fields

BASE_SITES = [
    REPO / "inventory" / "sim" / "site.yaml",
    DATA / "valid-every-field.yaml",
    DATA / "valid-custom-profile.yaml",
    DATA / "valid-index-url-vault.yaml",
    DATA / "valid-index-url-file.yaml",
]
CANARY_NAME = "podctl-canary"
MARKUP = "[/x][bold]"


def _docs() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, yaml.safe_load(p.read_text())) for p in BASE_SITES]


def _hostile(original: str, canary: str) -> dict[str, str]:
    return {
        "template": original + "{{ lookup('pipe', 'touch " + canary + "') }}",
        "statement": original + "{% if true %}x{% endif %}",
        "comment": original + "{# x #}",
        "trailing-newline": original + "\n",
        "embedded-newline": original + "\nallow 0.0.0.0/0",
        "carriage-return": original + "\rcmdallow all",
        "markup": original + MARKUP,
    }


def _cases() -> list[tuple[Path, tuple[Any, ...], bool]]:
    """(base site, concrete path, is a mapping key) for every string field found in the base sites."""
    out = []
    for path, doc in _docs():
        for field in sorted(set(string_fields())):
            for at in instances(doc, field):
                out.append((path, at, field[-1] == KEY))
    return out


CASES = _cases()


def test_every_string_field_of_the_schema_is_exercised() -> None:
    """A string field added to the schema needs a value in one of the base sites to be tested here."""
    docs = [doc for _, doc in _docs()]
    missing = [
        format_path(f)
        for f in sorted(set(string_fields()))
        if not any(any(True for _ in instances(doc, f)) for doc in docs)
    ]
    assert not missing, f"give these fields a value in {DATA / 'valid-every-field.yaml'}: {missing}"
    assert len(CASES) > 80


@pytest.mark.parametrize(("site", "at", "is_key"), CASES, ids=[f"{p.stem}:{format_path(a)}" for p, a, _ in CASES])
def test_hostile_text_is_refused_at_its_path_or_kept_as_text(
    site: Path, at: tuple[Any, ...], is_key: bool, tmp_path: Path
) -> None:
    doc = yaml.safe_load(site.read_text())
    original = str(at[-1]) if is_key else get(doc, at)
    canary = tmp_path / CANARY_NAME
    for kind, value in _hostile(original, str(canary)).items():
        mutated = copy.deepcopy(doc)
        replace(mutated, at, value, key=is_key)
        # Read as if it sat beside its base: its relative paths (the TLS files) resolve as the base's do.
        result = check_site_text(yaml.safe_dump(mutated, sort_keys=False), str(site.parent / "hostile.yaml"))
        where = format_path(at[:-1] + (value,)) if is_key else format_path(at)
        if kind == "markup":
            # Brackets are plain text (a hostlist has them): refused or not, never a crash.
            continue
        # ansible-vault's ciphertext spans lines too, but the schema holds each line to its form.
        if at[-1] in MULTILINE_KEYS - {"vault"} and kind in ("trailing-newline", "embedded-newline"):
            # Free text podctl never writes into a config line may span lines (the render test
            # below shows it reaches no config file).
            assert not result.errors, [d.render() for d in result.errors]
            continue
        assert result.errors, f"{kind} value {value!r} at {where} passed `podctl check`"
        at_field = [d for d in result.errors if d.path == where]
        assert at_field, f"{kind} at {where}: errors name other paths: {[d.render() for d in result.errors]}"
        if at[0] not in ("apiVersion",):
            assert any(d.code in ("unsafe-text", "pattern", "enum") and d.hint for d in at_field) or any(
                d.code == "unsafe-text" for d in at_field
            ), [d.render() for d in at_field]
    assert not canary.exists()


def _snapshot(root: Path, skip: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if skip not in p.parents and p != skip}


def _poison(data: Any, suffix: str, hosts: frozenset[str], key: str = "") -> Any:
    """Every string leaf with `suffix` appended, but connection variables (ssh needs them), the
    node names and the node's OS (podctl_os): the names are the inventory's host names (hosts.yml,
    left as written), and the roles' preflight rightly stops a node that is not in the host list
    it is given, as the platform role stops one that runs another OS than the one named."""
    if key == "podctl_os":
        return data
    if isinstance(data, dict):
        return {k: _poison(v, suffix, hosts, k) for k, v in data.items()}
    if isinstance(data, list):
        return [_poison(v, suffix, hosts, key) for v in data]
    if isinstance(data, str) and not key.startswith("ansible_") and data not in hosts:
        return data + suffix
    return data


def _rendered(workdir: Path) -> list[str]:
    """The file contents Ansible rendered in the check-mode run: each diff's `after`."""
    out = []
    for path in (workdir / "drift" / "artifacts" / "drift" / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        result = (event.get("event_data") or {}).get("res") or {}
        diffs = result.get("diff") or []
        for diff in diffs if isinstance(diffs, list) else [diffs]:
            if isinstance(diff, dict) and isinstance(diff.get("after"), str):
                out.append(diff["after"])
    return out


@pytest.mark.sim
@pytest.mark.parametrize(
    "tagged",
    # The control proves the test can fail; it costs a check-mode run of every role, so CI's tier
    # leaves it to make test-long.
    [True, pytest.param(False, marks=pytest.mark.long)],
    ids=["podctl-writer", "plain-yaml-control"],
)
def test_hostile_inventory_values_render_as_text(sim_pod: Any, tmp_path: Path, tagged: bool) -> None:
    """podctl's render path (the roles in check mode, as conformance runs them) over an inventory whose
    every value ends in console markup and a template: nothing runs, each value is on one line as written.
    The same inventory written as plain YAML (no !unsafe) does run the template: the test can fail."""
    from podctl.core import state
    from podctl.core.assets import roles_dir
    from podctl.core.state import private_key_for
    from podctl.runtime.ansible import ansible_settings
    from podctl.validate.conformance.drift import check_drift

    canary = tmp_path / CANARY_NAME
    suffix = MARKUP + "{{ lookup('pipe', 'touch " + str(canary) + "') }}"
    site = load_site(sim_pod.site)
    work = tmp_path / "work"
    inventory = work / "inventory"
    write_inventory(site, inventory, sim=True)
    hosts = frozenset(n.hostname for n in site.nodes)
    for rel in render(site, sim=True):
        if rel != "hosts.yml":
            path = inventory / rel
            data = _poison(yamlout.load(path.read_text()), suffix, hosts)
            path.write_text(yamlout.dump(data) if tagged else yaml.safe_dump(data))
    before = _snapshot(tmp_path, work)
    settings = ansible_settings(
        hosts=len(site.nodes),
        fast=True,
        fact_cache_dir=work / "facts",
        roles_path=roles_dir(),
        private_key=private_key_for(site, None, "sim up"),
        known_hosts=state.pod_known_hosts(site),
    )
    try:
        check_drift(inventory, work, settings, [n.hostname for n in site.nodes], lambda _m: None)
    except PodctlError:
        pass  # a poisoned run may stop early; what matters is what it ran and rendered
    if not tagged:
        assert canary.exists(), "the control (inventory without !unsafe) did not run the template"
        return
    assert not canary.exists(), "a template in an inventory value ran"
    assert _snapshot(tmp_path, work) == before, "rendering wrote outside its work folder"
    rendered = _rendered(work)
    lines = [line for text in rendered for line in text.splitlines() if MARKUP in line]
    assert any(line.startswith("server ") and line.endswith(suffix + " iburst") for line in lines), lines[:20]
    for line in lines:
        assert line.count(MARKUP) == line.count(suffix), f"a value was cut: {line!r}"
