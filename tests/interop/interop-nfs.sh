#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One side of a two-guest NFS over RDMA run (scripts/interop.sh starts both):
#   interop-nfs.sh server KIND   on 10.99.1.1: nfsd with an RDMA listener
#                                over KIND, exporting a directory
#   interop-nfs.sh client KIND   on 10.99.1.2: mounts it (NFSv4.2,
#                                proto=rdma) over KIND, writes, reads back,
#                                compares, and tells the server what it wrote
# KIND is rsiw or siw (MPA CRC off: the test kernel's siw has none). The
# server stays up until the client says it is done (a line on TCP port
# 5001) or 360 s pass, then compares the exported file with the client's
# checksum.
set -u
. "$(dirname "$0")/../common/lib.sh"

role=$1
kind=$2
server_ip=10.99.1.1
exp=/tmp/nfs-export
mnt=/mnt/nfs
mib=32
nic=$(for n in /sys/class/net/*; do [ -e "$n/device" ] && { echo "${n##*/}"; break; }; done)

dmesg -C
[ "$kind" = rsiw ] && setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add $kind on $nic" rdma link add ${kind}0 type "$kind" netdev "$nic"

if [ "$role" = server ]; then
	check "nfsd with an RDMA listener over $kind" nfs_server_up $exp rdma
	wait_s=360
	debug_kernel && wait_s=1440
	timeout $wait_s busybox nc -l -p 5001 >/tmp/client-said
	check "client finished and reported" grep -q '^done ' /tmp/client-said
	read -r _ sum _ </tmp/client-said
	expect_eq "the exported file is what the client wrote" "${sum:-none}" "$(md5sum <$exp/big 2>/dev/null | cut -d' ' -f1)"
	check "the client's small files are here" test "$(ls $exp/small 2>/dev/null | wc -l)" = 100
	nfs_server_down
else
	# The server guest boots in parallel and waits out nfsd's grace period:
	# retry the mount for at most 180 s (720 on the debug kernel).
	limit=180
	debug_kernel && limit=720
	check "mount $server_ip:/ with proto=rdma over $kind" nfs_mount $server_ip $mnt rdma $limit
	check "the mount's transport is RDMA" nfs_proto $mnt rdma
	head -c $((mib << 20)) /dev/urandom >/tmp/pattern
	check "write $mib MiB (direct I/O)" dd if=/tmp/pattern of=$mnt/big bs=1M oflag=direct status=none
	check "read back $mib MiB (direct I/O)" dd if=$mnt/big of=/tmp/back bs=1M iflag=direct status=none
	check "data read back equals data written" cmp /tmp/pattern /tmp/back
	check "100 small files" bash -c "mkdir -p $mnt/small && for i in \$(seq 1 100); do echo \"file \$i\" >$mnt/small/f\$i || exit 1; done"
	check "umount" umount $mnt
	sum=$(md5sum </tmp/pattern | cut -d' ' -f1)
	for _ in $(seq 1 20); do echo "done $sum" >/dev/tcp/$server_ip/5001 2>/dev/null && break; sleep 1; done
fi
modprobe -r nfsv4 nfs rpcrdma 2>/dev/null
if [ "$kind" = rsiw ]; then
	hw=/sys/class/infiniband/${kind}0/ports/1/hw_counters
	expect_eq "no Terminate sent or received" "0 0" "$(cat $hw/terminate_sent) $(cat $hw/terminate_received)"
fi
# siw's guest: its own teardown and kernel log are siw's, the baseline.
[ "$kind" = rsiw ] || baseline_mode
check "rdma link delete" rdma link delete ${kind}0
[ "$kind" = rsiw ] && check "rmmod rsiw" rmmod rsiw
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
