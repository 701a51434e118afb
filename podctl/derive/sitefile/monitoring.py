"""Building monitoring: the Prometheus host, how it listens, and its certificate."""

from __future__ import annotations

import os.path
from pathlib import Path

from podctl.core.model import (
    ManagementNetwork,
    Monitoring,
    MonitoringTls,
)
from podctl.core.yamlsource import PathKey
from podctl.derive.sitefile.certs import certificate_serves


class MonitoringSection:
    """The monitoring section of Builder (see build.py)."""

    def monitoring(self, management: ManagementNetwork, file: str) -> Monitoring | None:
        m = self.data.get("monitoring")
        if m is None:
            return None
        host = self.one_host(("monitoring", "prometheus_host"), m["prometheus_host"], "monitoring host")
        listen = m.get("listen", "management")
        return Monitoring(
            prometheus_host=host,
            retention=m.get("retention", "15d"),
            scrape_interval=m.get("scrape_interval", "15s"),
            exporters=tuple(m.get("exporters", ["node", "slurm", "dcgm"])),
            alert_rules=m.get("alert_rules", True),
            listen=listen,
            tls=self.monitoring_tls(m["tls"], host, listen, management, file) if "tls" in m else None,
        )

    def monitoring_tls(
        self, t: dict, host: str, listen: str, management: ManagementNetwork, file: str
    ) -> MonitoringTls | None:
        """The site's certificate, if it serves the name Prometheus's clients will ask for."""
        path: PathKey = ("monitoring", "tls")
        # Relative to the site file's folder, as a person reading the file would expect.
        cert, key = (Path(os.path.abspath(Path(file).parent / t[k])) for k in ("cert", "key"))
        if listen == "localhost":
            names = ["localhost"]
        else:
            names = [f"{host}.{management.domain}", host] if management.domain else [host]
        served, problem = certificate_serves(cert, key, names)
        if served is None:
            self.report.error(
                path,
                f"{cert} with {key} cannot serve Prometheus as {' or '.join(names)}: {problem}",
                f"give a PEM certificate whose subject alternative names include {names[0]}, and its unencrypted key",
                code="tls",
            )
            return None
        return MonitoringTls(cert=cert, key=key, server_name=served)
