#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One side of a two-guest SMB Direct run (scripts/interop.sh starts both):
#   interop-smb.sh server KIND   on 10.99.1.1: ksmbd sharing a directory,
#                                SMB Direct over KIND
#   interop-smb.sh client KIND   on 10.99.1.2: mounts it with cifs's `rdma`
#                                over KIND, writes, reads back, compares,
#                                and tells the server what it wrote
# KIND is rsiw or siw. The server stays up until the client says it is
# done (a line on TCP port 5001) or 360 s pass, then compares the shared
# file with the client's checksum.
set -u
. "$(dirname "$0")/../common/lib.sh"

role=$1
kind=$2
server_ip=10.99.1.1
share=/tmp/smb-share
mnt=/mnt/smb
mib=32
nic=$(for n in /sys/class/net/*; do [ -e "$n/device" ] && { echo "${n##*/}"; break; }; done)

dmesg -C
[ "$kind" = rsiw ] && setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add $kind on $nic" rdma link add ${kind}0 type "$kind" netdev "$nic"

if [ "$role" = server ]; then
	check "ksmbd with an SMB Direct listener over $kind" smb_server_up $share
	wait_s=360
	debug_kernel && wait_s=1440
	timeout $wait_s busybox nc -l -p 5001 >/tmp/client-said
	check "client finished and reported" grep -q '^done ' /tmp/client-said
	read -r _ sum _ </tmp/client-said
	expect_eq "the shared file is what the client wrote" "${sum:-none}" "$(md5sum <$share/big 2>/dev/null | cut -d' ' -f1)"
	check "the client's small files are here" test "$(ls $share/small 2>/dev/null | wc -l)" = 100
	smb_server_down
else
	# The server guest boots in parallel: retry the mount for at most
	# 180 s (720 on the debug kernel).
	limit=180
	debug_kernel && limit=720
	check "mount //$server_ip/rsiw with rdma over $kind" smb_mount $server_ip $mnt rdma $limit
	check "cifs runs the connection over RDMA (SMB Direct, not TCP)" smb_over_rdma
	head -c $((mib << 20)) /dev/urandom >/tmp/pattern
	check "write and read back $mib MiB (direct I/O)" dd_rates "$kind client" $mnt/big $mib
	check "data read back equals data written" cmp /tmp/pattern /tmp/back
	check "100 small files" bash -c "mkdir -p $mnt/small && for i in \$(seq 1 100); do echo \"file \$i\" >$mnt/small/f\$i || exit 1; done"
	check "umount" umount $mnt
	sum=$(md5sum </tmp/pattern | cut -d' ' -f1)
	for _ in $(seq 1 20); do echo "done $sum" >/dev/tcp/$server_ip/5001 2>/dev/null && break; sleep 1; done
	modprobe -r cifs 2>/dev/null
fi
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
