#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build rdma-core 55 (libibverbs + librdmacm with ibv_wr_flush, which
# Debian 12's rdma-core 44 lacks) into a private prefix, without touching
# the system's libraries. The source is the rdma-core v55.0 tree that the
# `ibverbs-sys` crate vendors, fetched from crates.io and checked against
# the sha256 below. Idempotent: a second run only prints the prefix.
# Prints the prefix on stdout.
#
#   RSIW_RDMA_CORE_PREFIX  where to install (default $RSIW_CACHE/rdma-core-55)
#   RSIW_JOBS              ninja -j (default: cores + 1)
#
# Use it: scripts/rdma-core-env.sh (LD_LIBRARY_PATH and the prefix's
# provider configuration), `make -C providers/rsiw RDMA_CORE=<prefix>`.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CRATE=ibverbs-sys
CRATE_VERSION=0.3.2+55.0
# The crate's checksum as crates.io's index records it (cksum of
# https://index.crates.io/ib/ve/ibverbs-sys for this version).
CRATE_SHA256=8149ab8d940ea7e7073a24ba6e3ec6b0cc8ceab6ea3d562d60a21ca5cc23413a
RDMA_CORE_VERSION=55.0

prefix=${RSIW_RDMA_CORE_PREFIX:-$RSIW_CACHE/rdma-core-55}
work=$RSIW_CACHE/rdma-core-55-build
stamp="$prefix/.rsiw-built"
# What changes the build: the source and this script's cmake options.
key=$( (echo "$CRATE_SHA256"; sed -n '/^cmake_opts=(/,/^)/p' "$0") | sha256sum | cut -c1-12)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
	log "rdma-core $RDMA_CORE_VERSION is up to date in $prefix"
	echo "$prefix"
	exit 0
fi

# Only ever remove a prefix this script made (or an empty one).
if [ -d "$prefix" ] && [ ! -f "$stamp" ] && [ -n "$(ls -A "$prefix")" ]; then
	die "$prefix exists and was not made by $0: choose another RSIW_RDMA_CORE_PREFIX"
fi
for tool in cmake ninja pkg-config curl; do
	command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup-toolchain.sh"
done
pkg-config --exists libnl-3.0 libnl-route-3.0 ||
	die "libnl-3 development files not found: run scripts/setup-toolchain.sh"

mkdir -p "$work"
exec 9>"$work.lock"
if ! flock -n 9; then
	log "another build of rdma-core is running; waiting for it"
	flock 9
fi

crate="$work/$CRATE-$CRATE_VERSION.crate"
if [ ! -f "$crate" ] || ! echo "$CRATE_SHA256  $crate" | sha256sum -c --status; then
	url="https://static.crates.io/crates/$CRATE/$CRATE-$CRATE_VERSION.crate"
	log "downloading $url"
	curl -fsSL --retry 3 -o "$crate.part" "$url"
	echo "$CRATE_SHA256  $crate.part" | sha256sum -c --status ||
		die "checksum mismatch for $url (expected $CRATE_SHA256)"
	mv "$crate.part" "$crate"
fi

src="$work/src"
if [ ! -f "$src/.rsiw-unpacked-$CRATE_SHA256" ]; then
	log "unpacking rdma-core $RDMA_CORE_VERSION from $CRATE $CRATE_VERSION"
	rm -rf "$src"
	mkdir -p "$src"
	tar -xzf "$crate" -C "$src" --strip-components=3 "$CRATE-$CRATE_VERSION/vendor/rdma-core"
	grep -q "set(PACKAGE_VERSION \"$RDMA_CORE_VERSION\")" "$src/CMakeLists.txt" ||
		die "$CRATE $CRATE_VERSION does not vendor rdma-core $RDMA_CORE_VERSION"
	touch "$src/.rsiw-unpacked-$CRATE_SHA256"
fi

# A private prefix: libraries in $prefix/lib (no multiarch directory),
# providers in $prefix/lib/libibverbs, provider configuration in
# $prefix/etc/libibverbs.d. No man pages, no pyverbs, no udev/systemd
# files, no static libraries. The build directory is kept: its include/
# holds the private headers (infiniband/driver.h) the provider's pabi
# check compiles against (copied into the prefix below).
cmake_opts=(
	-GNinja
	-DCMAKE_BUILD_TYPE=RelWithDebInfo
	-DCMAKE_INSTALL_PREFIX="$prefix"
	-DCMAKE_INSTALL_LIBDIR=lib
	-DNO_MAN_PAGES=1
	-DNO_PYVERBS=1
	-DENABLE_STATIC=0
	-DENABLE_VALGRIND=0
	-DCMAKE_DISABLE_FIND_PACKAGE_Systemd=1
	-DCMAKE_DISABLE_FIND_PACKAGE_UDev=1
	-DCMAKE_INSTALL_UDEV_RULESDIR="$prefix/lib/udev/rules.d"
	-DCMAKE_INSTALL_SYSTEMD_SERVICEDIR="$prefix/lib/systemd/system"
	-DCMAKE_INSTALL_SYSTEMD_BINDIR="$prefix/lib/systemd"
	-DCMAKE_INSTALL_PERLDIR="$prefix/share/perl5"
)
build="$work/build"
log "configuring rdma-core $RDMA_CORE_VERSION for $prefix"
rm -rf "$build" "$prefix"
mkdir -p "$build"
(cd "$build" && cmake "${cmake_opts[@]}" "$src" >"$work/cmake.log" 2>&1) ||
	{ tail -30 "$work/cmake.log" >&2; die "cmake failed (log: $work/cmake.log)"; }
jobs=${RSIW_JOBS:-$(($(nproc) + 1))}
log "building rdma-core $RDMA_CORE_VERSION with -j$jobs (about 5 minutes on 2 cores)"
start=$(date +%s)
ninja -C "$build" -j"$jobs" >"$work/ninja.log" 2>&1 ||
	{ tail -30 "$work/ninja.log" >&2; die "rdma-core build failed (log: $work/ninja.log)"; }
ninja -C "$build" install >"$work/install.log" 2>&1 ||
	{ tail -30 "$work/install.log" >&2; die "rdma-core install failed (log: $work/install.log)"; }

# Nothing may land outside the prefix (the system's rdma-core stays as is).
outside=$(grep -v "^$prefix/" "$build/install_manifest.txt" || true)
[ -z "$outside" ] || die "rdma-core installed files outside $prefix: $outside"

# The private provider interface (infiniband/driver.h and what it
# includes: config.h, ccan/, util/, the kernel's uAPI headers as rdma-core
# ships them), which rdma-core does not install: out-of-tree providers
# compile against it. Under $prefix/include/rdma-core-private so nothing
# picks it up by accident.
priv="$prefix/include/rdma-core-private"
mkdir -p "$priv"
cp -rL "$build/include/." "$priv/"
mkdir -p "$priv/ccan" "$priv/util"
cp "$src"/ccan/*.h "$priv/ccan/"
cp "$src"/util/*.h "$priv/util/"
echo "$RDMA_CORE_VERSION" >"$prefix/VERSION"
log "rdma-core $RDMA_CORE_VERSION built in $(($(date +%s) - start)) s: $prefix"
echo "$key" >"$stamp"
echo "$prefix"
