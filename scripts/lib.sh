# SPDX-License-Identifier: GPL-2.0
# Shared shell helpers for rsiw's scripts. Source it; do not run it.

RSIW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RSIW_CACHE=${RSIW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rsiw}
# The LLVM suffix the kernel and the module are built with (clang-19, ld.lld-19, ...).
RSIW_LLVM=${RSIW_LLVM:--19}
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm${RSIW_LLVM}/lib}
export PATH="$HOME/.cargo/bin:$PATH"

# Flavours of the test kernel: "lean" (default) and "debug" (KASAN, lockdep, kmemleak).
RSIW_KERNEL_FLAVOUR=${RSIW_KERNEL_FLAVOUR:-lean}

log() { printf '[rsiw %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Run a command as root, whether or not we already are.
as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# The kernel build directory for the current source, config fragments and
# toolchain. Printed by scripts/build-kernel.sh, which creates it.
kernel_dir_file() { echo "$RSIW_CACHE/kernel-$RSIW_KERNEL_FLAVOUR.path"; }

# KDIR: explicit, else the cached test kernel built by scripts/build-kernel.sh.
resolve_kdir() {
	if [ -n "${KDIR:-}" ]; then echo "$KDIR"; return; fi
	local f
	f=$(kernel_dir_file)
	[ -f "$f" ] || die "no test kernel yet: run scripts/build-kernel.sh (or set KDIR)"
	cat "$f"
}
