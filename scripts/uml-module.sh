#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# rsiw.ko for the User-Mode Linux test kernel (RSIW_KERNEL_FLAVOUR=uml,
# scripts/build-kernel.sh), built in a copy of this checkout in the cache:
# an out-of-tree module builds in its source tree, and the checkout's own
# build belongs to the QEMU test kernel. Incremental: only files newer than
# the copy's are copied again.
#
#   scripts/uml-module.sh [test|modules]   build the test module (default,
#                                          with the KUnit suites) or the
#                                          production one; prints its path
#   scripts/uml-module.sh path             the path of the last build
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export RSIW_KERNEL_FLAVOUR=uml

what=${1:-test}
kdir=$(KDIR=${RSIW_UML_KDIR:-} resolve_kdir)
tree="$RSIW_CACHE/uml/$(basename "$kdir")-$(echo "$RSIW_ROOT" | sha256sum | cut -c1-12)"
case "$what" in
path)
	[ -f "$tree/rsiw.ko" ] || die "no UML build of rsiw.ko yet: scripts/uml-module.sh"
	echo "$tree/rsiw.ko"
	exit 0
	;;
test | modules) ;;
*) die "usage: $0 [test|modules|path]" ;;
esac

mkdir -p "$tree"
exec 9>"$tree.lock"
flock 9
copy_checkout "$tree" -a -u
log "building rsiw.ko ($what) for $(basename "$kdir") in $tree"
make -s -C "$tree" KDIR="$kdir" "$what" >&2 || die "rsiw.ko does not build for the UML kernel (make -C $tree KDIR=$kdir $what)"
echo "$tree/rsiw.ko"
