"""`make mutants`: the breaks the tests must catch, each tried on a copy of the tree.

Each entry of this folder is a patch (`<name>.patch`): a unified diff against the repository that
breaks what a test guards, after a header of its own (git apply reads past it):

    # What the patch breaks, in a line.
    caught-by: tests/validation/test_trusted_exec.py::test_...      (one line per test; any may catch it)

For each entry the working tree as it is (the files git tracks and the untracked ones it does not
ignore, uncommitted edits included) is copied to a temporary folder, the patch applied there and
the named tests run there (`pytest -x`, PODCTL_TEST_ALL: a test that cannot run fails). An entry
is caught when they fail; it survives when they pass. The tests are first run once on an
unpatched copy, where they must pass: a test that fails anyway catches nothing. The working tree
is never written. Prints a table; exit status 1 when an entry survives, does not apply or its tests
do not run, 0 when every one is caught (docs/testing.md).

    python tests/mutants/run.py [NAME...]       # the entries named (default: all)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CAUGHT = 1  # pytest's exit status when tests failed; any other is no verdict (collection error, no tests)


@dataclass(frozen=True)
class Mutant:
    name: str
    patch: Path
    summary: str
    tests: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    result: str
    seconds: float
    detail: str = ""


def load(patch: Path) -> Mutant:
    summary, tests = "", []
    for line in patch.read_text().splitlines():
        if line.startswith(("--- ", "diff ")):
            break
        if line.startswith("caught-by:"):
            tests.append(line.partition(":")[2].strip())
        elif line.startswith("#") and not summary:
            summary = line.lstrip("#").strip()
    if not tests:
        sys.exit(f"{patch}: no `caught-by:` line names a test that must catch the break")
    return Mutant(patch.stem, patch, summary, tuple(tests))


def copy_tree(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # removed in the working tree
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / name, follow_symlinks=False)


def run_tests(tree: Path, tests: tuple[str, ...], log: Path) -> tuple[int, list[str]]:
    """pytest's exit status on `tests` in `tree`, and the tests that failed."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PODCTL_TEST_ALL": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", "-rfE"]
    with log.open("w") as out:
        code = subprocess.run(
            [*command, "--basetemp", str(tree.parent / f"{tree.name}-pytest"), *tests],
            cwd=tree,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    failed = [  # "FAILED <node id> - <why>": a node id may hold spaces
        line.partition(" ")[2].split(" - ", 1)[0]
        for line in log.read_text().splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    ]
    return code, failed


def tail(log: Path, lines: int = 15) -> str:
    return "\n".join("    " + line for line in log.read_text(errors="replace").splitlines()[-lines:])


def try_mutant(mutant: Mutant, work: Path) -> Outcome:
    started = time.monotonic()
    tree = work / mutant.name
    copy_tree(tree)
    applied = subprocess.run(["git", "apply", str(mutant.patch)], cwd=tree, capture_output=True, text=True)
    if applied.returncode != 0:
        return Outcome("DOES NOT APPLY", time.monotonic() - started, applied.stderr.strip())
    log = work / f"{mutant.name}.log"
    code, failed = run_tests(tree, mutant.tests, log)
    seconds = time.monotonic() - started
    if code == CAUGHT:
        return Outcome("caught", seconds, ", ".join(failed))
    if code == 0:
        return Outcome("SURVIVED", seconds, "its tests pass with the break")
    return Outcome(f"NO VERDICT (pytest {code})", seconds, tail(log))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="entries to try (default: every *.patch here)")
    args = parser.parse_args(argv)
    mutants = [load(p) for p in sorted(HERE.glob("*.patch")) if not args.names or p.stem in args.names]
    if not mutants:
        sys.exit(f"no entry in {HERE} named {' '.join(args.names)}")
    with tempfile.TemporaryDirectory(prefix="podctl-mutants-") as folder:
        work = Path(folder)
        baseline = work / "unpatched"
        copy_tree(baseline)
        every_test = tuple(dict.fromkeys(t for m in mutants for t in m.tests))
        started = time.monotonic()
        code, failed = run_tests(baseline, every_test, work / "unpatched.log")
        print(f"unpatched: pytest {code} in {time.monotonic() - started:.0f} s over {len(every_test)} test(s)")
        if code != 0:
            print(f"the tests fail without a break, so no break can be judged:\n{tail(work / 'unpatched.log')}")
            return 1
        outcomes = {}
        for mutant in mutants:
            outcomes[mutant.name] = outcome = try_mutant(mutant, work)
            print(f"{mutant.name}: {outcome.result} ({outcome.seconds:.0f} s)", flush=True)
    width = max(len(m.name) for m in mutants)
    print(f"\n{'entry':<{width}}  {'result':<14}  {'s':>4}  what breaks / caught by")
    for mutant in mutants:
        outcome = outcomes[mutant.name]
        print(f"{mutant.name:<{width}}  {outcome.result:<14}  {outcome.seconds:>4.0f}  {mutant.summary}")
        if outcome.detail:
            print(f"{'':<{width}}  {'':<14}  {'':>4}  {outcome.detail}")
    bad = [name for name, outcome in outcomes.items() if outcome.result != "caught"]
    print(f"\n{len(mutants) - len(bad)} of {len(mutants)} caught" + (f"; not caught: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
