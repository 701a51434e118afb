#!/usr/bin/env bash
# .ci/consumers-image.sh [--tag]: the Debian 13 (trixie) image that the tests of the rendered
# configuration run trixie's consumers in (tests/deploy/test_real_consumers.py): its Slurm 24.11
# daemons need glibc 2.38, and this Debian 12 host has 2.36, so they cannot run here directly.
# A debootstrap minbase with the packages below, imported into podman, tagged by a hash of the
# recipe: a rerun with the same recipe is a no-op, and debootstrap keeps the debs it fetched in a
# cache folder, so a rebuild after a change of the list downloads only what is new. Images of
# older recipes are removed. With --tag: print the image's name and build nothing (the tests
# ask for it, so the recipe stays written down once).
#   PODCTL_CONSUMERS_CACHE  debootstrap's deb cache (default /var/cache/podctl/consumers-debs)
set -euo pipefail
suite=trixie
mirror=http://deb.debian.org/debian
# The Slurm daemons and scontrol; munge; python3 for the health gate slurmd runs; iproute2 for the
# sandbox's own address; promtool and amtool (prometheus-alertmanager) for the monitoring files.
packages=slurmctld,slurmd,slurmdbd,slurm-client,munge,python3,iproute2,promtool,prometheus-alertmanager
hash=$(printf '%s\n' "$suite" minbase "$packages" | sha256sum | cut -c1-12)
repo=localhost/podctl-consumers
image=$repo:debian-13-$hash
if [[ ${1:-} == --tag ]]; then
    echo "$image"
    exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
    echo "consumers-image: must run as root (debootstrap, rootful podman)" >&2
    exit 1
fi
if podman image exists "$image"; then
    echo "consumers-image: $image already built"
    exit 0
fi
cache=${PODCTL_CONSUMERS_CACHE:-/var/cache/podctl/consumers-debs}
mkdir -p "$cache"
root=$(mktemp -d /var/tmp/podctl-consumers.XXXXXX)
chmod 0755 "$root" # the image's /: mktemp's 0700 keeps munge's postinst (run as munge) out
trap 'rm -rf "$root" "$root.log"' EXIT
started=$(date +%s)
echo "consumers-image: debootstrap $suite with $packages"
if ! debootstrap --variant=minbase --cache-dir="$cache" --include="$packages" "$suite" "$root" "$mirror" \
    > "$root.log" 2>&1; then
    tail -n 30 "$root.log" >&2
    exit 1
fi
rm -f "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | podman import --quiet \
    --change LABEL=io.podctl.image=consumers --change LABEL=io.podctl.platform=debian-13 - "$image" > /dev/null
podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$repo" | { grep -vx "$image" || true; } |
    xargs -r podman rmi > /dev/null
echo "consumers-image: built $image in $(($(date +%s) - started)) s"
