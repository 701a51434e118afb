"""Hostile input: over-long lines are refused fast, no expression backtracks, and damaged dumps give a parse or a
CablingError, never another exception."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podctl.derive.topology import plan_fabric
from podctl.ibfabric.check import check_cabling
from podctl.ibfabric.counters import parse_ibqueryerrors, parse_perfquery
from podctl.ibfabric.formats import MAX_LINE, CablingError, parse_iblinkinfo, parse_ibnetdiscover
from podctl.ibfabric.identity import parse_anchors
from tests.helpers.repo import REPO
from tests.helpers.sites import loaded_site

DATA = REPO / "tests" / "data" / "fabric"
PARSERS = {
    "ibnetdiscover": parse_ibnetdiscover,
    "iblinkinfo": parse_iblinkinfo,
    "perfquery": parse_perfquery,
    "ibqueryerrors": parse_ibqueryerrors,
    "anchors": parse_anchors,
}
# A line of each format, to grow hostile lines from: its parts repeated, so that every expression meets
# long runs of what it looks for.
SEEDS = {
    "ibnetdiscover": [
        'Switch\t65 "S-2c5eab0300b87b40"\t\t# "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 lid 73 lmc 0',
        '[1]\t"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) \t\t# "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR',
        '[2](2c903003421b2) "S-e41d2d030003e470"[35] # lid 3 lmc 0 "SwitchIB Mellanox Technologies" lid 268 4xFDR',
        "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )",
    ],
    "iblinkinfo": [
        "Switch: 0x0c42a103008982a4 Quantum Mellanox Technologies:",
        "      0xb8cef60300025b90     17    1[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>       3   39[  ] "
        '"Quantum Mellanox Technologies" ( Could be 53.125 Gbps)',
        '           3    5[  ] ==(                Down/ Polling)==>             [  ] "" ( )',
    ],
    "perfquery": [
        "# Port extended counters: Lid 2052 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)",
        "PortXmitDiscards:................20046",
    ],
    "ibqueryerrors": [
        'Errors for 0x2c903006e29b0 "MF0;ys23ib4:SX6036/U1"',
        "   GUID 0x2c903006e29b0 port 5: [SymbolErrorCounter == 65535] [LinkDownedCounter == 2]",
        "## Summary: 4 nodes checked, 4 bad nodes found",
    ],
    "anchors": ["dgx005 3 fe80:0000:0000:0000:e09d:7303:007a:4bd8"],
}


def hostile_lines(seed: str, size: int):
    """`seed` with a short piece of it (from each place where a delimiter or a run starts) repeated until the line
    is `size` long; each also with its end cut off or junk after it, so that a match must fail after trying all."""
    starts = sorted(
        {0, len(seed) - 1} | {i for i, c in enumerate(seed) if c in ' "()[]#:.=-x' and (i == 0 or seed[i - 1] != c)}
    )
    for start in starts:
        for length in (1, 2, 3, 4, 7):
            piece = seed[start : start + length]
            grown = seed[:start] + piece * ((size - len(seed)) // len(piece) + 1) + seed[start:]
            yield from (grown, grown[:-1], grown + "!", grown + ' "')


def timed(parse, text):
    started = time.perf_counter()
    try:
        parse(text, "hostile")
    except CablingError:
        pass
    return time.perf_counter() - started


@pytest.mark.parametrize("fmt", list(PARSERS))
def test_a_300_kb_line_is_refused_in_under_a_second_naming_file_and_line(fmt):
    parse = PARSERS[fmt]
    line = SEEDS[fmt][-1] + " " + '"[(0x' * 60_000
    started = time.perf_counter()
    with pytest.raises(
        CablingError,
        match=rf"^hostile:2: a line of {len(line)} characters; no {fmt} line is longer "
        rf"than {MAX_LINE}",
    ):
        parse(SEEDS[fmt][0] + "\n" + line + "\n", "hostile")
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("fmt", list(PARSERS))
def test_lines_just_under_the_limit_grown_from_real_ones_parse_or_fail_in_linear_time(fmt):
    # An expression that backtracks takes seconds to minutes on one of these; a linear one, milliseconds.
    parse = PARSERS[fmt]
    slowest = max(timed(parse, line + "\n") for seed in SEEDS[fmt] for line in hostile_lines(seed, MAX_LINE - 100))
    assert slowest < 0.5


FILES = {
    "ibnetdiscover": [
        "ibnetdiscover-edr-fdr-stderr-top-nvidia-doc.txt",
        "ibnetdiscover-g-grouped-voltaire-manpage.txt",
        "ibnetdiscover-p-ports-report-hdr-osc.txt",
        "ibnetdiscover-ndr200-split-redacted-partial.txt",
        "ibnetdiscover-qdr-sun-oracle-doc.txt",
    ],
    "iblinkinfo": ["iblinkinfo-edr-sb7700-linpack.txt", "iblinkinfo-S-hdr-switch-edr-hcas-could-be.txt"],
    "perfquery": ["perfquery-x-edr-switch-2ports-osc.txt", "perfquery-E-rcv-error-details-edr-osc.txt"],
    "ibqueryerrors": ["ibqueryerrors-fdr-sx6036-mailquoted.txt"],
}
SAMPLES = [(fmt, (DATA / name).read_text()) for fmt, names in FILES.items() for name in names]
SAMPLES.append(
    (
        "ibnetdiscover",
        "".join((DATA / "ibnetdiscover-ndr-topograph-582hca.txt").read_text().splitlines(keepends=True)[:160]),
    )
)
ALPHABET = st.sampled_from(
    list("0123456789abcdefx \"[]()#:;-.\t\n=>/'")
    + [
        "Switch",
        "Ca",
        "CA:",
        "lid ",
        "4xNDR",
        "Gbps",
        "==>",
        "==(",
        "port",
        "GUID 0x",
        "S-",
        "H-",
        "<redacted>",
        "ibwarn: ",
        "Down/ Polling",
    ]
)


@st.composite
def damaged(draw):
    fmt, text = draw(st.sampled_from(SAMPLES))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["cut", "insert", "duplicate", "swap", "truncate"]))
        where = draw(st.integers(0, max(len(lines) - 1, 0)))
        if not lines:
            break
        line = lines[where]
        if kind == "cut":
            start = draw(st.integers(0, len(line)))
            lines[where] = line[:start] + line[start + draw(st.integers(1, 12)) :]
        elif kind == "insert":
            start = draw(st.integers(0, len(line)))
            lines[where] = line[:start] + "".join(draw(st.lists(ALPHABET, min_size=1, max_size=6))) + line[start:]
        elif kind == "duplicate":
            lines.insert(where, line)
        elif kind == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[where], lines[other] = lines[other], lines[where]
        else:
            lines = lines[:where]
    return fmt, "".join(lines)


SIM_PLAN = plan_fabric(loaded_site("sim").fabrics["compute"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_real_dumps_parse_or_raise_a_cabling_error(sample):
    fmt, text = sample
    try:
        parsed = PARSERS[fmt](text, "damaged")
    except CablingError as exc:
        assert str(exc).startswith("damaged:")
        return
    if fmt in ("ibnetdiscover", "iblinkinfo"):
        # Whatever parses, the check can compare (against a plan it does not match).
        report = check_cabling(SIM_PLAN, parsed)
        assert report.links_found <= len(parsed.links)
