"""Building the site's shared storage: its mounts and their servers."""

from __future__ import annotations

import posixpath

from podctl.core.model import (
    Role,
    StorageMount,
)
from podctl.core.suggest import did_you_mean
from podctl.core.yamlsource import PathKey
from podctl.derive.sitefile.values import address_problem, system_path, written_as_address


class StorageSection:
    """The storage section of Builder (see build.py): it reads the nodes NodeSections built."""

    def storage(self) -> tuple[StorageMount, ...]:
        mounts: list[StorageMount] = []
        names: dict[str, int] = {}
        points: dict[str, int] = {}
        default_clients = tuple(n.hostname for n in self.nodes if Role.STORAGE_CLIENT in n.roles)
        for i, s in enumerate(self.data.get("storage", [])):
            path: PathKey = ("storage", i)
            if s["name"] in names:
                self.report.error(
                    path + ("name",),
                    f"storage name {s['name']!r} is already used by storage[{names[s['name']]}]",
                    code="duplicate",
                )
            names.setdefault(s["name"], i)
            mp = posixpath.normpath(s["mountpoint"])
            if mp in points:
                self.report.error(
                    path + ("mountpoint",),
                    f"mountpoint {mp} is already used by storage[{points[mp]}]",
                    code="duplicate",
                )
            points.setdefault(mp, i)
            if system := system_path(mp):
                self.report.error(
                    path + ("mountpoint",),
                    f"mounting shared storage on {mp} would hide or break the system's {system}",
                    f"mount it on a folder of its own, such as /shared/{s['name']}",
                    code="mountpoint",
                )
            self.storage_server(path + ("server",), s["server"], s["type"])
            if "clients" in s:
                clients = self.site_hosts(path + ("clients",), s["clients"], "")
            else:
                clients = default_clients
                if not clients:
                    self.report.warning(
                        path,
                        f"no node mounts {s['name']!r}: no node has the storage-client role",
                        "add the storage-client role to a group or set `clients`",
                        code="no-clients",
                    )
            mounts.append(
                StorageMount(
                    name=s["name"],
                    type=s["type"],
                    server=s["server"],
                    export=s.get("export") or s.get("filesystem", ""),
                    mountpoint=mp,
                    options=tuple(s.get("options", [])),
                    clients=clients,
                )
            )
        return tuple(mounts)

    def storage_server(self, path: PathKey, server: str, kind: str) -> None:
        host, at, _network = server.partition("@")
        if at and kind != "lustre":
            self.report.error(
                path,
                f"storage server {server!r}: only a Lustre server takes an LNet network (@...)",
                f"write the host alone: {host}",
                code="server",
            )
            return
        if problem := address_problem(host):
            self.report.error(path, f"storage server {server!r} is not a valid address: {problem}", code="address")
            return
        if written_as_address(host) or host in self.by_name or "." in host:
            return  # an address, a node of this site, or a DNS name outside it
        self.report.error(
            path,
            f"storage server {server!r} is neither a node of this site, an address, nor a DNS name",
            did_you_mean(host, self.by_name) or "name the server by address or fully qualified name",
            code="unknown-server",
        )
