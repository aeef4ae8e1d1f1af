# SPDX-License-Identifier: GPL-2.0
# Helpers for guest-side test scripts (run inside scripts/vm-run.sh).
# Each check prints "ok - NAME" or "not ok - NAME"; `finish` prints the
# "N passed, N failed" line and sets the exit status.

RSIW_ROOT=${RSIW_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
OUT=${RSIW_VM_OUT:-/tmp}
passed=0
failed=0

pass() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "not ok - $*"; }

# check NAME COMMAND...: passes when COMMAND succeeds.
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; fi
}

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds.
wait_for() {
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}

# Fails on any kernel warning, bug, oops, leak report or hung task.
check_dmesg_clean() {
	local bad
	bad=$(dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|refcount_t:|kmemleak:|UBSAN:|KASAN:|hung_task|blocked for more than|rcu_sched self-detected|soft lockup' || true)
	if [ -z "$bad" ]; then pass "$1"; else fail "$1"; echo "$bad" | sed 's/^/#   /'; fi
}

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
}
