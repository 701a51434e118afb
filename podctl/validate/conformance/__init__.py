"""The conformance suite: does the deployed pod match what podctl would deploy now?

`run.run_conformance` runs the roles' configuration steps in check mode with
diffs against every host (drift.py: the roles are the one statement of what a
node's files hold), runs the testinfra tests in test_conformance.py against
every host of the inventory, and turns both into one CheckRun per host.
"""

from podctl.validate.conformance.common import CHECKS, Check

__all__ = ["CHECKS", "Check"]
