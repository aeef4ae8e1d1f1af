#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Recovery from a Terminate under NVMe-oF I/O takes seconds, not I/O
# timeouts: the test build's kunit_terminate_after_mib makes the first QP
# to receive that many MiB (the target's I/O queue, reading the host's
# write data) end its stream with a Terminate, once. Both QPs go to Error
# and every WR either end had posted completes at once (flushed), so
# nvme-rdma starts its error recovery from those completions and
# reconnects; the write that was under way completes, and the data reads
# back intact. Measured: the time from the Terminate to the reconnect.
#   nvmeof-terminate.sh [MIB]   (default 256)
set -u
. "$(dirname "$0")/../common/lib.sh"

mib=${1:-256}
at=32
ip=10.99.0.1
nqn=rsiw-terminate-nqn

# stamp PATTERN: the dmesg timestamp (seconds) of the first line matching PATTERN.
stamp() {
	dmesg | grep -m1 -E "$1" | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'
}

dmesg -C
# Reconnect a second after a failure (the default waits 10 s).
nvmeof_over_rsiw $nqn $ip kunit_terminate_after_mib=$at -- --reconnect-delay=1 --ctrl-loss-tmo=120
if [ -n "$dev" ]; then
	head -c $((mib << 20)) /dev/urandom >/tmp/pattern
	t0=$(date +%s.%N)
	check "write $mib MiB across the Terminate (direct I/O)" \
		dd if=/tmp/pattern of="$dev" bs=1M oflag=direct status=none
	echo "# the write took $(echo "$(date +%s.%N) - $t0" | bc -l | xargs printf '%.1f') s (TCG guest)"
	check "a Terminate was sent once" [ "$(dmesg | grep -c 'sending Terminate')" = 1 ]
	check "the controller reconnected" wait_for 60 bash -c "dmesg | grep -q 'Successfully reconnected'"
	term=$(stamp 'sending Terminate')
	rec=$(stamp 'starting error recovery')
	back=$(stamp 'Successfully reconnected')
	if [ -n "$term" ] && [ -n "$rec" ] && [ -n "$back" ]; then
		echo "# Terminate at ${term} s; error recovery $(echo "$rec - $term" | bc -l | xargs printf '%.2f') s later; reconnected $(echo "$back - $term" | bc -l | xargs printf '%.2f') s after the Terminate"
		# The recovery starts from the flushed completions, not from a
		# timeout: well within a second (TCG included).
		check "error recovery starts within 2 s of the Terminate" [ "$(echo "$rec - $term < 2" | bc -l)" = 1 ]
		# Reconnect delay 1 s, plus the reconnect itself under TCG; an
		# I/O timeout alone would be 30 s.
		check "reconnected within 15 s of the Terminate" [ "$(echo "$back - $term < 15" | bc -l)" = 1 ]
	else
		fail "the Terminate, the recovery and the reconnect are all in dmesg"
	fi
	check "no I/O timed out" bash -c "! dmesg | grep -qE 'nvme nvme[0-9]+: .*timeout'"
	check "data read back equals data written" \
		bash -c "dd if=$dev bs=1M count=$mib iflag=direct status=none | cmp -s - /tmp/pattern"
fi
dmesg >"$OUT/dmesg-terminate.txt"
nvmeof_down $nqn
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
