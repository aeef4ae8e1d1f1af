# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# Shared shell helpers for rsiw's scripts. Source it; do not run it.

RSIW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RSIW_CACHE=${RSIW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rsiw}
# The LLVM suffix the kernel and the module are built with (clang-19, ld.lld-19, ...).
RSIW_LLVM=${RSIW_LLVM:--19}
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm${RSIW_LLVM}/lib}
export PATH="$HOME/.cargo/bin:$PATH"

# Flavours of the test kernel: "lean" (default), "debug" (KASAN, lockdep,
# kmemleak) and "uml" (lean as User-Mode Linux, ARCH=um: the native lane).
RSIW_KERNEL_FLAVOUR=${RSIW_KERNEL_FLAVOUR:-lean}
# Guest time limits scale with it: the debug kernel runs several times
# slower under TCG.
RSIW_TIME_FACTOR=1
# shellcheck disable=SC2034 # read by the scripts that source this
if [ "$RSIW_KERNEL_FLAVOUR" = debug ]; then RSIW_TIME_FACTOR=4; fi

log() { printf '[rsiw %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Run a command as root, whether or not we already are.
as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# need_debs PKG...: install (apt-get, as root) the Debian packages missing
# among PKG; idempotent.
need_debs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing Debian packages: ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		as_root apt-get update -qq
		as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	else
		log "Debian packages: all present"
	fi
}

# The kernel architecture of the current flavour (make ARCH=...).
kernel_arch() { if [ "$RSIW_KERNEL_FLAVOUR" = uml ]; then echo um; else echo x86_64; fi; }

# The config fragments of the current flavour, one path a line.
kernel_fragments() {
	case "$RSIW_KERNEL_FLAVOUR" in
	lean) echo "$RSIW_ROOT/scripts/kconfig/rsiw.config" ;;
	debug) printf '%s\n' "$RSIW_ROOT/scripts/kconfig/rsiw.config" "$RSIW_ROOT/scripts/kconfig/debug.config" ;;
	uml) printf '%s\n' "$RSIW_ROOT/scripts/kconfig/rsiw.config" "$RSIW_ROOT/scripts/kconfig/uml.config" ;;
	*) die "unknown RSIW_KERNEL_FLAVOUR=$RSIW_KERNEL_FLAVOUR (lean, debug or uml)" ;;
	esac
}

# The config key of a kernel build: everything besides the source that
# changes its output (fragments, compilers, bindgen). The last part of the
# build directory's name (scripts/build-kernel.sh). About 0.1 s.
kernel_cfg_key() {
	local fragments toolchain
	mapfile -t fragments < <(kernel_fragments)
	[ ${#fragments[@]} -gt 0 ] || return 1
	toolchain=$(rustc --version; bindgen --version; "clang$RSIW_LLVM" --version | head -1)
	# Only the options count (set, or "# CONFIG_X is not set"): a comment
	# edited in a fragment keeps the build.
	(grep -hE '^[[:space:]]*CONFIG_|^# CONFIG_[A-Za-z0-9_]+ is not set$' "${fragments[@]}"; echo "$toolchain"; echo "$RSIW_LLVM") | sha256sum | cut -c1-12
}

# Which kernel source a build uses, cheaply (no hashing of the tarball):
# the local tarball's name and size, or the Debian package series.
kernel_source_id() {
	if [ -n "${RSIW_KERNEL_TARBALL:-}" ]; then
		echo "tarball $(basename "$RSIW_KERNEL_TARBALL") $(stat -Lc %s "$RSIW_KERNEL_TARBALL" 2>/dev/null)"
	else
		echo "debian linux-source-${RSIW_KERNEL_SERIES:-7.3} ${RSIW_KERNEL_SUITE:-trixie-backports}"
	fi
}

# debian_mirror [-security]: the Debian mirror (or security mirror) this
# machine's apt sources use (deb822 or one-line sources); the main one
# defaults to deb.debian.org, the security one to none.
debian_mirror() {
	local sec=${1:-} uri
	uri=$( (cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }'
	grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		sed -E 's/^deb (\[[^]]*\] )?//' | awk '{print $1}') |
		grep -E "/debian$sec/?\$" | head -1 || true)
	[ -n "$uri" ] || [ -n "$sec" ] || uri=http://deb.debian.org/debian
	echo "${uri%/}"
}

# debian_apt_setup DIR SUITE: a private apt configuration in DIR for
# Debian's SUITE (main) on that mirror, in DEBIAN_APT_OPTS (options for
# apt-get and apt-cache); the machine's own apt setup is not touched.
debian_apt_setup() {
	debian_apt_opts "$1"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror "") $2 main" >"$1/sources.list"
}

# debian_apt_opts DIR: DEBIAN_APT_OPTS for a private apt configuration
# whose sources.list the caller writes into DIR.
debian_apt_opts() {
	mkdir -p "$1/lists/partial" "$1/cache/archives/partial"
	# shellcheck disable=SC2034 # read by the scripts that source this
	DEBIAN_APT_OPTS=(
		-o "Dir::Etc::SourceList=$1/sources.list"
		-o "Dir::Etc::SourceParts=$1/none"
		-o "Dir::State::Lists=$1/lists"
		-o "Dir::Cache=$1/cache"
		-o "APT::Get::List-Cleanup=0"
	)
}

# copy_checkout DEST [CP_OPTION...]: the checkout's source files (tracked,
# and new ones git does not ignore; no build output) into DEST, as root if
# need be, with cp's options (e.g. -a -u: only what is newer there).
copy_checkout() {
	local dest=$1
	shift
	(cd "$RSIW_ROOT" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		as_root xargs -0 cp "$@" --parents -t "$dest")
}

# unpack_kernel_source TARBALL: the directory the tarball is unpacked in,
# in the cache, keyed by its content (unpacked once; the test kernel and
# scripts/debian-kernel.sh share it). Hashing 166 MB costs a second; a
# content key survives copies between machines.
unpack_kernel_source() {
	local key dir
	key=$(sha256sum "$1" | cut -c1-16)
	dir="$RSIW_CACHE/src/$key"
	if [ ! -f "$dir/.rsiw-unpacked" ]; then
		# One unpacker at a time: the test kernels' builds and
		# scripts/debian-kernel.sh share the tree and may start together.
		mkdir -p "$RSIW_CACHE/src"
		(
			flock 9
			if [ ! -f "$dir/.rsiw-unpacked" ]; then
				log "unpacking $(basename "$1")"
				rm -rf "$dir"
				mkdir -p "$dir"
				tar -xJf "$1" -C "$dir" --strip-components=1 && touch "$dir/.rsiw-unpacked"
			fi
		) 9>"$dir.lock"
		[ -f "$dir/.rsiw-unpacked" ] || die "cannot unpack $1 into $dir"
	fi
	echo "$dir"
}

# The file naming the kernel build directory of one configuration (source,
# flavour, config key): checkouts with different fragments or tarballs
# sharing one cache each find their own kernel. Written by
# scripts/build-kernel.sh; kernel_dir_file CFG_KEY.
kernel_dir_file() {
	local key
	key=$( (kernel_source_id; echo "$RSIW_KERNEL_FLAVOUR"; echo "$1") | sha256sum | cut -c1-12)
	echo "$RSIW_CACHE/kernel-$RSIW_KERNEL_FLAVOUR-$key.path"
}

# The most recent build of a flavour, whatever its configuration (for
# people: `make KDIR=$(cat ~/.cache/rsiw/kernel-lean.path)`).
kernel_last_file() { echo "$RSIW_CACHE/kernel-$RSIW_KERNEL_FLAVOUR.path"; }

# KDIR: explicit, else the cached test kernel built by scripts/build-kernel.sh
# for this checkout's configuration.
resolve_kdir() {
	if [ -n "${KDIR:-}" ]; then echo "$KDIR"; return; fi
	local cfg f d
	cfg=$(kernel_cfg_key) || die "cannot compute the kernel config key (is the toolchain installed? scripts/setup-toolchain.sh)"
	f=$(kernel_dir_file "$cfg")
	if [ -f "$f" ]; then
		d=$(cat "$f")
		[ -f "$d/.rsiw-built" ] && { echo "$d"; return; }
	fi
	# A build made by older scripts, which kept only the last pointer: good
	# if its config key (the end of its name) is this checkout's.
	f=$(kernel_last_file)
	if [ -f "$f" ]; then
		d=$(cat "$f")
		case "$d" in
		*-"$cfg") [ -f "$d/.rsiw-built" ] && { echo "$d"; return; } ;;
		esac
	fi
	die "no test kernel for this configuration yet: run scripts/build-kernel.sh (or set KDIR)"
}

# console_oops CONSOLE PREFIX: why a guest stopped, each line after
# PREFIX: its console from the first oops, BUG, WARNING, panic, lockup,
# hung task, RCU stall or QEMU message (40 lines), else the console's last
# 15 lines.
console_oops() {
	local n
	[ -f "$1" ] || return 0
	n=$(grep -anE 'Oops|BUG:|kernel BUG|WARNING:|Kernel panic|general protection|watchdog: |blocked for more than|detected stalls|qemu-system' "$1" | head -1 | cut -d: -f1)
	if [ -n "$n" ]; then
		sed -n "$n,$((n + 40))p" "$1"
	else
		tail -n 15 "$1"
	fi | sed "s|^|$2|"
}

# guest_prepare OUT KDIR TIMEOUT COMMAND...: the files a guest's init
# (scripts/vm-init.sh) reads from its output directory OUT, for
# scripts/vm-run.sh and scripts/uml-run.sh alike, after removing an
# earlier run's results and binds: "shares", the paths the
# guest needs at the same paths as here (the caller's array shares, plus
# the checkout, the working directory, KDIR and its kernel source, unless
# KDIR is empty), each with its symlinks resolved first, then as given;
# "host-path"; "cmd.sh",
# COMMAND with its working directory and environment; "guest-timeout",
# the command's limit (TIMEOUT less 30 s for the guest to end cleanly).
guest_prepare() {
	local out=$1 kdir=$2 timeout_s=$3 src p phys=() logical=()
	shift 3
	rm -f "$out/status" "$out/output.log" "$out/dmesg.txt" "$out/console.log" "$out/binds"
	shares+=("$RSIW_ROOT" "$PWD")
	# No KDIR: another kernel booted without a test kernel built.
	[ -z "$kdir" ] || shares+=("$kdir")
	# The kernel source (kunit.py for scripts/kunit-check.sh in the guest).
	src=""
	[ -z "$kdir" ] || src=$(readlink -f "$kdir/source" 2>/dev/null || true)
	[ -z "$src" ] || [ ! -d "$src" ] || shares+=("$src")
	for p in "${shares[@]}"; do
		[ -e "$p" ] || die "--share $p: no such file or directory"
		case "$p" in /*) ;; *) p=$PWD/$p ;; esac
		case "$p" in *$'\n'*) die "a path with a newline cannot be shared: $p" ;; esac
		[ "$p" = / ] || p=${p%/}
		logical+=("$p")
		phys+=("$(readlink -f "$p")")
	done
	{
		printf '%s\n' "${phys[@]}" | LC_ALL=C sort -u
		printf '%s\n' "${logical[@]}" | LC_ALL=C sort -u
	} | awk '!seen[$0]++' >"$out/shares"
	echo "$out" >"$out/host-path"
	{
		echo "cd $(printf %q "$PWD")"
		echo "export RSIW_VM_OUT=/tmp/out KDIR=$(printf %q "$kdir")"
		echo "export RSIW_ROOT=$(printf %q "$RSIW_ROOT")"
		printf '%q ' "$@"
		echo
	} >"$out/cmd.sh"
	echo $((timeout_s - 30)) >"$out/guest-timeout"
}

# guest_out_dir OUT PREFIX: OUT made absolute (created), or a new
# $RSIW_CACHE/vm/PREFIX.XXXXXX when OUT is empty.
guest_out_dir() {
	local out=$1
	if [ -z "$out" ]; then
		mkdir -p "$RSIW_CACHE/vm"
		out=$(mktemp -d "$RSIW_CACHE/vm/$2.XXXXXX")
	fi
	mkdir -p "$out"
	(cd "$out" && pwd)
}

# guest_boot OUT TIMEOUT QUIET WHAT COMMAND...: runs COMMAND (a guest:
# QEMU, or a UML kernel) for at most TIMEOUT seconds, its console in
# OUT/console.log (and on the terminal unless QUIET is 1), and returns
# what the guest's command exited with (OUT/status), 124 if the guest hit
# the limit, 125 if it never ran the command. WHAT names the guest in the
# log lines.
guest_boot() {
	local out=$1 timeout_s=$2 quiet=$3 what=$4 start grc rc elapsed
	shift 4
	start=$(date +%s)
	if [ "$quiet" = 1 ]; then
		timeout --kill-after=10 "$timeout_s" "$@" </dev/null >"$out/console.log" 2>&1
		grc=$?
	else
		timeout --kill-after=10 "$timeout_s" "$@" </dev/null 2>&1 | tee "$out/console.log"
		grc=${PIPESTATUS[0]}
	fi
	elapsed=$(($(date +%s) - start))
	if [ -f "$out/status" ]; then
		rc=$(cat "$out/status")
		log "guest command exited with $rc after ${elapsed}s"
	elif [ "$grc" = 124 ] || [ "$grc" = 137 ]; then
		rc=124
		log "timeout: the $what did not finish within ${timeout_s}s"
	else
		rc=125
		log "the guest did not run the command ($what exit $grc); see $out/console.log"
	fi
	return "$rc"
}
