#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One side of a two-guest NFS over RDMA or SMB Direct run (scripts/interop.sh
# starts both):
#   interop-fs.sh ULP server KIND   on 10.99.1.1: the ULP's server over KIND
#                                   (nfs: nfsd with an RDMA listener,
#                                   exporting a directory; smb: ksmbd
#                                   sharing one, SMB Direct)
#   interop-fs.sh ULP client KIND   on 10.99.1.2: mounts it over KIND (nfs:
#                                   NFSv4.2, proto=rdma; smb: cifs's
#                                   `rdma`), writes, reads back, compares,
#                                   and tells the server what it wrote
# KIND is rsiw or siw (MPA CRC off: the test kernel's siw has none). The
# server stays up until the client says it is done (a line on TCP port
# 5001) or 360 s pass, then compares the exported or shared file with the
# client's checksum.
set -u
. "$(dirname "$0")/../common/lib.sh"

ulp=$1
role=$2
kind=$3
server_ip=10.99.1.1
mib=32
nic=$(for n in /sys/class/net/*; do [ -e "$n/device" ] && { echo "${n##*/}"; break; }; done)

# What differs between the ULPs: the server's directory and mount point,
# server_up and server_down, client_mount SECONDS (the mount and its
# transport checked), unload (the client's modules, on either side).
case $ulp in
nfs)
	dir=/tmp/nfs-export
	mnt=/mnt/nfs
	file="the exported file"
	server_up() { check "nfsd with an RDMA listener over $kind" nfs_server_up $dir rdma; }
	server_down() { nfs_server_down; }
	client_mount() {
		check "mount $server_ip:/ with proto=rdma over $kind" nfs_mount $server_ip $mnt rdma "$1"
		check "the mount's transport is RDMA" nfs_proto $mnt rdma
	}
	unload() { modprobe -r nfsv4 nfs rpcrdma 2>/dev/null; }
	;;
smb)
	dir=/tmp/smb-share
	mnt=/mnt/smb
	file="the shared file"
	server_up() { check "ksmbd with an SMB Direct listener over $kind" smb_server_up $dir; }
	server_down() { smb_server_down; }
	client_mount() {
		check "mount //$server_ip/rsiw with rdma over $kind" smb_mount $server_ip $mnt rdma "$1"
		check "cifs runs the connection over RDMA (SMB Direct, not TCP)" smb_over_rdma
	}
	unload() { modprobe -r cifs 2>/dev/null; }
	;;
*)
	fail "interop-fs.sh: no ULP '$ulp' (nfs or smb)"
	finish
	exit 1
	;;
esac

dmesg -C
[ "$kind" = rsiw ] && setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add $kind on $nic" rdma link add ${kind}0 type "$kind" netdev "$nic"

if [ "$role" = server ]; then
	server_up
	wait_s=360
	debug_kernel && wait_s=1440
	timeout $wait_s busybox nc -l -p 5001 >/tmp/client-said
	check "client finished and reported" grep -q '^done ' /tmp/client-said
	read -r _ sum _ </tmp/client-said
	expect_eq "$file is what the client wrote" "${sum:-none}" "$(md5sum <$dir/big 2>/dev/null | cut -d' ' -f1)"
	check "the client's small files are here" test "$(ls $dir/small 2>/dev/null | wc -l)" = 100
	server_down
else
	# The server guest boots in parallel (and nfsd waits out its grace
	# period): retry the mount for at most 180 s (720 on the debug kernel).
	limit=180
	debug_kernel && limit=720
	client_mount $limit
	head -c $((mib << 20)) /dev/urandom >/tmp/pattern
	check "write and read back $mib MiB (direct I/O)" dd_rates "$kind client" $mnt/big $mib
	check "data read back equals data written" cmp /tmp/pattern /tmp/back
	check "100 small files" small_files $mnt/small 100
	check "umount" umount $mnt
	sum=$(md5sum </tmp/pattern | cut -d' ' -f1)
	for _ in $(seq 1 20); do echo "done $sum" >/dev/tcp/$server_ip/5001 2>/dev/null && break; sleep 1; done
fi
unload
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
