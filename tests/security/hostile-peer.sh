#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A hostile peer against an unprivileged process's QP: tests/progs/
# hostile-peer.py (plain TCP from namespace n2, MPA and crafted FPDUs)
# against tests/progs/rsiw-hostile-target (an rdma_cm listener on rsiw0 in
# namespace n1, run as nobody). The peer stalls a Write FPDU, or a Read
# Response by not reading, while the target deregisters the MR it names
# and registers another at the same STag: a read-only mmap of a root-owned
# file (case a) or a writable buffer of 0x5E (b, c). The test module's
# kunit_stag_reuse=1 hands the STag out again at once (lowest free index,
# key 0) in place of 2^24 registrations. The file and the buffer must stay
# as they were and no 0x5E may reach the wire; the edge cases (d) check
# the Terminate each length/offset field at its edge gets. dmesg clean.
#
#   hostile-peer.sh [CASES]   (default a,b,c,d)
set -u
. "$(dirname "$0")/../common/lib.sh"
. "$(dirname "$0")/../common/stress-lib.sh"

cases=${1:-a,b,c,d}
port=7600
ro=/tmp/hostile-ro
target="$RSIW_ROOT/tests/progs/rsiw-hostile-target"

dmesg -C
check "rsiw-hostile-target is built (make -C tests/progs)" [ -x "$target" ]
# (Its parameters have no sysfs file: ask the .ko. Without the parameter
# insmod ignores it, and cases a-c fail their setup check.)
check "rsiw.ko has kunit_stag_reuse (the test module, make test)" \
	bash -c "modinfo -p '$RSIW_ROOT/rsiw.ko' | grep -q '^kunit_stag_reuse:'"
setup "insmod rsiw.ko kunit_stag_reuse=1" insmod "$RSIW_ROOT/rsiw.ko" kunit_stag_reuse=1
setup "namespaces n1 and n2" stress_namespaces
setup "veth hp1 (n1) <-> hp2 (n2)" veth_pair hp1 hp2 10.97.3
setup "rdma link add rsiw0 on hp1" in1 rdma link add rsiw0 type rsiw netdev hp1
check "rsiw0 port ACTIVE" wait_for 10 port_active rsiw0

# A file nobody may read but not write: 4 KiB of text, root's, 0644.
mkfile() {
	local i
	for i in $(seq 0 63); do printf 'root-owned line %02d: never written by a peer.....\n' $i; done | head -c 4096 >$ro &&
		chown root:root $ro && chmod 0644 $ro && cp $ro $OUT/hostile-ro.saved
}
check "read-only file $ro (root, 0644)" mkfile
check "nobody can read $ro and not write it" \
	setpriv --reuid=65534 --regid=65534 --clear-groups bash -c "cat $ro >/dev/null && ! echo x 2>/dev/null >>$ro"

# The target runs as nobody in n1, the peer as root in n2. Pinning: A and
# the buffer that replaces it, 4 MiB each (rlimits survive setpriv).
ulimit -l $((64 * 1024))
in2 timeout 1500 python3 "$RSIW_ROOT/tests/peers/hostile-peer.py" --cases "$cases" --ro-file $ro \
	10.97.3.1 $port \
	ip netns exec n1 setpriv --reuid=65534 --regid=65534 --clear-groups \
	env RDMAV_DRIVERS="$RDMAV_DRIVERS" "$target" \
	>"$OUT/hostile-peer.txt" 2>&1
rc=$?
# The peer's own ok / not ok lines count as this script's.
while IFS= read -r l; do
	case $l in
	"ok - "*) pass "${l#ok - }" ;;
	"not ok - "*) fail "${l#not ok - }" ;;
	*" passed, "*" failed") echo "# hostile-peer.py: $l" ;;
	*) echo "# ${l#\# }" ;;
	esac
done <"$OUT/hostile-peer.txt"
expect_eq "hostile-peer.py exits 0" 0 $rc
# (The guest's /tmp is tmpfs: its page cache is the file.)
check "the file is still what root wrote" cmp -s $ro "$OUT/hostile-ro.saved"
rdma statistic show link rsiw0/1 | sed 's/^/# /'
check "no RDMA object left" wait_for 30 bash -c '! rdma resource show | grep -qE "(qp|cq|pd|mr|cm_id|ctx) [1-9]"'
check "rdma link delete rsiw0" rdma link delete rsiw0
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
