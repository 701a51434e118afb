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

import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import guard
from .install import IbsimError, Install, find_install, need_tools, network_limits
from .network import node_id, node_ids

STATE_FILE = "ibsim.json"
READY = "Network simulator ready"
MAX_CONSOLE_LINE = 120  # ibsim reads a console line into 128 bytes
_POLL_S = 0.02
_CLIENT_VARIABLES = ("LD_PRELOAD", "IBSIM_SOCKNAME", "IBSIM_SERVER_NAME", "IBSIM_SERVER_PORT", "SIM_HOST")
_TOOL_DIRS = ("/usr/sbin", "/sbin", "/usr/bin")


def _die_with(parent: int) -> Callable[[], None]:
    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before the signal was armed
            os._exit(1)

    return arm


def spawn(argv: Sequence[str], env: Mapping[str, str], keep_running: bool, **kwargs: object) -> subprocess.Popen:
    """A child process that ends with this one, or (`keep_running`) one in a session of its own."""
    if keep_running:
        return subprocess.Popen(argv, env=dict(env), start_new_session=True, **kwargs)  # type: ignore[call-overload]
    return subprocess.Popen(argv, env=dict(env), preexec_fn=_die_with(os.getpid()), **kwargs)  # type: ignore[call-overload]


def wait_for(condition: Callable[[], bool], timeout: float, what: str, alive: Callable[[], str | None]) -> None:
    """Return once `condition()` holds; IbsimError when `alive()` says why the process it waits on
    ended, or when `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while not condition():
        gone = alive()
        if gone is not None:
            raise IbsimError(f"{what}: {gone}")
        if time.monotonic() > deadline:
            raise IbsimError(f"{what}: not within {timeout:g} s")
        time.sleep(_POLL_S)


def tool_path(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_TOOL_DIRS))
    if found is None:
        need_tools(name)
    return found or name


def tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (ended, not yet reaped by its parent) no longer serves anyone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@dataclass(frozen=True)
class ToolRun:
    argv: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int
    seconds: float


class _Stoppable(Protocol):
    def stop(self, timeout: float = ...) -> None: ...


class SimulatedFabric:
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
        # nsenter enters the namespace (as root), setpriv drops every authority, and ibsim is exec'd:
        # the pid is ibsim's, its cmdline ibsim's argv.
        prefix = [tool_path("nsenter"), "-t", str(int(netns_pid)), "-n", "--"] if netns_pid is not None else []
        prefix += guard.unprivileged(tool_path("setpriv"), keep_running)
        env = {k: v for k, v in os.environ.items() if k not in _CLIENT_VARIABLES}
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
        state = {
            "pid": process.pid,
            "argv": argv,
            "network_fd": network_fd,
            "sockname": sockname,
            "remote_port": remote_port,
            "root_only": root_only,
            "netns_pid": netns_pid,
            "ibsim": install.ibsim,
            "umad2sim": install.umad2sim,
            "version": list(install.version),
        }
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

    # -- the console ----------------------------------------------------------------------------

    def console_text(self) -> str:
        try:
            return (self.workdir / "console.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def console(self, command: str, timeout: float = 30.0) -> str:
        """Run one console command; what ibsim answered (prompts left out). IbsimError when ibsim
        refused it (its answers to a bad command start with `#`, or say `unknown`)."""
        if "\n" in command or "\r" in command or len(command) > MAX_CONSOLE_LINE:
            raise IbsimError(f"not one console line of at most {MAX_CONSOLE_LINE} characters: {command[:80]!r}")
        marker = f"# podctl {uuid.uuid4().hex}"
        log = self.workdir / "console.log"
        start = log.stat().st_size
        try:
            fd = os.open(self.workdir / "console", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise IbsimError(f"{self.workdir}/console: cannot write to ibsim's console ({exc.strerror})") from None
        try:
            os.write(fd, f"{command}\n{marker}\n".encode())  # under PIPE_BUF: one write, never interleaved
        finally:
            os.close(fd)

        def answered() -> bool:
            with open(log, "rb") as handle:
                handle.seek(start)
                return marker.encode() in handle.read()

        wait_for(answered, timeout, f"ibsim's console, {command!r}", self._ended)
        with open(log, "rb") as handle:
            handle.seek(start)
            text = handle.read().decode(errors="replace")
        answer = text[: text.index(marker)].replace("sim> ", "").strip()
        refused = [line for line in answer.splitlines() if line.startswith("#") or "unknown - skipped" in line]
        if refused:
            raise IbsimError(f"ibsim refused {command!r}: {' '.join(refused)}")
        return answer

    def node_id(self, device: str) -> str:
        """ibsim's id of a device of the network file, by its description."""
        if self._ids is None:
            self._ids = node_ids(self.network_path.read_text())
        return node_id(self._ids, device)

    def unplug(self, device: str, port: int) -> None:
        """Pull the cable at a port: both ends go Down, as if it were unplugged."""
        self.console(f'Unlink "{self.node_id(device)}"[{port}]')

    def replug(self, device: str, port: int) -> None:
        """Plug the cable pulled at a port back in."""
        self.console(f'ReLink "{self.node_id(device)}"[{port}]')

    def set_counter(self, device: str, port: int, counter: str, value: int, attribute: str = "PortCounters") -> None:
        """Set a port counter, as a port that counts errors would (e.g. SymbolErrorCounter)."""
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,63}", counter) or not re.fullmatch(r"[A-Za-z]{1,64}", attribute):
            raise IbsimError(f"not a counter name: {attribute}.{counter}")
        self.console(f'PerformanceSet "{self.node_id(device)}"[{port}] {attribute}.{counter}={int(value)}')

    def attached(self) -> list[tuple[int, int]]:
        """(client slot, pid) of every client attached now (`Attached`); in remote mode the pid is the client's port."""
        found = re.findall(r"Client (\d+): pid (\d+)", self.console("Attached"))
        return [(int(slot), int(pid)) for slot, pid in found]

    def release(self, pid: int) -> None:
        """Disconnect a client that ended without saying so (a tool killed at its deadline)."""
        for slot, client in self.attached():
            if client == pid:
                self.console(f"X {slot}")

    # -- clients --------------------------------------------------------------------------------

    def client_variables(self, server: str = "127.0.0.1") -> dict[str, str]:
        """What a client needs in its environment to reach this fabric (besides SIM_HOST): in remote
        mode the server's address as the client sees it."""
        variables = {"LD_PRELOAD": self.install.umad2sim}
        if self.remote_port is not None:
            variables |= {"IBSIM_SERVER_NAME": server, "IBSIM_SERVER_PORT": str(self.remote_port)}
        else:
            variables["IBSIM_SOCKNAME"] = str(self.state["sockname"])
        return variables

    def client_env(self, sim_host: str | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _CLIENT_VARIABLES}
        env |= self.client_variables()
        if sim_host:
            env["SIM_HOST"] = sim_host
        return env | dict(extra or {})

    def run_tool(self, argv: Sequence[str], timeout: float = 300.0, sim_host: str | None = None) -> ToolRun:
        """One tool of infiniband-diags (or any libibumad client), run to its end against this fabric."""
        if self._ended() is not None:
            raise IbsimError(f"cannot run {argv[0]}: {self._ended()}")
        full = [tool_path(argv[0]), *argv[1:]]
        started = time.monotonic()
        process = spawn(
            full,
            self.client_env(sim_host),
            False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.workdir,
        )
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            self.release(process.pid)
            raise IbsimError(f"{' '.join(argv)} did not end within {timeout:g} s against {self.workdir}") from None
        return ToolRun(tuple(argv), out, err, process.returncode, time.monotonic() - started)

    def output(self, argv: Sequence[str], timeout: float = 300.0, ok: Callable[[ToolRun], bool] | None = None) -> str:
        """A tool's standard output, as it printed it; IbsimError when it failed."""
        run = self.run_tool(argv, timeout)
        if not (ok(run) if ok else run.returncode == 0):
            raise IbsimError(f"{' '.join(argv)} failed (exit {run.returncode}): {run.stderr.strip()[-400:]}")
        return run.stdout

    def ibnetdiscover(self) -> str:
        return self.output(["ibnetdiscover"])

    def iblinkinfo(self, one_line: bool = False) -> str:
        """iblinkinfo; `one_line` (-l): each port's line names both ends by GUID and description."""
        return self.output(["iblinkinfo", "-l"] if one_line else ["iblinkinfo"])

    def dump_lfts(self) -> str:
        """rdma-core's dump_lfts(.sh) script: dump_fts, then the deprecation warning it appends."""
        name = "dump_lfts.sh" if shutil.which("dump_lfts.sh") else "dump_lfts"
        return self.output([name])

    def dump_fts(self) -> str:
        return self.output(["dump_fts"])

    def ibqueryerrors(self, skip_sl: bool = True) -> str:
        """ibqueryerrors; `skip_sl` when no SM answers SA queries (after `route`, whose OpenSM has exited)."""
        return self.output(
            ["ibqueryerrors", "--skip-sl"] if skip_sl else ["ibqueryerrors"],
            ok=lambda run: run.returncode == 0 or "## Summary" in run.stdout,
        )

    def perfquery(self, lid: int, port: int, extended: bool = False) -> str:
        return self.output(["perfquery", *(["-x"] if extended else []), str(int(lid)), str(int(port))])
