"""A site podctl can work with: read strictly (podctl.derive.sitefile), and buildable.

    load_site(path) -> Site           every command's way in; SiteError lists every problem
    check_site_file(path) -> CheckResult
    check_site_text(text, file) -> CheckResult

On top of what the site file itself must say (podctl.derive.sitefile), a site must be
buildable: each fabric's fat tree is planned here (podctl.derive.topology, through the
facts' cache, so that later steps reuse the plan), and a fabric that cannot be
built is an error at its path, and one whose plan OpenSM's ftree refuses, while the site
asks for ftree, a warning.
"""

from __future__ import annotations

from pathlib import Path

from podctl.core.errors import Severity, SiteError
from podctl.core.model import Site
from podctl.derive.facts import cached_plan
from podctl.derive.sitefile import (
    MULTILINE_KEYS,
    TEMPLATE_MARKERS,
    CheckResult,
    builtin_profiles,
    read_site_file,
    read_site_text,
    schema,
    text_problem,
)
from podctl.derive.topology import TopologyError, routing_advice


def load_site(path: str | Path) -> Site:
    """Load and check a site file; raise SiteError listing every error."""
    result = check_site_file(path)
    if result.errors or result.site is None:
        raise SiteError(result.file, result.diagnostics)
    return result.site


def check_site_file(path: str | Path) -> CheckResult:
    return _buildable(read_site_file(path))


def check_site_text(text: str, file: str = "<site>") -> CheckResult:
    return _buildable(read_site_text(text, file))


def _buildable(result: CheckResult) -> CheckResult:
    """Each fabric planned, once the file itself is clean (warnings allowed)."""
    site = result.site
    if site is None or any(d.severity is Severity.ERROR for d in result.diagnostics) or not site.fabrics:
        return result
    for name, fabric in site.fabrics.items():
        try:
            plan = cached_plan(fabric)
        except TopologyError as exc:
            result.error(("fabrics", name), str(exc), code="topology")
            continue
        if fabric.routing_engine == "ftree":
            advice = routing_advice(plan)
            if advice.engine != "ftree":
                result.warning(
                    ("fabrics", name, "routing_engine"),
                    advice.reason,
                    f"set routing_engine: {advice.engine}, or leave it out to get what `podctl plan` calls for",
                    code="routing-engine",
                )
    return result


__all__ = [
    "MULTILINE_KEYS",
    "TEMPLATE_MARKERS",
    "CheckResult",
    "builtin_profiles",
    "check_site_file",
    "check_site_text",
    "load_site",
    "schema",
    "text_problem",
]
