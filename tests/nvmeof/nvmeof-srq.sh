#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# NVMe-oF with the target's shared receive queues (nvmet-rdma use_srq=1):
# every I/O queue of the target receives on one SRQ per completion
# vector. Since Linux 6.11 ib_drain_qp on a QP attached to an SRQ waits
# (up to a minute) for IB_EVENT_QP_LAST_WQE_REACHED, so a teardown is
# quick only if rsiw raises it. Data written and read back over two
# connections at once, one disconnected and reconnected under I/O while
# the other keeps working, then both torn down; each disconnect timed.
#   nvmeof-srq.sh [MIB]   (default 64)
set -u
. "$(dirname "$0")/../common/lib.sh"

mib=${1:-64}
ip=10.99.0.1
# elapsed SINCE: seconds since SINCE (date +%s.%N), 2 decimals.
elapsed() {
	echo "$(date +%s.%N) - $1" | bc -l | xargs printf '%.2f'
}

dmesg -C
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "veth0 ($ip/24) and veth1" veth_up $ip
setup "rdma link add rsiw0 on veth0" rdma link add rsiw0 type rsiw netdev veth0
check "two memory-backed null_blk" modprobe null_blk nr_devices=2 memory_backed=1 gb=1 queue_mode=2
check "nvmet-rdma with use_srq=1, nvme-rdma" modprobe nvmet-rdma use_srq=1
check "use_srq is on" [ "$(cat /sys/module/nvmet_rdma/parameters/use_srq)" = Y ]
modprobe nvme-rdma
cfg=/sys/kernel/config/nvmet
mkdir -p $cfg/ports/1
echo rdma >$cfg/ports/1/addr_trtype
echo ipv4 >$cfg/ports/1/addr_adrfam
echo $ip >$cfg/ports/1/addr_traddr
echo 4420 >$cfg/ports/1/addr_trsvcid
for i in 0 1; do
	n=rsiw-srq-$i
	mkdir $cfg/subsystems/$n
	echo 1 >$cfg/subsystems/$n/attr_allow_any_host
	mkdir $cfg/subsystems/$n/namespaces/1
	echo /dev/nullb$i >$cfg/subsystems/$n/namespaces/1/device_path
	echo 1 >$cfg/subsystems/$n/namespaces/1/enable
	ln -s $cfg/subsystems/$n $cfg/ports/1/subsystems/$n
done
check "connect to subsystem 0" nvme_connect rsiw-srq-0 $ip
check "connect to subsystem 1" nvme_connect rsiw-srq-1 $ip
check "two namespaces appear" wait_for 10 bash -c '[ "$(ls /dev/nvme*n1 2>/dev/null | wc -l)" = 2 ]'
# The namespace of subsystem N.
ns() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn")" = "rsiw-srq-$1" ] && { echo "/dev/$(basename "$c")n1"; return; }
	done
}
d0=$(ns 0) d1=$(ns 1)
head -c $((mib << 20)) /dev/urandom >/tmp/pattern
# I/O on subsystem 1 while subsystem 0 is disconnected and reconnected.
dd if=/tmp/pattern of="$d1" bs=1M oflag=direct status=none &
io=$!
check "write on subsystem 0" dd if=/tmp/pattern of="$d0" bs=1M oflag=direct status=none
t0=$(date +%s.%N)
check "disconnect subsystem 0 under I/O on subsystem 1" bash -c "nvme disconnect -n rsiw-srq-0 | grep -q 'disconnected 1'"
t=$(elapsed "$t0")
echo "# disconnect of subsystem 0 took $t s (a missed Last WQE event costs the 60 s drain timeout)"
check "disconnect within 10 s (no drain timeout)" [ "$(echo "$t < 10" | bc -l)" = 1 ]
check "the other connection's write completes" wait $io
check "reconnect subsystem 0" nvme_connect rsiw-srq-0 $ip
check "its namespace is back" wait_for 10 bash -c '[ "$(ls /dev/nvme*n1 2>/dev/null | wc -l)" = 2 ]'
d0=$(ns 0)
check "subsystem 0 reads back what was written" \
	bash -c "dd if=$d0 bs=1M count=$mib iflag=direct status=none | cmp -s - /tmp/pattern"
check "subsystem 1 reads back what was written" \
	bash -c "dd if=$d1 bs=1M count=$mib iflag=direct status=none | cmp -s - /tmp/pattern"
check "no I/O timed out, no drain timeout" \
	bash -c "! dmesg | grep -qE 'timeout|timed out|failed to drain'"
t0=$(date +%s.%N)
check "disconnect both" bash -c "nvme disconnect-all"
t=$(elapsed "$t0")
echo "# disconnect of both took $t s"
check "both disconnects within 10 s" [ "$(echo "$t < 10" | bc -l)" = 1 ]
for i in 0 1; do
	rm -f $cfg/ports/1/subsystems/rsiw-srq-$i
	rmdir $cfg/subsystems/rsiw-srq-$i/namespaces/1 $cfg/subsystems/rsiw-srq-$i
done
rmdir $cfg/ports/1
check "unload the ULPs" modprobe -r nvme-rdma nvmet-rdma
check "rdma link delete rsiw0" rdma link delete rsiw0
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg-srq.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
