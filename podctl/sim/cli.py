"""`podctl sim ...`: a simulated pod of systemd containers on this machine.

The main CLI mounts `sim`; `python -m podctl.sim` runs it on its own.
Errors are SimError (a PodctlError): either way the message is printed and the
exit code (2) returned as for every podctl command (podctl.cliopts.CommandGroup), with a
traceback only under -v (or PODCTL_DEBUG=1).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from podctl.cliopts import CommandGroup, verbose_option
from podctl.core import platforms, state
from podctl.core.console import make_console, styled
from podctl.core.hostlist import HostlistError, expand
from podctl.ibfabric.ibsim import guard
from podctl.sim import fabric as fabric_mod
from podctl.sim import fault as faults_mod
from podctl.sim import pod as pod_mod
from podctl.sim.errors import SimError
from podctl.sim.image import Recipe, ensure_image, find_image, recipe_for
from podctl.sim.podman import Podman
from podctl.sim.preflight import preflight
from podctl.sim.spec import pod_spec

err_console = make_console(stderr=True)
out_console = make_console()

PHASE_TITLES = {"containers": "containers started", "systemd": "systemd booted", "sshd": "sshd answering"}


class RichReporter(pod_mod.Reporter):
    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, int] = {}
        self.lock = threading.Lock()

    def phase(self, name: str, total: int) -> None:
        with self.lock:
            self.tasks[name] = self.progress.add_task(PHASE_TITLES.get(name, name), total=total)

    def advance(self, name: str, detail: str = "") -> None:
        with self.lock:
            if name in self.tasks:
                self.progress.advance(self.tasks[name])

    def message(self, text: str) -> None:
        self.progress.console.print(text, style="dim")


def _progress() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description:<20}", markup=False),
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    )


def _podman(command: str) -> Podman:
    tools = preflight(command)
    return Podman(tools.podman, tools.runc)


def _load_site(path: str):  # -> podctl.core.model.Site
    try:
        from podctl.derive.site import load_site
    except ImportError as exc:  # pragma: no cover - only while podctl.derive.site is being written
        raise SimError(f"cannot load {path}: podctl.derive.site is not available ({exc})") from exc
    return load_site(path)


def _pod_name(podman: Podman, pod: str | None, site: str | None) -> str:
    if pod and site:
        raise click.UsageError("give --pod or --site, not both")
    if site:
        return _load_site(site).name
    return pod_mod.resolve_pod(podman, pod)


pod_option = click.option("--pod", "pod", metavar="NAME", help="The pod (its site's name); needed when several are up.")
site_option = click.option(
    "--site", "site", metavar="SITE.yaml", type=click.Path(dir_okay=False), help="Choose the pod by its site file."
)


@click.group(
    "sim", help="A simulated pod: one systemd container per node, on a bridge with the site's management subnet."
)
def sim() -> None:
    pass


def _release_platforms(releases: tuple[str, ...]) -> tuple[platforms.Platform, ...]:
    """The supported platforms of the `--release` values, all of them when none is given."""
    if not releases:
        return platforms.SUPPORTED
    chosen = []
    for release in releases:
        matches = [p for p in platforms.SUPPORTED if p.release == release.strip()]
        if not matches:
            raise click.BadParameter(
                f"release {release!r} has no sim node image: the supported releases are {platforms.supported_text()}",
                param_hint="'--release'",
            )
        chosen += [p for p in matches if p not in chosen]
    return tuple(chosen)


def _build_image(podman: Podman, platform: platforms.Platform, recipe: Recipe, force: bool) -> tuple[str, bool]:
    """Build one release's node image, showing debootstrap's progress under its name."""
    with err_console.status(f"{platform.title}: checking for a cached node image") as status:
        return ensure_image(podman, recipe, lambda text: status.update(Text(f"{platform.title}: {text}")), force=force)


@sim.command("image")
@click.option(
    "--release",
    "releases",
    metavar="RELEASE",
    multiple=True,
    help=f"Only this Debian release's image (repeatable; default every supported one: {platforms.supported_text()}).",
)
@click.option("--force", is_flag=True, help="Rebuild even when an image of the current recipe exists.")
def image_cmd(releases: tuple[str, ...], force: bool) -> None:
    """Build the node image of each supported Debian release with debootstrap (cached by recipe hash)."""
    chosen = _release_platforms(releases)
    podman = _podman("image")
    err_console.print(f"node images: {', '.join(p.title for p in chosen)}", highlight=False)
    for platform in chosen:
        recipe = recipe_for(platform)
        started = time.monotonic()
        ref, built = _build_image(podman, platform, recipe, force)
        if built:
            err_console.print(f"{platform.title}: built {ref} in {time.monotonic() - started:.0f} s", highlight=False)
        else:
            err_console.print(f"{platform.title}: {ref} is up to date (recipe {recipe.digest()[:12]})", highlight=False)
        click.echo(ref)


@sim.command("up")
@click.argument("site_file", metavar="SITE.yaml", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--nodes", "hostlist", metavar="HOSTLIST", help="Only these nodes (ClusterShell syntax, e.g. node[01-02])."
)
@click.option(
    "--timeout", "timeout_s", default=180.0, show_default=True, help="Seconds for every node to be reachable."
)
def up_cmd(site_file: str, hostlist: str | None, timeout_s: float) -> None:
    """Create (or repair) one container per node and wait until sshd answers on each."""
    site = _load_site(site_file)
    podman = _podman("up")
    # The spec here only says which releases the nodes run (and refuses a site the sim cannot
    # take before any image is built); `up` makes it again under the pod's lock.
    wanted = pod_spec(site, site_file, hostlist, state.pod_dir(site.name) / "mounts").platforms
    images: dict[str, str] = {}
    for platform in wanted:
        recipe = recipe_for(platform)
        found = find_image(podman, recipe)
        if found is None:
            preflight("image")
            err_console.print(f"building the {platform.title} node image (once; cached afterwards)", highlight=False)
            found, _ = _build_image(podman, platform, recipe, force=False)
        images[platform.key] = found
    with _progress() as progress:
        result = pod_mod.up(podman, site, site_file, hostlist, timeout_s, RichReporter(progress), images=images)
    _print_up(result)


def _print_up(result: pod_mod.UpResult) -> None:
    table = Table(title=f"pod {result.spec.pod} ({result.seconds:.1f} s)", title_justify="left")
    for column in ("node", "address", "container", "action", "systemd"):
        table.add_column(column)
    for r in result.nodes:
        systemd = r.systemd + (f" ({', '.join(r.failed_units)} failed)" if r.failed_units else "")
        table.add_row(r.hostname, r.address, r.container, r.action, systemd)
    out_console.print(table)
    if result.fabric is not None:
        f = result.fabric
        out_console.print(
            f"fabric compute: ibsim {f.action} in {f.server}'s network namespace, as {guard.ACCOUNT}, on UDP "
            f"{f.port}-{guard.ports(f.port).stop - 1} that only root there reaches",
            highlight=False,
            soft_wrap=True,
        )
    if result.removed:
        out_console.print(f"removed containers of nodes no longer in the site: {', '.join(result.removed)}")
    first = result.nodes[0].hostname if result.nodes else "NODE"
    out_console.print(
        "\nReach the nodes:\n"
        f"  ssh -F {result.ssh_config} {first}\n"
        f"  podctl sim exec --pod {result.spec.pod} {first} -- bash\n"
        f"  ANSIBLE_PRIVATE_KEY_FILE={result.key} ANSIBLE_SSH_ARGS='-o UserKnownHostsFile="
        f"{state.known_hosts_path(result.spec.pod)}' ansible -i INVENTORY all -m ping",
        highlight=False,
        soft_wrap=True,
    )


@sim.command("status")
@pod_option
@site_option
def status_cmd(pod: str | None, site: str | None) -> None:
    """Show each node's container, systemd and sshd state, and injected faults."""
    podman = _podman("status")
    name = _pod_name(podman, pod, site)
    rows, network = pod_mod.status(podman, name)
    if not rows and network is None:
        raise SimError(f"pod {name!r} is not up (no containers or network labelled io.podctl.pod={name})")
    table = Table(title=f"pod {name}" + (f" - network {network}" if network else " - no network"), title_justify="left")
    faults = [_fault_text(r.faults) for r in rows]
    for column in ("node", "address", "platform", "container", "state", "systemd", "ssh"):
        table.add_column(column)
    # On a narrow terminal the other columns give way: a fault is never cut short.
    table.add_column("faults", no_wrap=True, min_width=max((len(f) for f in faults), default=6))
    for r, fault in zip(rows, faults, strict=True):
        ssh = "-" if r.ssh is None else ("ok" if r.ssh else styled(("no", "red")))
        platform = r.platform or "-"
        table.add_row(r.hostname, r.address, platform, r.container, r.state, r.systemd, ssh, fault)
    out_console.print(table)
    served = fabric_mod.running(name)
    if served is not None:
        faults = fabric_mod.read_faults(name)
        kinds = ", ".join(f"{kind} {len(items)}" for kind, items in sorted(faults.items()) if items) or "none"
        out_console.print(
            f"fabric: ibsim pid {served.pid} ({served.install.describe()}); faults: {kinds}", highlight=False
        )


def _fault_text(entry: dict[str, object]) -> str:
    parts = []
    if entry.get("killed"):
        parts.append("killed")
    if entry.get("rate"):
        parts.append(f"rate {entry['rate']}")
    for service in entry.get("stopped_services", []) or []:  # type: ignore[union-attr]
        parts.append(f"stopped {service}")
    return ", ".join(parts)


@sim.command("down")
@pod_option
@site_option
@click.option("--purge", is_flag=True, help="Also delete the pod's state: SSH key and the shared-mount folders.")
def down_cmd(pod: str | None, site: str | None, purge: bool) -> None:
    """Remove the pod's containers and network (the node image is kept)."""
    podman = _podman("down")
    name = _pod_name(podman, pod, site)
    removed, network_removed = pod_mod.down(podman, name, purge)
    err_console.print(
        f"pod {name}: removed {len(removed)} container(s)"
        + (", and its network" if network_removed else "")
        + ("; state deleted" if purge else f"; state kept in {state.pod_dir(name)}")
    )


@sim.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@pod_option
@click.argument("node")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def exec_cmd(ctx: click.Context, pod: str | None, node: str, command: tuple[str, ...]) -> None:
    """Run COMMAND in NODE (as root, through podman exec): podctl sim exec node01 -- hostname"""
    podman = _podman("exec")
    name = pod_mod.resolve_pod(podman, pod)
    container = pod_mod.pod_container(podman, name, node)
    if not container.running:
        raise SimError(
            f"{node} is not running ({container.state}); `podctl sim fault {node} --clear` or `podctl sim up` restarts it"
        )
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise click.UsageError("give a command to run: podctl sim exec NODE -- COMMAND")
    flags = ["-i"]
    if sys.stdin.isatty() and sys.stdout.isatty():
        flags.append("-t")
    rc = subprocess.call(podman.command(["exec", *flags, container.name, *command]))
    ctx.exit(rc)


@sim.command("fault")
@pod_option
@click.argument("nodes", metavar="[NODES]", required=False)
@click.option("--kill", "kill_", is_flag=True, help="Stop the node abruptly (SIGKILL, like a power cut).")
@click.option("--rate", metavar="RATE", help="Throttle the node's network to RATE (tc units: 50mbit, 1gbit).")
@click.option("--stop-service", "services", metavar="NAME", multiple=True, help="Stop a systemd service (repeatable).")
@click.option(
    "--unmount", "unmounts", metavar="PATH", multiple=True, help="Unmount a shared mount inside the node (repeatable)."
)
@click.option(
    "--fill",
    "fills",
    metavar="PATH",
    multiple=True,
    help=f"Fill the disk at PATH: a {faults_mod.FILL_SIZE_MB} MB file system over it, full (repeatable).",
)
@click.option(
    "--unplug", "unplugs", metavar="CABLE", multiple=True,
    help="Fabric: pull a cable, named by one end: SWITCH[PORT] or HOST:RAIL (repeatable).",
)  # fmt: skip
@click.option("--swap", "swaps", metavar="CABLE CABLE", nargs=2, help="Fabric: trade two cables' switch ends.")
@click.option(
    "--degrade", "degrades", metavar="CABLE", multiple=True, help="Fabric: the cable trains at --width/--speed."
)
@click.option("--width", metavar="WIDTH", help="With --degrade: the width it trains at most (1x, 2x).")
@click.option("--speed", metavar="SPEED", help="With --degrade: the speed it trains at most (SDR ... NDR).")
@click.option(
    "--errors", "errors", metavar="CABLE", multiple=True,
    help="Fabric: the cable's switch port counts errors (--counter, --count).",
)  # fmt: skip
@click.option("--counter", default="SymbolErrorCounter", show_default=True, help="With --errors: which counter.")
@click.option(
    "--count", default=1000, show_default=True, type=click.IntRange(0, 65535), help="With --errors: its value."
)
@click.option(
    "--clear", "clear_", is_flag=True, help="Undo every fault injected on NODES; without NODES, on the fabric."
)
def fault_cmd(
    pod: str | None,
    nodes: str | None,
    kill_: bool,
    rate: str | None,
    services: tuple[str, ...],
    unmounts: tuple[str, ...],
    fills: tuple[str, ...],
    unplugs: tuple[str, ...],
    swaps: tuple[str, str] | None,
    degrades: tuple[str, ...],
    width: str | None,
    speed: str | None,
    errors: tuple[str, ...],
    counter: str,
    count: int,
    clear_: bool,
) -> None:
    """Inject a fault into NODES (a hostlist) or into the pod's fabric, or clear the faults injected.

    Fabric faults name a planned cable by one end: SWITCH[PORT] (ib-leaf-su01-r1[3]) or HOST:RAIL
    (node01:1, the node's rail-1 cable): podctl sim fault --unplug node01:1"""
    others = bool(rate or services or unmounts or fills)
    fabric_faults = bool(unplugs or swaps or degrades or errors)
    if (width or speed) and not degrades:
        raise click.UsageError("--width and --speed say how far --degrade CABLE degrades a cable")
    if fabric_faults:
        if nodes or kill_ or others or clear_:
            raise click.UsageError("fabric faults name cables, not NODES: give them without NODES and node faults")
        podman = _podman("fault")
        name = pod_mod.resolve_pod(podman, pod)
        wanted = fabric_mod.FabricFaults(unplugs, swaps, degrades, width, speed, errors, counter, count)
        for line in fabric_mod.inject(podman, name, wanted):
            err_console.print(f"fabric of pod {name}: {line}", highlight=False, soft_wrap=True)
        return
    if not nodes:
        if clear_ and not (kill_ or others):
            podman = _podman("fault")
            name = pod_mod.resolve_pod(podman, pod)
            done = fabric_mod.clear(podman, name)
            err_console.print(
                f"fabric of pod {name}: " + ("; ".join(f"cleared {d}" for d in done) or "nothing to clear")
            )
            return
        raise click.UsageError("give NODES for a node fault, or a fabric fault (--unplug, --swap, --degrade, --errors)")
    if not (kill_ or others or clear_):
        raise click.UsageError(
            "choose a fault: --kill, --rate RATE, --stop-service NAME, --unmount PATH, --fill PATH, or --clear"
        )
    if clear_ and (kill_ or others):
        raise click.UsageError("--clear undoes faults; give it alone")
    if kill_ and others:
        raise click.UsageError("--kill stops the node; it cannot be combined with other faults")
    for path in (*unmounts, *fills):
        if not path.startswith("/") or path.rstrip("/") in ("", "/proc", "/sys", "/dev", "/run", "/etc", "/usr"):
            raise click.BadParameter(f"{path!r}: give an absolute path that is not a system folder")
    if rate:
        faults_mod.parse_rate(rate)  # reject a bad rate before touching any node
    try:
        hosts = list(expand(nodes))
    except HostlistError as exc:
        raise click.BadParameter(str(exc), param_hint="NODES") from exc
    podman = _podman("fault")
    name = pod_mod.resolve_pod(podman, pod)
    containers = [pod_mod.pod_container(podman, name, host) for host in hosts]
    for container in containers:
        done: list[str] = []
        if clear_:
            done = faults_mod.clear(podman, name, container) or ["nothing to clear"]
        if kill_:
            faults_mod.kill(podman, name, container)
            done.append("killed")
        if rate:
            ifaces = faults_mod.throttle(podman, name, container, rate)
            where = ifaces.inside + (f" and host side {ifaces.host_peer}" if ifaces.host_peer else "")
            done.append(f"throttled to {rate} (tbf on {where})")
        for service in services:
            faults_mod.stop_service(podman, name, container, service)
            done.append(f"stopped {service}")
        for path in unmounts:
            faults_mod.unmount(podman, name, container, path)
            done.append(f"unmounted {path}")
        for path in fills:
            faults_mod.fill(podman, name, container, path)
            done.append(f"filled {path}")
        err_console.print(f"{container.node}: {'; '.join(done)}")


class _Alone(CommandGroup):
    program = "podctl sim"


# `python -m podctl.sim`: the sim's commands without the main CLI, their errors reported the way
# the main CLI reports every command's (podctl.cliopts.CommandGroup), -v for a traceback.
standalone = verbose_option(_Alone("sim", commands=sim.commands, help=sim.help))


def main() -> None:
    """`python -m podctl.sim`."""
    standalone.main(prog_name="podctl sim")
