"""The terminal, for text from anywhere.

What podctl prints mixes its own words with text it did not write: host
names, site values, srun's and ssh's stderr, node output. rich reads `[...]`
as markup and `:name:` as emoji, so a gloo error line such as
`[/opt/.../gloo/transport/tcp/pair.cc:598]` would be taken for a closing tag
and crash the run. Every console podctl makes reads no markup and no emoji:
style is given as data (`style=`, `styled()`), never inside the text.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text


def make_console(stderr: bool = False, width: int | None = None, soft_wrap: bool = False) -> Console:
    """A console that prints text as it is: no markup, no emoji, no highlighting."""
    return Console(stderr=stderr, width=width, markup=False, emoji=False, highlight=False, soft_wrap=soft_wrap)


def piped_width(stream: object = sys.stdout) -> int | None:
    """Piped output (logs, CI) would be cut at 80 columns: give tables room there."""
    isatty = getattr(stream, "isatty", None)
    return None if isatty is not None and isatty() else 160


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text from plain strings and (text, style) pairs: `styled(("FAIL", "red"), " node01: ", reason)`."""
    return Text.assemble(*parts)
