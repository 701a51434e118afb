"""Reading nccl-tests output (all_reduce_perf and friends) from every release in the field.

What the reader takes (real logs of each form are in tests/data/nccl-tests/, but for the
per-iteration and timestamp columns, Intel MPI's prefix and the average's verdict, which
the tests build from nccl-tests' own format strings):
- Both table layouts. nccl-tests 2.13 and later print `redop root` for every
  collective (`none`, `-1` where they do not apply) and an integer `#wrong`,
  written with %g, so `1.04858e+06` past a million. Older releases print only
  the columns a collective has (redop for all_reduce, root for broadcast, both
  for reduce, neither for all_gather, a blank redop for alltoall) and a float
  `error` column, the largest deviation seen. The table header says which
  columns a row has; rows without a header are read by their token count. `N/A`
  stands where nothing was checked (`-c 0`; alltoall's and sendrecv's in-place
  half). The per-iteration (`-I 1`) and timestamp columns are read too.
- Launcher prefixes: `srun --label` (`0: `), `mpirun --tag-output`
  (`[1,0]<stdout>:`), Intel MPI's `-prepend-rank` (`[0] `), indentation. Each
  rank's lines are read as a stream of their own, so lines of other ranks
  between the rows do no harm.
- Several tests in one output (a script that runs five binaries): one `Output`
  each, each with its own collective.
- Debug output (`NCCL INFO`, `NCCL WARN`, and in them routine lines such as
  `Failed to open libibverbs.so`) is passed over. A failure is only what says a
  test failed: `Test NCCL failure`, `Test CUDA failure`, `Test failure`, `Test
  timeout`, nccl-tests' own exits on bad arguments, a launcher's line that a
  rank died, `Out of bounds values : N FAILED`, `Avg bus bandwidth : X FAILED`
  (NCCL_TESTS_MIN_BW), a non-zero `#wrong`. An old-layout `error` value is
  judged by nccl-tests' own verdict (`Out of bounds values`), which knows the
  type's tolerance and the rank count; a table without that verdict fails.

Which collective ran, for the figures `nccl_<collective>_busbw_<size>`: the
test's own banner (`# Collective test starting: all_gather_perf`), else a
`*_perf` command line in the log before the test (a shell prompt, `Running:`),
else what the caller knows (`--collective`, or the file name of `--binary`).
Where the log and the caller disagree the log wins, with a warning. With none
of them the test gets no figures and an error that says to pass `--collective`:
a generic name would let an all_gather figure pass for all_reduce's.

Input from outside is refused, not guessed at: a line over 64 KiB, or a
`--from-file` over 256 MiB, stops the reader with an error; a line that starts
like a result row (a size, then a count) but cannot be read is an error that
names its line. Every regular expression here is anchored and has no nested
repetition, so reading takes time linear in the input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from validation.nccl_rows import (
    Columns,
    Row,
    RowError,
    collective_of_program,
    command_collective,
    is_int,
    quote,
    read_columns,
    read_float,
    read_row,
    strip_prefix,
)

MAX_LINE_CHARS = 64 * 1024
SIZE_TOLERANCE = 0.01  # a named size takes a row this close (nccl-tests rounds to the rank count)
MAX_KEPT = 100  # problems and failure lines kept per test; the rest are only counted
_MAX_FINDINGS = 10  # findings of one kind per test before "... and N more"
DEBUG_MARKERS = ("NCCL INFO", "NCCL WARN", "NCCL TRACE")
FAILURE_MARKERS = (
    "NCCL failure",
    "CUDA failure",
    "Cuda failure",
    "Test failure",
    "Test timeout",  # src/common.h
    # nccl-tests' own exits on bad arguments or a mismatched setup (src/common.cu)
    "invalid size specified for",
    "invalid sizes for 'minbytes' and 'maxbytes'",
    "Invalid number of GPUs:",
    "Incompatible NCCL versions.",
    "is not supported by this test",
    "requires NCCL >= ",
    "requires enabling symmetric memory registration",
    "invalid option '",
    # a launcher saying a rank died: the test it ran did not finish
    "exited with non-zero status",
    "exited on signal",
    "MPI_ABORT was invoked",
    "Exited with exit code",
)


class OutputError(ValueError):
    """nccl-tests output that cannot be read at all; the message says where and why."""


@dataclass
class Output:
    """One test (one binary's run) in nccl-tests output."""

    rows: list[Row] = field(default_factory=list)
    test: str | None = None  # the program the banner names, e.g. all_reduce_perf
    collective: str | None = None
    collective_source: str | None = None
    version: str | None = None
    parameters: str | None = None
    devices: list[str] = field(default_factory=list)
    layout: str | None = None  # "#wrong" (2.13 and later) or "error" (older)
    avg_busbw: float | None = None
    avg_busbw_ok: bool | None = None  # None unless NCCL_TESTS_MIN_BW made nccl-tests judge it
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    failures: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lines that should have been readable and were not
    notes: list[str] = field(default_factory=list)  # worth a warning, not a failure
    more_failures: int = 0
    more_problems: int = 0
    first_line: int = 0
    prefix: str = "none"
    concluded: bool = False

    def row_at(self, size_bytes: int) -> Row | None:
        return next((r for r in self.rows if r.size_bytes == size_bytes), None)

    def row_near(self, size_bytes: int) -> Row | None:
        """The row nearest `size_bytes` within SIZE_TOLERANCE of it."""
        best = min(self.rows, key=lambda r: abs(r.size_bytes - size_bytes), default=None)
        if best is None or abs(best.size_bytes - size_bytes) > SIZE_TOLERANCE * size_bytes:
            return None
        return best

    @property
    def wrong_total(self) -> int | None:
        """Wrong elements over every row, or None where no row counted them or a count was rounded."""
        counts = [w for r in self.rows for w in (r.oop_wrong, r.ip_wrong) if w is not None]
        if not counts or any(r.wrong_rounded for r in self.rows):
            return None
        return sum(counts)

    @property
    def unchecked(self) -> bool:
        """Results were not checked at all (-c 0 prints N/A in every row)."""
        return bool(self.rows) and all(
            r.oop_wrong is None and r.ip_wrong is None and r.oop_error is None and r.ip_error is None for r in self.rows
        )

    @property
    def failed(self) -> bool:
        """The output itself says the test failed, or holds lines that could not be read."""
        return bool(
            self.failures
            or self.problems
            or self.out_of_bounds_ok is False
            or self.avg_busbw_ok is False
            or any(r.oop_wrong or r.ip_wrong for r in self.rows)
        )

    def label(self) -> str:
        return self.collective or f"the test at line {self.first_line}"

    def _keep(self, kept: list[str], message: str) -> bool:
        if len(kept) < MAX_KEPT:
            kept.append(message)
            return True
        return False

    def add_failure(self, message: str) -> None:
        if not self._keep(self.failures, message):
            self.more_failures += 1

    def add_problem(self, message: str) -> None:
        if not self._keep(self.problems, message):
            self.more_problems += 1


@dataclass
class _Stream:
    test: Output | None = None
    columns: Columns | None = None
    in_table: bool = False
    stage: int = -1  # the furthest of version, banner, parameters, header seen in this test


_VERSION, _BANNER, _PARAMETERS, _HEADER = range(4)


class _Reader:
    """Reads nccl-tests output line by line; one state per launcher stream (rank)."""

    def __init__(self, collective: str | None, collective_source: str) -> None:
        self.hint = collective
        self.hint_source = collective_source
        self.tests: list[Output] = []
        self.streams: dict[str, _Stream] = {}
        self.pending_command: tuple[str, int] | None = None
        self.pending_failures: list[str] = []  # failures before the first test: the next one takes them
        self.more_pending_failures = 0
        self.first_failure_line = 0

    def start(self, stream: _Stream, stage: int, line_no: int, prefix: str) -> Output:
        """The stream's test, or a new one where this line begins the next test."""
        test = stream.test
        if test is None or test.rows or test.concluded or stream.stage >= stage:
            test = Output(first_line=line_no, prefix=prefix)
            if self.pending_command is not None:
                test.collective, command_line = self.pending_command
                test.collective_source = f"command line {command_line}"
                self.pending_command = None
            for failure in self.pending_failures:
                test.add_failure(failure)
            test.more_failures += self.more_pending_failures
            self.pending_failures, self.more_pending_failures = [], 0
            self.tests.append(test)
            stream.test, stream.columns, stream.in_table, stream.stage = test, None, False, -1
        stream.stage = max(stream.stage, stage)
        return test

    def feed(self, line_no: int, raw: str) -> None:
        if len(raw) > MAX_LINE_CHARS:
            raise OutputError(
                f"line {line_no} is {len(raw)} characters long (limit {MAX_LINE_CHARS}); "
                "nccl-tests never prints such a line"
            )
        key, prefix, text = strip_prefix(raw)
        if not text:
            return
        stream = self.streams.setdefault(key, _Stream())
        tokens = text.split()
        if not text.startswith("#") and self.looks_like_row(stream, tokens):
            self.read_row(stream, tokens, line_no, text, prefix)
            return
        if any(marker in text for marker in DEBUG_MARKERS):
            return
        meta = text.lstrip("#").strip()
        if self.read_meta(stream, meta, text.startswith("#"), line_no, prefix):
            return
        if any(marker in text for marker in FAILURE_MARKERS):
            failure = f"line {line_no}: {quote(text)}"
            if self.tests:
                self.tests[-1].add_failure(failure)
            elif len(self.pending_failures) < MAX_KEPT:
                self.first_failure_line = self.first_failure_line or line_no
                self.pending_failures.append(failure)
            else:
                self.more_pending_failures += 1
            return
        collective = command_collective(tokens) if "_perf" in text else None
        if collective is not None:
            self.pending_command = (collective, line_no)

    @staticmethod
    def looks_like_row(stream: _Stream, tokens: list[str]) -> bool:
        """A size, then a count; inside a table a size alone is enough to say it was meant as a row."""
        if not (tokens[0].isascii() and tokens[0].isdigit()):
            return False
        return stream.in_table or (len(tokens) > 1 and tokens[1].isascii() and tokens[1].isdigit())

    def read_row(self, stream: _Stream, tokens: list[str], line_no: int, text: str, prefix: str) -> None:
        test = stream.test if stream.test is not None and not stream.test.concluded else None
        if test is None:
            test = self.start(stream, _HEADER, line_no, prefix)
        try:
            row = read_row(tokens, stream.columns, line_no)
        except RowError as exc:
            test.add_problem(f"line {line_no}: a result row that cannot be read ({exc}): {quote(text)}")
            return
        if stream.columns is not None:
            test.layout = stream.columns.half[3]
        elif test.layout is None and (row.oop_error is not None or row.ip_error is not None):
            test.layout = "error"
        elif test.layout is None and (row.oop_wrong is not None or row.ip_wrong is not None):
            test.layout = "#wrong"
        test.rows.append(row)

    def read_meta(self, stream: _Stream, meta: str, hashed: bool, line_no: int, prefix: str) -> bool:
        """Header and footer lines (their '#' may be missing in pasted logs); True if this was one."""
        if meta.startswith("nccl-tests version"):
            self.start(stream, _VERSION, line_no, prefix).version = meta
        elif meta.startswith("Collective test starting:"):
            test = self.start(stream, _BANNER, line_no, prefix)
            program = meta.partition(":")[2].strip()
            test.test = program or None
            collective = collective_of_program(program)
            if collective is not None:
                test.collective, test.collective_source = collective, f"banner line {line_no}"
        elif meta.startswith("Collective test concluded:"):
            if stream.test is not None:
                stream.test.concluded = True
            stream.in_table = False
        elif meta.startswith("nThread "):
            self.start(stream, _PARAMETERS, line_no, prefix).parameters = meta
        elif meta.split()[:3] == ["size", "count", "type"]:
            test = self.start(stream, _HEADER, line_no, prefix)
            stream.in_table = True
            try:
                stream.columns = read_columns(meta.split(), line_no)
            except RowError as exc:
                stream.columns = None
                test.add_problem(f"line {line_no}: a table header this reader does not know ({exc}): {quote(meta)}")
        elif meta.startswith("Out of bounds values"):
            test = self.footer_test(stream, line_no, prefix)
            value = meta.partition(":")[2].split()
            if len(value) == 2 and is_int(value[0]) and int(value[0]) >= 0 and value[1] in ("OK", "FAILED"):
                test.out_of_bounds, test.out_of_bounds_ok = int(value[0]), value[1] == "OK"
            else:
                test.add_problem(f"line {line_no}: an 'Out of bounds values' line that cannot be read: {quote(meta)}")
            stream.in_table = False
        elif meta.startswith("Avg bus bandwidth"):
            test = self.footer_test(stream, line_no, prefix)
            self.read_average(test, meta, line_no)
            stream.in_table = False
        elif hashed and meta.startswith("error:"):
            if self.tests:
                self.tests[-1].notes.append(f"line {line_no}: NCCL's last error: {quote(meta[6:].strip())}")
        elif meta.split()[:1] == ["Rank"] and stream.test is not None and not stream.in_table:
            stream.test.devices.append(" ".join(meta.split()))
        else:
            return hashed  # other '#' lines (column units, "Using devices", memory notes) carry nothing to read
        return True

    @staticmethod
    def read_average(test: Output, meta: str, line_no: int) -> None:
        """'Avg bus bandwidth : 240.102', with ' OK' or ' FAILED' where NCCL_TESTS_MIN_BW was set."""
        value = meta.partition(":")[2].split()
        verdict = value[1] if len(value) == 2 and value[1] in ("OK", "FAILED") else None
        try:
            if len(value) != 1 and verdict is None:
                raise RowError("expected a number, then OK or FAILED or nothing")
            if value[0] not in ("nan", "-nan"):  # an average over no rows
                test.avg_busbw = read_float(value[0], "the average")
        except RowError as exc:
            test.add_problem(f"line {line_no}: an 'Avg bus bandwidth' line that cannot be read ({exc}): {quote(meta)}")
        if verdict is not None:
            test.avg_busbw_ok = verdict == "OK"

    def footer_test(self, stream: _Stream, line_no: int, prefix: str) -> Output:
        if stream.test is None or stream.test.concluded:
            return self.start(stream, _HEADER, line_no, prefix)
        return stream.test

    def finish(self) -> list[Output]:
        if self.pending_failures:
            # Failures before any test: the run stopped before printing its table.
            self.start(_Stream(), _VERSION, self.first_failure_line, "none")
        for test in self.tests:
            if test.collective is None and self.hint is not None:
                test.collective, test.collective_source = self.hint, self.hint_source
            elif test.collective is not None and self.hint is not None and test.collective != self.hint:
                test.notes.append(
                    f"the output says {test.collective} ran ({test.collective_source}), "
                    f"{self.hint_source} says {self.hint}: the figures are named {test.collective}"
                )
        return self.tests


def parse_outputs(text: str, collective: str | None = None, collective_source: str = "--collective") -> list[Output]:
    """Every test in nccl-tests output, in order; OutputError if the text cannot be nccl-tests output.

    `collective` names the tests whose output does not say which collective ran.
    """
    reader = _Reader(collective, collective_source)
    for line_no, raw in enumerate(text.split("\n"), start=1):
        reader.feed(line_no, raw.rstrip("\r"))
    return reader.finish()


def parse_output(text: str, collective: str | None = None) -> Output:
    """The one test in nccl-tests output (an empty Output if there is none); OutputError if there are several."""
    outputs = parse_outputs(text, collective)
    if len(outputs) > 1:
        raise OutputError(
            f"the output holds {len(outputs)} tests (lines "
            f"{', '.join(str(o.first_line) for o in outputs)}); read them with parse_outputs"
        )
    return outputs[0] if outputs else Output()
