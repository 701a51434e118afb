"""Benchmark: fault localization on simulated DGX H100 fabrics.

For each pod size N and fault count k, injects k faults at random places
(slow nodes, slow cables, dead ports, on node-leaf, leaf-spine and spine-core
cables alike), runs the all-nodes test and the localizer against the
simulated fabric, and prints

- extra rounds after the first all-nodes round (min / mean / max) against the
  bound k * ceil(log2 N) + 2;
- faults correctly named, out of those injected and out of those that some
  traffic can see at all (a cable that no route crosses cannot show in any
  test); with port counters (the default; --no-counters: traffic alone) a
  faulty cable is also named on what its ports record, routed or not;
- false accusations (nodes or cables named that are not faulty; must be 0)
  and unresolved placements (that left suspects, or a failing test that no
  accusation explains).

Fabrics come from `podctl init --profile dgx-h100 --scalable-units S`
(N = 32 S), loaded and planned as a user's site would be.

`--routes sm`: the fabric routes by the subnet manager's own tables, which number destinations in
another order than podctl's model (LIDs go out in discovery order; here a seeded shuffle of the
hosts). Each placement is localized twice: on those tables (what `--lfts FILE` gives a pod) and on
podctl's model of them (what a pod without `--lfts` gets). Only the first must pass.

    .venv/bin/python bench/localize_bench.py [--placements 100] [--seed 7] [--sizes 32,128,512,1344] [--ks 1,2,4]
        [--routes model|sm] [--no-counters]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from podctl.derive.init import render_site
from podctl.derive.site import load_site
from podctl.derive.topology import plan_fabric
from podctl.localize.localize import localize
from podctl.localize.routing import Router
from podctl.localize.schedule import Test
from podctl.localize.simulate import SimulatedFabric, random_faults

THRESHOLD = 0.9  # of the link rate; the simulator's slow parts run at 0.5


def fabric_for(nodes: int, workdir: Path):
    units = math.ceil(nodes / 32)
    path = workdir / f"h100-{nodes}.yaml"
    path.write_text(render_site("dgx-h100", units, nodes, f"bench-{nodes}", "site.schema.json"))
    fabric = load_site(path).fabrics["compute"]
    return fabric, plan_fabric(fabric)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--placements", type=int, default=100, help="random fault placements per (N, k)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sizes", default="32,128,512,1344")
    parser.add_argument("--ks", default="1,2,4")
    parser.add_argument(
        "--no-counters", dest="counters", action="store_false", help="traffic alone, without port counters"
    )
    parser.add_argument(
        "--routes",
        choices=["model", "sm"],
        default="model",
        help="sm: the fabric follows the subnet manager's tables (another destination order), localized on them "
        "and, for comparison, on podctl's model",
    )
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    ks = [int(x) for x in args.ks.split(",")]
    header = (
        f"{'N':>5} {'k':>2} {'tiers':>5} {'routes':>13} {'extra rounds min/mean/max':>26} {'bound':>5} "
        f"{'named/injected':>15} {'named/visible':>14} {'false acc.':>10} {'unresolved':>10} {'s':>6}"
    )
    print(
        f"localize_bench: {args.placements} placements per (N, k), seed {args.seed}, threshold {THRESHOLD:.0%} of link "
        f"rate, {'with port counters' if args.counters else 'traffic alone'}, "
        f"{'subnet manager tables' if args.routes == 'sm' else 'routes as modelled'}"
    )
    print(header)
    print("-" * len(header))
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in sizes:
            fabric, plan = fabric_for(nodes, Path(tmp))
            model = Router(plan)
            if args.routes == "sm":
                order = list(model.hosts)
                random.Random(f"{args.seed}-order-{nodes}").shuffle(order)
                routes = Router(plan, order=order)
                # what `--lfts` hands the localizer: the tables the fabric forwards by
                told = Router(plan, forwarding=routes.tables())
                given = [("sm tables", told, True), ("model guessed", model, False)]
            else:
                routes = model
                given = [("model", model, True)]
            for k in ks:
                for label, router, judged in given:
                    rng = random.Random(f"{args.seed}-{nodes}-{k}")
                    row = _cell(plan, fabric.rate, k, rng, args.placements, routes, router, args.counters)
                    bound = k * math.ceil(math.log2(nodes)) + 2
                    over = max(row["extra"]) > bound
                    bad = over or row["false"] > 0 or (args.counters and row["named"] < row["injected"])
                    failed |= judged and bad
                    extra = row["extra"]
                    print(
                        f"{nodes:>5} {k:>2} {plan.tiers:>5} {label:>13} "
                        f"{min(extra):>9} / {statistics.mean(extra):>5.2f} / {max(extra):>3}{'!' if over else ' ':<4} "
                        f"{bound:>5} {row['named']:>7}/{row['injected']:<7} {row['named']:>6}/{row['visible']:<7} "
                        f"{row['false']:>10} {row['suspects']:>10} {row['s']:>6.1f}",
                        flush=True,
                    )
    if failed:
        print(
            "FAILED: a bound was exceeded, something was falsely accused or (with counters) left unnamed",
            file=sys.stderr,
        )
        return 1
    return 0


def _cell(plan, rate: str, k: int, rng: random.Random, placements: int, routes: Router, router: Router,
          counters: bool) -> dict:  # fmt: skip
    """`placements` random placements of k faults on a fabric that routes by `routes`, localized on `router`."""
    extra: list[int] = []
    named = injected = visible = false = with_suspects = 0
    start = time.perf_counter()
    for _ in range(placements):
        faults = random_faults(plan, k, rng)
        sim = SimulatedFabric(plan, faults, rate, routes)
        threshold = THRESHOLD * sim.rate_gbps
        evidence = sim.port_evidence() if counters else ()
        diagnosis = localize(plan, sim, threshold, router, port_evidence=evidence)
        extra.append(diagnosis.rounds_used - 1)
        true_nodes = {f.node for f in faults if f.node}
        true_cables = {f.cable for f in faults if f.cable}
        named += sum(n in true_nodes for n in diagnosis.bad_nodes)
        named += sum(c in true_cables for c in diagnosis.bad_cables)
        false += sum(n not in true_nodes for n in diagnosis.bad_nodes)
        false += sum(c not in true_cables for c in diagnosis.bad_cables)
        with_suspects += bool(diagnosis.suspects or diagnosis.unexplained)
        injected += k
        for fault in faults:
            alone = SimulatedFabric(plan, [fault], rate, routes)
            visible += alone.run_round([Test(routes.hosts)])[0].bandwidth < threshold
    return {
        "extra": extra,
        "named": named,
        "injected": injected,
        "visible": visible,
        "false": false,
        "suspects": with_suspects,
        "s": time.perf_counter() - start,
    }


if __name__ == "__main__":
    sys.exit(main())
