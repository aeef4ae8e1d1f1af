#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# rsiw for Debian's own kernel (Documentation/usage.md, "Debian's kernel").
#
# Debian 13's kernel (trixie-backports) is built with CONFIG_RUST=y, but its
# headers package lacks the Rust build files an out-of-tree Rust module
# compiles against (rust/*.rmeta, rust/libmacros.so, ...). This rebuilds
# them from the same source (linux-source-SERIES, scripts/fetch-kernel-source.sh)
# with Debian's .config and Debian's own compilers, in a Debian root made
# with debootstrap (the kernel's rustc is Debian's package, which needs that
# release's C library), checks that the Rust symbols they export are exactly
# the ones in the headers' Module.symvers, and puts them into a copy of the
# headers tree: a KDIR for `make` and DKMS, in that root.
#
#   scripts/debian-kernel.sh [prepare]  make the KDIR (idempotent); prints it
#   scripts/debian-kernel.sh make [ARGS]   make KDIR=<it> ARGS (default:
#                                       modules) in this checkout, in the root
#   scripts/debian-kernel.sh dkms       dkms add + build of this checkout
#                                       against the KDIR, in the root (the
#                                       module and make.log:
#                                       /usr/src/rsiw-dkms/RELEASE)
#   scripts/debian-kernel.sh run CMD... CMD in the root, in this checkout
#   scripts/debian-kernel.sh module     rsiw.ko (production) for Debian's
#                                       kernel, built in the root in a copy
#                                       of this checkout in the cache
#                                       (incremental, make's output on
#                                       stderr); prints the path of a copy
#                                       that the next build replaces
#                                       atomically
#   scripts/debian-kernel.sh initrd     an initramfs for booting Debian's
#                                       kernel with scripts/vm-run.sh
#                                       (--initrd): busybox, the 9p and
#                                       virtio modules, /init from
#                                       scripts/vm-initrd-init.sh; prints
#                                       its path
#   scripts/debian-kernel.sh path       the root (host path), the KDIR (in the
#                                       root), Debian's image and modules,
#                                       the release, its vmlinuz and the
#                                       module root
#                                       (vm-run.sh --modroot)
#   scripts/debian-kernel.sh probe      whether Debian's packages can be had
#                                       (status 1 and why, if not)
#
# Environment:
#   RSIW_DEBIAN_KVER     kernel ABI name (default 7.3.4+deb13)
#   RSIW_DEBIAN_FLAVOUR  amd64 (default) or cloud-amd64
#   RSIW_DEBIAN_SUITE    the root's release (default trixie); the kernel
#                        comes from its -backports suite
#   RSIW_KERNEL_TARBALL  a local linux-source tarball (else Debian's package)
#   RSIW_JOBS            make -j (default: cores + 1)
#   RSIW_CACHE           cache (default ~/.cache/rsiw); all of this goes to
#                        $RSIW_CACHE/debian (about 4 GB)
#
# Every heavy step runs at idle CPU priority. Needs root (sudo) for
# debootstrap, chroot and the mounts, which live in a private mount namespace
# and go away with the command.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KVER=${RSIW_DEBIAN_KVER:-7.3.4+deb13}
FLAVOUR=${RSIW_DEBIAN_FLAVOUR:-amd64}
SUITE=${RSIW_DEBIAN_SUITE:-trixie}
RELEASE=$KVER-$FLAVOUR
D=$RSIW_CACHE/debian
ROOT=$D/$SUITE
# Paths inside the root.
HDR=/usr/src/linux-headers-$RELEASE
BUILD=/usr/src/rsiw-build/linux-$RELEASE
KDIR=/usr/src/rsiw-kdir/linux-headers-$RELEASE
IDLE=(chrt -i 0 nice -n 19)

# The packages of the root: the kernel's compilers as Debian built it
# (GCC; rustc, rust-src, bindgen, libclang for the Rust parts), kbuild's
# tools (openssl: Kconfig asks it about ML-DSA), pahole for the modules'
# BTF, kmod, dkms. The headers come from
# -backports, with the kernel.
ROOT_DEBS=(rustc rust-src bindgen libclang-dev gcc make bc bison flex libelf-dev libssl-dev
	openssl python3 kmod cpio xz-utils dwarves dkms)

# in_root [DIR...] -- CMD...: CMD in the root, as root, with /proc, /dev
# and each DIR bound at its own path, in the first DIR (else in /). The
# mounts are private to the command.
in_root() {
	local binds=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do binds+=("$1"); shift; done
	shift
	# shellcheck disable=SC2016 # expanded by the inner shell
	as_root unshare -m -- sh -c '
		r=$1 cwd=$2 n=$3; shift 3
		mount -t proc proc "$r/proc" && mount --rbind /dev "$r/dev" || exit 1
		while [ "$n" -gt 0 ]; do
			mkdir -p "$r$1" && mount --bind "$1" "$r$1" || exit 1
			shift; n=$((n - 1))
		done
		exec chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
			DEBIAN_FRONTEND=noninteractive sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
	' sh "$ROOT" "${binds[0]:-/}" ${#binds[@]} "${binds[@]}" "$@"
}

make_root() {
	need_debs debootstrap debian-archive-keyring
	local m stamp want
	m=$(debian_mirror)
	if [ ! -f "$ROOT/.rsiw-bootstrapped" ]; then
		log "debootstrap $SUITE into $ROOT (about a minute)"
		as_root rm -rf "$ROOT.part"
		mkdir -p "$D"
		as_root "${IDLE[@]}" debootstrap --variant=minbase \
			--keyring=/usr/share/keyrings/debian-archive-keyring.gpg "$SUITE" "$ROOT.part" "$m" >&2 ||
			die "debootstrap of $SUITE failed"
		as_root rm -rf "$ROOT"
		as_root mv "$ROOT.part" "$ROOT"
		as_root touch "$ROOT/.rsiw-bootstrapped"
	fi
	# The security suite is on its own host: the one the machine uses, if any.
	local sec
	sec=$(debian_mirror -security)
	{
		echo "deb $m $SUITE main"
		echo "deb $m $SUITE-updates main"
		[ -z "$sec" ] || echo "deb $sec $SUITE-security main"
		echo "deb $m $SUITE-backports main"
	} | as_root tee "$ROOT/etc/apt/sources.list.new" >/dev/null
	as_root mv "$ROOT/etc/apt/sources.list.new" "$ROOT/etc/apt/sources.list"
	want="${ROOT_DEBS[*]} linux-headers-$RELEASE"
	stamp=$ROOT/.rsiw-debs-$RELEASE
	if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -d "$ROOT$HDR" ]; then
		log "installing in the root: $want"
		in_root -- apt-get update -qq >&2
		# shellcheck disable=SC2086 # a list of package names
		in_root -- "${IDLE[@]}" apt-get install -y -qq --no-install-recommends $want >&2 ||
			die "apt-get install in the $SUITE root failed"
		in_root -- apt-get clean
		echo "$want" | as_root tee "$stamp" >/dev/null
	fi
}

# conf KEY: the value of a CONFIG_ option in Debian's .config.
conf() { sed -n "s/^$1=//p" "$ROOT$HDR/.config" | tr -d '"'; }

# The root's compilers must be the kernel's: rustc exactly (the crates'
# metadata and the symbols' crate hashes come from its version string),
# bindgen exactly (the bindings), GCC by its version text.
check_toolchain() {
	local want have
	want=$(conf CONFIG_RUSTC_VERSION_TEXT)
	have=$(in_root -- rustc --version)
	[ "$have" = "$want" ] || die "the $SUITE root's rustc is '$have', Debian's kernel was built with '$want'"
	want=$(conf CONFIG_BINDGEN_VERSION_TEXT)
	have=$(in_root -- bindgen --version)
	[ "$have" = "$want" ] || die "the $SUITE root's bindgen is '$have', Debian's kernel was built with '$want'"
	want=$(conf CONFIG_CC_VERSION_TEXT)
	have=$(in_root -- "${want%% *}" --version | head -1)
	[ "$have" = "$want" ] || log "note: the root's ${want%% *} is '$have', the kernel's '$want'"
	log "toolchain: $(conf CONFIG_RUSTC_VERSION_TEXT), $(conf CONFIG_BINDGEN_VERSION_TEXT), $have"
}

# The kernel's image and modules (usr/lib/modules/RELEASE/vmlinuz and the
# module tree), of the headers' version: for booting that kernel, and the
# vermagic of its own modules.
fetch_image() {
	local dir=$D/image-$RELEASE version
	version=$(in_root -- dpkg-query -W -f='${Version}' "linux-headers-$RELEASE")
	[ "$(cat "$dir/.rsiw-unpacked" 2>/dev/null)" = "$version" ] && return
	log "downloading linux-binary and linux-modules $RELEASE $version"
	as_root rm -rf "$ROOT/tmp/rsiw-debs"
	as_root mkdir -p "$ROOT/tmp/rsiw-debs"
	in_root -- sh -c "cd /tmp/rsiw-debs && apt-get download -qq -o APT::Sandbox::User=root linux-binary-$RELEASE=$version \
		linux-modules-$RELEASE=$version" >&2 || die "cannot download Debian's linux-binary-$RELEASE"
	as_root rm -rf "$dir.part"
	mkdir -p "$dir.part"
	for f in "$ROOT"/tmp/rsiw-debs/*.deb; do
		dpkg-deb -x "$f" "$dir.part"
	done
	as_root rm -rf "$ROOT/tmp/rsiw-debs"
	rm -rf "$dir"
	mv "$dir.part" "$dir"
	echo "$version" >"$dir/.rsiw-unpacked"
}

# The kernel source, unpacked in the cache the test kernel's build shares.
source_dir() {
	local tarball src
	tarball=$("$RSIW_ROOT/scripts/fetch-kernel-source.sh")
	src=$(unpack_kernel_source "$tarball")
	[ "$(make -s -C "$src" kernelversion)" = "${KVER%%+*}" ] ||
		die "$tarball is linux $(make -s -C "$src" kernelversion), Debian's kernel is ${KVER%%+*}"
	echo "$src"
}

# The rust/ of Debian's kernel: its .config, its make variables.
build_rust() {
	local src=$1 cross cc b=$ROOT$BUILD jobs key
	# What the build depends on besides the source: Debian's .config and
	# headers version, the root's rustc and bindgen.
	key=$( (cat "$ROOT$HDR/.config"; echo "$src"
		in_root -- dpkg-query -W -f='${Version}\n' "linux-headers-$RELEASE" rustc bindgen) | sha256sum)
	[ "$(cat "$b/.rsiw-built" 2>/dev/null)" = "$key" ] && return
	cross=$(sed -n 's/^override CROSS_COMPILE = //p' "$ROOT$HDR/.kernelvariables")
	cc=$(conf CONFIG_CC_VERSION_TEXT)
	cc=${cc%% *}
	jobs=${RSIW_JOBS:-$(($(nproc) + 1))}
	as_root rm -rf "$b"
	as_root mkdir -p "$b"
	as_root cp "$ROOT$HDR/.config" "$b/.config"
	as_root cp "$ROOT$HDR/.config" "$b/.config.debian"
	local mk=(make -s -C "$src" O="$BUILD" ARCH=x86 CROSS_COMPILE="$cross" CC="$cc"
		KERNELRELEASE="$RELEASE" -j"$jobs")
	in_root "$src" -- "${mk[@]}" olddefconfig >&2
	# Same options, or the toolchain in the root is not the one Debian's
	# kernel was configured with.
	if ! diff -I '^#' "$b/.config.debian" "$b/.config" >"$D/config.diff"; then
		head -20 "$D/config.diff" >&2
		die "Debian's .config changes under olddefconfig with the root's toolchain (diff: $D/config.diff)"
	fi
	log "building the kernel's rust/ for $RELEASE (make modules_prepare, -j$jobs)"
	local start=$SECONDS
	in_root "$src" -- "${IDLE[@]}" "${mk[@]}" modules_prepare >&2 || die "make modules_prepare failed"
	log "rust/ built in $((SECONDS - start)) s"
	echo "$key" | as_root tee "$b/.rsiw-built" >/dev/null
}

# The exported Rust symbols of the rebuilt objects (what rust/exports.c
# exports: core, the C helpers, bindings, kernel) against the headers'
# Module.symvers. Stops on any difference.
check_symbols() {
	local b=$ROOT$BUILD t
	t=$(mktemp -d)
	awk '$3 == "vmlinux" && ($2 ~ /^_R/ || $2 ~ /^rust_helper_/) {print $2}' "$ROOT$HDR/Module.symvers" |
		sort -u >"$t/debian"
	cat "$b"/rust/exports_*_generated.h | sed -n 's/^EXPORT_SYMBOL_RUST_GPL(\(.*\));$/\1/p' |
		grep -E '^(_R|rust_helper_)' | sort -u >"$t/rebuilt"
	[ -s "$t/rebuilt" ] || die "no exported Rust symbols in $b/rust/exports_*_generated.h"
	comm -23 "$t/debian" "$t/rebuilt" >"$t/only-debian"
	comm -13 "$t/debian" "$t/rebuilt" >"$t/only-rebuilt"
	if [ -s "$t/only-debian" ] || [ -s "$t/only-rebuilt" ]; then
		log "Rust symbols differ: $(wc -l <"$t/only-debian") only in Debian's Module.symvers," \
			"$(wc -l <"$t/only-rebuilt") only in the rebuilt rust/"
		# The crate hashes (v0 mangling's disambiguators) on each side
		# tell a different rustc from a different build.
		for s in debian rebuilt; do
			log "crate hashes in the $s symbols (mentions): $(perl -ne 'while (/C(s[0-9A-Za-z]*_)?(\d+)/g) { my ($h, $n) = ($1 // "", $2);
				my $c = substr($_, pos, $n); print "C$h$n$c\n" if $c =~ /^(core|kernel|bindings|pin_init|ffi|macros|zerocopy|compiler_builtins)$/ }' \
				"$t/$s" | sort | uniq -c | awk '{printf "%s(%s) ", $2, $1}')"
		done
		sed 's/^/  only in Debian: /' "$t/only-debian" | head -20 >&2
		sed 's/^/  only rebuilt:   /' "$t/only-rebuilt" | head -20 >&2
		cp "$t/only-debian" "$t/only-rebuilt" "$D/"
		rm -rf "$t"
		# No KDIR from an earlier build for these headers either.
		as_root rm -f "$ROOT$KDIR/.rsiw-kdir"
		die "the rebuilt rust/ does not export Debian's Rust symbols (lists: $D/only-debian, $D/only-rebuilt)"
	fi
	log "Rust symbols: all $(wc -l <"$t/debian") of Module.symvers's Rust exports match the rebuilt rust/ exactly"
	rm -rf "$t"
}

# The KDIR: a copy of the headers tree with the Rust build files and the
# target specification rustc takes (scripts/target.json).
install_kdir() {
	local b=$ROOT$BUILD k=$ROOT$KDIR
	if [ -f "$k/.rsiw-kdir" ] && [ "$k/.rsiw-kdir" -nt "$b/.rsiw-built" ]; then
		return
	fi
	log "installing the Rust build files into $KDIR"
	as_root rm -rf "$k"
	as_root mkdir -p "$(dirname "$k")"
	as_root cp -a "$ROOT$HDR" "$k"
	as_root sed -i "s|^KBUILD_OUTPUT=.*|KBUILD_OUTPUT=$KDIR|" "$k/Makefile"
	# Its links are relative to where it was (tools/ -> linux-kbuild's).
	(cd "$ROOT$HDR" && find . -type l) | while read -r l; do
		as_root ln -sfn "$(in_root -- readlink -f "$HDR/$l")" "$k/$l"
	done
	# scripts/ is a link to linux-kbuild's, shared by every flavour: a copy
	# of its own takes target.json.
	as_root rm "$k/scripts"
	as_root cp -a "$ROOT/usr/lib/linux-kbuild-$KVER/scripts" "$k/scripts"
	as_root cp "$b/scripts/target.json" "$k/scripts/"
	as_root mkdir -p "$k/rust"
	(cd "$b/rust" && as_root cp -a ./*.rmeta ./*.so "$k/rust/")
	(cd "$b/rust" && find . -name '*_generated.rs' -print0 | as_root xargs -0 cp --parents -t "$k/rust/")
	for f in include/generated/rustc_cfg include/config/auto.conf; do
		cmp -s "$b/$f" "$k/$f" || die "the rebuilt $f differs from Debian's"
	done
	as_root touch "$k/.rsiw-kdir"
}

prepare() {
	mkdir -p "$D"
	exec 8>"$D/.lock"
	flock 8
	local start=$SECONDS src
	make_root
	check_toolchain
	src=$(source_dir)
	build_rust "$src"
	check_symbols
	install_kdir
	fetch_image
	log "KDIR for $RELEASE in the $SUITE root: $KDIR ($((SECONDS - start)) s)"
	echo "$KDIR"
}

# Can the kernel's packages be had? Yes when the KDIR is made already, or
# when Debian's archive lists linux-headers-RELEASE in SUITE-backports.
probe() {
	if [ -f "$ROOT$KDIR/.rsiw-kdir" ]; then
		echo "made already: $KDIR in $ROOT"
		return
	fi
	debian_apt_setup "$D/apt" "$SUITE-backports"
	mkdir -p "$D"
	apt-get -qq "${DEBIAN_APT_OPTS[@]}" update >&2 2>/dev/null ||
		{ echo "Debian's archive ($(debian_mirror), $SUITE-backports) is not reachable"; return 1; }
	local v
	v=$(apt-cache "${DEBIAN_APT_OPTS[@]}" policy "linux-headers-$RELEASE" | awk '/Candidate:/ {print $2}')
	[ -n "$v" ] && [ "$v" != "(none)" ] ||
		{ echo "Debian's $SUITE-backports has no linux-headers-$RELEASE (any more)"; return 1; }
	echo "linux-headers-$RELEASE $v in $SUITE-backports"
}

ready() {
	[ -f "$ROOT$KDIR/.rsiw-kdir" ] || die "no KDIR for $RELEASE yet: run scripts/debian-kernel.sh"
}

IMAGE=$D/image-$RELEASE
# The unpacked packages' kernel image (linux-binary puts it beside the
# modules, lib/modules/RELEASE/vmlinuz) and module root (the directory
# whose lib/modules/RELEASE holds the modules: merged /usr or not).
vmlinuz() {
	local f
	for f in "$IMAGE"/usr/lib/modules/"$RELEASE"/vmlinuz "$IMAGE"/lib/modules/"$RELEASE"/vmlinuz \
		"$IMAGE/boot/vmlinuz-$RELEASE"; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
}
modroot() {
	local r
	for r in "$IMAGE/usr" "$IMAGE"; do
		[ -d "$r/lib/modules/$RELEASE/kernel" ] && { echo "$r"; return; }
	done
}

# Debian's packages ship no modules.dep (their postinst runs depmod): made
# once in the unpacked module tree, for modprobe -d.
image_ready() {
	local mr
	[ -f "$IMAGE/.rsiw-unpacked" ] || die "no Debian image for $RELEASE yet: run scripts/debian-kernel.sh"
	[ -n "$(vmlinuz)" ] || die "no vmlinuz-$RELEASE in $IMAGE"
	mr=$(modroot)
	[ -n "$mr" ] || die "no lib/modules/$RELEASE in $IMAGE"
	if [ ! -f "$mr/lib/modules/$RELEASE/modules.dep" ] ||
		[ "$mr/lib/modules/$RELEASE/modules.dep" -ot "$IMAGE/.rsiw-unpacked" ]; then
		# (Its warnings about modules.order and modules.builtin, which the
		# packages lack, left out.)
		depmod -b "$mr" "$RELEASE" 2> >(grep -v 'WARNING: could not open modules\.' >&2) ||
			die "depmod -b $mr $RELEASE failed"
	fi
}

# What the initramfs loads, with what they depend on: the host's root over
# virtio-9p (9pnet_virtio, 9p; virtio_pci is built in), and what
# scripts/vm-init.sh mounts before its modprobe (for the rest) is set up:
# overlay, configfs. Modules only: Debian's packages have no
# modules.builtin, so modprobe does not know the built-in ones.
INITRD_MODULES=(9pnet_virtio 9p overlay configfs)

initrd() {
	image_ready
	local mr out=$D/initrd-$RELEASE.cpio.gz stage key f name a
	# One maker at a time (debian/002 and debian/003 each call it).
	exec 6>"$out.lock"
	flock 6
	mr=$(modroot)
	local deps
	deps=$(modprobe -d "$mr" -S "$RELEASE" -a --show-depends "${INITRD_MODULES[@]}") ||
		die "Debian's modules lack one of ${INITRD_MODULES[*]}"
	key=$( (cat "$RSIW_ROOT/scripts/vm-initrd-init.sh" "$IMAGE/.rsiw-unpacked"; echo "$deps"
		busybox 2>&1 | sed -n 1p) | sha256sum)
	if [ -f "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then
		echo "$out"
		return
	fi
	stage=$(mktemp -d)
	mkdir -p "$stage"/{bin,dev,proc,sys,newroot,lib/modules}
	cp "$(command -v busybox)" "$stage/bin/busybox"
	for a in sh mount umount insmod sleep mkdir switch_root cat echo; do
		ln -s busybox "$stage/bin/$a"
	done
	as_root mknod -m 600 "$stage/dev/console" c 5 1
	cp "$RSIW_ROOT/scripts/vm-initrd-init.sh" "$stage/init"
	chmod 755 "$stage/init"
	: >"$stage/modules"
	# "insmod PATH" lines, dependencies first; uncompressed here (busybox's
	# insmod takes plain .ko files).
	for f in $(echo "$deps" | awk '$1 == "insmod" && !seen[$2]++ {print $2}'); do
		name=$(basename "$f")
		case "$f" in
		*.ko.xz) name=${name%.xz}; xz -dc "$f" >"$stage/lib/modules/$name" ;;
		*.ko.zst) name=${name%.zst}; zstd -qdc "$f" >"$stage/lib/modules/$name" ;;
		*.ko.gz) name=${name%.gz}; gzip -dc "$f" >"$stage/lib/modules/$name" ;;
		*) cp "$f" "$stage/lib/modules/$name" ;;
		esac
		echo "$name" >>"$stage/modules"
	done
	log "initramfs for $RELEASE: busybox and $(paste -sd' ' "$stage/modules")"
	(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.part"
	as_root rm -rf "$stage"
	mv "$out.part" "$out"
	echo "$key" >"$out.key"
	echo "$out"
}

# rsiw.ko for Debian's kernel in a copy of this checkout (one per checkout)
# in the cache: the checkout's own build stays the test kernel's.
module() {
	ready
	local tree
	tree=$D/module-$RELEASE-$(echo "$RSIW_ROOT" | sha256sum | cut -c1-12)
	mkdir -p "$tree"
	exec 7>"$tree.lock"
	flock 7
	copy_checkout "$tree" -a -u
	log "building rsiw.ko for $RELEASE in $tree"
	# modpost and the link anew each time (seconds), so that modpost says
	# what it found (tests/debian/001 reads its output).
	rm -f "$tree/rsiw.ko" "$tree/Module.symvers"
	in_root "$tree" -- "${IDLE[@]}" make KDIR="$KDIR" modules >&2 ||
		die "rsiw.ko does not build for $RELEASE (scripts/debian-kernel.sh make modules)"
	[ -f "$tree/rsiw.ko" ] || die "no $tree/rsiw.ko after make modules"
	# Published beside the tree, replaced atomically: the next caller's
	# relink never takes away the file an earlier one is reading.
	cp "$tree/rsiw.ko" "$tree.ko.part"
	mv -f "$tree.ko.part" "$tree.ko"
	echo "$tree.ko"
}

cmd=${1:-prepare}
[ $# -eq 0 ] || shift
case "$cmd" in
prepare) prepare ;;
probe) probe ;;
path)
	echo "root $ROOT"
	echo "kdir $KDIR"
	echo "image $IMAGE"
	echo "release $RELEASE"
	echo "vmlinuz $(vmlinuz)"
	echo "modroot $(modroot)"
	;;
module) module ;;
initrd) initrd ;;
make)
	ready
	[ $# -gt 0 ] || set -- modules
	in_root "$RSIW_ROOT" -- "${IDLE[@]}" make KDIR="$KDIR" "$@"
	;;
dkms)
	ready
	cd "$RSIW_ROOT"
	ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
	# dkms's source tree: the checkout's files, without its build output.
	as_root rm -rf "$ROOT/usr/src/rsiw-$ver"
	as_root mkdir -p "$ROOT/usr/src/rsiw-$ver"
	copy_checkout "$ROOT/usr/src/rsiw-$ver"
	# Built, then taken out of the root's dkms tree again: registered, it
	# would be autoinstalled (and fail) for every other kernel's headers
	# installed into the root later. The module stays in /usr/src/rsiw-dkms.
	# shellcheck disable=SC2016 # expanded in the root
	in_root -- sh -c 'v=$1 rel=$2 k=$3; shift 3
		dkms remove "rsiw/$v" --all >/dev/null 2>&1
		dkms add "rsiw/$v" || exit 1
		"$@" dkms build "rsiw/$v" -k "$rel" --kernelsourcedir "$k"; rc=$?
		dkms status rsiw
		mkdir -p "/usr/src/rsiw-dkms/$rel"
		rm -f "/usr/src/rsiw-dkms/$rel"/*
		cp /var/lib/dkms/rsiw/"$v/$rel"/*/module/rsiw.ko* "/var/lib/dkms/rsiw/$v/build/make.log" \
			"/usr/src/rsiw-dkms/$rel/" 2>/dev/null
		dkms remove "rsiw/$v" --all >/dev/null 2>&1
		exit $rc' sh "$ver" "$RELEASE" "$KDIR" "${IDLE[@]}"
	;;
run)
	ready
	in_root "$RSIW_ROOT" -- "$@"
	;;
*) die "unknown command $cmd (prepare, make, dkms, module, initrd, run, path, probe)" ;;
esac
