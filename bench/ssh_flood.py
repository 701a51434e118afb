#!/usr/bin/env python3
"""Many commands at once over SSH to one host: handshakes unthrottled against podctl's limit.

What a pairwise round does to the controller on a large pod (one srun per SSH connection).
Against a deployed sim pod's node, whose sshd keeps the stock MaxStartups (10:30:100):

    .venv/bin/python bench/ssh_flood.py SITE [--host head01] [--many 48]

Prints, for each setting, how many commands ran and why the others did not.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from podctl.core import state
from podctl.derive.site import load_site
from podctl.runtime import remote

SETTINGS = (("unlimited", 10_000, 1), ("unlimited", 10_000, remote.HANDSHAKE_TRIES))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("site")
    p.add_argument("--host", default="head01")
    p.add_argument("--many", type=int, default=48)
    args = p.parse_args(argv)
    site = load_site(args.site)
    podctls = ("podctl's", remote.HANDSHAKES_PER_HOST, remote.HANDSHAKE_TRIES)
    for name, limit, tries in (*SETTINGS, podctls):
        remote.HANDSHAKES_PER_HOST, remote.HANDSHAKE_TRIES = limit, tries
        nodes = remote.site_nodes(site, state.private_key_for(site, None, "podctl sim up"))
        started = time.monotonic()
        with ThreadPoolExecutor(args.many) as pool:
            results = list(
                pool.map(lambda i, n=nodes: n.run(args.host, f"sleep 5; echo {i}", timeout_s=120), range(args.many))
            )
        bad = [r.error or f"exit {r.returncode}" for r in results if r.error or r.returncode != 0]
        print(
            f"handshakes at once: {name} ({limit}), tries {tries}: {args.many - len(bad)}/{args.many} ran "
            f"in {time.monotonic() - started:.1f} s; {len(bad)} failed: {sorted(set(bad))[:2]}"
        )
    remote.HANDSHAKES_PER_HOST, remote.HANDSHAKE_TRIES = podctls[1:]
    return 0


if __name__ == "__main__":
    sys.exit(main())
