#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Print the path of a linux-source-7.3 tarball, fetching it if needed.
#
# RSIW_KERNEL_TARBALL names a local copy (CI points it at shared/cache).
# Otherwise Debian's newest `linux-source-7.3` package is downloaded from
# trixie-backports on the same mirror the machine's apt sources use, through
# a private apt configuration: the machine's own apt setup is not touched.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KERNEL_SERIES=${RSIW_KERNEL_SERIES:-7.3}
SUITE=${RSIW_KERNEL_SUITE:-trixie-backports}

if [ -n "${RSIW_KERNEL_TARBALL:-}" ]; then
	[ -r "$RSIW_KERNEL_TARBALL" ] || die "RSIW_KERNEL_TARBALL=$RSIW_KERNEL_TARBALL is not readable"
	echo "$RSIW_KERNEL_TARBALL"
	exit 0
fi

apt_dir="$RSIW_CACHE/apt"
mkdir -p "$apt_dir/pool"
debian_apt_setup "$apt_dir" "$SUITE"
apt_opts=("${DEBIAN_APT_OPTS[@]}")
log "looking up linux-source-$KERNEL_SERIES in $SUITE"
apt-get -qq "${apt_opts[@]}" update >&2
version=$(apt-cache "${apt_opts[@]}" policy "linux-source-$KERNEL_SERIES" | awk '/Candidate:/ {print $2}')
[ -n "$version" ] && [ "$version" != "(none)" ] || die "linux-source-$KERNEL_SERIES is not in $SUITE"
tarball="$apt_dir/pool/linux-source-$KERNEL_SERIES-$version.tar.xz"
if [ ! -s "$tarball" ]; then
	log "downloading linux-source-$KERNEL_SERIES $version"
	work=$(mktemp -d)
	chmod 755 "$work" # apt downloads as the _apt user
	trap 'rm -rf "$work"' EXIT
	(cd "$work" && apt-get -qq "${apt_opts[@]}" download "linux-source-$KERNEL_SERIES=$version" >&2)
	dpkg-deb -x "$work"/linux-source-*.deb "$work/x"
	mv "$work/x/usr/src/linux-source-$KERNEL_SERIES.tar.xz" "$tarball.part"
	mv "$tarball.part" "$tarball"
fi
echo "$tarball"
