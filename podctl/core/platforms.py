"""The operating systems podctl deploys, and the Slurm each of them ships: the one table.

A site names its nodes' OS (`os: {distribution: debian, release: "13"}`, per site and per
node group). Everything else follows from this table: the schema's choices, the sim's node image
for each release, the Slurm generation `podctl check` holds to Slurm's version rule, and the
rows of docs/platforms.md. The roles do not read this table: they choose by what they find on
the node (its /etc/os-release, its installed Slurm), through the collection's platform vars
file of the same name (`playbooks/vars/platform-debian-13.yml`).

Adding a release is a row here, that vars file, and its sim image (built from `codename`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SlurmVersion:
    """A Slurm major release, as SchedMD numbers them: YY.MM (22.05, 23.02, 23.11, ...)."""

    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> SlurmVersion:
        """'24.11', '24.11.5' or '24.11.5-4+deb13u1' -> 24.11; ValueError on anything else."""
        parts = text.strip().split(".")
        if len(parts) < 2 or not parts[0].isdigit() or not parts[1][:2].isdigit():
            raise ValueError(f"not a Slurm version: {text!r}")
        return cls(int(parts[0]), int(parts[1][:2]))

    def __str__(self) -> str:
        return f"{self.year:02d}.{self.month:02d}"

    @property
    def index(self) -> int:
        """Position in SchedMD's sequence of major releases, which counts for Slurm's version rule
        (not the calendar): 22.05 -> 23.02 -> 23.11 is two releases. Since 24.05, two a year."""
        if str(self) in _SLURM_MAJORS:
            return _SLURM_MAJORS.index(str(self))
        if self.year >= 24:
            return _SLURM_MAJORS.index("24.05") + (self.year - 24) * 2 + (1 if self.month >= 11 else 0)
        return self.year - 20  # older than podctl has known: far enough apart for the rule


# SchedMD's major releases up to the first of the twice-yearly cadence.
_SLURM_MAJORS = ("20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05")


# Slurm's own rule (SchedMD's upgrade guide): slurmdbd >= slurmctld >= slurmd and the client
# commands, and a daemon talks to peers at most this many major releases older than itself.
SLURM_MAX_RELEASES_APART = 2


def slurm_releases_apart(newer: SlurmVersion, older: SlurmVersion) -> int:
    return newer.index - older.index


@dataclass(frozen=True)
class Platform:
    distribution: str  # /etc/os-release ID
    release: str  # /etc/os-release VERSION_ID
    codename: str  # the suite debootstrap and apt name
    python: str  # the node's python3
    slurm: SlurmVersion  # slurm-wlm in the release's archive
    prometheus: str  # the release's prometheus package
    tested: str  # how podctl tests it (docs/platforms.md)

    @property
    def key(self) -> str:
        return f"{self.distribution}-{self.release}"

    @property
    def title(self) -> str:
        return f"{self.distribution.capitalize()} {self.release} ({self.codename})"


SUPPORTED: tuple[Platform, ...] = (
    Platform(
        distribution="debian",
        release="12",
        codename="bookworm",
        python="3.11",
        slurm=SlurmVersion(22, 5),
        prometheus="2.42",
        tested="sim pod in make test: deploy, no-change re-run, validate CERTIFIED",
    ),
    Platform(
        distribution="debian",
        release="13",
        codename="trixie",
        python="3.13",
        slurm=SlurmVersion(24, 11),
        prometheus="2.53",
        tested="sim pod in make test: the whole sim matrix (faults, day 2, gate, rolling changes)",
    ),
)

# A site that does not say: the newest release supported.
DEFAULT: Platform = SUPPORTED[-1]


def find(distribution: str, release: str) -> Platform | None:
    for platform in SUPPORTED:
        if (platform.distribution, platform.release) == (distribution, str(release)):
            return platform
    return None


def by_key(key: str) -> Platform:
    for platform in SUPPORTED:
        if platform.key == key:
            return platform
    raise KeyError(key)


def supported_text() -> str:
    return ", ".join(f"{p.distribution} {p.release}" for p in SUPPORTED)


@dataclass(frozen=True)
class SlurmDaemon:
    host: str
    daemon: str  # slurmdbd, slurmctld, slurmd or the client commands
    version: SlurmVersion


# Who must be at least as new as whom: slurmdbd, then slurmctld, then slurmd and the commands.
_SLURM_TIERS = {"slurmdbd": 0, "slurmctld": 1, "slurmd": 2, "commands": 2}


def slurm_rule_problems(daemons: list[SlurmDaemon]) -> list[str]:
    """Slurm's version rule over a pod's daemons: every daemon is at least as new as those of the
    tier below (slurmdbd >= slurmctld >= slurmd and the commands), and no two neighbours are more
    than SLURM_MAX_RELEASES_APART major releases apart. One line per pair of versions that breaks
    it, naming an example host of each."""
    problems: list[str] = []
    for daemon in ("slurmctld", "slurmdbd"):
        peers = [d for d in daemons if d.daemon == daemon]
        if len({d.version for d in peers}) > 1:
            shown = ", ".join(f"{d.version} on {d.host}" for d in peers)
            problems.append(f"the {daemon}s run different Slurm releases ({shown}): they must be the same")
    seen: set[tuple[str, str, str, str]] = set()
    present = {_SLURM_TIERS[d.daemon] for d in daemons}
    for upper in daemons:
        for lower in daemons:
            high, low = _SLURM_TIERS[upper.daemon], _SLURM_TIERS[lower.daemon]
            # Neighbouring tiers only: slurmd is held to slurmctld, and slurmctld to slurmdbd.
            if high >= low or any(high < t < low for t in present):
                continue
            pair = (upper.daemon, str(upper.version), lower.daemon, str(lower.version))
            if pair in seen:
                continue
            if lower.version > upper.version:
                seen.add(pair)
                problems.append(
                    f"{lower.daemon} {lower.version} on {lower.host} is newer than {upper.daemon} "
                    f"{upper.version} on {upper.host} (Slurm needs {upper.daemon} at least as new)"
                )
            elif slurm_releases_apart(upper.version, lower.version) > SLURM_MAX_RELEASES_APART:
                seen.add(pair)
                problems.append(
                    f"{lower.daemon} {lower.version} on {lower.host} is "
                    f"{slurm_releases_apart(upper.version, lower.version)} major releases older than "
                    f"{upper.daemon} {upper.version} on {upper.host} (Slurm allows at most "
                    f"{SLURM_MAX_RELEASES_APART})"
                )
    return problems
