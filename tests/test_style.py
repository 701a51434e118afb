"""The house rules the tools can check: ruff (lint and format), import layers, module size.

The layers (pyproject.toml, [tool.importlinter]): podctl's rooms (its folders),
commands over features over derive and runtime over the core, each contract
exhaustive; no library module importing a command module; the node-side
`validation` package never importing podctl. A back-import, or a module no
contract places, fails here instead of waiting for a review. The README's
table of rooms is checked against the folders and the contract. The tests'
conftest.py files hold fixtures and hooks alone; what tests share lives in
tests/helpers/ and is never imported from a conftest.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers.repo import REPO

BIN = Path(sys.executable).parent
# ~500 lines: a module beyond says at its top why it is one module.
MODULE_LINES = 520
REASON = "Why one module"


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    proc = subprocess.run([_tool("ruff"), *args], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_import_layers() -> None:
    proc = subprocess.run([_tool("lint-imports")], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_the_readme_shows_the_rooms_as_the_folders_and_the_contract_have_them() -> None:
    """One README row per layer of the rooms' contract, top to bottom, naming exactly that
    layer's folders and modules; every folder and module of podctl is in one row."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    rooms = next(c for c in config if c.get("containers") == ["podctl"])
    layers = [sorted(name.strip() for name in layer.split("|")) for layer in rooms["layers"]]
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Layout", 1)[1].split("\n\n- ", 1)[0]
    rows = [
        sorted(re.sub(r"(\.py|/)$", "", name) for name in re.findall(r"`([^`]+)`", line.split("|")[1]))
        for line in table.splitlines()
        if line.startswith("| `")
    ]
    assert rows == layers, "README.md's table of rooms and pyproject.toml's contract differ"
    # What Python imports from podctl/: its modules and its packages (the collection is not one).
    on_disk = {p.stem for p in (REPO / "podctl").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert on_disk - {"__init__", *rooms.get("exhaustive_ignores", [])} == {name for row in rows for name in row}


def test_large_modules_say_why() -> None:
    unexplained = []
    for path in [*(REPO / "podctl").rglob("*.py"), *(REPO / "validation").rglob("*.py")]:
        lines = path.read_text().count("\n")
        if lines > MODULE_LINES:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            if REASON not in doc:
                unexplained.append(f"{path.relative_to(REPO)} ({lines} lines)")
    assert not unexplained, f"split these, or say at their top why they are one module: {unexplained}"


# The function-size budget: ruff's C901 (McCabe complexity) and PLR0915 (statements) over podctl
# and the node-side validation package. A function over it is split, or named here with why it is
# one function; a name that is back under the budget must leave the list.
MAX_COMPLEXITY = 15
MAX_STATEMENTS = 60
OVER_BUDGET = {
    "podctl/ibfabric/iblinkinfo.py:parse_iblinkinfo": "a parser of one tool's text: one branch per kind of line, "
    "in the order iblinkinfo prints them; split, each piece would hand the parser's state to the next",
    "podctl/ibfabric/ibnetdiscover.py:_parse_topology": "a parser of ibnetdiscover's topology file: one branch per "
    "kind of record (switch, HCA, port line, comment), sharing the record being read",
    "podctl/ibfabric/lft.py:parse_lfts": "a parser of dump_lfts output from OpenSM and ibroute, whose two dialects "
    "interleave line by line; one loop keeps both readable side by side",
    "podctl/localize/localize.py:Localizer._links": "the search for bad cables: a matching, then rounds aimed at "
    "the cables still open, then the fallback pairs; each round reads what the one before left",
    "podctl/sim/cli.py:fault_cmd": "a command's argument checks: one branch per option (kill, rate, services, "
    "errors, clear) and the refusals between them, each with its message",
    "podctl/derive/sitefile/fabrics.py:FabricSections.fabrics": "one site-file section read field by field, each field's "
    "check and error where the field is read (the strict model's order)",
    "validation/burnin.py:gpu_burnin": "a GPU burn-in's one timed loop over every device, its warm-up and its "
    "checks, whose timings must not be broken across calls",
    "validation/collectives.py:worker": "one rank of the collectives test: its sizes, warm-up and timed loop in "
    "one place, as nccl-tests keeps them",
    "validation/health.py:_check_one_gpu": "one NVML query and its check per GPU property, each a branch that "
    "tolerates the property missing on that GPU model",
    "validation/result.py:envelope_problems": "the shape of a check's result from a node podctl does not "
    "control, one check per field, every problem named",
}


def _function_at(path: Path, line: int) -> str:
    """The qualified name (Class.method) of the function defined at `line` of `path`."""
    tree = ast.parse(path.read_text())

    def walk(node: ast.AST, prefix: str) -> str | None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and child.lineno == line:
                    return name
                found = walk(child, f"{name}.")
                if found:
                    return found
        return None

    return walk(tree, "") or f"line {line}"


def test_functions_stay_within_the_size_budget() -> None:
    proc = subprocess.run(
        [
            _tool("ruff"),
            "check",
            "--select",
            "C901,PLR0915",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--config",
            f"lint.pylint.max-statements={MAX_STATEMENTS}",
            "--output-format",
            "json",
            "--exit-zero",
            "podctl",
            "validation",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    over: dict[str, list[str]] = {}
    for finding in json.loads(proc.stdout):
        path = Path(finding["filename"])
        name = f"{path.relative_to(REPO)}:{_function_at(path, finding['location']['row'])}"
        over.setdefault(name, []).append(finding["message"])
    unexplained = {name: why for name, why in over.items() if name not in OVER_BUDGET}
    assert not unexplained, f"split these, or name them in OVER_BUDGET with why they are one function: {unexplained}"
    back_under = sorted(set(OVER_BUDGET) - set(over))
    assert not back_under, f"within the budget now, take them off OVER_BUDGET: {back_under}"


def _imports_a_conftest(node: ast.AST) -> bool:
    """`import tests.conftest`, `from .conftest import X`, `from tests import conftest`, ..."""
    if isinstance(node, ast.Import):
        return any("conftest" in alias.name.split(".") for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        module = (node.module or "").split(".")
        return "conftest" in module or any(alias.name == "conftest" for alias in node.names)
    return False


def _is_fixture(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in ("pytest.fixture", "fixture"):
            return True
    return False


def test_conftests_hold_fixtures_and_hooks_alone_and_no_module_imports_one() -> None:
    """A helper lives in tests/helpers/ and is imported from there: a conftest.py defines fixtures
    and pytest's hooks (`pytest_*`) only, no other function and no class, and no module imports
    anything from a conftest (pytest loads those itself)."""
    wrong = []
    for path in sorted([*(REPO / "tests").rglob("*.py"), *(REPO / "bench").rglob("*.py")]):
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(REPO)
        wrong += [
            f"{where}:{node.lineno}: imports from a conftest" for node in ast.walk(tree) if _imports_a_conftest(node)
        ]
        if path.name != "conftest.py":
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                wrong.append(f"{where}:{node.lineno}: class {node.name} (a helper: tests/helpers/)")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if not node.name.startswith("pytest_") and not _is_fixture(node):
                    wrong.append(
                        f"{where}:{node.lineno}: {node.name}() is neither a fixture nor a hook (tests/helpers/)"
                    )
    assert not wrong, "\n".join(wrong)
