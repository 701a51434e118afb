"""`podctl init`: a complete, commented site file for a reference-architecture pod.

The text is written from a template (init-site.yaml.tmpl beside this module) rather than dumped
from data so that it carries comments; a test loads every variant back through `podctl check`.
"""

from __future__ import annotations

import ipaddress
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from string import Template

from podctl.core.errors import PodctlError
from podctl.derive.facts import cached_plan
from podctl.derive.sitefile import read_site_text
from podctl.derive.topology import routing_advice


@dataclass(frozen=True)
class Reference:
    """What NVIDIA's reference architecture uses for one DGX generation."""

    su_size: int
    switch_model: str
    radix: int
    rate: str
    prefix: str


REFERENCE_ARCHITECTURES: dict[str, Reference] = {
    # DGX A100 SuperPOD: 20-node units, 40-port HDR QM8790 switches.
    "dgx-a100": Reference(20, "QM8790", 40, "HDR", "dgx"),
    # DGX H100/H200 SuperPOD: 32-node units, 64-port NDR QM9700 switches.
    "dgx-h100": Reference(32, "QM9700", 64, "NDR", "dgx"),
    "dgx-h200": Reference(32, "QM9700", 64, "NDR", "dgx"),
}

MAX_SCALABLE_UNITS = 64

# The site file init writes, with its comments: `${name}` placeholders (string.Template), `$$` a `$`.
SITE_TEMPLATE = Template((Path(__file__).parent / "init-site.yaml.tmpl").read_text())


def render_site(profile: str, scalable_units: int, nodes: int | None, name: str, schema_ref: str) -> str:
    text = _render(profile, scalable_units, nodes, name, schema_ref, "ftree", "")
    # The compute fabric's routing engine is the one its plan calls for, with the reason: a
    # pod whose spine blocks come out uneven is not a fat tree OpenSM's ftree routes.
    site = read_site_text(text).site
    assert site is not None, "init's own site file does not load"
    advice = routing_advice(cached_plan(site.fabrics["compute"]))
    why = textwrap.wrap(f"{advice.engine}: {advice.reason}", 96, break_on_hyphens=False)
    return _render(
        profile, scalable_units, nodes, name, schema_ref, advice.engine, "".join(f"    # {line}\n" for line in why)
    )


def _render(
    profile: str, scalable_units: int, nodes: int | None, name: str, schema_ref: str, engine: str, why: str
) -> str:
    ref = REFERENCE_ARCHITECTURES.get(profile)
    if ref is None:
        raise PodctlError(
            f"init knows the reference architectures of {', '.join(REFERENCE_ARCHITECTURES)}, "
            f"not {profile!r}; write other sites by hand from inventory/examples/"
        )
    if re.fullmatch(r"[a-z][a-z0-9-]{0,30}", name) is None:
        raise PodctlError(
            f"--name {name!r}: a pod name is lower-case letters, digits and dashes, starting with a "
            "letter, at most 31 characters (it names the Slurm cluster, containers and reports)"
        )
    if not 1 <= scalable_units <= MAX_SCALABLE_UNITS:
        raise PodctlError(f"--scalable-units must be between 1 and {MAX_SCALABLE_UNITS}, not {scalable_units}")
    capacity = scalable_units * ref.su_size
    count = capacity if nodes is None else nodes
    if not 1 <= count <= capacity:
        raise PodctlError(
            f"--nodes must be between 1 and {capacity} ({scalable_units} units of {ref.su_size}), not {count}"
        )
    width = max(3, len(str(count)))
    hosts = f"{ref.prefix}[{1:0{width}d}-{count:0{width}d}]" if count > 1 else f"{ref.prefix}{1:0{width}d}"
    # Management: heads from .10, compute from the next /24 on; a /16 leaves room to grow.
    first_compute = ipaddress.IPv4Address("10.0.1.1")
    return SITE_TEMPLATE.substitute(
        schema_ref=schema_ref,
        profile=profile,
        scalable_units=scalable_units,
        su_size=ref.su_size,
        count=count,
        gpus=count * 8,
        rate=ref.rate,
        radix=ref.radix,
        switch_model=ref.switch_model,
        tiers_note="two tiers while they suffice, three beyond",
        name=name,
        hosts=hosts,
        first_compute=first_compute,
        last_compute=first_compute + count - 1,
        why=why,
        engine=engine,
        cluster_name=name.replace("-", "_"),
        first_host=f"{ref.prefix}{1:0{width}d}",
    )
