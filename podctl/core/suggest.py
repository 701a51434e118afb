""" "Did you mean ...?" for names a user mistyped: keys, profiles, hosts, stages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.6  # difflib's default: close enough that the suggestion is usually right


def closest(word: object, candidates: Iterable[str]) -> str | None:
    """The candidate closest to `word`, if any is close enough."""
    if not isinstance(word, str):
        return None
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=CUTOFF)
    return match[0] if match else None


def did_you_mean(word: object, candidates: Iterable[str]) -> str | None:
    match = closest(word, candidates)
    return f"did you mean {match!r}?" if match else None
