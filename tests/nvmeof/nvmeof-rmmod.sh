#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rmmod rsiw under a live NVMe-oF connection with I/O in flight (nvmet-rdma
# target and nvme-rdma host on one rsiw device, no nvme disconnect first).
# The RDMA core removes the ULPs' queues through their ib_client remove;
# rsiw must flush their QPs so that both ULPs let go. Checks: rmmod returns
# within a bound, the device and the NVMe controller are gone, the I/O that
# was running ends (with an error, not a hang), and the kernel log has
# only the messages this removal should produce.
set -u
. "$(dirname "$0")/../common/lib.sh"

ip=10.99.0.1
nqn=rsiw-rmmod-nqn

dmesg -C
nvmeof_over_rsiw $nqn $ip
ctrl=$(ls -d /sys/class/nvme/nvme* 2>/dev/null | head -1)
check "the controller is an RDMA one" grep -qx rdma "$ctrl/transport"

# Writes that keep the queues busy until the device goes away.
(
	for _ in $(seq 1 200); do
		# nocreat: once the node is gone, fail rather than create a file.
		dd if=/dev/urandom of="$dev" bs=1M count=16 oflag=direct conv=nocreat status=none || exit 0
	done
	exit 3 # never stopped: the removal did not reach the I/O
) 2>"$OUT/writer.err" & # its expected errors must not split the ok/not ok lines
io=$!
check "I/O is running" wait_for 20 bash -c "kill -0 $io && awk '{ exit !(\$5 > 0) }' /sys/block/$(basename "$dev")/stat"
sleep 1

dmesg >"$OUT/dmesg-before-rmmod.txt"
mark=$(wc -l <"$OUT/dmesg-before-rmmod.txt")
t0=$(date +%s)
check "rmmod rsiw with NVMe-oF I/O in flight (bounded: 60 s)" timeout 60 rmmod rsiw
t1=$(date +%s)
echo "# rmmod took $((t1 - t0)) s"
check "module gone" bash -c '! grep -q "^rsiw " /proc/modules'
check "no RDMA device left" bash -c '[ -z "$(rdma dev show 2>/dev/null)" ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]'
check "the NVMe controller went with the device" wait_for 30 bash -c '! ls -d /sys/class/nvme/nvme* >/dev/null 2>&1'
# The writer sees its device fail and stops (no hang in D state).
check "the running I/O ends" wait_for 30 bash -c "! kill -0 $io 2>/dev/null"
kill -9 $io 2>/dev/null
wait $io
expect_eq "the running I/O ended with an error, not by finishing" 0 $?
check "the namespace is gone" wait_for 10 bash -c "! [ -e '$dev' ]"
nvmet_unexport $nqn
check "nvmet-rdma and nvme-rdma unload" modprobe -r nvme-rdma nvmet-rdma

# What the removal printed. Expected, and nothing else from these
# subsystems: rsiw's own unload line, nvme-rdma deleting the controller
# its ib_client remove tore down, nvmet-rdma's ib_client remove deleting
# the target queues still on the device, and the block layer failing
# writes that were in flight when the queues went (ratelimited: any count).
dmesg >"$OUT/dmesg-nvmeof-rmmod.txt"
allowed='rsiw: unloading$'
allowed+='|nvme nvme[0-9]+: Removing ctrl: NQN "'$nqn'"$'
allowed+='|nvmet_rdma: Removing queue [0-9]+$'
allowed+='|I/O error, dev nvme[0-9]+n1, sector [0-9]+ op 0x1:\(WRITE\) flags 0x[0-9a-f]+ phys_seg [0-9]+ prio class [0-9]+$'
allowed+='|blk_print_req_error: [0-9]+ callbacks suppressed$'
unexpected=$(tail -n +$((mark + 1)) "$OUT/dmesg-nvmeof-rmmod.txt" |
	grep -Ei 'rsiw|nvme|rdma|iw_cm|I/O error|blk_' |
	sed -E 's/^\[ *[0-9]+\.[0-9]+\] //' | grep -Ev "$allowed" || true)
if [ -z "$unexpected" ]; then
	pass "the removal logs only the expected nvme/block messages"
else
	fail "the removal logs only the expected nvme/block messages"
	echo "$unexpected" | sed 's/^/#   /'
fi
check "nvme-rdma reported the controller removal" \
	bash -c "tail -n +$((mark + 1)) '$OUT/dmesg-nvmeof-rmmod.txt' | grep -q 'Removing ctrl: NQN \"$nqn\"'"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
