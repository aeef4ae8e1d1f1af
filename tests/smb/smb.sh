#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SMB Direct through rsiw: the kernel's SMB server (ksmbd, with
# ksmbd-tools' ksmbd.mountd) shares a directory, and the kernel's SMB
# client (cifs.ko) mounts it with `rdma` over an rsiw device on a veth
# interface (client and server in one guest, as in nfs.sh). SMB Direct on
# iWARP uses TCP port 5445: the server's listener there and the client's
# connection are checked to be rsiw's, and cifs to run over RDMA, not TCP.
# Large direct I/O (RDMA Reads and Writes of the client's buffers), many
# small files (Sends), buffered I/O after dropping the caches; data
# compared on both sides; unmount, server stopped, no QP left, modules
# unloaded, dmesg clean.
# Then the same mount and transfer over Linux siw and over SMB's own TCP
# transport, for their figures beside rsiw's ("#" lines; only rsiw's
# round is checked).
#   smb.sh [MIB [BASELINES]]   (default 32 MiB; BASELINES "siw tcp", " ": none)
set -u
. "$(dirname "$0")/../common/lib.sh"

mib=${1:-32}
baselines=${2-siw tcp}
ip=10.99.0.1
share=/tmp/smb-share
mnt=/mnt/smb

dmesg -C
mkdir -p $share $mnt
head -c $((mib << 20)) /dev/urandom >/tmp/pattern
setup "veth0 ($ip/24) and veth1" veth_up $ip

hw=/sys/class/infiniband/rsiw0/ports/1/hw_counters

# --- rsiw: every step checked ---
setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
setup "rdma link add rsiw0 on veth0" rdma link add rsiw0 type rsiw netdev veth0
check "ksmbd up, listening for SMB Direct on port 5445" smb_server_up $share
check "the listener on 5445 is on rsiw0" bash -c 'rdma resource show cm_id | grep -qE "^link rsiw0/.* state LISTEN .*:5445 "'
check "mount -t cifs -o rdma over rsiw" smb_mount $ip $mnt rdma
if ! mountpoint -q $mnt; then
	fail "SMB Direct over rsiw: no mount, the remaining steps skipped"
	dmesg | tail -20 | sed 's/^/#   /'
	smb_server_down
	finish
	exit
fi
check "cifs runs the connection over RDMA (SMB Direct, not TCP)" smb_over_rdma
expect_eq "client's and server's connections are rsiw0's QPs (2)" 2 "$(rdma_qps rsiw0/1)"
check "the client's connection is to port 5445" bash -c "rdma resource show cm_id | grep -qE '^link rsiw0/1 .*dst-addr $ip:5445( |$)'"
check "direct write and read of $mib MiB" dd_rates rsiw $mnt/big $mib
check "data read back through SMB equals data written" cmp /tmp/pattern /tmp/back
check "the server's file equals data written" cmp /tmp/pattern $share/big
check "200 small files created" small_files $mnt/small
check "small files: the server holds what the client wrote" same_tree $mnt/small $share/small
check "buffered write of 8 MiB" dd if=/tmp/pattern of=$mnt/buffered bs=64k count=128 status=none conv=fsync
sync
echo 3 >/proc/sys/vm/drop_caches
check "buffered read after dropping the caches" bash -c "head -c $((8 << 20)) /tmp/pattern | cmp - $mnt/buffered"
check "rename, stat and remove" bash -c "mv $mnt/buffered $mnt/renamed && [ \$(stat -c %s $mnt/renamed) = $((8 << 20)) ] && rm $mnt/renamed && [ ! -e $share/renamed ]"
check "the client sees the server's own writes" bash -c "echo server >$share/from-server && [ \"\$(cat $mnt/from-server)\" = server ]"
expect_eq "no Terminate sent or received" "0 0" "$(cat $hw/terminate_sent) $(cat $hw/terminate_received)"
check "umount" umount $mnt
smb_server_down
check "no rsiw0 QPs left after umount and ksmbd stop" wait_for $((20 * TF)) no_qps rsiw0/1
check "unload cifs" modprobe -r cifs
check "rdma link delete rsiw0" rdma link delete rsiw0
check "rmmod rsiw" rmmod rsiw
rm -rf ${share:?}/*

# --- the baselines: their figures, and whether their round completed ---
for b in $baselines; do
	ok=1
	case $b in
	siw) modprobe siw && rdma link add siw0 type siw netdev veth0 || ok=0 ;;
	tcp) ;;
	*) echo "# $b: unknown baseline"; continue ;;
	esac
	tr=rdma
	[ $b = tcp ] && tr=tcp
	if [ $ok = 1 ] && smb_server_up $share $tr && smb_mount $ip $mnt $tr &&
		dd_rates "$b" $mnt/big $mib && cmp -s /tmp/pattern /tmp/back; then
		base_pass "$b: SMB over $tr: direct write and read of $mib MiB, data identical"
	else
		base_fail "$b: SMB over $tr: the round did not complete"
	fi
	umount $mnt 2>/dev/null
	smb_server_down
	modprobe -r cifs
	[ $b = siw ] && { rdma link delete siw0; modprobe -r siw; }
	rm -rf ${share:?}/*
done

dmesg >"$OUT/dmesg-smb.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
