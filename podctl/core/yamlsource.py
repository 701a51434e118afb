"""YAML loading that remembers where every value came from.

PyYAML's composer gives each node a start mark; we walk the node tree once,
building plain Python data and a map from YAML path to file position, so
that every diagnostic can say `file:line:column`. Duplicate keys, which
PyYAML would silently collapse, are reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from podctl.core.errors import Diagnostic, Location, Severity

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
    # yaml.Marks, turned into Locations only when a diagnostic asks: most values never are.
    value_marks: dict[PathKey, yaml.Mark] = field(default_factory=dict)
    key_marks: dict[PathKey, yaml.Mark] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def locate(self, path: PathKey, *, key: bool = False) -> Location | None:
        """Position of the value at `path` (or of its key), else of its nearest ancestor."""
        if key and path in self.key_marks:
            return _location(self.file, self.key_marks[path])
        probe = tuple(path)
        while True:
            if probe in self.value_marks:
                return _location(self.file, self.value_marks[probe])
            if not probe:
                return None
            probe = probe[:-1]


def _location(file: str, mark: yaml.Mark) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


# A real site, even of a thousand nodes written out host by host, is a few
# thousand values. Aliases repeat what they point at, so a few hundred bytes of
# nested ones can stand for billions of values: expansion stops well before.
MAX_VALUES = 50_000
MAX_DEPTH = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"
# ansible-vault's tag: `key: !vault |` and the ciphertext `ansible-vault encrypt_string` prints. Read
# as {"vault": ciphertext}; the schema says where a secret may be one (validation.tools.index_url).
VAULT_TAG = "!vault"


class _Refused(Exception):
    """The document cannot be expanded within the limits; carries the diagnostic."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


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
            Diagnostic(
                Severity.ERROR,
                "",
                f"not valid YAML: {problem}",
                where,
                "fix the YAML syntax at this position",
                code="yaml-syntax",
            )
        )
        return source
    except yaml.YAMLError as exc:  # reader errors: control characters, bad encodings
        source.diagnostics.append(
            Diagnostic(
                Severity.ERROR,
                "",
                f"not valid YAML: {exc}",
                Location(file, 1, 1),
                "a site file is UTF-8 text",
                code="yaml-syntax",
            )
        )
        return source
    finally:
        loader.dispose()
    if root is None:
        source.diagnostics.append(
            Diagnostic(
                Severity.ERROR,
                "",
                "the file is empty",
                Location(file, 1, 1),
                "start from `podctl init -o site.yaml` or inventory/sim/site.yaml",
                code="empty",
            )
        )
        return source
    converter = _Converter(source)
    try:
        source.data = converter.convert(root, ())
    except _Refused as refused:
        source.diagnostics.append(refused.diagnostic)
        source.data = None
    return source


class _Converter:
    """Node graph -> plain data, within MAX_VALUES values and MAX_DEPTH levels.

    PyYAML's composer shares the node of an anchor with every alias of it, and
    lets an alias point into its own anchor: the walk keeps the nodes on its
    current path to refuse such a cycle, and counts every value it makes.
    """

    def __init__(self, source: Source) -> None:
        self.source = source
        self.constructor = yaml.SafeLoader("")  # only used for its scalar constructors
        self.values = 0
        self.open: set[int] = set()  # ids of the collection nodes on the current path

    def refuse(self, node: yaml.Node, path: PathKey, message: str, hint: str, code: str) -> _Refused:
        return _Refused(
            Diagnostic(
                Severity.ERROR,
                format_path(path),
                message,
                _location(self.source.file, node.start_mark),
                hint,
                code=code,
            )
        )

    def convert(self, node: yaml.Node, path: PathKey) -> object:
        self.values += 1
        if self.values > MAX_VALUES:
            raise self.refuse(
                node,
                path,
                f"the document expands to more than {MAX_VALUES:,} values",
                "YAML aliases (*name) repeat what their anchor holds; a site file needs "
                "far fewer values: write it without nested aliases",
                "too-large",
            )
        if len(path) > MAX_DEPTH:
            raise self.refuse(
                node,
                path,
                f"nested more than {MAX_DEPTH} levels deep",
                "a site file is a few levels of mappings and lists",
                "too-deep",
            )
        self.source.value_marks.setdefault(path, node.start_mark)
        if isinstance(node, yaml.ScalarNode) and node.tag == VAULT_TAG:
            # Ciphertext of ansible-vault: kept as such, for the schema to place and Ansible to open.
            return {"vault": node.value.strip()}  # a literal block's final newline is YAML's, not the value's
        if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            return _construct_scalar(node, self.constructor)
        if id(node) in self.open:
            raise self.refuse(
                node,
                path,
                "recursive alias: this value contains itself",
                "an alias (*name) must not point at an anchor (&name) that encloses it",
                "recursive-alias",
            )
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.convert(item, path + (i,)) for i, item in enumerate(node.value)]
            return self.mapping(node, path)
        finally:
            self.open.discard(id(node))

    def mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[object, object]:
        out: dict[object, object] = {}
        merged: dict[object, object] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                # `<<: *base` or `<<: [*a, *b]`: keys of the mapping win over merged ones,
                # and earlier merged mappings over later ones, as YAML's merge key says.
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        raise self.refuse(
                            source,
                            path,
                            "bad merge key: `<<` takes a mapping or a list of mappings",
                            "merge an anchored mapping: `<<: *name`",
                            "yaml-syntax",
                        )
                    for k, v in self.convert(source, path).items():  # type: ignore[union-attr]
                        merged.setdefault(k, v)
                continue
            key = _construct_scalar(key_node, self.constructor)
            if not isinstance(key, str):
                # JSON Schema keys are strings; a key such as `1:` or `[a]:` is named as written.
                key = str(key) if isinstance(key, (int, float, bool)) or key is None else repr(key)
            child = path + (key,)
            if key in out:
                self.source.diagnostics.append(
                    Diagnostic(
                        Severity.ERROR,
                        format_path(child),
                        f"duplicate key {key!r} (first at line {self.source.key_marks[child].line + 1})",
                        _location(self.source.file, key_node.start_mark),
                        "remove one of the two; YAML keeps only the last",
                        code="duplicate-key",
                    )
                )
            self.source.key_marks[child] = key_node.start_mark
            out[key] = self.convert(value_node, child)
        for k, v in merged.items():
            out.setdefault(k, v)
        return out


def _construct_scalar(node: yaml.Node, constructor: yaml.SafeLoader) -> object:
    if not isinstance(node, yaml.ScalarNode):
        return f"<{node.id}>"  # a mapping or list used as a key
    try:
        return constructor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError):
        return node.value  # e.g. an invalid !!timestamp: keep the text, the schema will object
