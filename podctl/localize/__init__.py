"""Test scheduling over the fabric, fault localization, and a fabric simulator to test them."""

from .localize import Diagnosis, Localizer, PortEvidence, Result, Tester, link_ends, localize
from .routing import Router
from .schedule import Round, Test, plan_rounds

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
