#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# NFS over RDMA through rsiw: the kernel's NFS server (nfsd with svcrdma)
# exports a directory on an RDMA listener, and the kernel's NFS client
# (xprtrdma) mounts it with proto=rdma over an rsiw device on a veth
# interface (client and server in one guest, as in nvmeof.sh). Large
# direct I/O (RDMA Read and Write chunks), buffered I/O after dropping the
# caches, many small files (inline Sends) and metadata; data compared on
# both sides; unmount, server stopped, modules unloaded. Then `rmmod rsiw`
# under a live mount and nfsd: bounded, and the mount works again once the
# device is back. dmesg clean.
# Then the same mount and the same transfer over Linux siw and over NFS's
# own TCP transport, for their figures beside rsiw's (printed as "#" lines;
# only rsiw's round is checked).
#   nfs.sh [MIB [BASELINES]]   (default 32 MiB; BASELINES "siw tcp", " ": none)
set -u
. "$(dirname "$0")/../common/lib.sh"

mib=${1:-32}
baselines=${2-siw tcp}
ip=10.99.0.1
exp=/tmp/nfs-export
mnt=/mnt/nfs

dmesg -C
mkdir -p $exp $mnt
head -c $((mib << 20)) /dev/urandom >/tmp/pattern
setup "veth0 ($ip/24) and veth1" veth_up $ip

mountstat() { awk -v m=" $mnt " 'index($0, m) { f = 1 } f && /xprt:/ { print; exit }' /proc/self/mountstats; }

# --- rsiw: every step checked ---
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 on veth0" rdma link add rsiw0 type rsiw netdev veth0
check "nfsd with an RDMA listener (port $NFS_RDMA_PORT), NFSv4 root exported" nfs_server_up $exp rdma
check "nfsd listens on rdma $NFS_RDMA_PORT" grep -qx "rdma $NFS_RDMA_PORT" /proc/fs/nfsd/portlist
check "mount -t nfs4 -o proto=rdma over rsiw" nfs_mount $ip $mnt rdma
if ! mountpoint -q $mnt; then
	# Nothing below could test NFS: it would write into the bare directory.
	fail "NFS over rsiw: no mount, the remaining steps skipped"
	echo "# rpc.nfsd portlist: $(cat /proc/fs/nfsd/portlist 2>&1 | tr '\n' ' ')"
	dmesg | tail -20 | sed 's/^/#   /'
	finish
	exit
fi
check "the mount's transport is RDMA" nfs_proto $mnt rdma
expect_eq "client's and server's connections are rsiw0's QPs (2)" 2 "$(rdma_qps rsiw0/1)"
check "direct write and read of $mib MiB" dd_rates rsiw $mnt/big $mib
check "data read back through NFS equals data written" cmp /tmp/pattern /tmp/back
check "the server's file equals data written" cmp /tmp/pattern $exp/big
check "200 small files created" small_files $mnt/small
check "small files: the server holds what the client wrote" same_tree $mnt/small $exp/small
check "buffered write of 8 MiB" dd if=/tmp/pattern of=$mnt/buffered bs=64k count=128 status=none conv=fsync
sync
echo 3 >/proc/sys/vm/drop_caches
check "buffered read after dropping the caches" bash -c "head -c $((8 << 20)) /tmp/pattern | cmp - $mnt/buffered"
check "rename, stat and remove" bash -c "mv $mnt/buffered $mnt/renamed && [ \$(stat -c %s $mnt/renamed) = $((8 << 20)) ] && rm $mnt/renamed && [ ! -e $exp/renamed ]"
check "ls sees the server's own writes" bash -c "echo server >$exp/from-server && [ \"\$(cat $mnt/from-server)\" = server ]"
xprt=$(mountstat)
echo "# mountstats: $xprt"
# "xprt: rdma PORT BINDS CONNECTS CONNECT_TIME IDLE SENDS RECVS ..."
check "mountstats: an rdma transport that sent and received" bash -c "echo '$xprt' | awk '\$2 == \"rdma\" && \$8 > 0 && \$9 > 0 { ok = 1 } END { exit !ok }'"
check "umount" umount $mnt
nfs_server_down
check "no rsiw0 QPs left after umount and nfsd stop" wait_for $((20 * TF)) no_qps rsiw0/1
check "unload the NFS modules" modprobe -r nfsv4 nfs
check "rdma link delete rsiw0" rdma link delete rsiw0
check "rmmod rsiw" rmmod rsiw
rm -rf ${exp:?}/*

# --- rmmod rsiw under a live NFS mount: bounded, and the mount comes back
# with the device (xprtrdma reconnects; the mount is a hard one) ---
setup "removal round: insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "removal round: rdma link add rsiw0" rdma link add rsiw0 type rsiw netdev veth0
setup "removal round: nfsd again" nfs_server_up $exp rdma
check "removal round: mount over rsiw again" nfs_mount $ip $mnt rdma
check "removal round: I/O before the removal" bash -c "mountpoint -q $mnt && dd if=/tmp/pattern of=$mnt/before bs=1M count=4 oflag=direct status=none && cmp -n $((4 << 20)) /tmp/pattern $exp/before"
# 120 s: the removal takes seconds (xprtrdma's and svcrdma's queues
# drained first); a hang fails rather than stalls the guest. TF for the
# debug kernel; the same for the waits below (a QP is gone within a
# second or two of the umount: 20 s).
check "rmmod rsiw with an NFS mount and nfsd on it (bounded)" timeout $((120 * TF)) rmmod rsiw
check "module gone" bash -c '! grep -q "^rsiw " /proc/modules'
check "insmod rsiw.ko under the orphaned mount" insmod "$RSIW_ROOT/rsiw.ko"
check "rdma link add rsiw0 under the orphaned mount" rdma link add rsiw0 type rsiw netdev veth0
check "the mount recovers: a write through it after the device is back" bash -c "mountpoint -q $mnt && timeout 180 dd if=/tmp/pattern of=$mnt/after bs=1M count=4 oflag=direct status=none"
check "the server holds what was written after the recovery" bash -c "head -c $((4 << 20)) /tmp/pattern | cmp - $exp/after"
check "removal round: umount" umount $mnt
nfs_server_down
modprobe -r nfsv4 nfs
check "removal round: no rsiw0 QPs left" wait_for $((20 * TF)) no_qps rsiw0/1
check "removal round: rmmod rsiw" bash -c "rdma link delete rsiw0 && rmmod rsiw"
rm -rf ${exp:?}/*

# --- the baselines: their figures, and whether their round completed, as
# baseline ("[siw]") lines ---
for b in $baselines; do
	ok=1
	case $b in
	siw) modprobe siw && rdma link add siw0 type siw netdev veth0 || ok=0 ;;
	tcp) ;;
	*) echo "# $b: unknown baseline"; continue ;;
	esac
	tr=rdma
	[ $b = tcp ] && tr=tcp
	if [ $ok = 1 ] && nfs_server_up $exp $tr && nfs_mount $ip $mnt $tr && dd_rates "$b" $mnt/big $mib && cmp -s /tmp/pattern /tmp/back; then
		base_pass "$b: NFS over $tr: direct write and read of $mib MiB, data identical"
	else
		base_fail "$b: NFS over $tr: the round did not complete"
	fi
	umount $mnt 2>/dev/null
	nfs_server_down
	modprobe -r nfsv4 nfs
	[ $b = siw ] && { rdma link delete siw0; modprobe -r siw; }
	rm -rf ${exp:?}/*
done

dmesg >"$OUT/dmesg-nfs.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
