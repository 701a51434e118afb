"""Credentials in URLs (`https://user:token@index.example/simple`), kept out of what podctl writes.

A site may give a package index with a token in it. The node that installs
from it needs the token; nothing podctl leaves behind does: run artifacts,
reports, plan output. The scan is linear in the text (no backtracking
regular expression), so a hostile artifact cannot make it crawl.
"""

from __future__ import annotations

import os
from pathlib import Path

MASK = "***"
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
# Where userinfo ends without an '@': a URL's authority never holds these.
_AUTHORITY_END = frozenset("/?#\"'<> \t\r\n\\")
MAX_USERINFO = 512


def redact_urls(text: str) -> str:
    """`text` with the password of every `scheme://user:password@host` replaced by ***."""
    out: list[str] = []
    start = 0
    pos = text.find("://")
    while pos != -1:
        scheme_start = pos
        while scheme_start > 0 and pos - scheme_start < 32 and text[scheme_start - 1] in _SCHEME_CHARS:
            scheme_start -= 1
        begin = pos + 3
        colon = at = -1
        for i in range(begin, min(len(text), begin + MAX_USERINFO)):
            char = text[i]
            if char == "@":
                at = i
                break
            if char in _AUTHORITY_END:
                break
            if char == ":" and colon == -1:
                colon = i
        if scheme_start < pos and at != -1 and colon != -1:
            out.append(text[start : colon + 1])
            out.append(MASK)
            start = at
        pos = text.find("://", begin)
    out.append(text[start:])
    return "".join(out)


def has_credentials(url: str | None) -> bool:
    return bool(url) and redact_urls(url) != url  # type: ignore[arg-type]


def redact_tree(folder: Path) -> int:
    """Redact every text file under `folder` in place; returns how many changed."""
    from .fsio import atomic_write

    changed = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            if path.is_symlink():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            clean = redact_urls(text)
            if clean != text:
                atomic_write(path, clean, mode=path.stat().st_mode & 0o7777)
                changed += 1
    return changed
