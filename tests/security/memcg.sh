#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Kernel memory of user objects is charged to the owner's memory cgroup:
# rsiw allocates its per-object memory (QP send and
# receive rings, the send-order ring, CQ rings, MR page lists, the QP and
# MR objects, a connected QP's engine and buffers) with
# GFP_KERNEL_ACCOUNT. An unprivileged process in a cgroup v2 with a small
# memory.max creates CQs of 65 536 entries (2 MiB each; max_cqe's 1 Mi
# would take half the default limit at once), QPs of max_qp_wr WRs and MRs
# in a loop (rsiw-uvfuzz --exhaust) until the limit stops it: a verb
# fails with ENOMEM or the cgroup's OOM killer ends it. Checks: it was
# stopped, the charge was visible while it grew (memory.stat "kernel"
# reached at least half the limit: without the accounting the objects
# would not count and the loop would run on into the whole machine's
# memory), the limit was hit (memory.events), no global OOM, the machine
# and the device still work, and once it is gone its charge and its RDMA
# objects are released.
#
#   memcg.sh [LIMIT]   memory.max (default 64M)
set -u
. "$(dirname "$0")/../common/lib.sh"
. "$(dirname "$0")/../common/stress-lib.sh"

limit=${1:-64M}
a=10.97.0.1
b=10.97.0.2
bin=/tmp/uvfuzz
setup "rsiw-uvfuzz and the provider where nobody can read them" nobody_bin $bin rsiw-uvfuzz

dmesg -C
local_rsiw_pair rsiwu0 $a rsiwu1 $b

# cgroup v2 with the memory controller (the guest mounts none itself).
cg=/sys/fs/cgroup
mountpoint -q $cg || mount -t cgroup2 none $cg
check "cgroup v2 mounted with the memory controller" grep -qw memory $cg/cgroup.controllers
echo +memory >$cg/cgroup.subtree_control
mkdir -p $cg/uvfuzz
check "memory.max of the test cgroup set to $limit" bash -c "echo $limit >$cg/uvfuzz/memory.max"
echo 0 >$cg/uvfuzz/memory.swap.max 2>/dev/null
max=$(cat $cg/uvfuzz/memory.max)
res0=$(res_counts)
avail0=$(meminfo_kb MemAvailable)
echo "# baseline: $res0; MemAvailable $avail0 kB; memory.max $max"

# memstat KEY: a memory.stat field of the test cgroup.
memstat() { awk -v k="$1" '$1 == k { print $2 }' $cg/uvfuzz/memory.stat; }
# memevent KEY: a memory.events field.
memevent() { awk -v k="$1" '$1 == k { print $2 }' $cg/uvfuzz/memory.events; }

# The exhausting process: nobody, in the cgroup, no memlock limit (MR
# pinning is not what is measured here), holding what it got 5 s.
ulimit -l unlimited
bash -c "echo \$\$ >$cg/uvfuzz/cgroup.procs && exec setpriv --reuid=65534 --regid=65534 --clear-groups -- \
	$bin/rsiw-uvfuzz --exhaust -d rsiw0 -C 65536 -w 5" >"$OUT/memcg-exhaust.txt" 2>&1 &
pid=$!
# Bounded: 240 s for the loop and the hold.
ended() { ! kill -0 $pid 2>/dev/null || grep -q '^exhaust: holding' "$OUT/memcg-exhaust.txt"; }
check "the exhausting process was stopped within 240 s" wait_for 240 ended
kern_hold=$(memstat kernel)
vm_hold=$(memstat vmalloc)
cur_hold=$(cat $cg/uvfuzz/memory.current)
check "the exhausting process ends within 60 s" wait_for 60 bash -c "! kill -0 $pid 2>/dev/null"
wait $pid
rc=$?
sed 's/^/# /' "$OUT/memcg-exhaust.txt" | tail -6
peak=$(cat $cg/uvfuzz/memory.peak 2>/dev/null || echo 0)
echo "# memory.events: $(tr '\n' ' ' <$cg/uvfuzz/memory.events)"
echo "# exit status $rc; while held: memory.current $cur_hold, kernel $kern_hold, vmalloc $vm_hold; memory.peak $peak"

# Stopped by the limit: a verb failed with ENOMEM (and it exited 0), or
# the cgroup's OOM killer killed it (SIGKILL, oom_kill counted).
if grep -q '^exhaust: stopped at .*(ENOMEM)' "$OUT/memcg-exhaust.txt"; then
	pass "stopped by a failing verb: $(sed -n 's/^exhaust: stopped at //p' "$OUT/memcg-exhaust.txt")"
	expect_eq "the exhausting process exits 0" 0 "$rc"
else
	expect_eq "stopped by the limit: killed by the cgroup's OOM killer (SIGKILL)" 137 "$rc"
	check "memory.events counts the OOM kill" [ "$(memevent oom_kill)" -ge 1 ]
fi
check "memory.events: the limit was hit" [ "$(memevent max)" -ge 1 ]
# The charge: the largest kernel figure it printed (or read while held).
kmax=$(sed -n 's/^exhaust: .* kernel \([0-9]*\).*/\1/p' "$OUT/memcg-exhaust.txt" | sort -n | tail -1)
[ "${kern_hold:-0}" -gt "${kmax:-0}" ] && kmax=$kern_hold
objs=$(sed -n 's/^exhaust: \([0-9]*\) CQs, \([0-9]*\) QPs.*/\2/p' "$OUT/memcg-exhaust.txt" | tail -1)
echo "# largest kernel charge seen: ${kmax:-0} bytes with ${objs:-0} QPs (and as many CQs and MRs)"
check "rsiw's objects were charged: kernel memory reached half of memory.max" [ "${kmax:-0}" -ge $((max / 2)) ]
check "memory.peak reached 90% of memory.max" [ "$peak" -ge $((max * 9 / 10)) ]
check "the objects were created before the limit stopped it (at least one QP)" [ "${objs:-0}" -ge 1 ]

# The machine: no global OOM, memory to spare, the device still works.
check "no global OOM kill (only the cgroup's)" bash -c "! dmesg | grep -q '^.*Out of memory: Killed'"
# The limit stops the process quietly: no allocation failure report.
check "no page allocation failure reported" bash -c "! dmesg | grep -q 'page allocation failure'"
avail1=$(meminfo_kb MemAvailable)
echo "# MemAvailable: $avail0 kB before, $avail1 kB after"
check "MemAvailable back within 32 MiB of the baseline" [ $((avail0 - avail1)) -lt 32768 ]
to "$OUT/uverbs-check.txt" env RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw" \
	"$RSIW_ROOT/tests/progs/rsiw-uverbs-check" $a $b
check "rsiw-uverbs-check afterwards: every check passed" grep -qx PASSED "$OUT/uverbs-check.txt"

# Released: the cgroup's charge and the RDMA objects.
res_back() { [ "$(res_counts)" = "$res0" ]; }
check "RDMA objects back to the baseline" wait_for 30 res_back
kern_low() { [ "$(memstat kernel)" -lt $((2 << 20)) ]; }
check "the cgroup's kernel charge falls under 2 MiB once the process is gone" wait_for 30 kern_low
echo "# after: memory.current $(cat $cg/uvfuzz/memory.current), kernel $(memstat kernel), vmalloc $(memstat vmalloc)"
check "the test cgroup can be removed" rmdir $cg/uvfuzz

# What a connection allocates after the verbs that made it: the active
# side's stream is attached from the CM's work item (a kernel thread),
# where __GFP_ACCOUNT would charge no one; rsiw charges it to the memory
# cgroup of the QP's creator. A process in a fresh cgroup holds N client
# connections (rsiw-storm hold, the server outside the cgroup): its
# cgroup's unreclaimable slab must cover their engines (8 KiB each,
# kmalloc-cg-8k) and TX buffers on top of the rest. Measured 2026-11-26:
# 18.0 KiB a connection; 8.8 KiB with the charge scope turned off (the
# engines and buffers charged to the work items' root cgroup instead).
nconn=32
mkdir -p $cg/conn
"$STORM" server -a $a -p 7590 >"$OUT/memcg-conn-server.txt" 2>&1 &
server=$!
check "connection server listens" wait_for 30 bash -c "ss -Hltn 'sport = :7590' | grep -q ."
slab0=$(awk '$1 == "slab_unreclaimable" { print $2 }' $cg/conn/memory.stat)
bash -c "echo \$\$ >$cg/conn/cgroup.procs && exec $STORM hold -a $a -b $b -p 7590 -n $nconn -c 4 -R 1 -w 10 -t 60" \
	>"$OUT/memcg-conn-hold.txt" 2>&1 &
hold=$!
check "$nconn connections up and one round on each" wait_for 120 grep -q '^# hold 1: traffic done' "$OUT/memcg-conn-hold.txt"
slab1=$(awk '$1 == "slab_unreclaimable" { print $2 }' $cg/conn/memory.stat)
per=$(( (slab1 - slab0) / nconn ))
echo "# cgroup of the connecting process: slab_unreclaimable $slab0 -> $slab1 bytes, $per a connection"
check "the active side's stream memory is charged to its creator's cgroup: >= 14 KiB of slab a connection ($per)" \
	[ "$per" -ge 14336 ]
wait $hold
expect_eq "the hold exits 0" 0 $?
kill -TERM $server 2>/dev/null
wait $server 2>/dev/null
conn_low() { [ "$(awk '$1 == "slab_unreclaimable" { print $2 }' $cg/conn/memory.stat)" -lt $((slab0 + nconn * 1024)) ]; }
check "the charge goes with the connections" wait_for 30 conn_low
check "the connection cgroup can be removed" wait_for 10 rmdir $cg/conn

check "rdma link delete rsiw0" rdma link delete rsiw0
check "rdma link delete rsiw1" rdma link delete rsiw1
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
# The cgroup's OOM report (when it came to that) is expected.
check_dmesg_clean "dmesg has no warnings, oopses or leaks (but the cgroup's OOM report)" \
	'invoked oom-killer|Memory cgroup out of memory|oom-kill:|oom_reaper'
finish
