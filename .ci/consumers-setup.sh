#!/usr/bin/env bash
# The real consumers of what podctl renders, installed on this machine for the tests that hand
# them the files (tests/deploy/test_real_consumers.py): Debian's Slurm 22.05 daemons and munge
# (libpmix-dev: the daemons load the PMIx plugin at start), promtool and amtool, and chromium,
# the real browser the report test opens report.html in, and nft, which loads the exporters' firewall
# rules (in a network namespace of its own); and Debian 13's Slurm 24.11 daemons, promtool and
# amtool, in an image of their own (.ci/consumers-image.sh: podman, debootstrap). Idempotent.
# Nothing is started: those tests run the daemons in sandboxes of their own.
set -euo pipefail
if [[ "$(id -u)" != 0 ]]; then
    echo "consumers-setup: must run as root (installs packages)" >&2
    exit 1
fi
bash "$(dirname "$0")/apt-install.sh" consumers-setup \
    slurmctld slurmd slurm-client munge libpmix-dev prometheus prometheus-alertmanager util-linux iproute2 nftables chromium \
    podman runc debootstrap debian-archive-keyring
bash "$(dirname "$0")/consumers-image.sh"
