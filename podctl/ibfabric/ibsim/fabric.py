"""One simulated fabric: ibsim on a network file, its console, and the real tools run against it.

    with SimulatedFabric.start(network, workdir) as fabric:   # ibsim, ready or an error
        routed = fabric.route("ftree")                         # `opensm -o`: routes once and exits
        topo = fabric.ibnetdiscover()                          # the tools' stdout, as they print it
        fabric.unplug("ib-leaf-su01-r1", 5)                    # ibsim's console: `Unlink "S-..."[5]`

Everything of one fabric lives in its work folder: the network file, the console (a FIFO that
ibsim holds open for reading and writing, so it never sees the end of its input), what the
console printed (`console.log`), ibsim's warnings (`ibsim.log`), `ibsim.json` (its process,
socket name and install) and OpenSM's cache, logs and dumps (`opensm/`). A fabric started with
`keep_running=True` outlives the process that started it (its own session); any later process
`attach`es to it by its folder, drives its console and stops it. Otherwise every process started
here is told to end when its parent does (PR_SET_PDEATHSIG), so none outlives a crashed caller.

The clients (OpenSM, every tool) reach ibsim through libumad2sim.so, preloaded:
- by default over abstract unix datagram sockets named after `IBSIM_SOCKNAME` (`<name>:ctl`,
  `<name>:out<i>`, each client's `<name>:in<pid>`): a name per fabric keeps fabrics apart, and
  abstract sockets belong to a network namespace, so only clients in ibsim's reach it;
- with `remote_port`, over UDP (`ibsim -r -l PORT`): PORT for control and the next ten for the
  clients, on every address of the host, with no authentication; clients set
  `IBSIM_SERVER_NAME` and `IBSIM_SERVER_PORT` instead (`client_variables`), from any namespace
  that can reach the host;
- with `root_only` (a sim pod's), over UDP in `netns_pid`'s namespace, behind nftables rules that
  let only root's sockets on its loopback reach it (podctl.ibfabric.ibsim.guard).
Run as root, podctl starts ibsim as an account of its own with no capabilities (guard): it reads
its network file through a descriptor (`/dev/fd/N`), since the work folder may be root's alone.
ibsim serves at most 10 clients at once; each attaches at a node (`SIM_HOST`, a node id or
description; by default the network file's first node) and one SM may attach per node.

A client that cannot reach ibsim retries every 2 s forever: every tool runs under a deadline,
and a client killed at its deadline is disconnected from ibsim (`X <client>`), whose slots would
otherwise run out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from podctl.ibfabric.ibsim import guard
from podctl.ibfabric.ibsim.console import FabricConsole
from podctl.ibfabric.ibsim.install import IbsimError, Install, find_install, network_limits
from podctl.ibfabric.ibsim.process import pid_alive, spawn, tail, tool_path, wait_for
from podctl.ibfabric.ibsim.tools import CLIENT_VARIABLES, FabricTools

STATE_FILE = "ibsim.json"
READY = "Network simulator ready"


class _Stoppable(Protocol):
    def stop(self, timeout: float = ...) -> None: ...


class SimulatedFabric(FabricConsole, FabricTools):
    def __init__(self, workdir: Path, state: Mapping[str, object], process: subprocess.Popen | None = None) -> None:
        self.workdir = workdir
        self.state = dict(state)
        self.install = Install(str(state["ibsim"]), str(state["umad2sim"]), tuple(state["version"]))  # type: ignore[arg-type]
        self._process = process
        self._ids: dict[str, str] | None = None
        self.managers: list[_Stoppable] = []  # subnet managers started here, stopped with the fabric
        self.warnings: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return int(self.state["pid"])  # type: ignore[call-overload]

    @property
    def network_path(self) -> Path:
        return self.workdir / "network.net"

    @property
    def root_only(self) -> bool:
        """Whether only root's processes in its namespace reach it (guard), as `start(root_only=True)` made it."""
        return bool(self.state.get("root_only"))

    @property
    def remote_port(self) -> int | None:
        port = self.state.get("remote_port")
        return int(port) if port is not None else None  # type: ignore[call-overload]

    @classmethod
    def start(
        cls,
        network: str,
        workdir: Path,
        install: Install | None = None,
        *,
        remote_port: int | None = None,
        keep_running: bool = False,
        timeout: float = 120.0,
        sockname: str | None = None,
        netns_pid: int | None = None,
        root_only: bool = False,
    ) -> SimulatedFabric:
        """ibsim on `network` (a network file's text), ready: its console answers and its clients can attach.

        `sockname`: the name of its sockets (default: one of the work folder's). `netns_pid`: run it
        in that process's network namespace (`nsenter -n`; a sim pod's SM container), where its
        abstract sockets are, and the only place they are. `root_only` (with `netns_pid`): only
        root's processes in that namespace reach it (guard: remote mode on `remote_port`, by
        default ibsim's own port, behind nftables rules loaded there first)."""
        if root_only and netns_pid is None:
            raise IbsimError("a root-only fabric is served in a namespace podctl guards: name its netns_pid")
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        running = cls._running_state(workdir)
        if running is not None:
            raise IbsimError(
                f"{workdir}: a simulated fabric runs there already (ibsim pid {running['pid']}); stop it first"
            )
        install = install or find_install(need_ndr=re.search(r"\dxNDR\b", network) is not None)
        fabric_net = workdir / "network.net"
        fabric_net.write_text(network)
        console = workdir / "console"
        console.unlink(missing_ok=True)
        os.mkfifo(console, 0o600)
        sockname = sockname or "podctl-" + hashlib.sha256(str(workdir).encode()).hexdigest()[:16]
        if root_only and netns_pid is not None:
            remote_port = guard.SERVER_PORT if remote_port is None else remote_port
            # Before ibsim binds its ports: there is no moment when anyone else may reach them.
            guard.load_rules(tool_path("nsenter"), tool_path("nft"), netns_pid, remote_port)
        state = cls._launch(workdir, network, install, sockname, remote_port, keep_running, netns_pid)
        state["root_only"] = root_only
        process = state.pop("process")
        (workdir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
        fabric = cls(workdir, state, process)
        try:
            wait_for(
                lambda: READY in fabric.console_text(),
                timeout,
                f"{install.describe()} on {fabric_net}",
                fabric._ended,
            )
        except IbsimError:
            fabric.stop()
            raise
        unparsed = sum(
            "cannot parse" in line for line in (workdir / "ibsim.log").read_text(errors="replace").splitlines()
        )
        if unparsed:
            fabric.warnings.append(
                f"{install.describe()} could not read the width or speed of {unparsed} port line(s) of the network "
                "file; those links come up at its defaults"
            )
        return fabric

    @staticmethod
    def _launch(
        workdir: Path,
        network: str,
        install: Install,
        sockname: str,
        remote_port: int | None,
        keep_running: bool,
        netns_pid: int | None,
    ) -> dict[str, object]:
        """ibsim started on the work folder's network file, reading commands from its console: the
        state `ibsim.json` keeps, with the started process under "process"."""
        fabric_net = workdir / "network.net"
        console = workdir / "console"
        # nsenter enters the namespace (as root), setpriv drops every authority, and ibsim is exec'd:
        # the pid is ibsim's, its cmdline ibsim's argv.
        prefix = [tool_path("nsenter"), "-t", str(int(netns_pid)), "-n", "--"] if netns_pid is not None else []
        prefix += guard.unprivileged(tool_path("setpriv"), keep_running)
        env = {k: v for k, v in os.environ.items() if k not in CLIENT_VARIABLES}
        env["IBSIM_SOCKNAME"] = sockname
        # ibsim may not read the work folder: it opens the network file again through this
        # descriptor (/dev/fd/N checks the file's own mode, not the folders above it).
        fabric_net.chmod(0o644)
        network_fd = os.open(fabric_net, os.O_RDONLY)
        argv = [install.ibsim, *network_limits(network).argv(), "-s"]
        if remote_port is not None:
            argv += ["-r", "-l", str(remote_port)]
        argv.append(f"/dev/fd/{network_fd}")
        # Read and write: ibsim holds a writer of its own console, so it never reads an end of input.
        console_fd = os.open(console, os.O_RDWR)
        try:
            with open(workdir / "console.log", "wb") as out, open(workdir / "ibsim.log", "wb") as err:
                process = spawn(
                    [*prefix, *argv],
                    env,
                    keep_running,
                    stdin=console_fd,
                    stdout=out,
                    stderr=err,
                    cwd=workdir,
                    pass_fds=(network_fd,),
                )
        finally:
            os.close(console_fd)
            os.close(network_fd)
        return {
            "process": process,
            "pid": process.pid,
            "argv": argv,
            "network_fd": network_fd,
            "sockname": sockname,
            "remote_port": remote_port,
            "netns_pid": netns_pid,
            "ibsim": install.ibsim,
            "umad2sim": install.umad2sim,
            "version": list(install.version),
        }

    @classmethod
    def _running_state(cls, workdir: Path) -> dict[str, object] | None:
        try:
            state = json.loads((workdir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        pid = int(state.get("pid", 0))
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        # The pid may have been reused since: the process must be this fabric's ibsim, reading its
        # network file through a descriptor it still holds (or, started by an older podctl, by path).
        network = str(workdir / "network.net")
        try:
            held = os.readlink(f"/proc/{pid}/fd/{int(state.get('network_fd', -1))}") == network
        except (OSError, ValueError):
            held = False
        if pid_alive(pid) and cmdline[:1] == [str(state["argv"][0]).encode()] and (held or network.encode() in cmdline):
            return state
        return None

    @classmethod
    def attach(cls, workdir: Path) -> SimulatedFabric:
        """The fabric another process started in `workdir` (with keep_running), to drive or stop."""
        workdir = Path(workdir).resolve()
        state = cls._running_state(workdir)
        if state is None:
            raise IbsimError(f"{workdir}: no simulated fabric runs there (no live ibsim in {STATE_FILE})")
        return cls(workdir, state)

    def _ended(self) -> str | None:
        """Why ibsim is gone, or None while it runs."""
        if self._process is not None:
            code = self._process.poll()
            if code is None:
                return None
        elif pid_alive(self.pid):
            return None
        else:
            code = None
        return f"ibsim ended (exit status {code}): {tail(self.workdir / 'ibsim.log') or 'it printed nothing'}"

    @property
    def running(self) -> bool:
        return self._ended() is None

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the subnet managers started here, then ibsim; idempotent."""
        for manager in reversed(self.managers):
            manager.stop()
        self.managers.clear()
        if self._ended() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                wait_for(lambda: self._ended() is not None, timeout, "ibsim did not stop on SIGTERM", lambda: None)
            except IbsimError:
                os.kill(self.pid, signal.SIGKILL)
        if self._process is not None:
            self._process.wait(timeout=timeout)
        (self.workdir / "console").unlink(missing_ok=True)
        (self.workdir / STATE_FILE).unlink(missing_ok=True)

    def __enter__(self) -> SimulatedFabric:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
