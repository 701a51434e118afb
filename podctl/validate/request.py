"""What a certification is asked to do: built by a command from its options, passed to
certify_site (podctl.validate.certify) or certify_local (podctl.validate.local), which do the work.
Plain data: nothing here reads a file or reaches a node."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from podctl.core.model import Site
from podctl.validate.fabric_inputs import FabricDumps

# What a certification says as it goes, one line at a time (the commands print it on stderr).
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ValidateRequest:
    """One certification of a deployed pod's compute nodes: what `podctl validate SITE` parsed, or
    what `podctl nodes recheck` asks for the drained nodes it reserved."""

    site: Site
    private_key: Path | None  # SSH key for root on the nodes, as podctl.core.state.private_key_for gave it
    suites: tuple[str, ...]  # in podctl.validate.figures.SUITES order
    report_dir: Path  # report.json, junit.xml, report.html; raw outputs under raw/
    burnin: str = "quick"  # podctl.validate.local.BURNIN_PROFILES
    # --nodes: only these compute nodes are certified, paired in multi-node jobs with known-good
    # partners from the rest of the pod. Empty: every compute node not under validation.exclude.
    only: tuple[str, ...] = ()
    drain: bool = False  # drain every compute node that failed on something of its own
    # The fabric tools' output to check the cabling of (FabricDumps() when none was given: a sim pod's
    # validate then collects it itself). None: the fabric is not looked at (nodes recheck).
    fabric: FabricDumps | None = None
    vault_password_files: tuple[str, ...] = ()  # what opens the site's !vault values for conformance
    vault_ids: tuple[str, ...] = ()
    mitogen: bool = True  # conformance's Ansible runs Mitogen's strategy, else plain OpenSSH
    full_drift: bool = False  # conformance runs the roles in check mode even where the nodes' records hold
    reservation: str | None = None  # every Slurm job runs inside this reservation
    # With `only`, where their partners come from: these (nodes recheck: the idle nodes it reserved),
    # else the pod's other compute nodes that Slurm lists as idle.
    partner_pool: tuple[str, ...] | None = None
    mode: str = "site"  # what report.json calls the run: site (podctl validate) or recheck


@dataclass(frozen=True)
class LocalRequest:
    """One certification of this host alone, as `podctl validate --local` parsed it."""

    profile: str  # the name of a built-in hardware profile
    suites: tuple[str, ...]  # in podctl.validate.figures.LOCAL_SUITES order
    report_dir: Path
    burnin: str = "quick"
    python: str | None = None  # a Python with torch that runs the checks; None: the one running podctl
    gpus: int | None = None  # local ranks for collectives and smoke; None: the profile's GPUs
    nccl_tests: str | None = None  # a folder with an nccl-tests build, run beside podctl's collectives
