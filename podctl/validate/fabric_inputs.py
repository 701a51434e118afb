"""What `podctl validate SITE` knows of the compute fabric before any suite runs.

    the fabric tools' output (--ibnetdiscover, --iblinkinfo, --ibqueryerrors, --lfts), or on a sim
    pod what its SM host's tools print, collected here (fabric_tools)
        -> the cabling check's runs, anchored by the HCAs' GUIDs (--anchors, else read over SSH)
        -> the planned name of each device of the dump (for ibqueryerrors' ports and the tables)
        -> the routes fault localization follows: the subnet manager's (--lfts), else podctl's model

The paramiko-bound modules are imported where they are used, so that `podctl validate --help`
runs on a podctl installed without its deploy extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podctl.core.model import Site
from podctl.validate.judge import CheckRun

if TYPE_CHECKING:
    from podctl.localize.routing import Forwarding
    from podctl.runtime.remote import Nodes
    from podctl.validate.fabric_tools import Collected
    from podctl.validate.request import Progress


@dataclass(frozen=True)
class FabricDumps:
    """The fabric tools' output to check the cabling of, and the HCAs' GUIDs if given as a file."""

    ibnetdiscover: Path | None = None
    iblinkinfo: Path | None = None
    anchors: Path | None = None
    ibqueryerrors: Path | None = None
    lfts: Path | None = None


@dataclass
class FabricEvidence:
    """The fabric's part of a certification, read before any suite runs; empty when the fabric is
    not looked at (podctl nodes recheck, which certifies nodes, not cables)."""

    runs: list[CheckRun] = field(default_factory=list)  # the cabling check's, and the routes' on a sim pod
    notes: list[str] = field(default_factory=list)  # for the log: what was read, and how far to trust it
    names_by_guid: dict[str, str] = field(default_factory=dict)  # the dump's devices by their planned names
    forwarding: Forwarding | None = None  # the subnet manager's routes; None: podctl's model of them
    ibqueryerrors: Path | None = None  # the port counters' dump the report judges
    collected: Collected | None = None  # what validate ran on a sim pod's SM host itself

    def tools_meta(self) -> dict[str, Any] | None:
        """report.json's `fabric_tools`: where the tools ran, their output, and how long they took."""
        if self.collected is None:
            return None
        return {
            "host": self.collected.host,
            "emulated": True,
            "files": {name: str(path) for name, path in self.collected.files.items()},
            "seconds": self.collected.seconds,
        }


def collects_fabric(site: Site, dumps: FabricDumps) -> bool:
    """Whether validate reads the fabric tools itself: on a sim pod whose emulated fabric has an SM
    host, when no tool output was given."""
    from podctl.core.state import sim_pod
    from podctl.derive.emulated import has_emulated_fabric

    given = (dumps.ibnetdiscover, dumps.iblinkinfo, dumps.ibqueryerrors, dumps.lfts)
    return all(g is None for g in given) and has_emulated_fabric(site) and sim_pod(site)


def cabling(site: Site, dumps: FabricDumps, nodes: Nodes) -> tuple[list[CheckRun], list[str], dict[str, str]]:
    """The cabling check's runs, anchored by the GUIDs the nodes report (or the file given); notes for
    the log; the planned name of each device of the ibnetdiscover dump (for ibqueryerrors' ports and
    the forwarding tables' switches and HCAs)."""
    if not (dumps.ibnetdiscover or dumps.iblinkinfo):
        return [], [], {}
    from podctl.ibfabric.identity import read_anchors
    from podctl.validate.cabling import cabling_runs, names_by_guid, node_anchors_over_ssh

    if dumps.anchors is not None:
        anchors, notes = read_anchors(str(dumps.anchors)), []
    else:
        anchors, notes = node_anchors_over_ssh(site, nodes)
    runs = cabling_runs(site, dumps.ibnetdiscover, dumps.iblinkinfo, anchors)
    warnings = runs[0].envelope["details"].get("warnings", []) if runs else []
    names = names_by_guid(site, dumps.ibnetdiscover, anchors) if dumps.ibqueryerrors or dumps.lfts else {}
    return runs, notes + [f"cabling: {w}" for w in warnings], names


# Said when localization has no tables of the subnet manager to follow.
MODEL_ROUTES_NOTE = (
    "routes: podctl's model of ftree, not the subnet manager's (no --lfts): OpenSM numbers "
    "destinations otherwise (a fifth of the entries differ at 4 SUs), so a failing test may "
    "accuse the wrong cable; give --lfts (dump_lfts.sh > FILE) for localization to follow its tables"
)


def read_fabric(site: Site, dumps: FabricDumps, nodes: Nodes, workdir: Path, progress: Progress) -> FabricEvidence:
    """The fabric's evidence from the dumps given, or on a sim pod from its SM host's tools (their
    output kept under workdir/fabric)."""
    collected = None
    if collects_fabric(site, dumps):
        # A sim pod's fabric is ibsim's: its SM host runs the real tools against it, as a person
        # would on a pod, and their output is judged as the files given with the options.
        from podctl.validate.fabric_tools import collect

        collected = collect(site, nodes, workdir / "fabric", progress)
        files = collected.files
        dumps = FabricDumps(files["ibnetdiscover"], files["iblinkinfo"], dumps.anchors, files["ibqueryerrors"],
                            files["lfts"])  # fmt: skip
    runs, notes, guid_names = cabling(site, dumps, nodes)
    forwarding = None
    if collected is not None and dumps.lfts is not None:
        from podctl.validate.cabling import routes_run

        run, forwarding, route_notes = routes_run(site, dumps.lfts, guid_names)
        runs.append(run)
        notes += route_notes
    elif dumps.lfts is not None:
        from podctl.validate.cabling import subnet_manager_routes

        forwarding, route_notes = subnet_manager_routes(site, dumps.lfts, guid_names)
        notes += route_notes
    elif "compute" in site.fabrics:
        notes.append(MODEL_ROUTES_NOTE)
    return FabricEvidence(runs, notes, guid_names, forwarding, dumps.ibqueryerrors, collected)
