"""Fixtures for the hostile-input tests (their CLI runner: tests/helpers/cli.py)."""

from __future__ import annotations

import pytest

from tests.helpers.cli import podctl


@pytest.fixture
def run_podctl():
    return podctl
