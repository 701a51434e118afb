#!/usr/bin/env python3
"""What Ansible itself costs the controller, apart from the nodes: per host-task, per second of waiting,
and whether the size of podctl's group_vars (which grows with the pod) changes either.

Runs ansible-playbook (the one beside this Python) against N hosts on this machine
(`ansible_connection: local`, no SSH, no containers), with podctl's forks (one per host), and
measures wall and CPU seconds (ansible-playbook and everything it waited for) of:

- `tasks`: T `command: true` tasks on every host: the controller's work per host-task (with
  local connections the module's own run counts too, so this is an upper bound);
- `wait`: one `command: sleep S` task, for two values of S: the CPU per second of waiting is the
  difference over the difference in S;
- `tasks` again with the group_vars of a large pod (`--group-vars FILE`, e.g. from
  `podctl inventory` of a 1,344-node site).

    .venv/bin/python bench/ansible_overhead.py [--hosts 32] [--tasks 5] [--group-vars FILE]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(folder: Path, hosts: int, tasks: list[str], group_vars: Path | None) -> dict[str, float]:
    inventory = folder / "inventory"
    shutil.rmtree(inventory, ignore_errors=True)
    (inventory / "group_vars" / "all").mkdir(parents=True)
    lines = ["all:", "  hosts:"] + [
        f"    h{i:04d}: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}"
        for i in range(hosts)
    ]
    (inventory / "hosts.yml").write_text("\n".join(lines) + "\n")
    if group_vars is not None:
        shutil.copy(group_vars, inventory / "group_vars" / "all" / "podctl.yml")
    playbook = folder / "play.yml"
    body = "".join(f"    - command: {task}\n      changed_when: false\n" for task in tasks)
    playbook.write_text(f"- hosts: all\n  gather_facts: false\n  tasks:\n{body}")
    ansible = Path(sys.executable).parent / "ansible-playbook"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(
        [str(ansible), "-i", str(inventory / "hosts.yml"), "-f", str(hosts), str(playbook)],
        check=True,
        capture_output=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(time.monotonic() - started, 1), "cpu_s": round(cpu, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=32)
    p.add_argument("--tasks", type=int, default=5)
    p.add_argument("--group-vars", type=Path, help="a podctl group_vars file (group_vars/all/podctl.yml)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        one = run(folder, args.hosts, ['"true"'], None)
        many = run(folder, args.hosts, ['"true"'] * (1 + args.tasks), None)
        per_task = (many["cpu_s"] - one["cpu_s"]) / (args.hosts * args.tasks)
        print(f"{args.hosts} hosts, {args.tasks} more tasks: {many} against {one}: {per_task:.3f} CPU s per host-task")
        short, long = run(folder, args.hosts, ["sleep 1"], None), run(folder, args.hosts, ["sleep 41"], None)
        per_s = (long["cpu_s"] - short["cpu_s"]) / 40
        print(f"waiting: sleep 1 {short}, sleep 41 {long}: {per_s:.3f} CPU s per second of waiting, {args.hosts} forks")
        if args.group_vars is not None:
            big = run(folder, args.hosts, ['"true"'] * (1 + args.tasks), args.group_vars)
            size = args.group_vars.stat().st_size
            print(f"with {args.group_vars} ({size} bytes) as group_vars: {big} against {many}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
