"""Building the validation settings: thresholds, exclusions, nccl-tests and the validation tools."""

from __future__ import annotations

import os.path
import posixpath
from pathlib import Path

from podctl.core.model import (
    VALIDATION_TOOLS_LOCAL_PATH,
    Exclusion,
    Profile,
    Role,
    Secret,
    StorageMount,
    ThresholdOverride,
    ValidationSettings,
    ValidationTools,
)
from podctl.core.suggest import did_you_mean
from podctl.core.yamlsource import PathKey
from podctl.derive.sitefile.values import UNTRUSTED_TREES, system_path, under


class ValidationSection:
    """The validation section of Builder (see build.py): root runs what these name, so none may lie where another may write."""

    def validation(
        self, profiles: dict[str, Profile], storage: tuple[StorageMount, ...], file: str
    ) -> ValidationSettings:
        v = self.data.get("validation", {})
        thresholds: dict[str, dict[str, ThresholdOverride]] = {}
        for pname, figures in v.get("thresholds", {}).items():
            path: PathKey = ("validation", "thresholds", pname)
            prof = profiles.get(pname)
            if prof is None:
                self.report.error(
                    path, f"unknown profile {pname!r}", did_you_mean(pname, profiles), code="unknown-profile", key=True
                )
                continue
            known = [r.figure for r in prof.reference]
            for fig, override in figures.items():
                if fig not in known:
                    self.report.error(
                        path + (fig,),
                        f"profile {pname!r} has no reference figure {fig!r}",
                        did_you_mean(fig, known) or f"its figures: {', '.join(known) or 'none'}",
                        code="unknown-figure",
                        key=True,
                    )
                thresholds.setdefault(pname, {})[fig] = ThresholdOverride(
                    float(override["value"]) if "value" in override else None,
                    float(override["tolerance"]) if "tolerance" in override else None,
                )
        exclusions = []
        for i, e in enumerate(v.get("exclude", [])):
            hosts = self.site_hosts(("validation", "exclude", i, "hosts"), e["hosts"], "")
            exclusions.append(Exclusion(hosts=hosts, hostlist=e["hosts"], reason=e["reason"]))
        return ValidationSettings(
            thresholds=thresholds,
            exclude=tuple(exclusions),
            nccl_tests_path=self.nccl_tests_path(v, storage),
            nccl_tests=tuple(v.get("nccl_tests", ["all_reduce_perf"])),
            tools=self.validation_tools(v.get("tools", {}), profiles, storage, file),
        )

    def nccl_tests_path(self, v: dict, storage: tuple[StorageMount, ...]) -> str | None:
        if "nccl_tests_path" not in v:
            return None
        where = posixpath.normpath(v["nccl_tests_path"])
        if why := self.writable_by_others(where, storage):
            self.report.error(
                ("validation", "nccl_tests_path"),
                f"root runs the nccl-tests binaries on every compute node (through Slurm), and {where} {why}",
                "build nccl-tests into a folder on each compute node's local disk, owned by root, "
                "e.g. /opt/nccl-tests/build",
                code="untrusted-path",
            )
        return where

    def validation_tools(
        self, t: dict, profiles: dict[str, Profile], storage: tuple[StorageMount, ...], file: str
    ) -> ValidationTools:
        path: PathKey = ("validation", "tools")
        compute = [n for n in self.nodes if Role.COMPUTE in n.roles]
        where = posixpath.normpath(t["path"]) if "path" in t else VALIDATION_TOOLS_LOCAL_PATH
        if "path" in t:
            if why := self.writable_by_others(where, storage):
                self.report.error(
                    path + ("path",),
                    f"root runs the validation tools (the health gate, validate's checks), and {where} {why}",
                    f"install them on each compute node's local disk, owned by root, e.g. {VALIDATION_TOOLS_LOCAL_PATH}",
                    code="untrusted-path",
                )
            elif system_path(where):
                self.report.error(
                    path + ("path",),
                    f"installing the validation tools into {where} would mix them with the system's files",
                    f"use a folder of their own, e.g. {VALIDATION_TOOLS_LOCAL_PATH}",
                    code="path",
                )
        # Relative to the site file's folder, as a person reading the file would expect.
        wheels = Path(os.path.abspath(Path(file).parent / t["wheels"])) if "wheels" in t else None
        if wheels is not None and "index_url" in t:
            self.report.warning(
                path + ("index_url",),
                "index_url is not used: pip installs from the wheel folder with --no-index",
                "remove index_url, or wheels to install from the index",
                code="ignored",
            )
        # numpy: torch needs it for Tensor.numpy(), which burnin's bit-for-bit comparison uses.
        if "packages" in t:
            packages = tuple(t["packages"])
        elif any(profiles[n.profile].gpus for n in compute if n.profile in profiles):
            packages = ("torch", "numpy", "nvidia-ml-py")
        else:
            packages = ("torch", "numpy")
        index = t.get("index_url")
        if isinstance(index, dict):
            index = Secret(vault=index.get("vault"), file=index.get("file"))
        return ValidationTools(path=where, wheels=wheels, index_url=index, packages=packages)

    @staticmethod
    def writable_by_others(where: str, storage: tuple[StorageMount, ...]) -> str | None:
        """Why code at `where`, which root runs on the nodes, could be written by someone else:
        a world-writable temporary folder, users' homes, or shared storage (writable from every
        client, by root of any of them, or by the account squashed files belong to). None if not."""
        mount = next((m for m in storage if under(where, m.mountpoint)), None)
        if mount is not None:
            return (
                f"lies on shared storage {mount.name!r} ({mount.mountpoint}), which other hosts and their users write"
            )
        tmp = next((t for t in UNTRUSTED_TREES if under(where, t)), None)
        return f"lies under {tmp}, where every user may write" if tmp else None
