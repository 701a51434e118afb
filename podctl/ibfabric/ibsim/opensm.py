"""OpenSM on a simulated fabric: routed once (`opensm -o`), or a subnet manager that stays.

Either way OpenSM keeps everything in the fabric's `opensm/` folder: its cache (`guid2lid`, so
that LIDs stay put from one sweep to the next, as on a pod whose SM restarts), its log, one per
run, and with `dumps` its own files (`opensm-lfts.dump`: every switch's table, the top LID
included, which `ibroute` and `dump_fts` leave out when it is a multiple of 64). It reads the
configuration it is given, else an empty one: the host's /etc/opensm is never read.

What OpenSM really did is read from its log: `<engine> tables configured on all switches` names
the routing engine that routed; ftree refuses a fabric it cannot see as a fat tree (`ERR AB..`)
and OpenSM then falls back to minhop, which `RoutingRun.fell_back` says.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from podctl.ibfabric.ibsim.fabric import SimulatedFabric
from podctl.ibfabric.ibsim.install import IbsimError
from podctl.ibfabric.ibsim.process import spawn, tail, tool_path, wait_for

_ENGINE_USED = re.compile(r"osm_ucast_mgr_process: (\S+) tables configured on all switches")
_ERR = re.compile(r"\b(ERR [0-9A-F]{4}): (.{0,300})")
_STATE = re.compile(r"Entering (MASTER|STANDBY|DISCOVERING|NOT-ACTIVE) state")
MASTER, STANDBY = "MASTER", "STANDBY"


@dataclass(frozen=True)
class RoutingRun:
    requested: str  # the engine(s) asked for, as -R takes them ("ftree", "ftree,updn")
    used: str | None  # the engine that configured the tables, from OpenSM's log; None: none did
    seconds: float
    returncode: int
    errors: tuple[str, ...]  # OpenSM's `ERR xxxx: ...` lines, each once
    log: Path
    lfts_dump: Path | None  # OpenSM's own opensm-lfts.dump, when asked for

    @property
    def fell_back(self) -> bool:
        """OpenSM routed with another engine than the first asked for."""
        return self.used != self.requested.split(",")[0]

    def summary(self) -> str:
        how = f"routed by {self.used}" if self.used else "routed by no engine"
        fallback = f" (asked for {self.requested}: fell back)" if self.fell_back and self.used else ""
        errors = f"; {len(self.errors)} error(s), first: {self.errors[0]}" if self.errors else ""
        return f"OpenSM {how}{fallback} in {self.seconds:.1f} s{errors}"


def read_log(log: Path) -> tuple[str | None, tuple[str, ...]]:
    """(the engine that configured the tables last, OpenSM's ERR lines) of an OpenSM log."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return None, ()
    used = _ENGINE_USED.findall(text)
    errors = dict.fromkeys(f"{code}: {what.strip()}" for code, what in _ERR.findall(text))
    return (used[-1] if used else None), tuple(errors)


def _argv(fabric: SimulatedFabric, engine: str, name: str, config: Path | None, dumps: bool) -> tuple[list[str], Path]:
    folder = fabric.workdir / "opensm"
    folder.mkdir(exist_ok=True)
    if config is None:
        config = folder / "empty.conf"
        config.write_text("")
    log = folder / f"{name}.log"
    log.unlink(missing_ok=True)
    # -d2: every log line flushed as it is written, so that the log says what OpenSM did by now.
    argv = [tool_path("opensm"), "-F", str(config), "-R", engine, "-d", "2", "-f", str(log)]
    argv += ["--dump_files_dir", str(folder)]
    if dumps:
        argv += ["-D", "0x43"]  # errors, info and routing: the routing level writes opensm-lfts.dump
    return argv, log


def _sm_env(fabric: SimulatedFabric, sim_host: str | None) -> dict[str, str]:
    folder = str(fabric.workdir / "opensm")
    return fabric.client_env(sim_host, {"OSM_CACHE_DIR": folder, "OSM_TMP_DIR": folder})


def route(
    fabric: SimulatedFabric,
    engine: str = "ftree",
    *,
    config: Path | None = None,
    sim_host: str | None = None,
    dumps: bool = False,
    timeout: float = 900.0,
    name: str = "route",
) -> RoutingRun:
    """`opensm -o`: one sweep, the fabric routed by `engine`, and OpenSM gone."""
    argv, log = _argv(fabric, engine, name, config, dumps)
    started = time.monotonic()
    with open(fabric.workdir / "opensm" / f"{name}.out", "wb") as out:
        process = spawn(
            [*argv, "-o"],
            _sm_env(fabric, sim_host),
            False,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=fabric.workdir,  # umad2sim writes its stand-in sysfs (sys-PID/) into the working folder
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            fabric.release(process.pid)
            raise IbsimError(
                f"OpenSM ({engine}) did not route {fabric.workdir} within {timeout:g} s: see {log}"
            ) from None
    used, errors = read_log(log)
    if code != 0 or used is None:
        raise IbsimError(
            f"OpenSM ({engine}) did not route the fabric (exit {code}): "
            + (errors[0] if errors else tail(log) or "it logged nothing")
            + f"; see {log}"
        )
    dump = fabric.workdir / "opensm" / "opensm-lfts.dump"
    return RoutingRun(engine, used, time.monotonic() - started, code, errors, log, dump if dumps else None)


class SubnetManager:
    """An OpenSM that stays: master, or standby while another SM of higher priority is master."""

    def __init__(self, fabric: SimulatedFabric, process: subprocess.Popen, log: Path, engine: str) -> None:
        self.fabric, self.process, self.log, self.engine = fabric, process, log, engine

    @property
    def state(self) -> str | None:
        """The state OpenSM last logged entering (MASTER, STANDBY, DISCOVERING, NOT-ACTIVE)."""
        try:
            states = _STATE.findall(self.log.read_text(errors="replace"))
        except FileNotFoundError:
            return None
        return states[-1] if states else None

    def routing(self) -> tuple[str | None, tuple[str, ...]]:
        """(the engine that routed last, the ERR lines), from its log."""
        return read_log(self.log)

    def _gone(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"OpenSM ended (exit {code}): {tail(self.log)}"

    def wait_state(self, states: tuple[str, ...], timeout: float) -> str:
        """Wait until OpenSM enters one of `states` (as its log says); that state."""
        wait_for(
            lambda: self.state in states, timeout, f"OpenSM on {self.fabric.workdir}, {'/'.join(states)}", self._gone
        )
        return str(self.state)

    def wait_routed(self, timeout: float) -> str:
        """Wait until this SM, master, has configured every switch's tables; the engine it used."""
        wait_for(
            lambda: self.routing()[0] is not None, timeout, f"OpenSM on {self.fabric.workdir}, routing", self._gone
        )
        return str(self.routing()[0])

    def stop(self, timeout: float = 20.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_sm(
    fabric: SimulatedFabric,
    engine: str = "ftree",
    *,
    priority: int | None = None,
    config: Path | None = None,
    sim_host: str | None = None,
    name: str = "sm",
    timeout: float = 900.0,
) -> SubnetManager:
    """OpenSM as a subnet manager that stays, attached at `sim_host` (one SM per node), once it is
    master or standby. It is stopped with the fabric (or by its `stop`)."""
    argv, log = _argv(fabric, engine, name, config, False)
    if priority is not None:
        argv += ["-p", str(int(priority))]
    with open(fabric.workdir / "opensm" / f"{name}.out", "wb") as out:
        process = spawn(
            argv, _sm_env(fabric, sim_host), False, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=fabric.workdir
        )
    manager = SubnetManager(fabric, process, log, engine)
    fabric.managers.append(manager)
    try:
        manager.wait_state((MASTER, STANDBY), timeout)
    except IbsimError:
        manager.stop()
        raise
    return manager
