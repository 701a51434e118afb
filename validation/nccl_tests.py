"""Run NVIDIA's nccl-tests (all_reduce_perf and friends) and read its table.

    python3 -m validation.nccl_tests --binary /opt/nccl-tests/build/all_reduce_perf --gpus 8
    python3 -m validation.nccl_tests --launcher "srun --mpi=pmix" --binary .../all_reduce_perf --gpus 1
    python3 -m validation.nccl_tests --from-file all_reduce_perf.log     # parse an earlier run

Figures are judged at named large sizes (default 1 GiB and 8 GiB, the
out-of-place busbw column), never on nccl-tests' "Avg bus bandwidth", which
averages every size of the sweep and so mostly measures the small ones.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from validation.result import CheckArgumentParser, Report, emit, parse_args, progress, run_check
from validation.units import human_size, parse_size, parse_threshold


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
    oop_wrong: int | None  # None when nccl-tests ran without checking (-c 0 prints N/A)
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: int | None


@dataclass
class Output:
    rows: list[Row] = field(default_factory=list)
    test: str | None = None
    version: str | None = None
    parameters: str | None = None
    devices: list[str] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    failures: list[str] = field(default_factory=list)

    def row_at(self, size_bytes: int) -> Row | None:
        return next((r for r in self.rows if r.size_bytes == size_bytes), None)


def _wrong(token: str) -> int | None:
    return None if token.upper() == "N/A" else int(token)


def _row(tokens: list[str]) -> Row | None:
    """A data row: size count type [redop [root]] then two groups of time algbw busbw #wrong."""
    if len(tokens) < 11 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    middle = tokens[2:-8]
    if not 1 <= len(middle) <= 3:
        return None
    try:
        oop = [float(t) for t in tokens[-8:-5]]
        ip = [float(t) for t in tokens[-4:-1]]
        return Row(
            size_bytes=int(tokens[0]),
            count=int(tokens[1]),
            dtype=middle[0],
            redop=middle[1] if len(middle) > 1 else None,
            root=int(middle[2]) if len(middle) > 2 else None,
            oop_time_us=oop[0], oop_algbw=oop[1], oop_busbw=oop[2], oop_wrong=_wrong(tokens[-5]),
            ip_time_us=ip[0], ip_algbw=ip[1], ip_busbw=ip[2], ip_wrong=_wrong(tokens[-1]),
        )
    except ValueError:
        return None


def parse_output(text: str) -> Output:
    out = Output()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            if body.startswith("nccl-tests version"):
                out.version = body
            elif body.startswith("Collective test starting:"):
                out.test = body.split(":", 1)[1].strip()
            elif body.startswith("nThread"):
                out.parameters = body
            elif re.match(r"Rank\s+\d+", body):
                out.devices.append(re.sub(r"\s+", " ", body))
            elif body.startswith("Avg bus bandwidth"):
                out.avg_busbw = float(body.split(":", 1)[1])
            elif body.startswith("Out of bounds values"):
                match = re.search(r":\s*(\d+)\s+(\w+)", body)
                if match:
                    out.out_of_bounds = int(match.group(1))
                    out.out_of_bounds_ok = match.group(2).upper() == "OK"
            continue
        row = _row(line.split())
        if row is not None:
            out.rows.append(row)
        elif re.search(r"failure|failed|error", line, re.IGNORECASE):
            out.failures.append(line[:300])
    return out


def judge(report: Report, output: Output, judge_sizes: list[int], thresholds: dict[int, float]) -> None:
    name = (output.test or "nccl_test").removesuffix("_perf")
    if not output.rows:
        report.error("no result rows in the nccl-tests output")
    for row in output.rows:
        wrong = (row.oop_wrong or 0) + (row.ip_wrong or 0)
        if wrong:
            report.error(f"{wrong} wrong elements at {human_size(row.size_bytes)}")
    if output.out_of_bounds_ok is False:
        report.error(f"nccl-tests reported {output.out_of_bounds} out-of-bounds values")
    for line in output.failures:
        report.error(f"nccl-tests: {line}")
    for size in sorted(set(judge_sizes) | set(thresholds)):
        row = output.row_at(size)
        if row is None:
            report.warning(f"{human_size(size)} is not in the sweep; pass -e/--max-bytes to reach it")
            if size in thresholds:
                report.error(f"busbw at {human_size(size)} not measured (expected >= {thresholds[size]:g} GB/s)")
            continue
        report.measure(f"nccl_{name}_busbw_{human_size(size)}", row.oop_busbw, "GB/s")
        report.measure(f"nccl_{name}_busbw_inplace_{human_size(size)}", row.ip_busbw, "GB/s")
        if size in thresholds and row.oop_busbw < thresholds[size]:
            report.error(f"busbw at {human_size(size)} is {row.oop_busbw:g} GB/s, expected >= {thresholds[size]:g}")
    report.details.update({
        "test": output.test, "version": output.version, "parameters": output.parameters,
        "devices": output.devices,
        "avg_busbw_gbps_not_judged": output.avg_busbw,
        "rows": [r.__dict__ for r in output.rows],
    })
    if output.rows:
        best = max(output.rows, key=lambda r: r.oop_busbw)
        report.details["max_busbw"] = {"size_bytes": best.size_bytes, "busbw_gbps": best.oop_busbw}


def build_command(args: argparse.Namespace) -> list[str]:
    command = shlex.split(args.launcher) if args.launcher else []
    command += [args.binary, "-b", args.min_bytes, "-e", args.max_bytes, "-f", str(args.factor),
                "-g", str(args.gpus), "-w", str(args.warmup_iters), "-n", str(args.iters)]
    return command + shlex.split(args.extra_args or "")


def run(report: Report, args: argparse.Namespace) -> None:
    judge_sizes = [parse_size(s) for s in args.judge_sizes.split(",") if s.strip()]
    thresholds = {}
    for spec in args.min_busbw or []:
        size_text, bound = parse_threshold(spec)
        thresholds[parse_size(size_text)] = bound
    if args.from_file:
        text = Path(args.from_file).read_text(errors="replace")
        report.details["source"] = str(args.from_file)
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
    judge(report, parse_output(text), judge_sizes, thresholds)


def build_parser() -> argparse.ArgumentParser:
    p = CheckArgumentParser(prog="python3 -m validation.nccl_tests", description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default="all_reduce_perf", help="path of all_reduce_perf (or another *_perf)")
    p.add_argument("--from-file", help="parse this saved output instead of running the binary")
    p.add_argument("--launcher", help="command prefix, e.g. 'srun --mpi=pmix' or 'mpirun -np 16'")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per process (-g)")
    p.add_argument("--min-bytes", default="1M")
    p.add_argument("--max-bytes", default="8G")
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--warmup-iters", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--extra-args", help="more nccl-tests arguments, e.g. '-c 0 -G 1'")
    p.add_argument("--judge-sizes", default="1G,8G", help="sizes whose busbw become measurements")
    p.add_argument("--min-busbw", action="append", metavar="SIZE=GBPS", help="e.g. 8G=336 (repeatable)")
    p.add_argument("--timeout", type=float, default=1800.0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv, "nccl_tests")
    if isinstance(args, int):
        return args
    return emit(run_check("nccl_tests", lambda report: run(report, args)))


if __name__ == "__main__":
    sys.exit(main())
