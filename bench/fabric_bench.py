"""Benchmark: the real OpenSM routing each reference-architecture pod that `podctl init` writes.

For each size, the site `podctl init --profile P --scalable-units S` writes is planned, its
fabric started in ibsim (podctl.ibfabric.ibsim, the network file `podctl fabric topology`
prints) and routed once by Debian's OpenSM with the engine the plan calls for (ftree where the
tree is symmetric, else updn; `--engine` overrides). It records

- the engine OpenSM really used, from its log (`<engine> tables configured on all switches`),
  whether it fell back, and its first ERR line;
- OpenSM's time: the whole run (`opensm -o`), and from entering MASTER to the tables
  configured (LIDs handed out and routes computed), from its log's timestamps;
- peak memory (maximum resident set): OpenSM's (this worker's only waited-for child by then,
  resource.getrusage), ibsim's (VmHWM, read before it stops) and the analysis's own;
- updn (where the plan calls for it, or `--engine updn`) is given the top tier as its roots, as
  the plan says, by the GUIDs the network file gives those switches;
- the balance of OpenSM's own tables (its opensm-lfts.dump, podctl.ibfabric.balance): HCA
  routes per up-port on each tier (fewest, most), and the routes that turn up after coming
  down (a credit-loop risk; switch LIDs counted apart).

Each size runs in a worker process of its own, so that its memory figures are its own. Results
go to bench/results/fabric-<date>.json (merged with an earlier run of the same day, size by
size) and, as a markdown table, to bench/results/fabric-<date>.md.

    .venv/bin/python bench/fabric_bench.py [--sizes dgx-h100:1,2,4,8,16,32,37,42,64 dgx-a100:1,2,4,7]
        [--engine ftree] [--no-balance] [--out bench/results] [--tag TAG] [--workdir DIR]
    .venv/bin/python bench/fabric_bench.py --sizes all --no-balance --tag all-sizes
        # every size init offers, dgx-h100 and dgx-a100 of 1 to 64 SUs: the engine OpenSM used

Exit status 1 when OpenSM fell back from the engine asked for, or a route to an HCA turns up
after coming down, for any size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from podctl.core.fsio import atomic_write

DEFAULT_SIZES = ("dgx-h100:1,2,4,8,16,32,37,42,64", "dgx-a100:1,2,4,7,8,16,21,23,32,42,64")
ALL_SIZES = ("dgx-h100:1-64", "dgx-a100:1-64")
RESULTS = Path(__file__).resolve().parent / "results"
_STAMP = re.compile(r"^(\w{3}) (\d{2}) (\d{2}):(\d{2}):(\d{2}) (\d{6}) ")


def parse_sizes(specs: list[str]) -> list[tuple[str, int]]:
    """`dgx-h100:1,2,4-8` -> [("dgx-h100", 1), ...]; `all` for every size init offers."""
    if specs == ["all"]:
        specs = list(ALL_SIZES)
    out: list[tuple[str, int]] = []
    for spec in specs:
        profile, _, numbers = spec.partition(":")
        if not numbers:
            raise SystemExit(f"--sizes {spec!r}: PROFILE:SUS, e.g. dgx-h100:1,4,16-18")
        for part in numbers.split(","):
            low, _, high = part.partition("-")
            out += [(profile, n) for n in range(int(low), int(high or low) + 1)]
    return out


def _seconds(line: str) -> float:
    """Seconds of the day (with the day of the month) of an OpenSM log line's timestamp."""
    match = _STAMP.match(line)
    if match is None:
        return float("nan")
    _, day, h, m, s, us = match.groups()
    return ((int(day) * 24 + int(h)) * 60 + int(m)) * 60 + int(s) + int(us) / 1e6


def routing_seconds(log: Path) -> float:
    """From entering MASTER to the tables configured, by OpenSM's log."""
    master = configured = None
    for line in log.read_text(errors="replace").splitlines():
        if master is None and "Entering MASTER state" in line:
            master = _seconds(line)
        if "tables configured on all switches" in line:
            configured = _seconds(line)
    return round(configured - master, 2) if master is not None and configured is not None else float("nan")


def vm_hwm_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return round(int(match[1]) / 1024, 1) if match else float("nan")


def read_in_blocks(path: Path, per_block: int = 64):  # noqa: ANN201
    """OpenSM's dump, read `per_block` switch tables at a time (podctl.ibfabric.lft's reader takes a
    text; the whole dump of a 64-SU pod is two gigabytes) and merged as one reader run would."""
    from podctl.ibfabric.lft import Lfts, parse_lfts

    merged = Lfts(source=str(path))

    def add(lines: list[str]) -> None:
        part = parse_lfts("".join(lines), str(path))
        merged.switches += part.switches
        merged.warnings += part.warnings
        for lid, dest in part.dest.items():
            if lid not in merged.dest or (merged.dest[lid].port_guid is None and dest.port_guid is not None):
                merged.dest[lid] = dest

    lines: list[str] = []
    headers = 0
    with open(path, errors="replace") as dump:
        for line in dump:
            if line.startswith("Unicast lids"):
                headers += 1
                if headers > per_block:
                    add(lines)
                    lines, headers = [], 1
            lines.append(line)
    if lines:
        add(lines)
    return merged


def run_one(profile: str, sus: int, engine: str | None, balance: bool, workdir: Path) -> dict[str, object]:
    """One size, in this (worker) process."""
    from podctl.derive.facts import Facts, hca_names
    from podctl.derive.init import render_site
    from podctl.derive.site import load_site
    from podctl.derive.topology import root_switches
    from podctl.ibfabric.balance import route_balance
    from podctl.ibfabric.ibsim import SimulatedFabric, network_from_plan, route
    from podctl.ibfabric.topofile import name_guid

    site_file = workdir / "site.yaml"
    site_file.write_text(render_site(profile, sus, None, "bench", "site.schema.json"))
    site = load_site(site_file)
    facts = Facts(site)
    plan, advice = facts.plans["compute"], facts.routing["compute"]
    names = hca_names(site, "compute")
    network = network_from_plan(plan, site.fabrics["compute"].rate, names)
    asked = engine or advice.engine
    counts = plan.counts()
    result: dict[str, object] = {
        "profile": profile,
        "sus": sus,
        "nodes": len(site.fabrics["compute"].nodes),
        "tiers": plan.tiers,
        "switches": counts["switches"],
        "cables": counts["cables"],
        "advised": advice.engine,
        "asked": asked,
    }
    config = None
    if asked == "updn":
        # updn from the top tier, as the plan calls for it: the switches' GUIDs are those the
        # network file gives them (podctl.ibfabric.topofile.name_guid of their names).
        roots = workdir / "roots.guids"
        roots.write_text("".join(f"0x{name_guid(s.name):016x}\n" for s in root_switches(plan)))
        config = workdir / "opensm.conf"
        config.write_text(f"root_guid_file {roots}\n")
        result["roots"] = len(root_switches(plan))
    started = time.monotonic()
    with SimulatedFabric.start(network, workdir / "fabric") as fabric:
        result["ibsim"] = fabric.install.describe()
        result["ibsim_ready_s"] = round(time.monotonic() - started, 2)
        run = route(fabric, asked, dumps=balance, timeout=1800, config=config)
        result["opensm_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
        result["ibsim_mb"] = vm_hwm_mb(fabric.pid)
    result |= {
        "used": run.used,
        "fell_back": run.fell_back,
        "errors": list(run.errors[:3]),
        "opensm_s": round(run.seconds, 2),
        "routing_s": routing_seconds(run.log),
    }
    if balance and run.lfts_dump is not None:
        t0 = time.monotonic()
        result["dump_mb"] = round(run.lfts_dump.stat().st_size / 2**20, 1)
        lfts = read_in_blocks(run.lfts_dump)
        run.lfts_dump.unlink()  # gigabytes at 64 SUs: read, then gone
        # ibsim's switches describe themselves by their planned names.
        planned = {s.name for s in plan.switches}
        tables = {t.desc: t for t in lfts.switches if t.desc in planned}
        result["balance"] = route_balance(plan, lfts, tables).as_dict()
        result["analysis_s"] = round(time.monotonic() - t0, 2)
    result["analysis_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _cell_balance(row: dict[str, object]) -> str:
    balance = row.get("balance")
    if not isinstance(balance, dict):
        return "-"
    parts = []
    for tier, figures in balance["tiers"].items():
        per_port = figures["routes_per_up_port"]
        parts.append(f"{tier} {per_port['min']}-{per_port['max']}")
    return ", ".join(parts) or "-"


def _cell_turns(row: dict[str, object]) -> str:
    balance = row.get("balance")
    if not isinstance(balance, dict):
        return "-"
    hca, switch = balance["credit_loop_risk"]["entries"], balance["switch_lid_turns"]["entries"]
    return f"{hca}" + (f" ({switch} to switch LIDs)" if switch else "")


def markdown(rows: list[dict[str, object]]) -> str:
    head = (
        "| pod | nodes | tiers | leaf / spine / core | engine asked | engine used | OpenSM s (routing s) "
        "| OpenSM MB | ibsim MB | HCA routes per up-port (min-max) | down-then-up routes |\n"
        "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | --- | --- |\n"
    )
    lines = []
    for row in rows:
        sw = row["switches"]
        assert isinstance(sw, dict)
        used = str(row.get("used"))
        if row.get("fell_back"):
            used += " (fell back)"
        asked = str(row["asked"]) + (f" (the {row['roots']} top switches as roots)" if row.get("roots") else "")
        lines.append(
            f"| {row['profile']} {row['sus']} SU | {row['nodes']} | {row['tiers']} | "
            f"{sw['leaf']} / {sw['spine']} / {sw['core']} | {asked} | {used} | "
            f"{row['opensm_s']} ({row['routing_s']}) | {row['opensm_mb']} | {row['ibsim_mb']} | "
            f"{_cell_balance(row)} | {_cell_turns(row)} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=list(DEFAULT_SIZES), help="PROFILE:SUS[,SUS|LOW-HIGH...], or all")
    parser.add_argument("--engine", help="ask OpenSM for this engine instead of the plan's")
    parser.add_argument("--no-balance", action="store_true", help="skip OpenSM's table dump and its analysis")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", help="results go to fabric-<date>-<tag>.json/.md (a run of other sizes)")
    parser.add_argument("--workdir", type=Path, help="where the fabrics run (default: a temporary folder)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # PROFILE:SUS, run by a worker
    args = parser.parse_args(argv)

    if args.one:
        profile, sus = args.one.split(":")
        row = run_one(profile, int(sus), args.engine, not args.no_balance, args.workdir)
        print(json.dumps(row))
        return 0

    sizes = parse_sizes(args.sizes)
    date = dt.date.today().isoformat()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"fabric-{date}" + (f"-{args.tag}" if args.tag else "")
    json_path, md_path = args.out / f"{stem}.json", args.out / f"{stem}.md"
    done: dict[tuple[str, int], dict[str, object]] = {}
    if json_path.exists():
        for row in json.loads(json_path.read_text())["rows"]:
            done[(row["profile"], row["sus"])] = row
    failed = False
    with tempfile.TemporaryDirectory(prefix="fabric-bench-", dir=args.workdir) as tmp:
        for profile, sus in sizes:
            work = Path(tmp) / f"{profile}-{sus}"
            work.mkdir()
            print(f"{profile} {sus} SU: ...", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            worker = [sys.executable, __file__, "--one", f"{profile}:{sus}", "--workdir", str(work)]
            worker += (["--engine", args.engine] if args.engine else []) + (["--no-balance"] if args.no_balance else [])
            proc = subprocess.run(worker, capture_output=True, text=True, check=False, env=os.environ.copy())
            if proc.returncode != 0:
                print(f"{profile} {sus} SU: worker failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                failed = True
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row["wall_s"] = round(time.monotonic() - t0, 1)
            done[(profile, sus)] = row
            turns = row.get("balance", {}).get("credit_loop_risk", {}).get("entries", 0)  # type: ignore[union-attr]
            failed |= bool(row["fell_back"]) or bool(turns)
            print(
                f"{profile} {sus} SU: {row['nodes']} nodes, asked {row['asked']}, used {row['used']}"
                f"{' (FELL BACK)' if row['fell_back'] else ''}, OpenSM {row['opensm_s']} s "
                f"(routing {row['routing_s']} s), {row['opensm_mb']} MB; balance {_cell_balance(row)}; "
                f"down-then-up {_cell_turns(row)}; {row['wall_s']} s in all",
                file=sys.stderr,
                flush=True,
            )
            rows = sorted(done.values(), key=lambda r: (str(r["profile"]), int(r["sus"])))  # type: ignore[call-overload]
            meta = {"date": date, "host_cpus": os.cpu_count(), "command": " ".join(sys.argv)}
            atomic_write(json_path, json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
            atomic_write(md_path, markdown(rows))
    print(md_path.read_text() if md_path.exists() else "no result", end="")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
