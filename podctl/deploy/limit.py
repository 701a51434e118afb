"""--limit: a Slurm-style host list (node[01-03],head01) checked against the site."""

from __future__ import annotations

from collections.abc import Sequence

from podctl.core.hostlist import HostlistError, expand
from podctl.core.hostlist import fold as fold_hostlist
from podctl.core.suggest import closest
from podctl.deploy.errors import DeployError


def expand_limit(hostlist: str, known_hosts: Sequence[str]) -> list[str]:
    """Expand `hostlist` and return the hosts in the site's order; any host the
    site does not declare is an error that names it."""
    try:
        wanted = list(expand(hostlist))
    except HostlistError as exc:
        raise DeployError(f"--limit {hostlist!r}: not a host list ({exc}); e.g. node[01-03],head01") from exc
    if not wanted:
        raise DeployError(f"--limit {hostlist!r}: names no host")
    known = set(known_hosts)
    unknown = [h for h in wanted if h not in known]
    if unknown:
        hints = []
        for host in unknown:
            close = closest(host, known_hosts)
            hints.append(f"{host} (did you mean {close}?)" if close else host)
        raise DeployError(
            f"--limit {hostlist!r}: not in the site: {', '.join(hints)}; "
            f"the site's hosts are {fold_hostlist(known_hosts)}"
        )
    chosen = set(wanted)
    return [h for h in known_hosts if h in chosen]
