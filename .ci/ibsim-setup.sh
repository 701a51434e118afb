#!/usr/bin/env bash
# The simulated InfiniBand fabric the fabric tests run the real tools on (docs/fabric.md):
# Debian's OpenSM and infiniband-diags, Debian 12's ibsim-utils (ibsim 0.10, libumad2sim0), and
# ibsim 0.12 built from Debian 13's source package into a prefix of podctl's own
# (/opt/podctl-ibsim, or PODCTL_IBSIM_PREFIX): 0.10 brings NDR links up as 4xSDR, 0.12 as 4xNDR.
# The system account podctl-ibsim, which ibsim runs as. Debian's files are never overwritten. Idempotent: a second run checks and returns in a second.
#
# The source comes through apt, so its checksum is checked against Debian's signed index: a
# trixie deb-src line in a sources list of its own, with a lists folder of its own, so the host's
# apt state (its sources, lists and caches) is left as it was. ibsim is GPL-2 / BSD-2 (its
# COPYING is installed beside it); none of its code is in this repository.
set -euo pipefail
PREFIX=${PODCTL_IBSIM_PREFIX:-/opt/podctl-ibsim}
if [[ "$(id -u)" != 0 ]]; then
    echo "ibsim-setup: must run as root (installs packages into /usr and ibsim into $PREFIX)" >&2
    exit 1
fi
SOURCE_VERSION=0.12-1  # Debian 13 (trixie) ibsim
MIRROR=${PODCTL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
export DEBIAN_FRONTEND=noninteractive

# opensm's package would start an SM on this machine (there is no HCA here): apt-install.sh keeps it off.
# nftables: the host's nft loads the rules that keep a sim pod's ibsim root's (podctl.ibfabric.ibsim.guard).
bash "$(dirname "$0")/apt-install.sh" ibsim-setup \
    ibsim-utils libumad2sim0 opensm infiniband-diags libibmad-dev libibumad-dev gcc make libc6-dev nftables

# The account ibsim runs as when podctl is root: no home, no shell, no group but its own.
ACCOUNT=podctl-ibsim
if ! getent passwd "$ACCOUNT" >/dev/null; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        --comment "podctl's ibsim, with no authority" "$ACCOUNT"
    echo "ibsim-setup: made the system account $ACCOUNT"
fi

if [[ -x $PREFIX/bin/ibsim && -f $PREFIX/lib/umad2sim/libumad2sim.so && "$(cat "$PREFIX/SOURCE" 2>/dev/null)" == "ibsim $SOURCE_VERSION" ]]; then
    echo "ibsim-setup: $(cat "$PREFIX/SOURCE") in $PREFIX (Debian's $(dpkg-query -W -f='${Version}' ibsim-utils) beside it)"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial"
echo "deb-src [signed-by=$KEYRING] $MIRROR trixie main" > "$work/sources.list"
apt_own=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$work/lists"
         -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
echo "ibsim-setup: fetching ibsim $SOURCE_VERSION's source from Debian 13 ($MIRROR)"
apt-get "${apt_own[@]}" update -qq
# The upstream tarball alone: it holds the whole program (and its COPYING); the Debian part is packaging.
(cd "$work" && apt-get "${apt_own[@]}" source --tar-only -qq "ibsim=$SOURCE_VERSION" >/dev/null)
tar -C "$work" -xzf "$work"/ibsim_"${SOURCE_VERSION%-*}".orig.tar.gz
src=$work/ibsim-${SOURCE_VERSION%-*}
make -s -C "$src/ibsim" ibsim >/dev/null
make -s -C "$src/umad2sim" libumad2sim.so >/dev/null
# Into a fresh folder, then in place of the old one: an interrupted run never looks complete.
rm -rf "$PREFIX.new"
install -D -m 0755 "$src/ibsim/ibsim" "$PREFIX.new/bin/ibsim"
install -D -m 0644 "$src/umad2sim/libumad2sim.so" "$PREFIX.new/lib/umad2sim/libumad2sim.so"
install -D -m 0644 "$src/COPYING" "$PREFIX.new/share/doc/ibsim/COPYING"
install -D -m 0644 "$src/debian/copyright" "$PREFIX.new/share/doc/ibsim/copyright"
echo "ibsim $SOURCE_VERSION" > "$PREFIX.new/SOURCE"
built=$("$PREFIX.new/bin/ibsim" -h 2>&1 || true)  # -h prints usage and the version, and exits 1
[[ ${built##*$'\n'} == *"ibsim ${SOURCE_VERSION%-*}" ]] || { echo "ibsim-setup: the build says ${built##*$'\n'}" >&2; exit 1; }
rm -rf "$PREFIX"
mv "$PREFIX.new" "$PREFIX"
echo "ibsim-setup: built ibsim $SOURCE_VERSION into $PREFIX"
