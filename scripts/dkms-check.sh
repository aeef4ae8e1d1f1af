#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Can rsiw.ko be built for the kernel whose build directory is KDIR?
# dkms.conf's PRE_BUILD; also useful by hand before `make KDIR=...`:
#
#   scripts/dkms-check.sh /lib/modules/$(uname -r)/build
#
# Exit status 0 when it can; otherwise 1, with one line per missing piece
# saying what it is and what to do.
#   LLVM=-NN    the LLVM suffix the build will use (default -19, as the Makefile)
#   RSIW_KERNEL_ANY=1  a kernel other than Linux 7.3 is a note, not a refusal
set -u
kdir=${1:-/lib/modules/$(uname -r)/build}
llvm=${LLVM:--19}
bad=0
say() { echo "rsiw dkms-check: $*" >&2; }
miss() { say "cannot build for $kdir: $*"; bad=1; }

if [ ! -d "$kdir" ]; then
	miss "no such directory (install the kernel's headers or build tree)"
	exit 1
fi
cfg=""
for f in "$kdir/include/config/auto.conf" "$kdir/.config"; do
	[ -r "$f" ] && { cfg=$f; break; }
done
if [ -z "$cfg" ]; then
	miss "no kernel configuration (include/config/auto.conf or .config): not a kernel build directory"
	exit 1
fi
conf() { sed -n "s/^$1=//p" "$cfg" | tr -d '"' | head -1; }

release=$(cat "$kdir/include/config/kernel.release" 2>/dev/null)
say "kernel ${release:-(unknown release)} at $kdir ($cfg)"

if [ "$(conf CONFIG_RUST)" != y ]; then
	miss "the kernel has no Rust support (CONFIG_RUST is not y): rsiw is a Rust module; use a kernel built with CONFIG_RUST=y, or rsiw's test kernel in a VM (scripts/rsiw-vm.sh)"
	exit 1
fi
# The kernel crate's API changes from one release to the next: rsiw is
# built and tested against Linux 7.3 (any 7.3.y, a distribution's too).
case "$release" in
7.3 | 7.3.* | 7.3-* | 7.3+*) ;;
"") say "note: the kernel's release is unknown (no include/config/kernel.release); rsiw is for Linux 7.3" ;;
*)
	if [ "${RSIW_KERNEL_ANY:-0}" = 1 ]; then
		say "note: Linux $release, not 7.3: trying anyway (RSIW_KERNEL_ANY=1)"
	else
		miss "rsiw is for Linux 7.3 and this kernel is $release: the kernel crate's API differs between releases (RSIW_KERNEL_ANY=1 tries anyway)"
	fi
	;;
esac
case "$(conf CONFIG_INFINIBAND)" in
y | m) ;;
*) miss "the kernel has no RDMA core (CONFIG_INFINIBAND)" ;;
esac

# The Rust build files: what a module crate compiles against (the kernel's
# crates' metadata and its proc macros). Headers packages often leave them out.
missing=""
# On x86, rustc also takes the kernel's target specification.
rust_files="rust/libcore.rmeta rust/libcompiler_builtins.rmeta rust/libkernel.rmeta
	rust/libffi.rmeta rust/libmacros.so rust/libpin_init.rmeta"
[ "$(conf CONFIG_X86)" != y ] || rust_files="$rust_files scripts/target.json"
for f in $rust_files; do
	[ -e "$kdir/$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
	miss "the build directory lacks the kernel's Rust build files:$missing (out-of-tree Rust modules need them: use the kernel's full build tree, or headers that ship rust/*.rmeta and rust/libmacros.so; for Debian's kernel, scripts/debian-kernel.sh makes them)"
fi

[ -e "$kdir/Module.symvers" ] ||
	miss "no Module.symvers: the kernel's modules were not built there (an unfinished build, or headers without it)"

# Same compilers as the kernel: rustc exactly, and for the C parts the
# kernel's own: clang by major version (rsiw's bindings are generated with
# the kernel's clang flags), or the GCC it names (a GCC-built kernel, as
# Debian's: the C files with that GCC, the bindings through libclang with
# the flags only GCC knows left out, Kbuild).
want_rustc=$(conf CONFIG_RUSTC_VERSION_TEXT)
have_rustc=$(rustc --version 2>/dev/null)
if [ -z "$have_rustc" ]; then
	miss "no rustc on PATH (the kernel was built with: $want_rustc)"
elif [ -n "$want_rustc" ] && [ "$have_rustc" != "$want_rustc" ]; then
	miss "rustc is '$have_rustc', the kernel was built with '$want_rustc' (crate metadata only works with the same compiler)"
fi
if ! command -v bindgen >/dev/null 2>&1; then
	miss "no bindgen on PATH (cargo install bindgen-cli)"
else
	want_bindgen=$(conf CONFIG_BINDGEN_VERSION_TEXT)
	have_bindgen=$(bindgen --version 2>/dev/null)
	[ -z "$want_bindgen" ] || [ "$have_bindgen" = "$want_bindgen" ] ||
		say "note: bindgen is '$have_bindgen', the kernel's bindings were made by '$want_bindgen'"
fi
if [ "$(conf CONFIG_CC_IS_CLANG)" = y ]; then
	want_clang=$(($(conf CONFIG_CLANG_VERSION) / 10000))
	case "$llvm" in
	-*) clang=clang$llvm ;;
	*) clang=clang ;;
	esac
	have_clang=$("$clang" -dumpversion 2>/dev/null | cut -d. -f1)
	if [ -z "$have_clang" ]; then
		miss "no $clang (LLVM=$llvm); the kernel was built with clang $want_clang (set LLVM=-$want_clang)"
	elif [ "$have_clang" != "$want_clang" ]; then
		miss "$clang is clang $have_clang, the kernel was built with clang $want_clang (set LLVM=-$want_clang)"
	fi
	compiler="clang $want_clang"
elif [ "$(conf CONFIG_CC_IS_GCC)" = y ]; then
	want_cc=$(conf CONFIG_CC_VERSION_TEXT)
	cc=${want_cc%% *}
	have_cc=$("$cc" --version 2>/dev/null | head -1)
	if [ -z "$have_cc" ]; then
		miss "no $cc: the kernel was built with '$want_cc'"
	elif [ "$have_cc" != "$want_cc" ]; then
		say "note: $cc is '$have_cc', the kernel was built with '$want_cc'"
	fi
	compiler=$have_cc
else
	miss "the kernel was built with neither clang nor GCC (CONFIG_CC_IS_CLANG, CONFIG_CC_IS_GCC)"
fi

if [ $bad = 0 ]; then
	say "ok: CONFIG_RUST=y, Rust build files present, $have_rustc, $compiler"
fi
exit $bad
