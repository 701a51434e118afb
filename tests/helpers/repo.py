"""Where things are in the checkout, and what a test does when it cannot run on this machine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
# The test data of tests/ (site files, tool output) and of the node-side validation tests.
DATA = REPO / "tests" / "data"
VALIDATION_DATA = REPO / "tests" / "validation" / "data"
SIM_SITE = REPO / "inventory" / "sim" / "site.yaml"


def cannot_run_here(reason: str) -> NoReturn:
    """A test that cannot run on this machine (not root, a tool missing): skipped when pytest is
    run by hand, a failure under the Makefile's tiers (PODCTL_TEST_ALL), which must not pass by
    running nothing."""
    if os.environ.get("PODCTL_TEST_ALL"):
        pytest.fail(f"{reason} (the Makefile's test tiers set PODCTL_TEST_ALL: every test runs)", pytrace=False)
    pytest.skip(reason)
