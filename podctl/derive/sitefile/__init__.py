"""Reading a site file: YAML -> every string checked -> schema -> typed model -> semantic checks.

The strict loader of the site format, and nothing else: it knows the model, not
what podctl derives from it. `podctl.derive.site` adds the derived checks (a fabric
that cannot be built) and is what commands use.

`read_site_text` never raises on bad input: the property tests feed it mutated
and random files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from podctl.core.errors import Diagnostic, Location, PodctlError, Severity
from podctl.core.model import KNOWN_API_VERSIONS, Site
from podctl.core.yamlsource import PathKey, Source, format_path, load_source
from podctl.derive.sitefile.build import Builder
from podctl.derive.sitefile.diagnostics import (
    MULTILINE_KEYS,
    TEMPLATE_MARKERS,
    Reporter,
    data_diagnostics,
    kind_name,
    schema,
    schema_diagnostics,
    text_problem,
)
from podctl.derive.sitefile.profiles import builtin_profiles, profile_problems


@dataclass
class CheckResult:
    file: str
    site: Site | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # The parsed text, to place diagnostics found later (podctl.derive.site's fabric plans) in the file.
    source: Source | None = None

    def error(self, path: PathKey, message: str, *, code: str) -> None:
        """Add an error at `path`, placed in the file when the text was parsed; the site is then unusable."""
        location = self.source.locate(path) if self.source is not None else None
        self.diagnostics.append(Diagnostic(Severity.ERROR, format_path(path), message, location, code=code))
        self.site = None

    def warning(self, path: PathKey, message: str, hint: str, *, code: str) -> None:
        """Add a warning at `path`, placed in the file when the text was parsed."""
        location = self.source.locate(path) if self.source is not None else None
        self.diagnostics.append(Diagnostic(Severity.WARNING, format_path(path), message, location, hint, code=code))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.WARNING]


def read_site_file(path: str | Path) -> CheckResult:
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise PodctlError(f"{file}: no such file; create one with `podctl init -o {file}`") from None
    except IsADirectoryError:
        raise PodctlError(f"{file}: is a directory, not a site file") from None
    except OSError as exc:
        raise PodctlError(f"{file}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return CheckResult(
            file,
            None,
            [
                Diagnostic(
                    Severity.ERROR,
                    "",
                    f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                    Location(file, line, 1),
                    "a site file is UTF-8 YAML text",
                    code="encoding",
                )
            ],
        )
    return read_site_text(text, file)


def read_site_text(text: str, file: str = "<site>") -> CheckResult:
    source = load_source(text, file)
    result = CheckResult(file, None, list(source.diagnostics), source)
    if result.errors:
        return result
    report = Reporter(source, result.diagnostics)
    data = source.data
    if not isinstance(data, dict):
        report.error(
            (),
            f"the top level must be a mapping of keys (apiVersion, kind, ...), not {kind_name(data)}",
            "start from `podctl init -o site.yaml` or inventory/sim/site.yaml",
            code="type",
        )
        return result
    version = data.get("apiVersion")
    if version not in KNOWN_API_VERSIONS:
        known = ", ".join(KNOWN_API_VERSIONS)
        what = "missing apiVersion" if version is None else f"unknown apiVersion {version!r}"
        report.error(
            ("apiVersion",),
            f"{what}; known versions: {known}",
            f"set `apiVersion: {KNOWN_API_VERSIONS[-1]}`",
            code="api-version",
        )
        return result
    data_diagnostics(data, report)
    schema_diagnostics(data, report)
    if result.errors:
        return result
    builder = Builder(data, report)
    site = builder.build(file)
    result.site = site if not result.errors else None
    return result


__all__ = [
    "MULTILINE_KEYS",
    "TEMPLATE_MARKERS",
    "CheckResult",
    "builtin_profiles",
    "profile_problems",
    "read_site_file",
    "read_site_text",
    "schema",
    "text_problem",
]
