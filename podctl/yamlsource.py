"""YAML loading that remembers where every value came from.

PyYAML's composer gives each node a start mark; we walk the node tree once,
building plain Python data and a map from YAML path to file position, so
that every diagnostic can say `file:line:column`. Duplicate keys, which
PyYAML would silently collapse, are reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from .errors import Diagnostic, Location, Severity

try:  # libyaml's composer is several times faster on large files
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader

PathKey = tuple[object, ...]


def format_path(path: PathKey) -> str:
    """('nodes', 1, 'profile') -> 'nodes[1].profile'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass
class Source:
    """Parsed YAML data plus the position of every value and every mapping key."""

    file: str
    data: object
    value_marks: dict[PathKey, Location] = field(default_factory=dict)
    key_marks: dict[PathKey, Location] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def locate(self, path: PathKey, *, key: bool = False) -> Location | None:
        """Position of the value at `path` (or of its key), else of its nearest ancestor."""
        if key and path in self.key_marks:
            return self.key_marks[path]
        probe = tuple(path)
        while True:
            if probe in self.value_marks:
                return self.value_marks[probe]
            if not probe:
                return None
            probe = probe[:-1]


def _location(file: str, mark: yaml.Mark) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


def load_source(text: str, file: str) -> Source:
    """Parse `text`; syntax problems become diagnostics, never exceptions."""
    source = Source(file=file, data=None)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _location(file, mark) if mark else Location(file, 1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        source.diagnostics.append(
            Diagnostic(Severity.ERROR, "", f"not valid YAML: {problem}", where,
                       "fix the YAML syntax at this position", code="yaml-syntax")
        )
        return source
    except yaml.YAMLError as exc:  # reader errors: control characters, bad encodings
        source.diagnostics.append(
            Diagnostic(Severity.ERROR, "", f"not valid YAML: {exc}", Location(file, 1, 1),
                       "a site file is UTF-8 text", code="yaml-syntax")
        )
        return source
    finally:
        loader.dispose()
    if root is None:
        source.diagnostics.append(
            Diagnostic(Severity.ERROR, "", "the file is empty", Location(file, 1, 1),
                       "start from `podctl init -o site.yaml` or inventory/sim/site.yaml",
                       code="empty")
        )
        return source
    constructor = yaml.SafeLoader("")  # only used for its scalar constructors
    source.data = _convert(root, (), source, constructor)
    return source


def _convert(node: yaml.Node, path: PathKey, source: Source, constructor: yaml.SafeLoader) -> object:
    source.value_marks[path] = _location(source.file, node.start_mark)
    if isinstance(node, yaml.MappingNode):
        try:
            constructor.flatten_mapping(node)  # resolve `<<` merge keys as YAML does
        except yaml.MarkedYAMLError as exc:
            source.diagnostics.append(
                Diagnostic(Severity.ERROR, format_path(path), f"bad merge key: {exc.problem}",
                           source.value_marks[path], code="yaml-syntax"))
            return {}
        out: dict[object, object] = {}
        for key_node, value_node in node.value:
            key = _construct_scalar(key_node, constructor)
            if not isinstance(key, str):
                # JSON Schema keys are strings; a key such as `1:` or `[a]:` is named as written.
                key = str(key) if isinstance(key, (int, float, bool)) or key is None else repr(key)
            child = path + (key,)
            key_loc = _location(source.file, key_node.start_mark)
            if key in out:
                source.diagnostics.append(
                    Diagnostic(Severity.ERROR, format_path(child),
                               f"duplicate key {key!r} (first at line "
                               f"{source.key_marks[child].line})", key_loc,
                               "remove one of the two; YAML keeps only the last", code="duplicate-key"))
            source.key_marks[child] = key_loc
            out[key] = _convert(value_node, child, source, constructor)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, path + (i,), source, constructor) for i, item in enumerate(node.value)]
    return _construct_scalar(node, constructor)


def _construct_scalar(node: yaml.Node, constructor: yaml.SafeLoader) -> object:
    if not isinstance(node, yaml.ScalarNode):
        return f"<{node.id}>"  # a mapping or list used as a key
    try:
        return constructor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError):
        return node.value  # e.g. an invalid !!timestamp: keep the text, the schema will object
