#!/usr/bin/env bash
# The real consumers of what podctl renders, installed on this machine for the tests that hand
# them the files (tests/deploy/test_real_consumers.py): Debian's Slurm 22.05 daemons and munge
# (libpmix-dev: the daemons load the PMIx plugin at start), promtool and amtool, and chromium,
# the real browser the report test opens report.html in. Idempotent.
# Nothing is started: those tests run the daemons in sandboxes of their own.
set -euo pipefail
if [[ "$(id -u)" != 0 ]]; then
    echo "consumers-setup: must run as root (installs packages)" >&2
    exit 1
fi
need=()
for pkg in slurmctld slurmd slurm-client munge libpmix-dev prometheus prometheus-alertmanager util-linux iproute2 chromium; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]})); then
    echo "consumers-setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d 101: install without starting any service on this machine.
    policy=/usr/sbin/policy-rc.d
    restore=0
    if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy && restore=1; fi
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    if ((restore)); then rm -f $policy; fi
else
    echo "consumers-setup: Slurm, munge, promtool, amtool and chromium already installed"
fi
