from __future__ import annotations

from podctl.core.errors import PodctlError


class DeployError(PodctlError):
    """A deploy request podctl cannot carry out (bad --only/--limit, missing playbook, Ansible not starting)."""
