"""One line of nccl-tests output: its launcher prefix, a table header, a result row.

The two table layouts, `N/A`, roots and redops per collective, the
per-iteration and timestamp columns: validation.nccl_log says what is
read; this module reads one line of it. Every regular expression is anchored
and has no nested repetition.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

# The tests nccl-tests builds (src/*.cu), as their binaries name them without `_perf`.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "broadcast",
    "reduce",
    "reduce_scatter",
    "alltoall",
    "alltoallv",
    "sendrecv",
    "scatter",
    "gather",
    "hypercube",
)
QUOTE_CHARS = 200
MAX_NUMBER_CHARS = 40
TAG_OUTPUT = re.compile(r"\[[0-9]+,([0-9]+)\]<std(?:out|err)>:")  # mpirun --tag-output
SRUN_LABEL = re.compile(r"([0-9]+):(?: |$)")  # srun --label, once leading blanks are gone
RANK_PREFIX = re.compile(r"\[([0-9]+)\] ")  # Intel MPI -prepend-rank
INT_TOKEN = re.compile(r"-?[0-9]+")
FLOAT_TOKEN = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    oop_time_us: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: int | None  # None when nothing was counted: N/A (-c 0), or the old float error column
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: int | None
    oop_error: float | None = None  # the old layout's largest deviation
    ip_error: float | None = None
    wrong_rounded: bool = False  # a count printed in %g exponent form: only 6 digits are exact
    line: int = 0


@dataclass(frozen=True)
class Columns:
    """A table header's columns: those before the two halves, one half, and a trailing timestamp."""

    lead: tuple[str, ...]
    half: tuple[str, ...]
    timestamp: bool
    line: int

    @property
    def width(self) -> int:
        return 3 + len(self.lead) + 2 * len(self.half) + (2 if self.timestamp else 0)


class RowError(ValueError):
    pass


def quote(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "..."


def is_int(token: str) -> bool:
    return len(token) <= MAX_NUMBER_CHARS and INT_TOKEN.fullmatch(token) is not None


def is_number(token: str) -> bool:
    return is_int(token) or (len(token) <= MAX_NUMBER_CHARS and FLOAT_TOKEN.fullmatch(token) is not None)


def read_int(token: str, what: str) -> int:
    if not is_int(token):
        raise RowError(f"{what} {quote(token)!r} is not an integer")
    return int(token)


def read_float(token: str, what: str) -> float:
    # float() alone would take 'nan', 'inf', '1_0' and other scripts' digits.
    if len(token) > MAX_NUMBER_CHARS or FLOAT_TOKEN.fullmatch(token) is None:
        raise RowError(f"{what} {quote(token)!r} is not a number")
    value = float(token)
    if not math.isfinite(value):
        raise RowError(f"{what} {quote(token)!r} is out of range")
    return value


def check_value(token: str, kind: str | None, what: str) -> tuple[int | None, float | None, bool]:
    """(wrong count, old-layout error, count rounded) of a #wrong or error cell; kind None: tell by its form."""
    if token.upper() == "N/A":
        return None, None, False
    if kind is None:
        # Without a header: the old layout prints %5.0le ('2e-07', '0e+00'), never a plain integer;
        # %g prints counts under a million as integers and larger ones with a decimal point.
        mantissa = token.lower().partition("e")[0]
        kind = "error" if "e" in token.lower() and "." not in mantissa else "#wrong"
    if kind == "error":
        return None, read_float(token, what), False
    if is_int(token) and not token.startswith("-"):
        return int(token), None, False
    value = read_float(token, what)
    if value != int(value):
        raise RowError(f"{what} {token!r} is not a count")
    return int(value), None, "e" in token.lower()


def read_columns(tokens: list[str], line_no: int) -> Columns:
    """The columns a header line names; RowError if it is not a header this reader knows."""
    i = 3
    while i < len(tokens) and tokens[i] in ("redop", "root"):
        i += 1
    lead = tuple(tokens[3:i])
    if lead not in ((), ("redop",), ("root",), ("redop", "root")):
        raise RowError("redop and root stand once each, in that order")
    times = [j for j in range(i, len(tokens)) if tokens[j] in ("time", "cputime")]
    if len(times) != 2 or times[0] != i:
        raise RowError("a table header needs two halves that each start with 'time'")
    half = tuple(tokens[times[0] : times[1]])
    rest = tokens[times[1] + len(half) :]
    if (
        tuple(tokens[times[1] : times[1] + len(half)]) != half
        or half[1:3] != ("algbw", "busbw")
        or len(half) < 4
        or half[3] not in ("#wrong", "error")
        or rest not in ([], ["timestamp"])
    ):
        raise RowError("the columns are not 'time algbw busbw #wrong|error' twice")
    return Columns(lead, half, rest == ["timestamp"], line_no)


class Half(NamedTuple):
    """One half (out-of-place or in-place) of a result row."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    error: float | None
    rounded: bool


def read_half(tokens: list[str], names: tuple[str, ...], where: str) -> Half:
    """`names` are the header's columns for this half; () where there is no header."""
    check = names[3] if names else None
    wrong, error, rounded = check_value(tokens[3], check, f"{where} {check or 'check'}")
    for name, token in zip(names[4:], tokens[4:]):
        read_float(token, f"{where} {name}")  # per-iteration figures: read to be sure, not kept
    return Half(
        read_float(tokens[0], f"{where} time"),
        read_float(tokens[1], f"{where} algbw"),
        read_float(tokens[2], f"{where} busbw"),
        wrong,
        error,
        rounded,
    )


def read_row(tokens: list[str], columns: Columns | None, line_no: int) -> Row:
    """A result row; RowError says why it cannot be read."""
    if columns is not None:
        lead_names: list[str] = list(columns.lead)
        n_lead = len(lead_names)
        half_names = columns.half
        if len(tokens) == columns.width:
            lead = tokens[3 : 3 + n_lead]
        elif len(tokens) == columns.width - 1 and "redop" in lead_names:
            # Old alltoall prints an empty redop under a 'redop' header.
            n_lead -= 1
            lead = tokens[3 : 3 + n_lead]
            lead_names.remove("redop")
        else:
            raise RowError(f"{len(tokens)} columns where the header at line {columns.line} names {columns.width}")
    else:
        half_names = ()
        n_lead = len(tokens) - 11
        if n_lead not in (0, 1, 2):
            raise RowError(f"{len(tokens)} columns and no table header to say what they are (11 to 13 expected)")
        lead = tokens[3 : 3 + n_lead]
        # No header: a lone column is a root if it is a number (old broadcast) and a redop if not.
        lead_names = ["redop", "root"] if n_lead == 2 else (["root"] if n_lead == 1 and is_int(lead[0]) else ["redop"])
        lead_names = lead_names[:n_lead]
    size = read_int(tokens[0], "size")
    count = read_int(tokens[1], "count")
    if size < 0 or count < 0:
        raise RowError("size and count cannot be negative")
    dtype = tokens[2]
    if is_number(dtype):
        raise RowError(f"type {dtype!r} is a number")
    named = dict(zip(lead_names, lead))
    redop = named.get("redop")
    if redop is not None and is_number(redop):
        raise RowError(f"redop {redop!r} is a number")
    root = read_int(named["root"], "root") if "root" in named else None
    start = 3 + n_lead
    width = len(half_names) or 4
    oop = read_half(tokens[start : start + width], half_names, "out-of-place")
    ip = read_half(tokens[start + width : start + 2 * width], half_names, "in-place")
    return Row(
        size_bytes=size,
        count=count,
        dtype=dtype,
        redop=redop,
        root=root,
        oop_time_us=oop.time_us,
        oop_algbw=oop.algbw,
        oop_busbw=oop.busbw,
        oop_wrong=oop.wrong,
        ip_time_us=ip.time_us,
        ip_algbw=ip.algbw,
        ip_busbw=ip.busbw,
        ip_wrong=ip.wrong,
        oop_error=oop.error,
        ip_error=ip.error,
        wrong_rounded=oop.rounded or ip.rounded,
        line=line_no,
    )


def strip_prefix(line: str) -> tuple[str, str, str]:
    """(stream key, prefix kind, text) of one line, launcher prefix and indentation removed."""
    text = line.lstrip()
    indent = len(line) - len(text)
    for pattern, kind in ((TAG_OUTPUT, "mpirun-tag-output"), (SRUN_LABEL, "srun-label"), (RANK_PREFIX, "mpi-rank")):
        match = pattern.match(text)
        if match:
            return f"rank {match.group(1)}", kind, text[match.end() :].strip()
    return "", f"indent-{indent}" if indent and text.startswith("#") else "none", text.rstrip()


def collective_of_program(program: str) -> str | None:
    """all_reduce for '/opt/nccl-tests/build/all_reduce_perf'; None for a name that is no *_perf binary."""
    name = program.rsplit("/", 1)[-1]
    stem = name[: -len("_perf")] if name.endswith("_perf") else ""
    return stem if stem and stem.replace("_", "").isalnum() and stem.isascii() else None


def command_collective(tokens: list[str]) -> str | None:
    """The collective a command line runs, if it names exactly one nccl-tests binary."""
    found = {c for c in map(collective_of_program, tokens) if c in COLLECTIVES}
    return found.pop() if len(found) == 1 else None
