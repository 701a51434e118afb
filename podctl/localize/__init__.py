"""Test scheduling over the fabric, fault localization, and a fabric simulator to test them."""

from podctl.localize.localize import Diagnosis, Localizer, PortEvidence, Result, Tester, link_ends, localize
from podctl.localize.routing import Router
from podctl.localize.schedule import Round, Test, plan_rounds

__all__ = [
    "Diagnosis",
    "Localizer",
    "PortEvidence",
    "Result",
    "Round",
    "Router",
    "Test",
    "Tester",
    "link_ends",
    "localize",
    "plan_rounds",
]
