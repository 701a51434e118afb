"""Load a site file: YAML -> schema -> typed model -> semantic checks.

Every problem is collected with its YAML path and file position; nothing
stops at the first error. `check_site_text` never raises on bad input: the
property tests feed it mutated and random files.
"""

from __future__ import annotations

import ipaddress
import json
import os.path
import posixpath
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml
from ClusterShell.NodeSet import NodeSet, NodeSetException

from .errors import Diagnostic, Location, PodctlError, Severity, SiteError
from .model import (
    KNOWN_API_VERSIONS,
    GPUs,
    default_hca_names,
    HCAs,
    IPoIB,
    Exclusion,
    Fabric,
    ManagementNetwork,
    Monitoring,
    mounts_shared_by,
    Node,
    NodeGroup,
    NVLink,
    Partition,
    Profile,
    Reference,
    Role,
    Site,
    Slurm,
    StorageMount,
    ThresholdOverride,
    ValidationSettings,
    ValidationTools,
    VALIDATION_TOOLS_DIRNAME,
    VALIDATION_TOOLS_LOCAL_PATH,
)
from .suggest import closest, did_you_mean
from .yamlsource import PathKey, Source, format_path, load_source

SCHEMA_RESOURCE = "site.schema.json"
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def schema() -> dict[str, Any]:
    text = resources.files("podctl.schema").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(schema())


@cache
def _profile_validator() -> jsonschema.protocols.Validator:
    root = schema()
    return jsonschema.Draft202012Validator({"$defs": root["$defs"], "$ref": "#/$defs/profile"})


@dataclass
class CheckResult:
    file: str
    site: Site | None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.WARNING]


def load_site(path: str | Path) -> Site:
    """Load and check a site file; raise SiteError listing every error."""
    result = check_site_file(path)
    if result.errors or result.site is None:
        raise SiteError(result.file, result.diagnostics)
    return result.site


def check_site_file(path: str | Path) -> CheckResult:
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise PodctlError(f"{file}: no such file; create one with `podctl init -o {file}`") from None
    except IsADirectoryError:
        raise PodctlError(f"{file}: is a directory, not a site file") from None
    except OSError as exc:
        raise PodctlError(f"{file}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return CheckResult(file, None, [Diagnostic(
            Severity.ERROR, "", f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            Location(file, line, 1), "a site file is UTF-8 YAML text", code="encoding")])
    return check_site_text(text, file)


def check_site_text(text: str, file: str = "<site>") -> CheckResult:
    source = load_source(text, file)
    result = CheckResult(file, None, list(source.diagnostics))
    if result.errors:
        return result
    report = _Reporter(source, result.diagnostics)
    data = source.data
    if not isinstance(data, dict):
        report.error((), f"the top level must be a mapping of keys (apiVersion, kind, ...), not {_kind(data)}",
                     "start from `podctl init -o site.yaml` or inventory/sim/site.yaml", code="type")
        return result
    version = data.get("apiVersion")
    if version not in KNOWN_API_VERSIONS:
        known = ", ".join(KNOWN_API_VERSIONS)
        what = "missing apiVersion" if version is None else f"unknown apiVersion {version!r}"
        report.error(("apiVersion",), f"{what}; known versions: {known}",
                     f"set `apiVersion: {KNOWN_API_VERSIONS[-1]}`", code="api-version")
        return result
    _schema_diagnostics(data, report)
    if result.errors:
        return result
    builder = _Builder(data, report)
    site = builder.build(file)
    result.site = site if not result.errors else None
    return result


def _kind(value: object) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", int: "an integer", float: "a number",
            bool: "a boolean", type(None): "null"}.get(type(value), type(value).__name__)


class _Reporter:
    def __init__(self, source: Source, sink: list[Diagnostic]) -> None:
        self.source = source
        self.sink = sink

    def add(self, severity: Severity, path: PathKey, message: str, hint: str | None = None,
            *, code: str = "invalid", key: bool = False) -> None:
        self.sink.append(Diagnostic(severity, format_path(path), message,
                                    self.source.locate(path, key=key), hint, code))

    def error(self, path: PathKey, message: str, hint: str | None = None, *, code: str = "invalid",
              key: bool = False) -> None:
        self.add(Severity.ERROR, path, message, hint, code=code, key=key)

    def warning(self, path: PathKey, message: str, hint: str | None = None, *, code: str = "warning") -> None:
        self.add(Severity.WARNING, path, message, hint, code=code)


_TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def _schema_diagnostics(data: dict, report: _Reporter) -> None:
    errors = sorted(_validator().iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    for err in errors:
        path: PathKey = tuple(err.absolute_path)
        inst = err.instance
        sch = err.schema if isinstance(err.schema, dict) else {}
        v = err.validator
        if v == "additionalProperties" and isinstance(inst, dict):
            known = list(sch.get("properties", {}))
            for extra in sorted(set(inst) - set(known), key=str):
                hint = did_you_mean(extra, known) or (
                    f"known keys here: {', '.join(known)}" if known else None)
                report.error(path + (extra,), f"unknown key {extra!r}", hint, code="unknown-key", key=True)
        elif v == "required" and isinstance(inst, dict):
            extras = set(inst) - set(sch.get("properties", {}))
            for missing in err.validator_value:
                # A misspelt key is already reported with its did-you-mean; saying that the
                # key it was meant to be is missing as well only repeats it.
                if missing not in inst and not any(closest(str(x), [missing]) for x in extras):
                    report.error(path, f"missing required key {missing!r}", _required_hint(missing),
                                 code="missing-key")
        elif v == "type":
            want = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
            names = " or ".join(_TYPE_NAMES.get(w, w) for w in want)
            report.error(path, f"expected {names}, got {_kind(inst)} {_short(inst)}", code="type")
        elif v in ("enum", "const"):
            choices = err.validator_value if v == "enum" else [err.validator_value]
            shown = ", ".join(str(c) for c in choices)
            report.error(path, f"{_short(inst)} is not one of: {shown}",
                         did_you_mean(inst, [str(c) for c in choices]), code="enum")
        elif v == "propertyNames":
            report.error(path, f"invalid name {_short(inst)}: {err.message}", code="name")
        elif v in ("oneOf", "not") and "x-message" in sch:
            report.error(path, sch["x-message"], code="choice")
        elif v == "pattern":
            report.error(path, f"{_short(inst)} does not have the expected form ({_pattern_help(path)})",
                         code="pattern")
        else:
            report.error(path, err.message, code=v)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _pattern_help(path: PathKey) -> str:
    last = next((p for p in reversed(path) if isinstance(p, str)), "")
    return {
        "cidr": "an IPv4 network such as 10.0.0.0/16",
        "supernet": "an IPv4 network such as 172.16.0.0/12",
        "address": "an IPv4 address such as 10.0.0.10",
        "gateway": "an IPv4 address such as 10.0.0.1",
        "hosts": "a hostlist such as dgx[001-032]",
        "nodes": "a hostlist such as dgx[001-032]",
        "name": "lower-case letters, digits and dashes, starting with a letter",
        "group": "lower-case letters, digits and underscores, starting with a letter",
        "mountpoint": "an absolute path",
        "export": "an absolute path",
        "retention": "a duration such as 15d",
        "scrape_interval": "a duration such as 15s",
        "max_time": "UNLIMITED, minutes, or [days-]hours:minutes:seconds",
        "names": "an RDMA device name such as mlx5_0",
    }.get(last, "see `podctl schema`")


def _required_hint(key: str) -> str | None:
    return {
        "apiVersion": "add `apiVersion: podctl/v1alpha1`",
        "kind": "add `kind: Site`",
        "nodes": "list node groups: - {group: compute, hosts: 'dgx[001-032]', profile: dgx-h100, roles: [compute], address: 10.0.1.1}",
        "networks": "add `networks: {management: {cidr: 10.0.0.0/16}}`",
    }.get(key)


# --------------------------------------------------------------------------------------
# Built-in profiles


@cache
def builtin_profiles() -> dict[str, Profile]:
    out: dict[str, Profile] = {}
    folder = resources.files("podctl.profiles")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            name = entry.name[: -len(".yaml")]
            data = yaml.load(entry.read_text(encoding="utf-8"), Loader=_FAST_LOADER)
            problems = list(_profile_validator().iter_errors(data))
            if problems:  # a packaging bug, not a user error: fail loudly in tests
                raise RuntimeError(f"built-in profile {name} is invalid: {problems[0].message}")
            for path, message, _ in hca_name_problems(data):
                raise RuntimeError(f"built-in profile {name} is invalid: {format_path(path)}: {message}")
            out[name] = _profile(name, data, builtin=True)
    return out


def _profile(name: str, data: dict, *, builtin: bool) -> Profile:
    g = data.get("gpus")
    gpus = None
    if g:
        nv = g.get("nvlink")
        gpus = GPUs(
            model=g["model"], count=g["count"], memory_gib=g["memory_gib"],
            nvlink=NVLink(nv["generation"], nv["links_per_gpu"], float(nv["bandwidth_gbps"])) if nv else None,
            peak_bf16_tflops=float(g["peak_bf16_tflops"]) if "peak_bf16_tflops" in g else None,
        )
    return Profile(
        name=name,
        description=data.get("description", ""),
        gpus=gpus,
        compute_hcas=(compute := _hcas(data["compute_hcas"])),
        storage_hcas=_hcas(data.get("storage_hcas", {"count": 0}), taken=compute.names),
        cpu_cores=data["cpu_cores"],
        memory_gib=data["memory_gib"],
        emulated=bool(data.get("emulated", False)),
        reference=tuple(Reference(r["figure"], float(r["value"]), float(r["tolerance"]), r["unit"], r["source"])
                        for r in data.get("reference", [])),
        builtin=builtin,
    )


def _hcas(data: dict, taken: tuple[str, ...] = ()) -> HCAs:
    # Storage HCAs default to the names compute leaves free: a node has one device per name.
    names = tuple(data["names"]) if "names" in data else default_hca_names(data["count"], taken)
    return HCAs(count=data["count"], rate=data.get("rate", "NDR") if data["count"] else data.get("rate", ""),
                names=names)


def hca_name_problems(profile: dict) -> list[tuple[PathKey, str, str]]:
    """(path inside the profile, message, hint) for HCA names that are not one distinct name per HCA."""
    problems: list[tuple[PathKey, str, str]] = []
    seen: dict[str, str] = {}  # name -> what already has it
    for attr in ("compute_hcas", "storage_hcas"):
        hcas = profile.get(attr)
        if not isinstance(hcas, dict):
            continue
        if "names" not in hcas:
            # Unnamed HCAs take default names, which named ones elsewhere must not repeat.
            for k, name in enumerate(default_hca_names(hcas.get("count", 0), seen)):
                seen[name] = f"{attr}.names[{k}] (by default)"
            continue
        names, count = hcas["names"], hcas["count"]
        if len(names) != count:
            problems.append(((attr, "names"), f"{len(names)} name(s) for {count} HCA(s)",
                             "list one RDMA device name per HCA, rail 1 first, or leave `names` out for mlx5_0, mlx5_1, ..."))
        for k, name in enumerate(names):
            if name in seen:
                problems.append(((attr, "names", k), f"HCA name {name!r} is already used by {seen[name]}",
                                 "each HCA of a node has its own RDMA device name (ls /sys/class/infiniband)"))
            seen.setdefault(name, format_path((attr, "names", k)))
    return problems


# --------------------------------------------------------------------------------------
# Model building and semantic checks


def _under(path: str, mountpoint: str) -> bool:
    return path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


class _Builder:
    def __init__(self, data: dict, report: _Reporter) -> None:
        self.data = data
        self.report = report
        self.nodes: list[Node] = []
        self.by_name: dict[str, Node] = {}

    # -- helpers -------------------------------------------------------------------

    def hostlist(self, path: PathKey, text: str) -> tuple[str, ...]:
        try:
            return tuple(NodeSet(text))
        except (NodeSetException, ValueError, TypeError, IndexError) as exc:
            self.report.error(path, f"invalid hostlist {text!r}: {exc}",
                              "use Slurm syntax such as dgx[001-032,040] or node[01-03]", code="hostlist")
            return ()

    def site_hosts(self, path: PathKey, text: str, what: str) -> tuple[str, ...]:
        """Expand a hostlist whose every host must be a node of this site."""
        hosts = self.hostlist(path, text)
        unknown = [h for h in hosts if h not in self.by_name]
        if unknown:
            folded = str(NodeSet.fromlist(unknown))
            hint = did_you_mean(unknown[0], self.by_name) if len(unknown) == 1 else None
            self.report.error(path, f"{what}names node(s) not in this site: {folded}",
                              hint or "declare them under `nodes` or fix the hostlist", code="unknown-node")
        return tuple(h for h in hosts if h in self.by_name)

    def one_host(self, path: PathKey, name: str, what: str) -> str:
        if name not in self.by_name:
            self.report.error(path, f"{what} {name!r} is not a node of this site",
                              did_you_mean(name, self.by_name) or "name one of the hosts under `nodes`",
                              code="unknown-node")
        return name

    # -- the whole site ------------------------------------------------------------

    def build(self, file: str) -> Site:
        d = self.data
        meta = d["metadata"]
        profiles = self.profiles()
        management = self.management()
        groups = self.groups(profiles, management)
        fabrics = self.fabrics(profiles)
        ipoib = self.ipoib(management, fabrics.get("compute"))
        storage = self.storage()
        slurm = self.slurm(meta["name"])
        monitoring = self.monitoring()
        validation = self.validation(profiles, storage, file)
        self.ntp(management)
        site = Site(
            name=meta["name"], description=meta.get("description", ""), source=file,
            profiles=profiles, groups=groups, nodes=tuple(self.nodes), management=management,
            ipoib=ipoib, fabrics=fabrics, storage=storage, slurm=slurm, monitoring=monitoring,
            validation=validation,
        )
        if not self.report.sink or all(x.severity is Severity.WARNING for x in self.report.sink):
            self.topology(site)
        return site

    def profiles(self) -> dict[str, Profile]:
        profiles = dict(builtin_profiles())
        for name, body in self.data.get("profiles", {}).items():
            if name in profiles:
                self.report.error(("profiles", name), f"profile {name!r} is built in and cannot be redefined",
                                  "give your profile another name, or override figures under validation.thresholds",
                                  code="duplicate", key=True)
                continue
            for path, message, hint in hca_name_problems(body):
                self.report.error(("profiles", name) + path, message, hint, code="hca-names")
            profiles[name] = _profile(name, body, builtin=False)
        return profiles

    def management(self) -> ManagementNetwork:
        m = self.data["networks"]["management"]
        path = ("networks", "management")
        cidr = self.network(path + ("cidr",), m["cidr"]) or ipaddress.IPv4Network("0.0.0.0/32")
        gateway = None
        if "gateway" in m:
            gateway = self.address(path + ("gateway",), m["gateway"])
            if gateway is not None and gateway not in cidr:
                self.report.error(path + ("gateway",), f"gateway {gateway} is outside the management network {cidr}",
                                  code="address-range")
        return ManagementNetwork(cidr=cidr, gateway=gateway, domain=m.get("domain", "pod.internal"),
                                 dns=tuple(m.get("dns", [])), ntp=tuple(m.get("ntp", [])))

    def network(self, path: PathKey, text: str) -> ipaddress.IPv4Network | None:
        try:
            return ipaddress.IPv4Network(text, strict=True)
        except ipaddress.NetmaskValueError as exc:
            self.report.error(path, f"invalid network {text!r}: {exc}", code="network")
        except ValueError as exc:
            hint = None
            try:
                hint = f"did you mean {ipaddress.IPv4Network(text, strict=False)}?"
            except ValueError:
                pass
            self.report.error(path, f"invalid network {text!r}: {exc}", hint, code="network")
        return None

    def address(self, path: PathKey, text: str) -> ipaddress.IPv4Address | None:
        try:
            return ipaddress.IPv4Address(text)
        except ValueError as exc:
            self.report.error(path, f"invalid address {text!r}: {exc}", code="address")
            return None

    def groups(self, profiles: dict[str, Profile], mgmt: ManagementNetwork) -> tuple[NodeGroup, ...]:
        groups: list[NodeGroup] = []
        seen_groups: dict[str, int] = {}
        host_origin: dict[str, int] = {}
        addr_origin: dict[ipaddress.IPv4Address, tuple[PathKey, str]] = {}
        reserved = {mgmt.cidr.network_address, mgmt.cidr.broadcast_address}
        for i, g in enumerate(self.data["nodes"]):
            path: PathKey = ("nodes", i)
            name = g["group"]
            if name in seen_groups:
                self.report.error(path + ("group",), f"group name {name!r} is already used by nodes[{seen_groups[name]}]",
                                  "group names become Ansible groups and must be unique", code="duplicate")
            seen_groups.setdefault(name, i)
            if name in ("all", "ungrouped") or name.startswith("role_"):
                self.report.error(path + ("group",), f"group name {name!r} is reserved",
                                  "Ansible owns `all` and `ungrouped`; podctl names its role groups `role_*`",
                                  code="reserved")
            hosts = self.hostlist(path + ("hosts",), g["hosts"])
            if g["profile"] not in profiles:
                self.report.error(path + ("profile",), f"unknown profile {g['profile']!r}",
                                  did_you_mean(g["profile"], profiles) or
                                  f"built-in profiles: {', '.join(sorted(builtin_profiles()))}; or define it under `profiles`",
                                  code="unknown-profile")
            roles = frozenset(Role(r) for r in g["roles"])
            addresses = self.group_addresses(path, g, hosts)
            for k, host in enumerate(hosts):
                if host in host_origin:
                    self.report.error(path + ("hosts",), f"host {host} is already declared in nodes[{host_origin[host]}]",
                                      "each host belongs to exactly one group", code="duplicate-host")
                    continue
                host_origin[host] = i
                addr = addresses[k] if k < len(addresses) else None
                if addr is None:
                    continue
                apath = path + (("addresses", k) if "addresses" in g else ("address",))
                if addr not in mgmt.cidr:
                    self.report.error(apath, f"address {addr} of {host} is outside the management network {mgmt.cidr}",
                                      f"the group's {len(hosts)} host(s) need consecutive free addresses inside {mgmt.cidr}",
                                      code="address-range")
                elif addr in reserved:
                    self.report.error(apath, f"address {addr} of {host} is the network or broadcast address of {mgmt.cidr}",
                                      code="address-range")
                elif mgmt.gateway is not None and addr == mgmt.gateway:
                    self.report.error(apath, f"address {addr} of {host} is the gateway's address", code="address-collision")
                if addr in addr_origin:
                    other_path, other = addr_origin[addr]
                    self.report.error(apath, f"address {addr} of {host} is already used by {other} ({format_path(other_path)})",
                                      "give each node its own address", code="address-collision")
                else:
                    addr_origin[addr] = (apath, host)
                node = Node(hostname=host, group=name, profile=g["profile"], roles=roles, address=addr)
                self.nodes.append(node)
                self.by_name[host] = node
            groups.append(NodeGroup(name=name, hostlist=g["hosts"], hosts=hosts, profile=g["profile"], roles=roles))
        return tuple(groups)

    def group_addresses(self, path: PathKey, g: dict, hosts: tuple[str, ...]) -> list[ipaddress.IPv4Address | None]:
        if "addresses" in g:
            out = [self.address(path + ("addresses", k), a) for k, a in enumerate(g["addresses"])]
            if len(out) != len(hosts):
                self.report.error(path + ("addresses",),
                                  f"{len(out)} address(es) for {len(hosts)} host(s) in {g['hosts']!r}",
                                  "give one address per host, in hostlist order, or a start `address`",
                                  code="address-count")
            return out
        start = self.address(path + ("address",), g["address"])
        if start is None:
            return []
        out = []
        for k in range(len(hosts)):
            try:
                out.append(start + k)
            except ipaddress.AddressValueError:
                self.report.error(path + ("address",), f"{len(hosts)} consecutive addresses from {start} run past 255.255.255.255",
                                  code="address-range")
                break
        return out

    def fabrics(self, profiles: dict[str, Profile]) -> dict[str, Fabric]:
        out: dict[str, Fabric] = {}
        for fname, f in self.data.get("fabrics", {}).items():
            path: PathKey = ("fabrics", fname)
            hca_attr = "compute_hcas" if fname == "compute" else "storage_hcas"

            def hcas_of(node: Node) -> HCAs | None:
                prof = profiles.get(node.profile)
                return getattr(prof, hca_attr) if prof else None

            if "nodes" in f:
                attached = self.site_hosts(path + ("nodes",), f["nodes"], "")
            else:
                attached = tuple(n.hostname for n in self.nodes if (h := hcas_of(n)) is not None and h.count > 0)
            if not attached:
                self.report.error(path, f"no node is attached to the {fname} fabric",
                                  f"give nodes whose profile has {hca_attr}, or list them in fabrics.{fname}.nodes",
                                  code="empty-fabric")
            counts: dict[int, list[str]] = {}
            for host in attached:
                h = hcas_of(self.by_name[host])
                if h is not None:
                    counts.setdefault(h.count, []).append(host)
            rails = f.get("rails")
            if rails is None:
                rails = max(counts, key=lambda c: len(counts[c])) if counts else 1
            for count, hosts in sorted(counts.items()):
                if count != rails:
                    prof = self.by_name[hosts[0]].profile
                    self.report.error(path + ("rails",) if "rails" in f else path,
                                      f"{len(hosts)} node(s) ({NodeSet.fromlist(hosts)}) have {count} {hca_attr.replace('_', ' ')} "
                                      f"(profile {prof}) but the fabric has {rails} rail(s)",
                                      "every attached node must have one HCA per rail: fix the profile, `rails`, or the fabric's `nodes`",
                                      code="rails")
                rates = {getattr(profiles[self.by_name[h].profile], hca_attr).rate for h in hosts}
                for rate in sorted(r for r in rates if r and r != f["rate"]):
                    self.report.warning(path + ("rate",), f"fabric rate {f['rate']} differs from the HCA rate {rate} of profile(s) used here",
                                        "links will train at the lower of the two rates", code="rate")
            radix = f["switch"]["radix"]
            leaf = f.get("leaf", {"down_ports": radix // 2, "up_ports": radix - radix // 2})
            if leaf["down_ports"] + leaf["up_ports"] > radix:
                self.report.error(path + ("leaf",), f"leaf uses {leaf['down_ports']} + {leaf['up_ports']} ports but the switch has {radix}",
                                  code="radix")
            su = f.get("scalable_unit_size", leaf["down_ports"])
            if su > leaf["down_ports"]:
                self.report.error(path + ("scalable_unit_size",),
                                  f"{su} nodes per scalable unit, but a leaf switch has only {leaf['down_ports']} down-ports "
                                  f"(radix {radix})",
                                  f"use at most {leaf['down_ports']} nodes per unit, or a switch with more ports", code="leaf-ports")
            used = min(su, leaf["down_ports"], max(len(attached), 1))
            if used > leaf["up_ports"]:
                self.report.warning(path + ("leaf",), f"leaf switches are oversubscribed {used}:{leaf['up_ports']} "
                                    f"({used / leaf['up_ports']:.2f}:1): not full bisection bandwidth",
                                    "intended for cost, or give the leaf as many up-ports as nodes", code="oversubscription")
            if "subnet_managers" in f:
                sms = self.site_hosts(path + ("subnet_managers",), f["subnet_managers"], "")
            else:
                sms = tuple(n.hostname for n in self.nodes if Role.SUBNET_MANAGER in n.roles)
                if not sms:
                    self.report.warning(path, f"no subnet manager for the {fname} fabric",
                                        "give a node the subnet-manager role or set subnet_managers (skip if the switches run it)",
                                        code="no-subnet-manager")
            # A subnet manager needs an HCA in the fabric, though management hosts usually sit on
            # spare switch ports outside the planned rails, so it need not be in `nodes`.
            no_hca = [h for h in sms if (hc := hcas_of(self.by_name[h])) is None or hc.count == 0]
            if no_hca:
                self.report.error(path + ("subnet_managers",) if "subnet_managers" in f else path,
                                  f"subnet manager(s) {NodeSet.fromlist(no_hca)} have no {hca_attr.replace('_', ' ')} "
                                  f"in their profile", "OpenSM runs on a host with an HCA in the fabric it manages",
                                  code="subnet-manager")
            tiers = f.get("tiers", "auto")
            out[fname] = Fabric(
                name=fname, type=f.get("type", "infiniband"), rate=f["rate"], switch_model=f["switch"]["model"],
                radix=radix, scalable_unit_size=su, tiers=None if tiers == "auto" else int(tiers),
                leaf_down_ports=leaf["down_ports"], leaf_up_ports=leaf["up_ports"], rails=rails,
                nodes=attached, subnet_managers=sms, routing_engine=f.get("routing_engine", "ftree"),
                switch_prefix=f.get("switch_prefix", "ib" if fname == "compute" else "st"),
            )
        return out

    def ipoib(self, mgmt: ManagementNetwork, compute: Fabric | None) -> IPoIB | None:
        spec = self.data["networks"].get("ipoib")
        if spec is None:
            return None
        path: PathKey = ("networks", "ipoib")
        if compute is None:
            self.report.error(path, "IPoIB subnets are declared but there is no compute fabric",
                              "declare fabrics.compute, or remove networks.ipoib", code="ipoib")
            return None
        rails_needed = compute.rails
        nets: list[ipaddress.IPv4Network] = []
        if "rails" in spec:
            for k, text in enumerate(spec["rails"]):
                net = self.network(path + ("rails", k), text)
                if net is not None:
                    nets.append(net)
            if len(spec["rails"]) != rails_needed:
                self.report.error(path + ("rails",), f"{len(spec['rails'])} IPoIB subnet(s) for {rails_needed} compute rail(s)",
                                  "give one subnet per rail", code="rails")
        else:
            supernet = self.network(path + ("supernet",), spec["supernet"])
            if supernet is None:
                return None
            if spec["prefix"] < supernet.prefixlen:
                self.report.error(path + ("prefix",), f"prefix /{spec['prefix']} is larger than the supernet {supernet}",
                                  code="ipoib")
                return None
            available = 2 ** (spec["prefix"] - supernet.prefixlen)
            if available < rails_needed:
                self.report.error(path + ("prefix",), f"{supernet} holds {available} /{spec['prefix']} subnet(s), "
                                  f"the compute fabric has {rails_needed} rails",
                                  f"use a prefix of at most /{supernet.prefixlen + (rails_needed - 1).bit_length()} or a larger supernet",
                                  code="ipoib")
                return None
            subnets = supernet.subnets(new_prefix=spec["prefix"])
            nets = [next(subnets) for _ in range(rails_needed)]
        for k, net in enumerate(nets):
            where = path + ("rails", k) if "rails" in spec else path + ("supernet",)
            if net.num_addresses - 2 < len(compute.nodes):
                self.report.error(where, f"rail {k} subnet {net} has room for {max(net.num_addresses - 2, 0)} hosts, "
                                  f"the compute fabric has {len(compute.nodes)} nodes", "use larger subnets", code="ipoib")
            if net.overlaps(mgmt.cidr):
                self.report.error(where, f"rail {k} subnet {net} overlaps the management network {mgmt.cidr}", code="ipoib")
            for j in range(k):
                if net.overlaps(nets[j]):
                    self.report.error(where, f"rail {k} subnet {net} overlaps rail {j} subnet {nets[j]}", code="ipoib")
        return IPoIB(rails=tuple(nets), mtu=spec.get("mtu", 4092))

    def storage(self) -> tuple[StorageMount, ...]:
        mounts: list[StorageMount] = []
        names: dict[str, int] = {}
        points: dict[str, int] = {}
        default_clients = tuple(n.hostname for n in self.nodes if Role.STORAGE_CLIENT in n.roles)
        for i, s in enumerate(self.data.get("storage", [])):
            path: PathKey = ("storage", i)
            if s["name"] in names:
                self.report.error(path + ("name",), f"storage name {s['name']!r} is already used by storage[{names[s['name']]}]",
                                  code="duplicate")
            names.setdefault(s["name"], i)
            mp = s["mountpoint"].rstrip("/") or "/"
            if mp in points:
                self.report.error(path + ("mountpoint",), f"mountpoint {mp} is already used by storage[{points[mp]}]",
                                  code="duplicate")
            points.setdefault(mp, i)
            if mp in ("/", "/usr", "/etc", "/var", "/proc", "/sys", "/dev", "/boot"):
                self.report.error(path + ("mountpoint",), f"mounting shared storage over {mp} would break the nodes",
                                  code="mountpoint")
            self.storage_server(path + ("server",), s["server"], s["type"])
            if "clients" in s:
                clients = self.site_hosts(path + ("clients",), s["clients"], "")
            else:
                clients = default_clients
                if not clients:
                    self.report.warning(path, f"no node mounts {s['name']!r}: no node has the storage-client role",
                                        "add the storage-client role to a group or set `clients`", code="no-clients")
            mounts.append(StorageMount(name=s["name"], type=s["type"], server=s["server"],
                                       export=s.get("export") or s.get("filesystem", ""), mountpoint=mp,
                                       options=tuple(s.get("options", [])), clients=clients))
        return tuple(mounts)

    def storage_server(self, path: PathKey, server: str, kind: str) -> None:
        host = server.split("@", 1)[0] if kind == "lustre" else server
        try:
            ipaddress.IPv4Address(host)
            return
        except ValueError:
            pass
        if host in self.by_name or "." in host:
            return  # a node of this site, or a DNS name outside it
        self.report.error(path, f"storage server {server!r} is neither a node of this site, an address, nor a DNS name",
                          did_you_mean(host, self.by_name) or "name the server by address or fully qualified name",
                          code="unknown-server")

    def slurm(self, site_name: str) -> Slurm | None:
        s = self.data.get("slurm")
        if s is None:
            return None
        path: PathKey = ("slurm",)
        if "controllers" in s:
            controllers = self.site_hosts(path + ("controllers",), s["controllers"], "")
        else:
            controllers = tuple(n.hostname for n in self.nodes if Role.CONTROLLER in n.roles)
        if not controllers:
            self.report.error(path, "Slurm needs a controller: no node has the controller role",
                              "give a group the controller role or set slurm.controllers", code="no-controller")
        partitions: list[Partition] = []
        seen: dict[str, int] = {}
        defaults = []
        for i, p in enumerate(s["partitions"]):
            ppath = path + ("partitions", i)
            if p["name"] in seen:
                self.report.error(ppath + ("name",), f"partition {p['name']!r} is already declared in partitions[{seen[p['name']]}]",
                                  code="duplicate")
            seen.setdefault(p["name"], i)
            nodes = self.site_hosts(ppath + ("nodes",), p["nodes"], f"partition {p['name']!r} ")
            not_compute = [h for h in nodes if Role.COMPUTE not in self.by_name[h].roles]
            if not_compute:
                self.report.warning(ppath + ("nodes",), f"partition {p['name']!r} includes node(s) without the compute role: "
                                    f"{NodeSet.fromlist(not_compute)}", "slurmd runs only on compute nodes", code="partition")
            if p.get("default", False):
                defaults.append(i)
            partitions.append(Partition(name=p["name"], nodes=nodes, hostlist=p["nodes"],
                                        default=p.get("default", False), max_time=p.get("max_time", "UNLIMITED")))
        if len(defaults) > 1:
            self.report.error(path + ("partitions", defaults[1], "default"),
                              f"more than one default partition (partitions{defaults})", code="partition")
        return Slurm(cluster_name=s.get("cluster_name", site_name), controllers=controllers,
                     accounting=s.get("accounting", False), partitions=tuple(partitions),
                     gres=s.get("gres", True), select_type=s.get("select_type", "select/cons_tres"))

    def monitoring(self) -> Monitoring | None:
        m = self.data.get("monitoring")
        if m is None:
            return None
        host = self.one_host(("monitoring", "prometheus_host"), m["prometheus_host"], "monitoring host")
        return Monitoring(prometheus_host=host, retention=m.get("retention", "15d"),
                          scrape_interval=m.get("scrape_interval", "15s"),
                          exporters=tuple(m.get("exporters", ["node", "slurm", "dcgm"])),
                          alert_rules=m.get("alert_rules", True))

    def validation(self, profiles: dict[str, Profile], storage: tuple[StorageMount, ...],
                   file: str) -> ValidationSettings:
        v = self.data.get("validation", {})
        thresholds: dict[str, dict[str, ThresholdOverride]] = {}
        for pname, figures in v.get("thresholds", {}).items():
            path: PathKey = ("validation", "thresholds", pname)
            prof = profiles.get(pname)
            if prof is None:
                self.report.error(path, f"unknown profile {pname!r}", did_you_mean(pname, profiles), code="unknown-profile",
                                  key=True)
                continue
            known = [r.figure for r in prof.reference]
            for fig, override in figures.items():
                if fig not in known:
                    self.report.error(path + (fig,), f"profile {pname!r} has no reference figure {fig!r}",
                                      did_you_mean(fig, known) or f"its figures: {', '.join(known) or 'none'}",
                                      code="unknown-figure", key=True)
                thresholds.setdefault(pname, {})[fig] = ThresholdOverride(
                    float(override["value"]) if "value" in override else None,
                    float(override["tolerance"]) if "tolerance" in override else None)
        exclusions = []
        for i, e in enumerate(v.get("exclude", [])):
            hosts = self.site_hosts(("validation", "exclude", i, "hosts"), e["hosts"], "")
            exclusions.append(Exclusion(hosts=hosts, hostlist=e["hosts"], reason=e["reason"]))
        return ValidationSettings(thresholds=thresholds, exclude=tuple(exclusions),
                                  nccl_tests_path=v.get("nccl_tests_path"),
                                  tools=self.validation_tools(v.get("tools", {}), profiles, storage, file))

    def validation_tools(self, t: dict, profiles: dict[str, Profile], storage: tuple[StorageMount, ...],
                         file: str) -> ValidationTools:
        path: PathKey = ("validation", "tools")
        compute = [n for n in self.nodes if Role.COMPUTE in n.roles]
        # A mount every compute node sees holds one install for all of them.
        shared_mounts = mounts_shared_by(storage, [n.hostname for n in compute])
        if "path" in t:
            where = posixpath.normpath(t["path"])
            if where in ("/", "/usr", "/etc", "/var", "/proc", "/sys", "/dev", "/boot", "/bin", "/lib", "/home"):
                self.report.error(path + ("path",), f"installing the validation tools into {where} would mix them "
                                  "with the system's files", f"use a folder of their own, e.g. {VALIDATION_TOOLS_LOCAL_PATH}",
                                  code="path")
            shared = any(_under(where, m.mountpoint) for m in shared_mounts)
            partly = [m for m in storage if _under(where, m.mountpoint) and not shared
                      and any(n.hostname in m.clients for n in compute)]
            if partly:
                m = partly[0]
                missing = [n.hostname for n in compute if n.hostname not in m.clients]
                self.report.error(path + ("path",), f"{where} lies on storage {m.name!r}, which compute node(s) "
                                  f"{NodeSet.fromlist(missing)} do not mount: the nodes that do would install over "
                                  "each other", f"use a path on storage every compute node mounts, or a local one "
                                  f"such as {VALIDATION_TOOLS_LOCAL_PATH}", code="path")
        elif shared_mounts:
            where, shared = posixpath.join(shared_mounts[0].mountpoint, VALIDATION_TOOLS_DIRNAME), True
        else:
            where, shared = VALIDATION_TOOLS_LOCAL_PATH, False
        # Relative to the site file's folder, as a person reading the file would expect.
        wheels = Path(os.path.abspath(Path(file).parent / t["wheels"])) if "wheels" in t else None
        if wheels is not None and "index_url" in t:
            self.report.warning(path + ("index_url",), "index_url is not used: pip installs from the wheel "
                                "folder with --no-index", "remove index_url, or wheels to install from the index",
                                code="ignored")
        # numpy: torch needs it for Tensor.numpy(), which burnin's bit-for-bit comparison uses.
        if "packages" in t:
            packages = tuple(t["packages"])
        elif any(profiles[n.profile].gpus for n in compute if n.profile in profiles):
            packages = ("torch", "numpy", "nvidia-ml-py")
        else:
            packages = ("torch", "numpy")
        return ValidationTools(path=where, shared=shared, wheels=wheels, index_url=t.get("index_url"),
                               packages=packages)

    def ntp(self, mgmt: ManagementNetwork) -> None:
        for k, server in enumerate(mgmt.ntp):
            try:
                ipaddress.IPv4Address(server)
                continue
            except ValueError:
                pass
            if server not in self.by_name and "." not in server:
                self.report.error(("networks", "management", "ntp", k),
                                  f"NTP server {server!r} is neither a node of this site, an address, nor a DNS name",
                                  did_you_mean(server, self.by_name), code="unknown-node")

    def topology(self, site: Site) -> None:
        from .facts import cached_plan
        from .topology import TopologyError

        for name, fabric in site.fabrics.items():
            try:
                cached_plan(fabric)
            except TopologyError as exc:
                self.report.error(("fabrics", name), str(exc), code="topology")
