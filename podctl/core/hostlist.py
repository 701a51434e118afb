"""Slurm-style host lists (`dgx[001-032,040],head01`), expanded within a bound.

ClusterShell's NodeSet expands a range into one string per host before it can
say how many there are: `node[1-100000000]` would take minutes and gigabytes.
`count` reads the brackets' arithmetic alone, so that `expand` refuses a list
larger than a pod can be before anything is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ClusterShell.NodeSet import NodeSet, NodeSetException

# The largest DGX SuperPOD-style pods have a few thousand nodes; a host list
# ten times larger than the largest planned pod is a typo, not a site.
MAX_HOSTS = 16_384


# RFC 1123 section 2.1: a host name label is letters, digits and hyphens, neither starting nor
# ending with a hyphen (a leading digit is allowed), at most 63 characters.
HOSTNAME_MAX = 63
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def is_hostname(name: str) -> bool:
    """True when `name` is one RFC 1123 label (what podctl accepts as a host's name)."""
    return _LABEL.fullmatch(name) is not None


class HostlistError(ValueError):
    """A host list that is malformed or names too many hosts; the message says which."""


def _range_size(text: str) -> int:
    """Hosts in one bracket element: `7`, `01-32` or `0-30/2`."""
    body, _, step_text = text.partition("/")
    low, dash, high = body.partition("-")
    if not low.isdigit() or (dash and not high.isdigit()) or (step_text and not step_text.isdigit()):
        raise HostlistError(f"bad range {text!r}")
    if not dash:
        return 1
    first, last, step = int(low), int(high), int(step_text or 1)
    if last < first or step < 1:
        raise HostlistError(f"bad range {text!r}: the end is before the start")
    return (last - first) // step + 1


def count(text: str) -> int:
    """How many hosts `text` names (an upper bound when items repeat), without expanding it."""
    total, item, depth, group, group_sizes = 0, 1, 0, "", 0
    for char in text + ",":
        if char == "[":
            if depth:
                raise HostlistError("nested '['")
            depth, group, group_sizes = 1, "", 0
        elif char == "]":
            if not depth:
                raise HostlistError("']' without '['")
            group_sizes += _range_size(group)
            item *= group_sizes
            depth = 0
        elif depth and char == ",":
            group_sizes += _range_size(group)
            group = ""
        elif depth:
            group += char
        elif char == ",":
            total += item
            item = 1
        if total > MAX_HOSTS or item > MAX_HOSTS:
            return max(total, item)
    if depth:
        raise HostlistError("'[' without ']'")
    return total


def expand(text: str, limit: int = MAX_HOSTS) -> tuple[str, ...]:
    """The hosts of `text`, in order; HostlistError if malformed or over `limit`."""
    n = count(text)
    if n > limit:
        raise HostlistError(f"names {n:,} or more hosts, more than the {limit:,} podctl accepts")
    try:
        return tuple(NodeSet(text))
    except (NodeSetException, ValueError, TypeError, IndexError) as exc:
        raise HostlistError(str(exc)) from None


def expand_in_order(text: str, limit: int = MAX_HOSTS) -> tuple[str, ...]:
    """The hosts of `text` in the order written (`head02,head01` stays so; each bracketed range
    in its own order), each once; HostlistError as expand. expand sorts them."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    expand(text, limit)  # the whole first: malformed or too many is refused as expand refuses it
    hosts: dict[str, None] = {}
    for part in parts:
        if part.strip():
            hosts.update(dict.fromkeys(expand(part, limit)))
    return tuple(hosts)


def fold(hosts: Iterable[str]) -> str:
    """The shortest host list for `hosts`: node01,node02,node03 -> node[01-03]."""
    return str(NodeSet.fromlist(list(hosts)))
