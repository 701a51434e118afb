"""The sim pod's InfiniBand fabric: ibsim beside the containers, and the faults a cable can have.

`podctl sim up` starts ibsim on the site's compute fabric (podctl.ibfabric.emulated: the network
file `podctl fabric topology` prints) in the network namespace of the first subnet-manager host's
container (`nsenter -n`, from the host: ibsim is the host's podctl build, never code placed in a
node), on abstract sockets that exist only in that namespace: nothing listens on an address. It
outlives `sim up` (a session of its own) and is kept by the next `sim up` while it serves the
current container's namespace and the current plan; `sim down` stops it. Everything of it lives in
the pod's state folder, `fabric/` (podctl.ibfabric.ibsim.SimulatedFabric).

Fabric faults, each on a planned cable named by one end (`SWITCH[PORT]`, or `HOST:RAIL` for a
node's cable), recorded in `fabric/faults.json`:

- unplug: ibsim's console pulls the cable (`Unlink` at its switch end: both ends go Down);
- errors: the console sets an error counter of its switch-end port (`PerformanceSet`);
- swap two cables, degrade a cable's width or speed: ibsim has no console command for either, so
  the network file is edited (`swap_cables`, `set_link_rate`) and ibsim restarted on it; the
  console faults are applied again, and the SM host's OpenSM restarted (its client of the old
  ibsim is gone) and awaited as master.

`clear` restarts ibsim on the plan's network file: every fabric fault is gone.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from podctl.model import Site

from .. import facts, state
from ..facts import cached_plan, hca_names
from ..fsio import atomic_write
from ..ibfabric import emulated
from ..ibfabric.ibsim import IbsimError, SimulatedFabric, set_link_rate, swap_cables
from ..topology import Cable
from .errors import SimError
from .podman import Podman, container_name

FAULTS_FILE = "faults.json"
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
    socket_name: str
    seconds: float


def _netns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def _server(podman: Podman, site: Site) -> tuple[str, int]:
    """(container, pid) of the SM host whose namespace serves the fabric."""
    host = facts.emulated_server(site)
    name = container_name(site.name, host)
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
    if not facts.has_emulated_fabric(site):
        return None
    started = time.monotonic()
    folder = fabric_dir(site.name)
    container, pid = _server(podman, site)
    plan_net = emulated.network(site)
    current = running(site.name)
    action = "started"
    if current is not None:
        same_plan = (folder / PLAN_FILE).is_file() and (folder / PLAN_FILE).read_text() == plan_net
        if same_plan and _netns(current.pid) == _netns(pid):
            return FabricUp("kept", facts.emulated_server(site), facts.emulated_socket_name(site.name), 0.0)
        current.stop()
        action = "restarted"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    atomic_write(folder / PLAN_FILE, plan_net)
    (folder / FAULTS_FILE).unlink(missing_ok=True)
    _start(plan_net, site, pid)
    # An OpenSM deployed before (a kept SM host, a new ibsim) holds a client of the old one.
    podman.run(["exec", container, "systemctl", "try-restart", f"{facts.EMULATED_SM_SERVICE}.service"], check=False)
    return FabricUp(
        action, facts.emulated_server(site), facts.emulated_socket_name(site.name), time.monotonic() - started
    )


def _start(network: str, site: Site, pid: int) -> SimulatedFabric:
    try:
        return SimulatedFabric.start(
            network,
            fabric_dir(site.name),
            keep_running=True,
            sockname=facts.emulated_socket_name(site.name),
            netns_pid=pid,
        )
    except IbsimError as exc:
        raise SimError(f"the pod's fabric did not start: {exc}") from None


def down(pod: str) -> bool:
    """Stop the pod's fabric; whether one ran."""
    current = running(pod)
    if current is None:
        return False
    current.stop()
    return True


# -- cables ---------------------------------------------------------------------------------------


def find_cable(site: Site, text: str) -> Cable:
    """The planned cable of the compute fabric at one of its ends: `SWITCH[PORT]` or `HOST:RAIL`."""
    if not facts.has_emulated_fabric(site):
        raise SimError(f"{site.source}: no compute fabric with a subnet manager, so the sim serves no fabric")
    plan = cached_plan(site.fabrics[facts.EMULATED_FABRIC])
    match = _SWITCH_END.match(text) or _NODE_END.match(text)
    if match is None:
        raise SimError(f"{text!r}: name a cable by one end, SWITCH[PORT] (ib-leaf-su01-r1[3]) or HOST:RAIL (node01:1)")
    device, port = match.group(1), int(match.group(2))
    for cable in plan.cables:
        if (cable.upper.device, cable.upper.port) == (device, port) or (
            cable.lower.device,
            cable.lower.port,
        ) == (device, port):
            return cable
    raise SimError(f"{text!r}: no planned cable of fabric {plan.fabric!r} ends there")


def cable_ends(site: Site, cable: Cable) -> tuple[End, End]:
    """(switch end, lower end) of a planned cable as the network file names them."""
    lower: End = (cable.lower.device, cable.lower.port)
    if cable.tier == "node-leaf":
        names = hca_names(site, facts.EMULATED_FABRIC)[cable.lower.device]
        lower = (f"{cable.lower.device} {names[cable.lower.port - 1]}", 1)
    return (cable.upper.device, cable.upper.port), lower


def describe(site: Site, cable: Cable) -> str:
    (switch, port), (device, _) = cable_ends(site, cable)
    rail = f" (node {cable.lower.device}, rail {cable.lower.port})" if cable.tier == "node-leaf" else ""
    lower = device if cable.tier == "node-leaf" else f"{device}[{cable.lower.port}]"
    return f"{switch}[{port}] <-> {lower}{rail}"


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


def unplug(site: Site, cable: Cable) -> str:
    fabric = _live(site.name)
    switch_end, _ = cable_ends(site, cable)
    _console(lambda: fabric.unplug(*switch_end))
    faults = read_faults(site.name)
    faults.setdefault("unplugged", []).append(list(switch_end))
    _write_faults(site.name, faults)
    return f"unplugged {describe(site, cable)}"


def raise_errors(site: Site, cable: Cable, counter: str, value: int) -> str:
    fabric = _live(site.name)
    switch_end, _ = cable_ends(site, cable)
    _console(lambda: fabric.set_counter(*switch_end, counter, value))
    faults = read_faults(site.name)
    faults.setdefault("counters", []).append([*switch_end, counter, int(value)])
    _write_faults(site.name, faults)
    return f"{counter} = {value} at {switch_end[0]}[{switch_end[1]}] on {describe(site, cable)}"


def swap(podman: Podman, site: Site, first: Cable, second: Cable) -> str:
    a, _ = cable_ends(site, first)
    b, _ = cable_ends(site, second)
    if a == b:
        raise SimError("swapping a cable with itself changes nothing: name two cables")
    _rewire(podman, site, lambda net: swap_cables(net, a, b), ["swapped", [list(a), list(b)]])
    return f"swapped {describe(site, first)} and {describe(site, second)} (their switch ends traded)"


def degrade(podman: Podman, site: Site, cable: Cable, width: str | None, speed: str | None) -> str:
    if width is None and speed is None:
        raise SimError("degrade a cable to a width (--width 1x, 2x) or a speed (--speed EDR, ...)")
    switch_end, _ = cable_ends(site, cable)
    _rewire(
        podman,
        site,
        lambda net: set_link_rate(net, switch_end, width=width, speed=speed),
        ["degraded", [list(switch_end), width, speed]],
    )
    return f"degraded {describe(site, cable)} to {width or ''}{speed or ''} (trains at most that)"


def _rewire(podman: Podman, site: Site, edit, record: list) -> None:  # type: ignore[no-untyped-def]
    """Restart ibsim on an edited copy of its network file, the console faults applied again."""
    current = _live(site.name)
    try:
        network = edit(current.network_path.read_text())
    except IbsimError as exc:
        raise SimError(str(exc)) from None
    faults = read_faults(site.name)
    faults.setdefault(record[0], []).append(record[1])
    _restart(podman, site, current, network, faults)


def _restart(podman: Podman, site: Site, current: SimulatedFabric, network: str, faults: dict[str, list]) -> None:
    container, pid = _server(podman, site)
    current.stop()
    fabric = _start(network, site, pid)
    for device, port in faults.get("unplugged", []):
        _console(lambda d=device, p=port: fabric.unplug(d, int(p)))
    for device, port, counter, value in faults.get("counters", []):
        _console(lambda d=device, p=port, c=counter, v=value: fabric.set_counter(d, int(p), c, int(v)))
    _write_faults(site.name, faults)
    restart_sm(podman, container)


def restart_sm(podman: Podman, container: str, timeout_s: float = SM_MASTER_S) -> bool:
    """Restart the SM host's OpenSM, if it runs, and wait until it is master again; whether it ran."""
    unit = f"{facts.EMULATED_SM_SERVICE}.service"
    if podman.run(["exec", container, "systemctl", "is-active", "--quiet", unit], check=False).returncode != 0:
        return False
    podman.run(["exec", container, "systemctl", "restart", unit])
    deadline = time.monotonic() + timeout_s
    while True:
        proc = podman.run(["exec", container, facts.UMAD2SIM_PROGRAM, "sminfo"], check=False)
        if "SMINFO_MASTER" in proc.stdout:
            return True
        if time.monotonic() > deadline:
            raise SimError(f"OpenSM on {container} is not master {timeout_s:g} s after its restart: {proc.stdout}")
        time.sleep(1)


def clear(podman: Podman, site: Site) -> list[str]:
    """Every fabric fault undone: ibsim restarted on the plan's network file."""
    faults = read_faults(site.name)
    if not any(faults.values()):
        return []
    current = _live(site.name)
    undone = [f"{kind}: {len(items)}" for kind, items in sorted(faults.items()) if items]
    _restart(podman, site, current, emulated.network(site), {})
    return undone
