"""The conformance suite: does the deployed pod match what podctl would deploy now?

`run.run_conformance` renders the configuration files the roles write
(playbooks/render-configs.yml), runs the testinfra tests in
test_conformance.py against every host of the inventory, and turns their
JUnit XML into one CheckRun per host.
"""

from .common import CHECKS, Check

__all__ = ["CHECKS", "Check"]
