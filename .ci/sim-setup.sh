#!/usr/bin/env bash
# Prepare this machine for the simulated pod (podctl sim): install podman,
# runc and debootstrap, merge the two container-engine settings that work on
# these VMs into /etc/containers/containers.conf, and build the node images
# (one per supported Debian release: `podctl sim image` builds them all).
#
# Idempotent: each step checks before it changes anything, and an image
# build is skipped when an image with the same recipe hash exists.
# Sourcing is safe too (it runs in a subshell and does not change your shell
# options).
#
# Environment:
#   PODCTL_PYTHON     Python with podctl importable (default: .venv/bin/python
#                     of this checkout if present, else python3)
#   PODCTL_STATE_DIR  where the sim keeps its debootstrap cache and pod state
#   PODCTL_SIM_SKIP_IMAGE=1  install and configure only

(
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [[ "$(id -u)" != 0 ]]; then
    echo "sim-setup: must run as root (installs packages, runs debootstrap and rootful podman)" >&2
    exit 1
fi

need=()
for pkg in podman runc debootstrap debian-archive-keyring iproute2 openssh-client; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]})); then
    echo "sim-setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    echo "sim-setup: podman, runc, debootstrap already installed"
fi

python="${PODCTL_PYTHON:-}"
if [[ -z "$python" ]]; then
    if [[ -x "$repo/.venv/bin/python" ]]; then python="$repo/.venv/bin/python"; else python=python3; fi
fi

# Merge, never clobber: keeps any other settings already in the file.
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m podctl.sim.hostconf /etc/containers/containers.conf

# Host settings a pod of many nodes needs, kept in /etc/sysctl.d/60-podctl-sim.conf (podctl sim up
# checks both before it starts any node):
# - each sim node's systemd holds inotify instances, and rootful containers share root's limit:
#   Debian's 128 stops a pod at about 20 nodes;
# - the kernel's one neighbour (ARP) table serves every node's namespace, about N x N entries:
#   Debian's cap of 1,024 breaks multi-node jobs at 32 nodes ("No route to host").
settings=(
    "fs.inotify.max_user_instances 8192"
    "net.ipv4.neigh.default.gc_thresh2 8192"
    "net.ipv4.neigh.default.gc_thresh3 16384"
)
conf=/etc/sysctl.d/60-podctl-sim.conf
for setting in "${settings[@]}"; do
    read -r key want <<< "$setting"
    file=/proc/sys/${key//.//}
    if [[ -w "$file" ]] && (( $(cat "$file") < want )); then
        echo "$want" > "$file"
        echo "sim-setup: $key raised to $want ($conf)"
    fi
    if [[ -d /etc/sysctl.d ]] && ! grep -qx "$key = $want" "$conf" 2>/dev/null; then
        { grep -v "^$key = " "$conf" 2>/dev/null || true; echo "$key = $want"; } > "$conf.new" && mv "$conf.new" "$conf"
    fi
done

if [[ "${PODCTL_SIM_SKIP_IMAGE:-0}" == 1 ]]; then
    exit 0
fi

if command -v podctl >/dev/null 2>&1 && podctl sim --help >/dev/null 2>&1; then
    podctl sim image
else
    # The main CLI may not be installed in this environment; the sim group
    # runs on its own as a module.
    PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m podctl.sim image
fi
)
