#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# packages.sh DIR: builds what a user installs from, as a user would, from
# a copy of this checkout (its tracked and untracked files, not what a
# build left or .gitignore names) into DIR:
#   DIR/rsiw-VERSION-dkms.tar.gz          make dkms-tarball
#   DIR/rsiw-dkms_VERSION_all.deb         dpkg-buildpackage -us -uc -b
#   DIR/ibverbs-providers-rsiw_VERSION_ARCH.deb
# with their logs (tarball.log, dpkg-buildpackage.log) and the copy
# (DIR/src/rsiw). Installs the build dependencies first (Debian's
# packages, idempotent). Exit status 0 when all of them were built.
# Used by tests/install/004 and 005.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/lib.sh"
dir=${1:?usage: packages.sh DIR}

need_debs dpkg-dev debhelper dh-dkms dkms libibverbs-dev pkg-config >&2 || exit
rm -rf "$dir"
mkdir -p "$dir/src/rsiw" || exit
dir=$(cd "$dir" && pwd)
(cd "$root" && git ls-files -z -co --exclude-standard | tar -c --null -T -) |
	tar -x -C "$dir/src/rsiw" || exit
# The provider's build needs rdma-core's private headers: prepared once
# (cached), outside the package build.
hdr=$("$root/scripts/build-rdma-core.sh" --headers 2>"$dir/headers.log") || {
	echo "packages.sh: no private rdma-core headers (log: $dir/headers.log)" >&2
	exit 1
}
rc=0
make -C "$dir/src/rsiw" dkms-tarball DKMS_TARBALL="$dir/rsiw-dkms.tar.gz" >"$dir/tarball.log" 2>&1 || rc=1
# Named by version as the default target names it.
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$dir/src/rsiw/dkms.conf")
[ -f "$dir/rsiw-dkms.tar.gz" ] && mv "$dir/rsiw-dkms.tar.gz" "$dir/rsiw-$ver-dkms.tar.gz"
(cd "$dir/src/rsiw" && RDMA_CORE_HEADERS=$hdr dpkg-buildpackage -us -uc -b) \
	>"$dir/dpkg-buildpackage.log" 2>&1 || rc=1
mv "$dir"/src/*.deb "$dir"/src/*.changes "$dir"/src/*.buildinfo "$dir" 2>/dev/null
exit $rc
