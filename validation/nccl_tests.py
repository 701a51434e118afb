"""Run NVIDIA's nccl-tests (all_reduce_perf and friends) and read its table.

    python3 -m validation.nccl_tests --binary /opt/nccl-tests/build/all_reduce_perf --gpus 8
    python3 -m validation.nccl_tests --launcher "srun --mpi=pmix" --binary .../all_reduce_perf --gpus 1
    python3 -m validation.nccl_tests --from-file run.log --collective all_reduce   # parse an earlier run

Figures are judged at named large sizes (default 1 GiB and 8 GiB, the
out-of-place busbw column), never on nccl-tests' "Avg bus bandwidth", which
averages every size of the sweep and so mostly measures the small ones. A
named size takes the nearest row within 1%: nccl-tests rounds each size down
to a multiple of the rank count, so 8 GiB on 12 GPUs is the 8589934560 B row.

How the output is read: validation/nccl_log.py.

`details` holds the test's `test`, `collective`, `rows`, ... at the top level
when the output held one test (the usual case), and a list of them under
`tests` when it held several. The envelope and exit codes: validation/result.py.
"""

from __future__ import annotations

import argparse
import math
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from validation.nccl_log import MAX_LINE_CHARS, Output, OutputError, parse_output, parse_outputs
from validation.nccl_rows import COLLECTIVES, collective_of_program
from validation.result import CheckArgumentParser, Report, emit, parse_args, progress, run_check
from validation.units import human_size, parse_size, parse_threshold

MAX_FILE_BYTES = 256 * 1024 * 1024
_MAX_FINDINGS = 10  # findings of one kind per test before "... and N more"


def _capped(report: Report, messages: list[str], more: int = 0) -> None:
    for message in messages[:_MAX_FINDINGS]:
        report.error(message)
    left = len(messages) - _MAX_FINDINGS + more
    if left > 0:
        report.error(f"... and {left} more like these")


def judge(
    report: Report, output: Output, judge_sizes: list[int], thresholds: dict[int, float], measure: bool = True
) -> dict[str, Any]:
    """Findings and figures for one test; returns what goes into `details` for it."""
    name = output.label()
    if not output.rows:
        report.error(f"{name}: no result rows in the nccl-tests output")
    _capped(report, [f"{name}: {p}" for p in output.problems], output.more_problems)
    wrong_rows = []
    for row in output.rows:
        wrong = (row.oop_wrong or 0) + (row.ip_wrong or 0)
        if wrong:
            about = "about " if row.wrong_rounded else ""
            wrong_rows.append(f"{name}: {about}{wrong} wrong elements at {human_size(row.size_bytes)}")
    _capped(report, wrong_rows)
    if output.out_of_bounds_ok is False:
        report.error(f"{name}: nccl-tests reported {output.out_of_bounds} out-of-bounds values")
    if output.avg_busbw_ok is False:
        average = "?" if output.avg_busbw is None else f"{output.avg_busbw:g}"
        report.error(f"{name}: nccl-tests says the average bus bandwidth, {average} GB/s, is below NCCL_TESTS_MIN_BW")
    _capped(report, [f"{name}: nccl-tests: {line}" for line in output.failures], output.more_failures)
    if output.rows and output.out_of_bounds is None and not output.failures:
        report.error(
            f"{name}: no 'Out of bounds values' verdict after the table: the run stopped early or the log is cut short"
        )
    for note in output.notes:
        report.warning(f"{name}: {note}")
    if output.unchecked:
        report.warning(f"{name}: results were not checked (-c 0): wrong results would go unnoticed")
    if output.collective is None:
        report.error(
            f"the output does not say which collective the test at line {output.first_line} ran "
            "(no '# Collective test starting:' banner, no *_perf command line): pass --collective"
        )
    elif measure:
        _measure(report, output, judge_sizes, thresholds)
    details: dict[str, Any] = {
        "test": output.test,
        "collective": output.collective,
        "collective_source": output.collective_source,
        "version": output.version,
        "parameters": output.parameters,
        "devices": output.devices,
        "layout": output.layout,
        "avg_busbw_gbps_not_judged": output.avg_busbw,
        "rows": [r.__dict__ for r in output.rows],
    }
    if output.rows:
        best = max(output.rows, key=lambda r: r.oop_busbw)
        details["max_busbw"] = {"size_bytes": best.size_bytes, "busbw_gbps": best.oop_busbw}
    return details


def _measure(report: Report, output: Output, judge_sizes: list[int], thresholds: dict[int, float]) -> None:
    name = output.collective
    for size in sorted(set(judge_sizes) | set(thresholds)):
        row = output.row_near(size)
        if row is None:
            if output.rows:  # with no rows at all, that error says enough
                report.warning(f"{name}: {human_size(size)} is not in the sweep; pass -e/--max-bytes to reach it")
            if size in thresholds:
                report.error(
                    f"{name}: busbw at {human_size(size)} not measured (expected >= {thresholds[size]:g} GB/s)"
                )
            continue
        if row.size_bytes != size:
            report.info(
                f"{name}: {human_size(size)} is read from the {row.size_bytes} B row "
                "(nccl-tests rounds sizes to a multiple of the rank count)"
            )
        report.measure(f"nccl_{name}_busbw_{human_size(size)}", row.oop_busbw, "GB/s")
        report.measure(f"nccl_{name}_busbw_inplace_{human_size(size)}", row.ip_busbw, "GB/s")
        if size in thresholds and row.oop_busbw < thresholds[size]:
            report.error(
                f"{name}: busbw at {human_size(size)} is {row.oop_busbw:g} GB/s, expected >= {thresholds[size]:g}"
            )


def judge_outputs(
    report: Report, outputs: list[Output], judge_sizes: list[int], thresholds: dict[tuple[str | None, int], float]
) -> None:
    """Judge every test; `thresholds` maps (collective or None for every test, size) to GB/s."""
    if not outputs:
        report.error("no nccl-tests output: no table, no result rows")
    seen: dict[str, Output] = {}
    details = []
    for output in outputs:
        first = seen.setdefault(output.collective, output) if output.collective else output
        if first is not output:
            report.error(
                f"{output.collective}: a second {output.collective} test at line {output.first_line} "
                f"(the first is at line {first.first_line}); only the first is measured"
            )
        own = {size: bound for (collective, size), bound in thresholds.items() if collective is None}
        own.update(
            {
                size: bound
                for (collective, size), bound in thresholds.items()
                if collective is not None and collective == output.collective
            }
        )
        details.append(judge(report, output, judge_sizes, own, measure=first is output))
    for collective, size in sorted((c, s) for c, s in thresholds if c is not None and c not in seen):
        report.error(
            f"{collective}: busbw at {human_size(size)} not measured (the output has no {collective} test; "
            f"expected >= {thresholds[(collective, size)]:g} GB/s)"
        )
    if len(details) == 1:
        report.details.update(details[0])
    elif details:
        report.details["tests"] = details


def judge_text(
    report: Report,
    text: str,
    collective: str | None,
    collective_source: str,
    judge_sizes: list[int],
    thresholds: dict[tuple[str | None, int], float],
) -> None:
    try:
        outputs = parse_outputs(text, collective, collective_source)
    except OutputError as exc:
        report.error(f"cannot read the nccl-tests output: {exc}")
        return
    judge_outputs(report, outputs, judge_sizes, thresholds)


def build_command(args: argparse.Namespace) -> list[str]:
    command = shlex.split(args.launcher) if args.launcher else []
    command += [
        args.binary,
        "-b",
        args.min_bytes,
        "-e",
        args.max_bytes,
        "-f",
        str(args.factor),
        "-g",
        str(args.gpus),
        "-w",
        str(args.warmup_iters),
        "-n",
        str(args.iters),
    ]
    return command + shlex.split(args.extra_args or "")


def _read_log(report: Report, path: Path) -> str | None:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            report.error(f"{path} is {size} bytes, more than the {MAX_FILE_BYTES} an nccl-tests log is read up to")
            return None
        return path.read_text(errors="replace")
    except OSError as exc:
        report.error(f"cannot read {path}: {exc.strerror or exc}")
        return None


def run(report: Report, args: argparse.Namespace) -> None:
    thresholds: dict[tuple[str | None, int], float] = dict(args.min_busbw or [])
    if args.collective:
        hint, hint_source = args.collective, "--collective"
    elif args.from_file:
        hint, hint_source = None, "--collective"
    else:
        hint, hint_source = collective_of_program(args.binary or ""), "--binary"
    if args.from_file:
        text = _read_log(report, Path(args.from_file))
        report.details["source"] = str(args.from_file)
        if text is None:
            return
    else:
        if not args.binary or not (Path(args.binary).is_file() or shutil.which(args.binary)):
            report.error(f"nccl-tests binary not found: {args.binary!r} (build nccl-tests or pass --binary)")
            return
        command = build_command(args)
        report.details["command"] = shlex.join(command)
        progress(f"running {shlex.join(command)}")
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, errors="replace")
        except subprocess.TimeoutExpired:
            report.error(f"nccl-tests ran past {args.timeout:g} s and was stopped")
            return
        text = done.stdout
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        if done.returncode != 0:
            report.error(f"nccl-tests exited {done.returncode}: {(done.stderr or done.stdout).strip()[-500:]}")
        report.details["exit_code"] = done.returncode
    judge_text(report, text, hint, hint_source, args.judge_sizes, thresholds)


def _sizes(text: str) -> list[int]:
    try:
        return [parse_size(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _threshold(text: str) -> tuple[tuple[str | None, int], float]:
    """'8G=336' -> ((None, 8 GiB), 336.0); 'all_gather:8G=300' -> (('all_gather', 8 GiB), 300.0)."""
    try:
        key, bound = parse_threshold(text)
        collective, _, size_text = key.rpartition(":")
        if collective and collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r} (one of {', '.join(COLLECTIVES)})")
        if not math.isfinite(bound) or bound < 0:
            raise ValueError(f"{text!r}: the bound must be a number of GB/s")
        return (collective or None, parse_size(size_text)), bound
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = CheckArgumentParser(prog="python3 -m validation.nccl_tests", description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default="all_reduce_perf", help="path of all_reduce_perf (or another *_perf)")
    p.add_argument("--from-file", help="parse this saved output instead of running the binary")
    p.add_argument(
        "--collective",
        choices=COLLECTIVES,
        help="the collective, where the output does not say (default: from --binary's name)",
    )
    p.add_argument("--launcher", help="command prefix, e.g. 'srun --mpi=pmix' or 'mpirun -np 16'")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per process (-g)")
    p.add_argument("--min-bytes", default="1M")
    p.add_argument("--max-bytes", default="8G")
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--warmup-iters", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--extra-args", help="more nccl-tests arguments, e.g. '-c 0 -G 1'")
    p.add_argument("--judge-sizes", type=_sizes, default="1G,8G", help="sizes whose busbw become measurements")
    p.add_argument(
        "--min-busbw",
        type=_threshold,
        action="append",
        metavar="[COLLECTIVE:]SIZE=GBPS",
        help="e.g. 8G=336, or all_gather:8G=300 for one test of several (repeatable)",
    )
    p.add_argument("--timeout", type=float, default=1800.0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv, "nccl_tests")
    if isinstance(args, int):
        return args
    return emit(run_check("nccl_tests", lambda report: run(report, args)))


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["MAX_LINE_CHARS", "OutputError", "judge", "judge_text", "main", "parse_output", "parse_outputs"]
