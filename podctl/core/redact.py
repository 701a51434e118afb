"""Credentials in URLs (`https://user:token@index.example/simple`, `https://token@index.example/simple`,
`https://h/simple?token=...`), kept out of what podctl writes.

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
# Where a URL ends in text around it (a log line, JSON, a shell command).
_URL_END = frozenset("\"'<>` \t\r\n\\")
_QUERY_SEPARATORS = frozenset("&;")
MAX_USERINFO = 512


def redact_urls(text: str) -> str:
    """`text` with the secrets of every `scheme://...` URL in it replaced by ***: the password of its
    userinfo (`user:***@host`), a userinfo without a password as a whole (`***@host`), and every
    value of its query string (`?token=***&sig=***`; a parameter without `=` as a whole). Index and
    mirror URLs carry tokens in either place (a package index's `?token=`, a signed object store's
    `X-Amz-Signature=`)."""
    out: list[str] = []
    start = 0
    pos = text.find("://")
    while pos != -1:
        scheme_start = pos
        while scheme_start > 0 and pos - scheme_start < 32 and text[scheme_start - 1] in _SCHEME_CHARS:
            scheme_start -= 1
        begin = pos + 3
        url_end = begin
        while url_end < len(text) and text[url_end] not in _URL_END:
            url_end += 1
        if scheme_start < pos:
            colon = at = -1
            for i in range(begin, min(url_end, begin + MAX_USERINFO)):
                char = text[i]
                if char == "@":
                    at = i
                    break
                if char in _AUTHORITY_END:
                    break
                if char == ":" and colon == -1:
                    colon = i
            if at > begin:
                # `user:token@` keeps its user; a bare `token@` cannot be told from a user name, so all
                # of it goes.
                out.append(text[start : colon + 1 if colon != -1 else begin])
                out.append(MASK)
                start = at
            query = text.find("?", max(begin, start), url_end)
            if query != -1:
                fragment = text.find("#", query, url_end)
                out.append(text[start : query + 1])
                out.append(_mask_query(text[query + 1 : fragment if fragment != -1 else url_end]))
                start = fragment if fragment != -1 else url_end
        pos = text.find("://", max(url_end, begin))
    out.append(text[start:])
    return "".join(out)


def _mask_query(query: str) -> str:
    parts: list[str] = []
    item = 0
    for i in range(len(query) + 1):
        if i == len(query) or query[i] in _QUERY_SEPARATORS:
            name, eq, value = query[item:i].partition("=")
            parts.append(f"{name}={MASK}" if eq and value else (query[item:i] if eq or not name else MASK))
            if i < len(query):
                parts.append(query[i])
            item = i + 1
    return "".join(parts)


def has_credentials(url: str | None) -> bool:
    return bool(url) and redact_urls(url) != url  # type: ignore[arg-type]


def redact_tree(folder: Path) -> int:
    """Redact every text file under `folder` in place; returns how many changed."""
    from podctl.core.fsio import atomic_write

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
