#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A real kernel ULP over rsiw: NVMe over Fabrics, nvmet-rdma target and
# nvme-rdma host, connected through rdma_cm/iw_cm over an rsiw device on a
# veth interface. Writes patterned data to the remote namespace, reads it
# back, compares, disconnects, unloads; dmesg must stay clean.
#   nvmeof.sh [MIB]   (default 64)
set -u
. "$(dirname "$0")/../common/lib.sh"

mib=${1:-64}
ip=10.99.0.1
nqn=rsiw-test-nqn

dmesg -C
nvmeof_over_rsiw $nqn $ip
if [ -n "$dev" ]; then
	head -c $((mib << 20)) /dev/urandom >/tmp/pattern
	check "write ${mib} MiB and read it back (direct)" dd_rates nvme-rdma "$dev" "$mib"
	check "data read back equals data written" cmp /tmp/pattern /tmp/back
fi
# The RDMA core tracks rsiw's objects like any driver's.
rdma resource show >"$OUT/rdma-resource.txt" 2>&1
rdma resource show qp >>"$OUT/rdma-resource.txt" 2>&1
check "rdma resource show lists rsiw0's QPs" bash -c 'rdma resource show qp | grep -q "rsiw0"'
check "rdma resource show lists rsiw0's CQs" bash -c 'rdma resource show cq | grep -q "rsiw0"'
check "rdma resource show counts rsiw0's MRs and PDs" bash -c 'rdma resource show | grep "rsiw0" | grep -Eq "pd [1-9].*mr [1-9]"' 
nvmeof_down $nqn

# Unloading rsiw under a live ULP: the core removes nvme-rdma's and
# nvmet-rdma's queues from the device first (their ib_client remove).
setup "insmod rsiw.ko again" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 again" rdma link add rsiw0 type rsiw netdev veth0
setup "null_blk and NVMe-oF modules again" modprobe -a null_blk nvmet-rdma nvme-rdma
check "after a reload of rsiw: nvmet port on rsiw" nvmet_export $nqn /dev/nullb0 $ip
check "after a reload of rsiw: nvme connect" nvme_connect $nqn $ip
check "after a reload of rsiw: namespace appears" wait_for $((10 * TF)) bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'
check "I/O on the second connection" dd if=/tmp/pattern of="$(ls /dev/nvme*n1 | head -1)" bs=1M count=8 oflag=direct status=none
# 120 s: the unload takes a few seconds (the ULPs' queues drained and
# destroyed first); a hang fails rather than stalls the guest. The
# controller goes with it at once; 30 s, TF for the debug kernel.
check "rmmod rsiw with the NVMe-oF queues live" timeout $((120 * TF)) rmmod rsiw
check "the NVMe controller went with the device" wait_for $((30 * TF)) bash -c '! ls /dev/nvme*n1 >/dev/null 2>&1'
check "module gone" bash -c '! grep -q "^rsiw " /proc/modules'
nvmet_unexport $nqn
dmesg >"$OUT/dmesg-nvmeof.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
