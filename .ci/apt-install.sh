#!/usr/bin/env bash
# .ci/apt-install.sh NAME PACKAGE...: install the Debian packages not installed yet (NAME prefixes
# what it says), without starting any service they ship on this machine (policy-rc.d 101: the
# tests run the daemons in sandboxes of their own). Idempotent.
set -euo pipefail
name=$1
shift
need=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]} == 0)); then
    echo "$name: $* already installed"
    exit 0
fi
echo "$name: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
policy=/usr/sbin/policy-rc.d
restore=0
if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy && restore=1; fi
trap 'if ((restore)); then rm -f $policy; fi' EXIT
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
