"""Fixtures for the node-side validation tests (their helpers: tests/helpers/nodechecks.py).

`validation/` ships to nodes as a plain folder and is not part of the
installed podctl package, so the repository root goes on sys.path here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import nodechecks
from tests.helpers.repo import REPO, VALIDATION_DATA

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture(autouse=True)
def _builtin_sys_intern(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node-side tests run torch, as a node does: in a process without Ansible. In the unit
    part they share pytest's process with tests that import Ansible, and ansible-core (2.19)
    replaces `sys.intern` with a callable object on import; torch's dynamo then refuses to import
    ("substitute_in_graph expects a function"). The builtin is put back for these tests."""
    builtin = getattr(type(sys.intern), "unpatched_implementation", None)
    if builtin is not None:
        monkeypatch.setattr(sys, "intern", builtin)


@pytest.fixture
def data_dir() -> Path:
    return VALIDATION_DATA


@pytest.fixture
def run_module():
    """`run_module("health", "--expect-cores", "2")` -> (exit code, envelope, stderr)."""
    return nodechecks.run_module
