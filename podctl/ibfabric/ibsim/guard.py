"""ibsim with no authority: whom it runs as, and who may reach it.

ibsim answers whatever reaches its sockets and asks no one who they are: a client may attach at any
node and send SMP Sets (a port taken down, a route rewritten), which is what the fabric checks read.
So podctl gives it nothing to lend and lets only root talk to it:

- Run as root, podctl starts ibsim as an account of its own (`ACCOUNT`, a system account that
  `.ci/ibsim-setup.sh` makes), with no supplementary groups, no capabilities (none permitted,
  none in its bounding set) and no_new_privs (`setpriv`). It reads its network file through a
  descriptor podctl opened, not by a path in podctl's private state folder.
- `root_only` (a sim pod's fabric, in the SM container's network namespace): ibsim serves in
  remote mode, UDP on `SERVER_PORT` (control) and the `MAX_CLIENTS` ports after it, and an
  nftables table loaded from the host into that namespace (`rules`) refuses a datagram to those
  ports unless a socket of root's sent it (`meta skuid 0`), and drops one that came from anywhere
  but loopback. Root in the container (OpenSM's unit, the tools run through podctl-umad2sim)
  reaches it; `nobody` gets EPERM on its first send, and its client gives up. Abstract unix
  sockets, ibsim's default, cannot be kept from anyone in their namespace: they have no owner and
  no mode, and Linux 6.1 has no Landlock scope for them. Only a process with CAP_NET_ADMIN in that
  namespace can remove the table: on a sim node that is root, which may drive the fabric anyway.
"""

from __future__ import annotations

import os
import pwd
import subprocess

from podctl.ibfabric.ibsim.install import SETUP_HINT, IbsimError

ACCOUNT = "podctl-ibsim"
# ibsim's own default port (IBSIM_DEFAULT_SERVER_PORT, its include/ibsim.h): a client that names no
# IBSIM_SERVER_PORT asks there, so OpenSM's unit and podctl-umad2sim name the server alone.
SERVER_PORT = 7070
MAX_CLIENTS = 10  # IBSIM_MAX_CLIENTS: one port per client slot after the control port
TABLE = "podctl_ibsim"
_NFT_TIMEOUT_S = 30


def account() -> tuple[int, int]:
    """(uid, gid) of the account ibsim runs as; IbsimError when this machine has none."""
    try:
        entry = pwd.getpwnam(ACCOUNT)
    except KeyError:
        raise IbsimError(f"no account {ACCOUNT!r} to run ibsim as, without root; {SETUP_HINT}") from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise IbsimError(f"the account {ACCOUNT!r} is root's uid or gid: ibsim must run without authority")
    return entry.pw_uid, entry.pw_gid


def unprivileged(setpriv: str, keep_running: bool) -> list[str]:
    """The argv prefix that runs a program as `ACCOUNT` with no authority; none when podctl itself
    is not root (the program is then as unprivileged as podctl). A changed uid clears the parent
    death signal: unless `keep_running`, setpriv sets it again after the change."""
    if os.geteuid() != 0:
        return []
    uid, gid = account()
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        *([] if keep_running else ["--pdeathsig=SIGTERM"]),
        "--",
    ]


def ports(port: int = SERVER_PORT) -> range:
    """Every UDP port ibsim serves on in remote mode: control, then one per client slot."""
    return range(port, port + MAX_CLIENTS + 1)


def rules(port: int = SERVER_PORT) -> str:
    """The nftables table (replaced whole, in one transaction) that keeps ibsim's ports root's."""
    served = ports(port)
    span = f"{served.start}-{served.stop - 1}"
    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        "\tchain input {\n"
        "\t\ttype filter hook input priority filter; policy accept;\n"
        f'\t\tudp dport {span} iif != "lo" drop\n'
        "\t}\n"
        "\tchain output {\n"
        "\t\ttype filter hook output priority filter; policy accept;\n"
        f"\t\tudp dport {span} meta skuid != 0 reject\n"
        "\t}\n"
        "}\n"
    )


def load_rules(nsenter: str, nft: str, netns_pid: int, port: int = SERVER_PORT) -> None:
    """Load `rules` into the network namespace of `netns_pid`, from the host (whose nft it is, not
    one a node could replace); IbsimError when they are not in place."""
    argv = [nsenter, "-t", str(int(netns_pid)), "-n", "--", nft, "-f", "-"]
    try:
        proc = subprocess.run(
            argv, input=rules(port), capture_output=True, text=True, timeout=_NFT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IbsimError(f"cannot keep ibsim's ports root's: {' '.join(argv)}: {exc}") from None
    if proc.returncode != 0:
        raise IbsimError(
            f"cannot keep ibsim's ports root's: nft in the namespace of pid {netns_pid} said "
            f"{(proc.stderr or proc.stdout).strip()[-400:]!r}"
        )
