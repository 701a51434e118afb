"""The sim's own error type: the main CLI prints it as `error: <message>`."""

from __future__ import annotations

from podctl.core.errors import PodctlError


class SimError(PodctlError):
    """Something about the simulated pod the user can fix (a missing tool, a
    name clash, a node that never came up); the message says what to do."""
