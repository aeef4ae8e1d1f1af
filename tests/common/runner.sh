# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Helpers for the test files tests/GROUP/NNN, which tests/check sources and
# runs from the top of the tree. Source it; do not run it.
#
# In a test: $LOGS (out/test), $KDIR (the test kernel's build tree),
# $TEST_NAME (GROUP/NNN), $NAME (the test's short name), $RSIW_TIME_FACTOR
# (4 on the debug kernel). A test prints result lines in the convention of
# tests/common/results.sh on stdout; the runner counts them. Counts that
# are no such lines (cargo's, KUnit's) go through _record.

. "$RSIW_ROOT/tests/common/results.sh"

# _record CATEGORY PASSED FAILED: counts for the summary's CATEGORY line
# (host: cargo test's tests; kunit: KUnit cases).
_record() { echo "$1 $2 $3" >>"$TEST_COUNTS"; }

# _check DESC COMMAND...: "ok - DESC" when COMMAND succeeds, else "not ok - DESC".
_check() {
	local desc=$1
	shift
	if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; return 1; fi
}

# _tail FILE [N]: the last N (default 25) lines of FILE as information.
_tail() { tail -n "${2:-25}" "$1" 2>/dev/null | sed 's/^/# tail: /'; }

# --- rsiw's provider libraries (tests/build) ---

# _provider_pabi_only LIB NN: every private libibverbs symbol LIB uses is at
# IBVERBS_PRIVATE_NN (and there is one at least).
_provider_pabi_only() {
	local v
	v=$(objdump -T "$1" | grep -o 'IBVERBS_PRIVATE_[0-9]*' | sort -u) || return 1
	[ "$v" = "IBVERBS_PRIVATE_$2" ]
}

# _provider_dv_exports LIB: LIB's defined dynamic symbols are rsiwdv.h's three
# (and the version node), all at RSIW_1.0 (providers/rsiw/librsiw.map).
_provider_dv_exports() {
	local got
	got=$(objdump -T "$1" | awk '$2 == "g" && $4 != "*UND*" { print $(NF - 1), $NF }' | sort | paste -sd' ')
	[ "$got" = "RSIW_1.0 RSIW_1.0 RSIW_1.0 rsiwdv_post_masked_atomic RSIW_1.0 rsiwdv_query_qp RSIW_1.0 rsiwdv_sq_doorbell" ]
}

# --- requirements: each prints why it is not met and fails ---

# _require_cmd CMD...: the commands are on PATH.
_require_cmd() {
	local c
	for c; do
		command -v "$c" >/dev/null || { echo "no $c (scripts/setup-toolchain.sh installs it)"; return 1; }
	done
}

# _require_file FILE...: the files exist.
_require_file() {
	local f
	for f; do [ -e "$f" ] || { echo "$f not present"; return 1; }; done
}

# _require_kconfig CONFIG_X...: the test kernel has them (y or m).
_require_kconfig() {
	local c
	for c; do
		grep -qE "^$c=(y|m)" "$KDIR/.config" || { echo "the test kernel has no $c"; return 1; }
	done
}

# _vm_lane: where this test's guest runs: "uml" (the test kernel as
# User-Mode Linux, scripts/uml-run.sh) with RSIW_LANE=uml unless the test
# needs QEMU (LANE=qemu: pmem, an NVDIMM, the QEMU tool itself), else
# "qemu" (scripts/vm-run.sh). A test with LANE=uml runs only there.
_vm_lane() {
	case "${LANE:-any}" in
	qemu) echo qemu ;;
	uml) echo uml ;;
	*) if [ "${RSIW_LANE:-qemu}" = uml ]; then echo uml; else echo qemu; fi ;;
	esac
}

# _require_vm: a guest can boot: QEMU and the test kernel's image, or the
# UML kernel and rsiw.ko built for it on the UML lane.
_require_vm() {
	if [ "$(_vm_lane)" = uml ]; then
		[ "${RSIW_LANE:-qemu}" = uml ] || { echo "a test of the UML lane (RSIW_LANE=uml)"; return 1; }
		[ -x "${UML_KDIR:-}/linux" ] || { echo "no UML test kernel (RSIW_KERNEL_FLAVOUR=uml scripts/build-kernel.sh)"; return 1; }
		return 0
	fi
	_require_cmd qemu-system-x86_64 || return 1
	[ -f "$KDIR/arch/x86/boot/bzImage" ] || { echo "no test kernel image in $KDIR (scripts/build-kernel.sh)"; return 1; }
}

# --- VM tests ---

# _vm_test MEM CMDLINE SCRIPT [ARGS...]: boots the test kernel with MEM of
# memory and CMDLINE added to the kernel command line ("" for none), runs
# SCRIPT in it and prints the guest's result lines. The guest gets
# VM_TIMEOUT seconds (default 600; 4x on the debug kernel); VM_ARGS adds
# vm-run.sh options. On the lane _vm_lane says: scripts/vm-run.sh or
# scripts/uml-run.sh, with the same output. Output in $LOGS/vm-$NAME. A
# guest that did not run its script to the end (time limit, no boot, a
# non-zero status with no failed check) adds a failed check saying so.
_vm_test() {
	local mem=$1 append=$2 out="$LOGS/vm-$NAME" rc run=scripts/vm-run.sh
	shift 2
	[ "$(_vm_lane)" = uml ] && run=scripts/uml-run.sh
	echo "# lane: $(_vm_lane)"
	# shellcheck disable=SC2086 # VM_ARGS: extra vm-run.sh options, split
	RSIW_UML_KDIR=${UML_KDIR:-} "$run" --quiet --timeout $((${VM_TIMEOUT:-600} * RSIW_TIME_FACTOR)) --mem "$mem" \
		--append "$append" --out "$out" ${VM_ARGS:-} -- "$@"
	rc=$?
	_vm_results "$NAME" "$rc" "$out"
}

# _vm_results NAME STATUS OUTDIR: the result lines of the guest whose
# vm-run.sh output is OUTDIR and whose status was STATUS, and a failed
# check when it did not finish (or failed without saying what). Returns 1
# when a check of rsiw failed; a baseline's failure alone is not rsiw's.
_vm_results() {
	local name=$1 rc=$2 out=$3 nf=0 nall=0 bad=0
	if [ -f "$out/output.log" ]; then
		results_lines "$out/output.log"
		nall=$(grep -c '^not ok - ' "$out/output.log")
		nf=$(grep '^not ok - ' "$out/output.log" | grep -vc '^not ok - \[siw\] ')
	fi
	case "$rc" in
	0) ;;
	124) echo "not ok - $name: the VM did not finish within its time limit (log: $out)"; bad=1 ;;
	125) echo "not ok - $name: the guest did not run its command (log: $out/console.log)"; bad=1 ;;
	*) [ "$nall" -gt 0 ] || { echo "not ok - $name: the guest exited with status $rc and no failed check (log: $out)"; bad=1; } ;;
	esac
	if [ "$bad" = 1 ] || [ "$nf" -gt 0 ]; then
		_tail "$out/output.log" 15
		[ "$bad" = 1 ] && console_oops "$out/console.log" "# tail: console: "
		return 1
	fi
}

# _kunit_check DMESG [kunit-check.sh options]: the KUnit cases of a guest's
# dmesg (scripts/kunit-check.sh), recorded as KUnit's; skipped cases as
# skip lines, failed ones as information.
_kunit_check() {
	local dmesg=$1 log="$LOGS/kunit-$NAME.log" kp kf
	shift
	if [ ! -f "$dmesg" ]; then
		echo "# kunit: no $dmesg: the KUnit suites did not run"
		_record kunit 0 1
		return 1
	fi
	scripts/kunit-check.sh "$@" "$dmesg" >"$log" 2>&1
	kp=$(sed -n 's/^kunit: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log")
	kf=$(sed -n 's/^kunit: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$log")
	sed -n 's/^kunit: \(.*\): SKIP$/skip - KUnit \1: skipped by its suite (see out\/test\/kunit-'"$NAME"'.log)/p' "$log"
	grep -E '^kunit: .*(: [A-Z_]+| did not run| did not)$' "$log" | grep -v ': SKIP$' | sed 's/^/# /'
	echo "# kunit: ${kp:-0} passed, ${kf:-?} failed"
	_record kunit "${kp:-0}" "${kf:-1}"
	[ "${kf:-1}" = 0 ]
}

# _guest_quiet FILE...: rsiw-vm's guest side noted no kernel warning,
# oops, KASAN/UBSAN report or hang in its dmesg (tools/rsiw-vm/guest.sh).
_guest_quiet() {
	local f
	for f; do [ -f "$f" ] || return 1; done
	! grep -q 'note: the kernel logged warnings or errors' "$@"
}
