#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's own test suite against rsiw (through its provider) and
# against Linux siw in the same boot: rsiw0 on one end of a veth pair,
# siw0 on the other. Each test has a timeout (tests/userspace/
# rdmacore-run.py, which also gives the suite the device's IP where it
# cannot find it and changes none of its tests). Prints both results side
# by side and checks that rsiw passes every test siw passes, save the
# exceptions listed below with their reasons (Documentation/usage.md).
#
#   tests/userspace/rdmacore.sh
#       the suite as Debian's python3-pyverbs ships it (rdma-core 44:
#       /usr/share/doc/rdma-core/tests; nothing of it is in this
#       repository), Debian's libibverbs, rsiw's out-of-tree provider
#       (RDMAV_DRIVERS) and Debian's siw provider.
#   tests/userspace/rdmacore.sh VERSION
#       the suite of a private rdma-core VERSION (59:
#       scripts/build-rdma-core.sh 59 builds pyverbs and installs the
#       tests/ of its tree) with that prefix's pyverbs (PYTHONPATH) and
#       libibverbs (LD_LIBRARY_PATH), which finds rsiw's provider built in
#       its tree and siw's through its own etc/libibverbs.d (no
#       RDMAV_DRIVERS).
set -u
. "$(dirname "$0")/../common/lib.sh"

v=${1:-}
PER_TEST=${RSIW_RDMACORE_TIMEOUT:-60}
a=10.98.0.1
b=10.98.0.2

# Tests siw passes that rsiw is not expected to, and why (none today).
declare -A EXCEPT=()
# The suite's tests that error on rsiw, each with its reason
# (Documentation/usage.md): they need what no iWARP device offers. Any
# other error, failure or timeout on rsiw fails this script. Each still
# erring is a "skip - " line (not run to a verdict on rsiw), never a pass.
declare -A KNOWN=()
rts="brings two QPs to RTS with ibv_modify_qp (RTR with a path and a PSN): an iWARP connection comes only from rdma_cm, so the modify fails with EINVAL"

if [ -z "$v" ]; then
	export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
	suite=/usr/share/doc/rdma-core/tests
	py_env=(env)
	# The suite finds no netdev for a soft RNIC: the wrapper gives it.
	net_rsiw=rsiwc0 net_siw=rsiwc1
	what="Debian's rdma-core 44"
	# More than 200: Debian 12's suite has 273 tests; far fewer means it
	# did not load most of its modules.
	MIN_TESTS=200
	# RSIW_FLOOR: rsiw passes at least this many of the suite's tests. It
	# passes 32 of 273 in every run of this suite (Debian 12's rdma-core
	# 44): the 29 siw passes too, and test_create_cq_ex_bad_flow,
	# test_create_rc_qp_ex_with_attr and test_query_rc_qp, which siw skips
	# for want of create_cq_ex/create_qp_ex. The suite draws a QP's create
	# mask at random, which moves siw's count by one between runs but not
	# rsiw's (it has create_qp_ex). Fewer means a test rsiw passed now
	# skips (the errors are caught one by one below).
	RSIW_FLOOR=32
	for t in test_atomic.AtomicTest.test_atomic_{cmp_and_swap,fetch_and_add,invalid_lkey,invalid_mr_access,invalid_qp_access,invalid_rkey,non_aligned_addr} \
		test_qpex.QpExTestCase.test_qp_ex_rc_{atomic_cmp_swp,atomic_fetch_add,rdma_read,rdma_read_zero_size,rdma_write,rdma_write_imm,rdma_write_zero_length,send} \
		test_cqex.CqExTestCase.test_rc_traffic_cq_ex \
		test_cq_events.CqEventsTestCase.test_cq_events_rc \
		test_relaxed_ordering.RoTestCase.test_ro_rc_traffic \
		test_mr.MRTest.test_mr_rereg_{access,access_bad_flow,addr,pd}; do
		KNOWN[tests.$t]=$rts
	done
	KNOWN[tests.test_rdmacm.CMTestCase.test_rdmacm_async_udp_traffic]="needs a UD QP (RDMA_PS_UDP): iWARP has only RC"
else
	rdma_core_find "$v" || echo "# $RC_WHY"
	setup "rdma-core $v with rsiw's provider in its tree" test -z "$RC_WHY"
	suite=$RC/share/doc/rdma-core/tests
	setup "rdma-core $v's test suite and pyverbs in $RC (scripts/build-rdma-core.sh $v)" \
		test -f "$suite/run_tests.py" -a -d "$RC/lib/python3/dist-packages/pyverbs"
	unset RDMAV_DRIVERS
	py_env=(env PYTHONPATH="$RC/lib/python3/dist-packages" LD_LIBRARY_PATH="$RC/lib")
	# The suite finds the netdev itself (rdma link show).
	net_rsiw=- net_siw=-
	what="rdma-core $v"
	# rdma-core 59's suite has 327 tests.
	MIN_TESTS=300
	# rsiw passes 33 of 327 in every run: the 30 siw passes too, and
	# test_create_cq_ex_bad_flow, test_create_rc_qp_ex_with_attr and
	# test_create_rc_qp_ex_no_attr, which siw skips for want of
	# create_cq_ex/create_qp_ex (the last of them it passes in some runs:
	# the suite's random QP create mask, as in 44's).
	RSIW_FLOOR=33
	# Skipped on siw (no atomics, no create_qp_ex/create_cq_ex, no Flush
	# access flags on an MR), then, and on both: RC traffic without rdma_cm.
	for t in test_atomic.AtomicTest.test_atomic_{cmp_and_swap,fetch_and_add,invalid_lkey,invalid_mr_access,invalid_qp_access,invalid_rkey,non_aligned_addr} \
		test_qpex.QpExTestCase.test_qp_ex_rc_{atomic_cmp_swp,atomic_fetch_add,flush,flush_type_violate,rdma_read,rdma_read_zero_size,rdma_write,rdma_write_imm,rdma_write_zero_size,send} \
		test_cqex.CqExTestCase.test_rc_traffic_cq_ex \
		test_cq_events.CqEventsTestCase.test_cq_events_rc \
		test_relaxed_ordering.RoTestCase.test_ro_rc_traffic \
		test_qp.RCQPTest.test_modify_rc_qp_rd_atomic \
		test_srq.SrqTestCase.test_{modify_srq_limit,rc_srq_traffic,resize_srq} \
		test_mr.MRTest.test_mr_rereg_{access,access_bad_flow,addr,atomic,pd}; do
		KNOWN[tests.$t]=$rts
	done
fi
# Both suites' rdma_cm tests that need what iWARP's CM does not do.
KNOWN[tests.test_rdmacm.CMTestCase.test_rdmacm_async_traffic]="sets RDMA_OPTION_ID_ACK_TIMEOUT and expects ibv_query_qp to return it: an InfiniBand attribute iWARP has no use for (TCP retransmits)"
KNOWN[tests.test_rdmacm.CMTestCase.test_rdmacm_async_traffic_external_qp]="expects RDMA_CM_EVENT_CONNECT_RESPONSE, which the iWARP CM does not raise (it raises ESTABLISHED)"

tdir=$(mktemp -d)
cp -r "$suite" "$tdir/"
gunzip -f "$tdir"/tests/*.gz 2>/dev/null
echo "# the suite: $what, $suite"

ip link add rsiwc0 type veth peer name rsiwc1
for c in rsiwc0 rsiwc1; do
	sysctl -qw net.ipv6.conf.$c.disable_ipv6=1
done
ip addr add $a/24 dev rsiwc0
ip addr add $b/24 dev rsiwc1
ip link set rsiwc0 up
ip link set rsiwc1 up
for c in all rsiwc0 rsiwc1; do
	sysctl -qw net.ipv4.conf.$c.accept_local=1 net.ipv4.conf.$c.rp_filter=0
done

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 on rsiwc0" rdma link add rsiw0 type rsiw netdev rsiwc0
# siw is the baseline: without it rsiw's run still counts (the floor).
siw_up=0
if modprobe siw && rdma link add siw0 type siw netdev rsiwc1; then
	siw_up=1
	echo "# setup: modprobe siw, rdma link add siw0 on rsiwc1"
else
	base_fail "setup: modprobe siw, rdma link add siw0 on rsiwc1 (rsiw's results alone below)"
fi

# run DEV NETDEV: the suite on DEV, its RESULT lines in $OUT/rdmacore-DEV.txt.
# 500 s: one run takes about a minute on the lean kernel; every test has
# its own PER_TEST bound besides. Both scale with TF. Two runs and the
# boot stay within the guest's time limit (tests/userspace/003, 005), so a
# run cut short still leaves the lines below to say which tests did not end.
run() {
	(cd "$tdir" && timeout $((500 * TF)) "${py_env[@]}" /usr/bin/python3 "$RSIW_ROOT/tests/userspace/rdmacore-run.py" \
		"$tdir/tests" "$2" $((PER_TEST * TF)) --dev "$1" --gid 0 \
		>"$OUT/rdmacore-$1.txt" 2>"$OUT/rdmacore-$1.log")
	echo "# rdma-core suite on $1: exit $?, $(grep -c '^RESULT ' "$OUT/rdmacore-$1.txt") results"
	sed -n 's/^\(PYVERBS\|LIBIBVERBS\) /# \1 on '"$1"': /p' "$OUT/rdmacore-$1.txt"
}
if [ "$siw_up" = 1 ]; then
	run siw0 "$net_siw"
	check_base "the suite ran to its end on siw0" grep -q '^DONE ' "$OUT/rdmacore-siw0.txt"
else
	: >"$OUT/rdmacore-siw0.txt"
fi
run rsiw0 "$net_rsiw"
if [ -n "$v" ]; then
	# The prefix's pyverbs and libibverbs, not Debian's.
	expect_eq "the suite ran with rdma-core $v's pyverbs" "$RC/lib/python3/dist-packages/pyverbs" \
		"$(sed -n 's/^PYVERBS //p' "$OUT/rdmacore-rsiw0.txt")"
	check "the suite ran with rdma-core $v's libibverbs" \
		grep -q "^LIBIBVERBS $RC/lib/libibverbs.so" "$OUT/rdmacore-rsiw0.txt"
fi
check "the suite ran to its end on rsiw0 ($(sed -n 's/^DONE //p' "$OUT/rdmacore-rsiw0.txt") tests)" \
	grep -q '^DONE ' "$OUT/rdmacore-rsiw0.txt"

# Both results per test, "TEST SIW RSIW" (a test one run lacks: none).
r=$OUT/rdmacore-rsiw0.txt s=$OUT/rdmacore-siw0.txt both=$OUT/rdmacore-both.txt
awk 'FNR == 1 { f++ } $1 == "RESULT" { st[f, $2] = $3; id[$2] = 1 }
     END { for (t in id) print t, ((1, t) in st ? st[1, t] : "none"), ((2, t) in st ? st[2, t] : "none") }' \
	"$s" "$r" | sort >"$both"

for dev in siw0 rsiw0; do
	echo "# $dev: $(grep '^RESULT ' "$OUT/rdmacore-$dev.txt" | awk '{print $3}' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')"
done
echo "# side by side (tests not skipped on both): siw | rsiw"
awk '!($2 == "skip" && $3 == "skip") { sub(/^tests\./, "", $1); printf "#   %-7s | %-7s %s\n", $2, $3, $1 }' "$both"

if [ "$siw_up" = 1 ]; then
	expect_eq_base "the suite ran the same tests on siw0 and rsiw0" 0 "$(awk '$2 == "none" || $3 == "none"' "$both" | wc -l)"
fi
check "the suite ran on rsiw0 (more than $MIN_TESTS tests)" test "$(grep -c '^RESULT ' "$r")" -gt "$MIN_TESTS"
nok=0
nskip=0
while read -r id sst rst; do
	t=${id#tests.}
	[ "$rst" = ok ] && nok=$((nok + 1))
	if [ "$sst" = ok ]; then
		base_pass "siw passes $t"
		if [ -n "${EXCEPT[$id]:-}" ]; then
			skip "rsiw $t: siw passes, rsiw $rst: ${EXCEPT[$id]}"
		else
			expect_eq "rsiw passes $t (siw does)" ok "$rst"
		fi
		continue
	fi
	case $rst in
	ok) pass "rsiw passes $t (siw: $sst)" ;;
	skip) nskip=$((nskip + 1)) ;;
	none) ;;
	*)
		# Known as an error (an exception in the test), not as a
		# failed assertion or a hang.
		if [ "$rst" = error ] && [ -n "${KNOWN[$id]:-}" ]; then
			skip "rsiw $t: $rst, as known: ${KNOWN[$id]}"
		else
			fail "rsiw $t: $rst, not a known error ($(grep "^RESULT $id " "$r" | cut -d' ' -f4- | cut -c1-200))"
		fi
		;;
	esac
done <"$both"
for id in "${!KNOWN[@]}"; do
	grep -q "^RESULT $id " "$r" || echo "# known error ${id#tests.}: not in this run of the suite"
	grep -q "^RESULT $id ok" "$r" && echo "# ${id#tests.} now passes on rsiw: drop it from KNOWN"
done
echo "# rsiw0: $nskip tests skipped by the suite itself (another vendor's hardware, UD/UC/XRC/raw QPs, ODP, memory windows, device memory, ...)"
if [ "$nok" -ge "$RSIW_FLOOR" ]; then
	pass "rsiw passes $nok of the suite's tests (at least $RSIW_FLOOR)"
else
	fail "rsiw passes $nok of the suite's tests (expected at least $RSIW_FLOOR)"
fi

check "rdma link delete rsiw0" rdma link delete rsiw0
[ "$siw_up" = 0 ] || check_base "rdma link delete siw0" rdma link delete siw0
check "rmmod rsiw" rmmod rsiw
rm -rf "$tdir"
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses, leaks or user-space crashes"
finish
