"""The fabric tools' output on a sim pod, collected on its SM host: what `podctl validate` is
otherwise given with --ibnetdiscover, --iblinkinfo, --lfts and --ibqueryerrors.

On a pod `podctl sim up` made (podctl.core.state.sim_pod), the compute fabric is ibsim's and the SM host
runs the real infiniband-diags against it through the fabric role's `podctl-umad2sim`
(podctl.derive.emulated.UMAD2SIM_PROGRAM: umad2sim preloaded, attached where that host's OpenSM is). Each
tool's output is kept in the report folder (`fabric/<name>.txt`), read by the same checks as a
real pod's files: cabling, the subnet manager's routes, port counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from podctl.core.model import Site
from podctl.derive.emulated import UMAD2SIM_PROGRAM, emulated_server
from podctl.ibfabric.check import FabricCheckError
from podctl.runtime.remote import Nodes, command_line

# (name, argv): the name is the validate option the output stands for.
TOOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ibnetdiscover", ("ibnetdiscover",)),
    ("iblinkinfo", ("iblinkinfo",)),
    ("lfts", ("dump_fts",)),
    # With the SM answering SA queries; it exits 1 when it found errors, after its summary.
    ("ibqueryerrors", ("ibqueryerrors",)),
)
TOOL_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Collected:
    host: str
    files: dict[str, Path]  # name (TOOLS) -> the tool's standard output
    seconds: dict[str, float]


def collect(site: Site, nodes: Nodes, folder: Path, progress: Callable[[str], None]) -> Collected:
    """Run every tool on the pod's emulated SM host; FabricCheckError (exit 2) when one cannot run."""
    import time

    host = emulated_server(site)
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    seconds: dict[str, float] = {}
    for name, argv in TOOLS:
        started = time.monotonic()
        result = nodes.run(host, command_line([UMAD2SIM_PROGRAM, *argv]), timeout_s=TOOL_TIMEOUT_S)
        seconds[name] = round(time.monotonic() - started, 2)
        finished = result.returncode == 0 or (name == "ibqueryerrors" and "## Summary" in result.stdout)
        if result.error is not None or not finished or result.dropped:
            why = result.error or result.dropped_note or f"exit {result.returncode}: {result.stderr.strip()[-300:]}"
            raise FabricCheckError(
                f"{' '.join(argv)} on {host}, against the sim pod's emulated fabric: {why}; is the fabric up "
                f"(`podctl sim up`) and the fabric stage deployed (`podctl deploy --only fabric`)?"
            )
        files[name] = folder / f"{name}.txt"
        files[name].write_text(result.stdout)
    progress(
        f"fabric: {', '.join(argv[0] for _, argv in TOOLS)} run on {host} against the emulated fabric "
        f"({sum(seconds.values()):.1f} s); their output in {folder}"
    )
    return Collected(host, files, seconds)
