"""Hardware profiles: the built-in ones shipped with podctl, and a site's own."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

import yaml

from podctl.core.model import (
    GPUs,
    HCAs,
    NVLink,
    Profile,
    Reference,
    default_hca_names,
)
from podctl.core.yamlsource import PathKey, format_path
from podctl.derive.sitefile.diagnostics import profile_validator

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def builtin_profiles() -> dict[str, Profile]:
    out: dict[str, Profile] = {}
    folder = resources.files("podctl.profiles")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            name = entry.name[: -len(".yaml")]
            data = yaml.load(entry.read_text(encoding="utf-8"), Loader=_FAST_LOADER)
            problems = list(profile_validator().iter_errors(data))
            if problems:  # a packaging bug, not a user error: fail loudly in tests
                raise RuntimeError(f"built-in profile {name} is invalid: {problems[0].message}")
            for path, message, _, _ in profile_problems(data):
                raise RuntimeError(f"built-in profile {name} is invalid: {format_path(path)}: {message}")
            out[name] = make_profile(name, data, builtin=True)
    return out


def make_profile(name: str, data: dict, *, builtin: bool) -> Profile:
    g = data.get("gpus")
    gpus = None
    if g:
        nv = g.get("nvlink")
        gpus = GPUs(
            model=g["model"],
            count=g["count"],
            memory_gib=g["memory_gib"],
            nvlink=NVLink(nv["generation"], nv["links_per_gpu"], float(nv["bandwidth_gbps"])) if nv else None,
            peak_bf16_tflops=float(g["peak_bf16_tflops"]) if "peak_bf16_tflops" in g else None,
            slurm_type=g.get("slurm_type") or slurm_gpu_type(g["model"]),
            cores=tuple(g.get("cores", ())),
        )
    return Profile(
        name=name,
        description=data.get("description", ""),
        gpus=gpus,
        compute_hcas=(compute := _hcas(data["compute_hcas"])),
        storage_hcas=_hcas(data.get("storage_hcas", {"count": 0}), taken=compute.names),
        cpu_cores=data["cpu_cores"],
        sockets=data.get("sockets", 1),
        threads_per_core=data.get("threads_per_core", 1),
        memory_gib=data["memory_gib"],
        emulated=bool(data.get("emulated", False)),
        reference=tuple(
            Reference(r["figure"], float(r["value"]), float(r["tolerance"]), r["unit"], r["source"])
            for r in data.get("reference", [])
        ),
        builtin=builtin,
    )


def slurm_gpu_type(model: str) -> str:
    """The type Slurm offers for a GPU model when the profile does not name one: the model's first
    word, lower-cased, anything but a letter, digit or _ made _ (H100-SXM5-80GB -> h100)."""
    word = re.sub(r"[^a-z0-9_]", "_", model.split("-")[0].strip().lower())[:32]
    return word if re.match(r"^[a-z]", word) else f"gpu_{word}"[:32]


def _core_ids(text: str) -> list[int]:
    """'0-3,8' -> [0, 1, 2, 3, 8] (the schema has checked the form); a range whose end is before its
    start gives its two ends, out of order, for the caller to refuse."""
    ids: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        low, high = int(first), int(last or first)
        ids.extend(range(low, high + 1) if low <= high else (low, high))
    return ids


def _hcas(data: dict, taken: tuple[str, ...] = ()) -> HCAs:
    # Storage HCAs default to the names compute leaves free: a node has one device per name.
    names = tuple(data["names"]) if "names" in data else default_hca_names(data["count"], taken)
    return HCAs(
        count=data["count"], rate=data.get("rate", "NDR") if data["count"] else data.get("rate", ""), names=names
    )


def profile_problems(profile: dict) -> list[tuple[PathKey, str, str, str]]:
    """(path inside the profile, message, hint, code) for what the schema cannot say: a CPU count that the
    sockets and threads do not divide, HCA names that are not one distinct name per HCA."""
    problems: list[tuple[PathKey, str, str, str]] = []
    sockets, threads = profile.get("sockets", 1), profile.get("threads_per_core", 1)
    cpus = profile.get("cpu_cores")
    if isinstance(cpus, int) and isinstance(sockets, int) and isinstance(threads, int) and cpus % (sockets * threads):
        problems.append(
            (
                ("cpu_cores",),
                f"{cpus} logical CPUs do not divide into {sockets} socket(s) of {threads} thread(s) per core",
                "cpu_cores is sockets x cores per socket x threads per core (Slurm checks the node against it)",
                "cpu-topology",
            )
        )
    problems.extend(_gpu_core_problems(profile))
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
            problems.append(
                (
                    (attr, "names"),
                    f"{len(names)} name(s) for {count} HCA(s)",
                    "list one RDMA device name per HCA, rail 1 first, or leave `names` out for mlx5_0, mlx5_1, ...",
                    "hca-names",
                )
            )
        for k, name in enumerate(names):
            if name in seen:
                problems.append(
                    (
                        (attr, "names", k),
                        f"HCA name {name!r} is already used by {seen[name]}",
                        "each HCA of a node has its own RDMA device name (ls /sys/class/infiniband)",
                        "hca-names",
                    )
                )
            seen.setdefault(name, format_path((attr, "names", k)))
    return problems


def _gpu_core_problems(profile: dict) -> list[tuple[PathKey, str, str, str]]:
    """gpus.cores: one entry per GPU, each naming cores the node has (Slurm's core ids run from 0 to
    sockets x cores per socket - 1)."""
    gpus = profile.get("gpus")
    if not isinstance(gpus, dict) or not isinstance(gpus.get("cores"), list):
        return []
    cores, count = gpus["cores"], gpus.get("count")
    problems: list[tuple[PathKey, str, str, str]] = []
    if isinstance(count, int) and len(cores) != count:
        problems.append(
            (
                ("gpus", "cores"),
                f"{len(cores)} core list(s) for {count} GPU(s)",
                "list the cores next to each GPU, GPU 0 first (nvidia-smi topo -m, column CPU Affinity), or leave "
                "`cores` out",
                "gpu-cores",
            )
        )
    cpus, threads = profile.get("cpu_cores"), profile.get("threads_per_core", 1)
    if not (isinstance(cpus, int) and isinstance(threads, int) and threads > 0):
        return problems
    physical = cpus // threads
    for k, text in enumerate(cores):
        ids = _core_ids(text)
        bad = [i for i in ids if i >= physical] + [i for i, j in zip(ids, ids[1:]) if j <= i]
        if bad or not ids:
            problems.append(
                (
                    ("gpus", "cores", k),
                    f"cores {text!r} are not ascending core ids below {physical} (the node's cores: cpu_cores / "
                    "threads_per_core)",
                    "Slurm numbers cores, not hardware threads: on a node with 2 threads per core, take the first "
                    "range of nvidia-smi's CPU Affinity (0-55 of 0-55,112-167)",
                    "gpu-cores",
                )
            )
    return problems
