#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Hostile userspace: tests/progs/rsiw-uvfuzz, random
# sequences of user verbs and raw uverbs write() commands, run by an
# unprivileged user (nobody) against rsiw with several seeds: each on its
# own device, with rdma_cm connections between rsiw0 and rsiw1, two at
# once (each with a racer thread), one that exits with every object alive and one killed with
# SIGKILL. Then: every fuzzer exited 0 with its summary (no crash, no
# hang), each ran a real mix (objects created, WRs posted, raw commands
# accepted), the RDMA core's object counts are back to the baseline,
# unreclaimable slab within a tolerance, the devices still carry traffic
# (rping, rsiw-uverbs-check), rsiw unloads, dmesg clean.
#
#   uvfuzz.sh [SECONDS]   seconds per fuzzer run (default 20: about 4-6 min of
#                         TCG in all); RSIW_UVFUZZ_SECONDS the same
#   long form: uvfuzz.sh 600 (vm-run.sh --timeout 5400), or any SECONDS;
#   RSIW_UVFUZZ_SEEDS="1 2 3 4" picks the seeds (two or more; through
#   vm-run.sh: -- env RSIW_UVFUZZ_SEEDS="11 12 13 14" tests/security/uvfuzz.sh).
#
# rsiw0 on rsiwu0 (10.97.0.1) and rsiw1 on rsiwu1 (10.97.0.2), a veth
# pair in the initial namespace (a connection between the two local
# addresses runs over lo), as in userspace.sh.
set -u
. "$(dirname "$0")/../common/lib.sh"
. "$(dirname "$0")/../common/stress-lib.sh"

secs=${1:-${RSIW_UVFUZZ_SECONDS:-20}}
read -r -a seeds <<<"${RSIW_UVFUZZ_SEEDS:-1 2 3 4}"
a=10.97.0.1
b=10.97.0.2

# The fuzzer and the provider where nobody can read them (the checkout
# may be private to root).
bin=/tmp/uvfuzz
mkdir -p /tmp/cores
chmod 1777 /tmp/cores
setup "rsiw-uvfuzz and the provider where nobody can read them" nobody_bin $bin rsiw-uvfuzz
FUZZ=$bin/rsiw-uvfuzz
# A crash of the fuzzer leaves a core (and fails check_dmesg_clean).
ulimit -c unlimited
echo "/tmp/cores/core.%e.%p" >/proc/sys/kernel/core_pattern

# nobody COMMAND...: COMMAND as uid/gid 65534, no supplementary groups.
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

dmesg -C
local_rsiw_pair rsiwu0 $a rsiwu1 $b
check "ports ACTIVE" wait_for 10 bash -c 'grep -q ACTIVE /sys/class/infiniband/rsiw0/ports/1/state && grep -q ACTIVE /sys/class/infiniband/rsiw1/ports/1/state'

# What an unprivileged user gets: the uverbs and rdma_cm nodes are 0666.
ls -l /dev/infiniband/ | sed 's/^/# /'
check "every user may open /dev/infiniband/uverbs* and rdma_cm (0666)" \
	bash -c '! stat -c %a /dev/infiniband/uverbs* /dev/infiniband/rdma_cm | grep -vx 666'
check "nobody is not root" [ "$(nobody id -u)" = 65534 ]
echo "# nobody's limits: memlock $(nobody bash -c 'ulimit -l') kB, open files $(nobody bash -c 'ulimit -n')"

# fuzz NAME TIMEOUT ARGS...: a fuzzer run as nobody, its output in
# $OUT/uvfuzz-NAME.txt; sets rc.
fuzz() {
	local name=$1 t=$2
	shift 2
	timeout -s KILL "$t" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$FUZZ" "$@" >"$OUT/uvfuzz-$name.txt" 2>&1
	rc=$?
}

# judge NAME RC SECONDS: the checks of one finished run of SECONDS.
judge() {
	local name=$1 rc=$2 f="$OUT/uvfuzz-$1.txt" ops min=$((20 * $3))
	expect_eq "$name: the fuzzer exits 0 (no crash, no hang)" 0 "$rc"
	check "$name: it printed its summary and 'uvfuzz: done'" grep -q '^uvfuzz: done' "$f"
	grep -E '^uvfuzz: ' "$f" | sed "s/^/# $name: /"
	ops=$(sed -n 's/^uvfuzz: \([0-9]*\) ops in.*/\1/p' "$f")
	# At least 20 a second (runs on one device do ~3 000, with
	# connections ~270, under TCG).
	check "$name: at least $min operations ran (${ops:-0})" [ "${ops:-0}" -ge $min ]
	# A real mix: the verbs that set up the rest succeeded sometimes.
	local v
	for v in alloc_pd reg_mr create_cq create_qp modify_qp 'post_send(\(conn\))?' post_recv raw_write ring_scribble; do
		grep -qE "^op $v +[0-9]+:.* ok [1-9]" "$f" || fail "$name: some $v succeeded"
	done
}

res_back() { [ "$(res_counts)" = "$res0" ]; }
# kernel_clean: no new kernel warning since the last check (cheap; the
# kmemleak scan is check_dmesg_clean's at the end).
# An allocation failure report counts too: a user must not be able to
# make the kernel log one (rsiw's large rings are kvmalloc'ed).
kernel_clean() { ! dmesg | grep -qE "$KERNEL_TROUBLE|page allocation failure"; }

# Warm-up: a short run (first-use allocations are not leaks), then the
# baseline with no process holding anything.
fuzz warmup 120 -d rsiw1 -s 1000 -t 3 -n 100000000 -c $a,$b
expect_eq "warm-up: the fuzzer exits 0" 0 "$rc"
res0=$(res_counts)
sunr0=$(sunreclaim_settled)
echo "# baseline: $res0"
echo "# baseline: SUnreclaim $sunr0 kB"

t0=$(date +%s)
total=0
i=0
for s in "${seeds[@]}"; do
	# Even runs fuzz rsiw0 alone, odd ones rsiw1 with connections to rsiw0.
	if [ $((i % 2)) = 0 ]; then
		fuzz "seed$s" $((secs + 180)) -d rsiw0 -s "$s" -t "$secs" -n 100000000
	else
		fuzz "seed$s" $((secs + 180)) -d rsiw1 -s "$s" -t "$secs" -n 100000000 -c $a,$b
	fi
	judge "seed$s" $rc "$secs"
	if [ $((i % 2)) = 1 ]; then
		grep -qE '^op connect +[0-9]+:.* ok [1-9]' "$OUT/uvfuzz-seed$s.txt" ||
			fail "seed$s: some rdma_cm connection was established"
	fi
	check "seed$s: the kernel logged no warning" kernel_clean
	check "seed$s: RDMA objects back to the baseline" wait_for 30 res_back
	total=$((total + $(sed -n 's/^uvfuzz: \([0-9]*\) ops in.*/\1/p' "$OUT/uvfuzz-seed$s.txt")))
	i=$((i + 1))
done

# Two at once, one on each device (the second with connections), each
# with its racer thread (-r: raw commands on live handles racing the
# main thread's destroys).
s1=$((seeds[0] + 100)) s2=$((seeds[1] + 100))
timeout -s KILL $((secs + 180)) setpriv --reuid=65534 --regid=65534 --clear-groups -- \
	"$FUZZ" -d rsiw0 -s $s1 -t "$secs" -n 100000000 -r >"$OUT/uvfuzz-pair-$s1.txt" 2>&1 &
p1=$!
fuzz "pair-$s2" $((secs + 180)) -d rsiw1 -s $s2 -t "$secs" -n 100000000 -c $a,$b -r
rc2=$rc
wait $p1
rc1=$?
judge "pair-$s1" $rc1 "$secs"
judge "pair-$s2" $rc2 "$secs"
for p in $s1 $s2; do
	grep -E '^uvfuzz: racer' "$OUT/uvfuzz-pair-$p.txt" | sed "s/^/# pair-$p: /"
	check "pair-$p: its racer's raw commands ran, some succeeded" \
		grep -qE '^uvfuzz: racer: [1-9][0-9]* raw commands, [1-9][0-9]* succeeded' "$OUT/uvfuzz-pair-$p.txt"
done
check "pair: the kernel logged no warning" kernel_clean
check "pair: RDMA objects back to the baseline" wait_for 30 res_back

# Exit with every object alive (the kernel's cleanup on close), and a
# run killed with SIGKILL in the middle of whatever it was doing.
fuzz keep $((secs + 180)) -d rsiw1 -s 77 -t $((secs / 2 + 1)) -n 100000000 -c $a,$b -x
judge keep $rc $((secs / 2 + 1))
check "keep: it left its objects alive" grep -q '^uvfuzz: exiting with every object alive' "$OUT/uvfuzz-keep.txt"
check "keep: RDMA objects back to the baseline after its exit" wait_for 30 res_back
setpriv --reuid=65534 --regid=65534 --clear-groups -- \
	"$FUZZ" -d rsiw1 -s 78 -t 600 -n 100000000 -c $a,$b >"$OUT/uvfuzz-killed.txt" 2>&1 &
pk=$!
sleep $((secs / 2 + 2))
check "killed: the fuzzer was still running" kill -0 $pk
kill -KILL $pk
wait $pk 2>/dev/null
check "killed: RDMA objects back to the baseline after SIGKILL" wait_for 30 res_back
check "killed: the kernel logged no warning" kernel_clean
t1=$(date +%s)
echo "# uvfuzz: $total operations in the seeded runs, $((t1 - t0)) s in all"

res1=$(res_counts)
[ "$res1" = "$res0" ] || echo "# after: $res1"
sunr1=$(sunreclaim_settled)
echo "# SUnreclaim: $sunr0 kB at the baseline, $sunr1 kB after the runs ($((sunr1 - sunr0)) kB)"
# The runs create and destroy hundreds of thousands of objects; a leak
# of 100 bytes per object would pass this: a guard against runaway
# growth. On a debug kernel it is a skip line (lib.sh's slab_check).
slab_check "unreclaimable slab within 4 MiB of the baseline" [ $((sunr1 - sunr0)) -lt 4096 ]
check "no core dumped" bash -c '! ls /tmp/cores/core.* 2>/dev/null | grep -q .'

# The devices still work: rping (Sends, RDMA Read and Write, data
# verified) and the user verbs check.
export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
rping_verified $a $b 10 "rping afterwards"
to "$OUT/uverbs-check.txt" "$RSIW_ROOT/tests/progs/rsiw-uverbs-check" $a $b
check "rsiw-uverbs-check afterwards: every check passed" grep -qx PASSED "$OUT/uverbs-check.txt"

check "rdma link delete rsiw0" rdma link delete rsiw0
check "rdma link delete rsiw1" rdma link delete rsiw1
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses, leaks or user-space crashes"
finish
