"""Sizes as people write them ('1GiB', '8G', '512M') and back."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KIB": 1024,
    "M": 1024**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GIB": 1024**3,
    "T": 1024**4,
    "TIB": 1024**4,
}


def parse_size(text: str) -> int:
    """'1GiB', '1G', '1073741824' -> 1073741824 (binary units, as nccl-tests' -b/-e)."""
    # Stripped first: two optional runs of spaces side by side would backtrack in quadratic time.
    match = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", text.strip())
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (write e.g. 1048576, 1M, 1MiB, 8G)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def human_size(nbytes: int) -> str:
    """1073741824 -> '1GiB'; sizes that are not whole units keep their bytes: '1000B'."""
    for suffix, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{suffix}"
    return f"{nbytes}B"


def parse_threshold(text: str) -> tuple[str, float]:
    """'1GiB=314.3' -> ('1GiB', 314.3); the size part may carry a 'collective:' prefix."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), float(value)
