"""ibsim's console: one command line at a time through its FIFO, its answer read back from
`console.log`; cables pulled and plugged back, counters set, clients listed and released."""

from __future__ import annotations

import os
import re
import uuid

from podctl.ibfabric.ibsim.install import IbsimError
from podctl.ibfabric.ibsim.network import node_id, node_ids
from podctl.ibfabric.ibsim.process import wait_for

MAX_CONSOLE_LINE = 120  # ibsim reads a console line into 128 bytes


class FabricConsole:
    """The console half of SimulatedFabric (fabric.py): it reads the fabric's work folder and process."""

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
