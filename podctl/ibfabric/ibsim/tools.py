"""The real tools run against a simulated fabric: each client with libumad2sim preloaded and the
fabric's address in its environment, under a deadline, its output as it printed it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from podctl.ibfabric.ibsim.install import IbsimError
from podctl.ibfabric.ibsim.process import spawn, tool_path

CLIENT_VARIABLES = ("LD_PRELOAD", "IBSIM_SOCKNAME", "IBSIM_SERVER_NAME", "IBSIM_SERVER_PORT", "SIM_HOST")


@dataclass(frozen=True)
class ToolRun:
    argv: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int
    seconds: float


class FabricTools:
    """The clients' half of SimulatedFabric (fabric.py): the tools, run against its ibsim."""

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
        env = {k: v for k, v in os.environ.items() if k not in CLIENT_VARIABLES}
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
