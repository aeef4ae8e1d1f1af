#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The kernel's own gates and the host crates' lints, each an ok / not ok
# line, in a few minutes once the test kernel is built (it is built first
# if it is not cached: clippy and checkpatch need its tree):
#
#   rustfmt      every Rust file, with the kernel's .rustfmt.toml (the
#                copy at the top of this tree) - generated bindings aside
#   clippy       the module, production and test builds, with the
#                kernel's lint set (make CLIPPY=1); any warning fails
#   build        the module's build (C and Rust) without a warning
#   cargo        cargo clippy -D warnings on the host crates
#   checkpatch   the module's C and headers (checkpatch.pl --no-tree -f)
#   clang-format the provider, with rdma-core's .clang-format (from the
#                rdma-core 59 source scripts/build-rdma-core.sh unpacks)
#   shell        the scripts through shellcheck, at severity warning and
#                above (quoting and other style notes are not gated)
#
#   scripts/gates.sh [GATE...]      (default: all of them)
# Ends with "gates: N passed, N failed"; logs in out/gates/.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT" || exit 1

logs=$RSIW_ROOT/out/gates
rm -rf "$logs"
mkdir -p "$logs"
pass=0
fail=0
gates=("$@")
[ ${#gates[@]} -gt 0 ] || gates=(rustfmt clippy build cargo checkpatch clang-format shell)

result() { # result NAME STATUS LOG
	if [ "$2" = 0 ]; then
		echo "ok - $1"
		pass=$((pass + 1))
	else
		echo "not ok - $1 (log: $3)"
		grep -E '^(warning|error)|^Diff in|: (ERROR|WARNING):|: (warning|error):|-->' "$3" | head -20 | sed 's/^/#   /'
		fail=$((fail + 1))
	fi
}

# Tracked files of a kind, wherever the tree keeps them.
tracked() { git ls-files -- "$@"; }

need_tools() {
	need_debs shellcheck clang-format-19 perl >"$logs/packages.log" 2>&1 || return 1
	local c
	for c in clippy rustfmt; do
		rustup component list --installed 2>/dev/null | grep -q "^$c" ||
			rustup component add "$c" >>"$logs/packages.log" 2>&1 || return 1
	done
}

# need_kdir: the test kernel's build tree in $gate_kdir, looked up (or
# built) once for all the gates that need it; called in this shell, not
# in a command substitution, so the answer is kept.
need_kdir() {
	[ -n "${gate_kdir:-}" ] || gate_kdir=$(scripts/build-kernel.sh 2>"$logs/kernel.log")
}

gate_rustfmt() {
	tracked '*.rs' | grep -v generated | xargs rustfmt --check --config-path .rustfmt.toml >"$logs/rustfmt.log" 2>&1
}

# make CLIPPY=1 builds every crate file through clippy-driver with the
# kernel's lint flags and its .clippy.toml; a warning is a failure.
gate_clippy() {
	local k rc=0
	need_kdir || return 1
	k=$gate_kdir
	: >"$logs/clippy.log"
	make -s KDIR="$k" CLIPPY=1 modules >>"$logs/clippy.log" 2>&1 || rc=1
	make -s KDIR="$k" CLIPPY=1 test >>"$logs/clippy.log" 2>&1 || rc=1
	! grep -qE '^(warning|error)' "$logs/clippy.log" && [ $rc = 0 ]
}

gate_build() {
	local k
	need_kdir || return 1
	k=$gate_kdir
	make -s KDIR="$k" modules >"$logs/build.log" 2>&1 || return 1
	! grep -qiE '(^|: )warning' "$logs/build.log"
}

gate_cargo() {
	cargo clippy --workspace --all-targets -- -D warnings >"$logs/cargo.log" 2>&1
}

gate_checkpatch() {
	local k src
	need_kdir || return 1
	k=$gate_kdir
	src=$(realpath "$k/source" 2>/dev/null || echo "$k")
	[ -x "$src/scripts/checkpatch.pl" ] || { echo "no checkpatch.pl in $src" >"$logs/checkpatch.log"; return 1; }
	# shellcheck disable=SC2046 # one path a word
	"$src/scripts/checkpatch.pl" --no-tree --terse --show-types -f \
		$(tracked 'rust/*.c' 'include/*.h') >"$logs/checkpatch.log" 2>&1
}

gate_clang_format() {
	local src style
	src=$(scripts/build-rdma-core.sh --source 59 2>"$logs/rdma-core.log") || return 1
	style=$src/.clang-format
	[ -f "$style" ] || { echo "rdma-core's .clang-format not found in $src" >"$logs/clang-format.log"; return 1; }
	# shellcheck disable=SC2046 # one path a word
	clang-format-19 --style="file:$style" --dry-run -Werror \
		$(tracked 'providers/rsiw/*.c' 'providers/rsiw/*.h') >"$logs/clang-format.log" 2>&1
}

gate_shellcheck() {
	# shellcheck disable=SC2046 # one path a word
	shellcheck -S warning -x -f gcc $(tracked '*.sh' 'tests/check' 'tools/rsiw-vm/bin/*') >"$logs/shellcheck.log" 2>&1
}

need_tools || { result "gate tools installed (shellcheck, clang-format-19, clippy, rustfmt)" 1 "$logs/packages.log"; echo "gates: $pass passed, $fail failed"; exit 1; }
for g in "${gates[@]}"; do
	log "gate: $g"
	case $g in
	rustfmt) gate_rustfmt; result "rustfmt with the kernel's .rustfmt.toml" $? "$logs/rustfmt.log" ;;
	clippy) gate_clippy; result "make CLIPPY=1 (modules, test): the kernel's clippy lints, no warning" $? "$logs/clippy.log" ;;
	build) gate_build; result "module build without a warning" $? "$logs/build.log" ;;
	cargo) gate_cargo; result "cargo clippy on the host crates, -D warnings" $? "$logs/cargo.log" ;;
	checkpatch) gate_checkpatch; result "checkpatch on the module's C and headers" $? "$logs/checkpatch.log" ;;
	clang-format) gate_clang_format; result "rdma-core's clang-format on the provider" $? "$logs/clang-format.log" ;;
	shell) gate_shellcheck; result "shellcheck (severity warning) on the scripts" $? "$logs/shellcheck.log" ;;
	*) echo "not ok - unknown gate $g"; fail=$((fail + 1)) ;;
	esac
done
echo "gates: $pass passed, $fail failed"
[ "$fail" = 0 ]
