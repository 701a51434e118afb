"""The sim pod's InfiniBand fabric: ibsim beside the containers, and the faults a cable can have.

`podctl sim up` starts ibsim on the site's compute fabric (podctl.ibfabric.emulated: the network
file `podctl fabric topology` prints) in the network namespace of the first subnet-manager host's
container (`nsenter -n`, from the host: ibsim is the host's podctl build, never code placed in a
node), with no authority and for root alone (podctl.ibfabric.ibsim.guard): as the account
podctl-ibsim with no capabilities, on UDP ports of that namespace (ibsim's 7070 and the ten after
it) that an nftables table, loaded there from the host, keeps to root's sockets on loopback.
OpenSM's unit and podctl-umad2sim, root's, reach it at 127.0.0.1; `nobody` there does not, nor does
anything outside the container. It outlives `sim up` (a session of its own) and is kept by the next
`sim up` while it serves the current container's namespace and the current plan, root's alone
(its table loaded again); `sim down` stops it. Everything of it lives in the pod's state folder,
`fabric/` (podctl.ibfabric.ibsim.SimulatedFabric).

Fabric faults, each on a planned cable named by one end (`SWITCH[PORT]`, or `HOST:RAIL` for a
node's cable), recorded in `fabric/faults.json`:

- unplug: ibsim's console pulls the cable (`Unlink` at its switch end: both ends go Down);
- errors: the console sets an error counter of its switch-end port (`PerformanceSet`);
- swap two cables, degrade a cable's width or speed: ibsim has no console command for either, so
  the network file is edited (`swap_cables`, `set_link_rate`) and ibsim restarted on it; the
  console faults are applied again; the SM host's OpenSM is stopped before (a client of the old
  ibsim must not reach the new one on its ports) and started after, and awaited as master.

`clear` restarts ibsim on the plan's network file: every fabric fault is gone.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from podctl.core import state
from podctl.core.fsio import atomic_write
from podctl.core.model import Site
from podctl.derive.emulated import (
    EMULATED_FABRIC,
    EMULATED_SM_SERVICE,
    UMAD2SIM_PROGRAM,
    emulated_server,
    has_emulated_fabric,
)
from podctl.derive.facts import cached_plan, hca_names
from podctl.ibfabric import emulated
from podctl.ibfabric.ibsim import IbsimError, SimulatedFabric, guard, set_link_rate, swap_cables
from podctl.ibfabric.ibsim.process import tool_path
from podctl.sim.errors import SimError
from podctl.sim.podman import Podman, container_name

FAULTS_FILE = "faults.json"
SERVER_FILE = "server.json"
PLAN_FILE = "plan.net"
SM_MASTER_S = 90.0
_SWITCH_END = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]{0,63})\[(\d{1,3})\]$")
_NODE_END = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]{0,62}):(\d{1,2})$")

End = tuple[str, int]  # (device description in the network file, port)


def fabric_dir(pod: str) -> Path:
    return state.pod_dir(pod) / "fabric"


@dataclass(frozen=True)
class FabricUp:
    action: str  # started | kept | restarted
    server: str  # the SM host whose namespace serves it
    port: int  # its control port there (UDP, root's alone); the client slots' ports follow it
    seconds: float


def _netns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def _server(podman: Podman, site: Site) -> tuple[str, int]:
    """(container, pid) of the SM host whose namespace serves the fabric."""
    return _container_pid(podman, emulated_server(site), container_name(site.name, emulated_server(site)))


def _server_of(podman: Podman, pod: str) -> tuple[str, int]:
    """(container, pid) of the SM host a running fabric was started for (`sim up` wrote it down)."""
    try:
        host = json.loads((fabric_dir(pod) / SERVER_FILE).read_text())["host"]
    except (OSError, ValueError, KeyError, TypeError):
        raise SimError(f"pod {pod} has no fabric (no {SERVER_FILE}): `podctl sim up SITE` starts it") from None
    return _container_pid(podman, host, container_name(pod, host))


def _container_pid(podman: Podman, host: str, name: str) -> tuple[str, int]:
    info = podman.container_by_name(name)
    if info is None or not info.running:
        raise SimError(
            f"the fabric is served in {host}'s network namespace, and {name} is not running: "
            f"`podctl sim up` brings it up"
        )
    return name, podman.container_pid(name)


def running(pod: str) -> SimulatedFabric | None:
    try:
        return SimulatedFabric.attach(fabric_dir(pod))
    except IbsimError:
        return None


def up(podman: Podman, site: Site) -> FabricUp | None:
    """Start the pod's fabric, or keep the one running; None when the site has none to serve."""
    if not has_emulated_fabric(site):
        return None
    started = time.monotonic()
    folder = fabric_dir(site.name)
    container, pid = _server(podman, site)
    plan_net = emulated.network(site)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    # What `sim fault` names cables by, and whose namespace to start ibsim in again.
    _write_cables(folder, pod_cables(site))
    atomic_write(folder / SERVER_FILE, json.dumps({"host": emulated_server(site)}) + "\n")
    current = running(site.name)
    action = "started"
    if current is not None:
        same_plan = (folder / PLAN_FILE).is_file() and (folder / PLAN_FILE).read_text() == plan_net
        # One started by an older podctl (root's, on abstract sockets anyone there reached) is replaced.
        if same_plan and _netns(current.pid) == _netns(pid) and current.root_only and current.remote_port:
            # Root in the container may have removed the table (nothing else there can): loaded again.
            _guard(pid, current.remote_port)
            return FabricUp("kept", emulated_server(site), current.remote_port, 0.0)
    # An OpenSM deployed before (a kept SM host) holds a client of the old ibsim, or of none: it
    # stops before the new ibsim binds the ports, and starts again on it.
    sm_ran = _stop_sm(podman, container)
    try:
        if current is not None:
            current.stop()
            action = "restarted"
        atomic_write(folder / PLAN_FILE, plan_net)
        (folder / FAULTS_FILE).unlink(missing_ok=True)
        fabric = serve(plan_net, fabric_dir(site.name), pid)
    finally:
        if sm_ran:
            _start_sm_unit(podman, container)
    return FabricUp(action, emulated_server(site), fabric.remote_port or 0, time.monotonic() - started)


def serve(network: str, folder: Path, netns_pid: int) -> SimulatedFabric:
    """ibsim on `network`, kept running from `folder`, in the network namespace of `netns_pid` (the
    SM host's container) and for root's processes there alone."""
    try:
        return SimulatedFabric.start(network, folder, keep_running=True, netns_pid=netns_pid, root_only=True)
    except IbsimError as exc:
        raise SimError(f"the pod's fabric did not start: {exc}") from None


def _guard(netns_pid: int, port: int) -> None:
    try:
        guard.load_rules(tool_path("nsenter"), tool_path("nft"), netns_pid, port)
    except IbsimError as exc:
        raise SimError(f"the pod's fabric: {exc}") from None


def down(pod: str) -> bool:
    """Stop the pod's fabric; whether one ran."""
    current = running(pod)
    if current is None:
        return False
    current.stop()
    return True


# -- cables ---------------------------------------------------------------------------------------

CABLES_FILE = "cables.json"


@dataclass(frozen=True)
class PodCable:
    """A planned cable of the pod's fabric, its ends as the network file names them."""

    switch: End  # the upper end: a switch's port
    lower: End  # an HCA ("node01 mlx5_0", port 1) or a lower switch's port
    node: str | None = None  # a node's cable: its host and rail
    rail: int | None = None

    def describe(self) -> str:
        lower = self.lower[0] if self.node else f"{self.lower[0]}[{self.lower[1]}]"
        rail = f" (node {self.node}, rail {self.rail})" if self.node else ""
        return f"{self.switch[0]}[{self.switch[1]}] <-> {lower}{rail}"


def pod_cables(site: Site) -> list[PodCable]:
    """Every planned cable of the emulated fabric, as `sim fault` names them."""
    plan = cached_plan(site.fabrics[EMULATED_FABRIC])
    names = hca_names(site, EMULATED_FABRIC)
    out = []
    for cable in plan.cables:
        switch: End = (cable.upper.device, cable.upper.port)
        if cable.tier == "node-leaf":
            host, rail = cable.lower.device, cable.lower.port
            out.append(PodCable(switch, (f"{host} {names[host][rail - 1]}", 1), host, rail))
        else:
            out.append(PodCable(switch, (cable.lower.device, cable.lower.port)))
    return out


def _write_cables(folder: Path, cables: list[PodCable]) -> None:
    rows = [{"switch": list(c.switch), "lower": list(c.lower), "node": c.node, "rail": c.rail} for c in cables]
    atomic_write(folder / CABLES_FILE, json.dumps(rows, indent=1) + "\n")


def read_cables(pod: str) -> list[PodCable]:
    try:
        rows = json.loads((fabric_dir(pod) / CABLES_FILE).read_text())
        return [
            PodCable((r["switch"][0], int(r["switch"][1])), (r["lower"][0], int(r["lower"][1])), r["node"], r["rail"])
            for r in rows
        ]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        raise SimError(f"pod {pod} has no fabric (no {CABLES_FILE}): `podctl sim up SITE` starts it") from None


def find_cable(cables: list[PodCable], text: str) -> PodCable:
    """The planned cable at one of its ends: `SWITCH[PORT]` (either end) or `HOST:RAIL`."""
    switch_end = _SWITCH_END.match(text)
    node_end = _NODE_END.match(text)
    if switch_end is None and node_end is None:
        raise SimError(f"{text!r}: name a cable by one end, SWITCH[PORT] (ib-leaf-su01-r1[3]) or HOST:RAIL (node01:1)")
    for cable in cables:
        if switch_end is not None:
            end = (switch_end.group(1), int(switch_end.group(2)))
            if end == cable.switch or (cable.node is None and end == cable.lower):
                return cable
        elif node_end is not None and (cable.node, cable.rail) == (node_end.group(1), int(node_end.group(2))):
            return cable
    raise SimError(f"{text!r}: no planned cable of the pod's fabric ends there")


# -- faults ---------------------------------------------------------------------------------------


def read_faults(pod: str) -> dict[str, list]:
    try:
        data = json.loads((fabric_dir(pod) / FAULTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_faults(pod: str, faults: dict[str, list]) -> None:
    atomic_write(fabric_dir(pod) / FAULTS_FILE, json.dumps(faults, indent=2, sort_keys=True) + "\n")


def _live(pod: str) -> SimulatedFabric:
    current = running(pod)
    if current is None:
        raise SimError(f"pod {pod} has no fabric running: `podctl sim up SITE` starts it")
    return current


def _console(action):  # type: ignore[no-untyped-def]
    try:
        return action()
    except IbsimError as exc:
        raise SimError(str(exc)) from None


@dataclass(frozen=True)
class FabricFaults:
    """What one `sim fault` asks of the fabric; cables by one end (find_cable)."""

    unplug: tuple[str, ...] = ()
    swap: tuple[str, str] | None = None
    degrade: tuple[str, ...] = ()
    width: str | None = None
    speed: str | None = None
    errors: tuple[str, ...] = ()
    counter: str = "SymbolErrorCounter"
    count: int = 1000


def inject(podman: Podman, pod: str, wanted: FabricFaults) -> list[str]:
    """Every fault asked for, each cable checked before anything changes: the faults that restart
    ibsim first, then the console's. What was done, a line each."""
    cables = read_cables(pod)
    unplugged = [find_cable(cables, c) for c in wanted.unplug]
    swapped = [find_cable(cables, c) for c in wanted.swap or ()]
    degraded = [find_cable(cables, c) for c in wanted.degrade]
    counting = [find_cable(cables, c) for c in wanted.errors]
    done: list[str] = []
    if swapped:
        done.append(swap(podman, pod, swapped[0], swapped[1]))
    done += [degrade(podman, pod, cable, wanted.width, wanted.speed) for cable in degraded]
    done += [unplug(pod, cable) for cable in unplugged]
    done += [raise_errors(pod, cable, wanted.counter, wanted.count) for cable in counting]
    return done


def unplug(pod: str, cable: PodCable) -> str:
    fabric = _live(pod)
    _console(lambda: fabric.unplug(*cable.switch))
    faults = read_faults(pod)
    faults.setdefault("unplugged", []).append(list(cable.switch))
    _write_faults(pod, faults)
    return f"unplugged {cable.describe()}"


def raise_errors(pod: str, cable: PodCable, counter: str, value: int) -> str:
    fabric = _live(pod)
    _console(lambda: fabric.set_counter(*cable.switch, counter, value))
    faults = read_faults(pod)
    faults.setdefault("counters", []).append([*cable.switch, counter, int(value)])
    _write_faults(pod, faults)
    return f"{counter} = {value} at {cable.switch[0]}[{cable.switch[1]}] of {cable.describe()}"


def swap(podman: Podman, pod: str, first: PodCable, second: PodCable) -> str:
    if first == second:
        raise SimError("swapping a cable with itself changes nothing: name two cables")
    a, b = first.switch, second.switch
    _rewire(podman, pod, lambda net: swap_cables(net, a, b), ["swapped", [list(a), list(b)]])
    return f"swapped {first.describe()} and {second.describe()} at their switch ends"


def degrade(podman: Podman, pod: str, cable: PodCable, width: str | None, speed: str | None) -> str:
    if width is None and speed is None:
        raise SimError("degrade a cable to a width (--width 1x, 2x) or a speed (--speed EDR, ...)")
    end = cable.switch
    _rewire(
        podman,
        pod,
        lambda net: set_link_rate(net, end, width=width, speed=speed),
        ["degraded", [list(end), width, speed]],
    )
    return f"degraded {cable.describe()}: it trains at most {width or ''}{' ' if width and speed else ''}{speed or ''}"


def _rewire(podman: Podman, pod: str, edit, record: list) -> None:  # type: ignore[no-untyped-def]
    """Restart ibsim on an edited copy of its network file, the console faults applied again."""
    current = _live(pod)
    try:
        network = edit(current.network_path.read_text())
    except IbsimError as exc:
        raise SimError(str(exc)) from None
    faults = read_faults(pod)
    faults.setdefault(record[0], []).append(record[1])
    _restart(podman, pod, current, network, faults)


def _restart(podman: Podman, pod: str, current: SimulatedFabric, network: str, faults: dict[str, list]) -> None:
    container, pid = _server_of(podman, pod)
    sm_ran = _stop_sm(podman, container)
    try:
        current.stop()
        fabric = serve(network, fabric_dir(pod), pid)
        for device, port in faults.get("unplugged", []):
            _console(lambda d=device, p=port: fabric.unplug(d, int(p)))
        for device, port, counter, value in faults.get("counters", []):
            _console(lambda d=device, p=port, c=counter, v=value: fabric.set_counter(d, int(p), c, int(v)))
        _write_faults(pod, faults)
    except BaseException:
        if sm_ran:  # as it was, whatever became of ibsim
            _start_sm_unit(podman, container)
        raise
    if sm_ran:
        start_sm(podman, container)


def _stop_sm(podman: Podman, container: str) -> bool:
    """Stop the SM host's OpenSM, if it runs, before its ibsim is replaced; whether it ran. The new
    ibsim binds the old one's ports, so a client of the old one left running reaches it: OpenSM, on
    its way out, asks it to clear IsSM for a client slot it never attached, and ibsim 0.12 follows
    that slot's NULL port (seen: a segfault in libibmad, on a sim pod and in a namespace alone)."""
    unit = f"{EMULATED_SM_SERVICE}.service"
    if podman.run(["exec", container, "systemctl", "is-active", "--quiet", unit], check=False).returncode != 0:
        return False
    podman.run(["exec", container, "systemctl", "stop", unit])
    return True


def _start_sm_unit(podman: Podman, container: str) -> None:
    podman.run(["exec", container, "systemctl", "start", f"{EMULATED_SM_SERVICE}.service"], check=False)


def start_sm(podman: Podman, container: str, timeout_s: float = SM_MASTER_S) -> None:
    """Start the SM host's OpenSM and wait until it is master."""
    _start_sm_unit(podman, container)
    deadline = time.monotonic() + timeout_s
    while True:
        proc = podman.run(["exec", container, UMAD2SIM_PROGRAM, "sminfo"], check=False)
        if "SMINFO_MASTER" in proc.stdout:
            return
        if time.monotonic() > deadline:
            raise SimError(f"OpenSM on {container} is not master {timeout_s:g} s after its start: {proc.stdout}")
        time.sleep(1)


def clear(podman: Podman, pod: str) -> list[str]:
    """Every fabric fault undone: ibsim restarted on the plan's network file."""
    faults = read_faults(pod)
    if not any(faults.values()):
        return []
    current = _live(pod)
    undone = [f"{kind}: {len(items)}" for kind, items in sorted(faults.items()) if items]
    _restart(podman, pod, current, (fabric_dir(pod) / PLAN_FILE).read_text(), {})
    return undone
