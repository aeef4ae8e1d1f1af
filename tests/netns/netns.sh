#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Containers: rsiw devices in non-initial network namespaces with the RDMA
# core in "exclusive" netns mode (each device belongs to one namespace and
# is visible only there). Devices created inside two namespaces (c1, c2)
# joined by veth, visibility inside and outside (rdma dev, ibv_devices),
# rping -V between them through the provider, a device moved between
# namespaces with `rdma dev set ... netns`, a namespace deleted under its
# device; and NVMe-oF: the kernel's nvme-rdma and nvmet-rdma create their
# rdma_cm IDs in the initial namespace only, so they work over rsiw
# devices there (checked in exclusive mode) and cannot bind an address of
# another namespace (checked: the port refuses it).
set -u
. "$(dirname "$0")/../common/lib.sh"

export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
c1=10.93.0.1
c2=10.93.0.2
in1() { ip netns exec c1 "$@"; }
in2() { ip netns exec c2 "$@"; }
# devs_in [NS]: the RDMA devices `rdma dev` shows in NS (or here), sorted.
devs_in() {
	if [ -n "${1:-}" ]; then ip netns exec "$1" rdma dev show; else rdma dev show; fi |
		sed -n 's/^[0-9]*: \([^:]*\):.*/\1/p' | sort | paste -sd' '
}
ibv_in() {
	if [ -n "${1:-}" ]; then ip netns exec "$1" ibv_devices; else ibv_devices; fi 2>/dev/null |
		awk 'NR > 2 { print $1 }' | sort | paste -sd' '
}
listening() { in1 ss -Hltn "sport = :$1" | grep -q .; }
dmesg -C
# Bounds: a listener, a QP, a namespace's block device or a device's
# removal follows its cause within a second or two on the lean kernel:
# 10-30 s, times TF on the debug kernel.

# The mode changes only while the initial namespace is the only one.
check "rdma system set netns exclusive (before any other namespace exists)" rdma system set netns exclusive
check "rdma system show: netns exclusive" bash -c 'rdma system show | grep -q "netns exclusive"'
ip netns add c1
ip netns add c2
rdma system set netns shared >"$OUT/netns-shared.txt" 2>&1
rc=$?
sed 's/^/#   /' "$OUT/netns-shared.txt"
check "the mode cannot change while namespaces exist (EBUSY)" \
	bash -c "[ $rc != 0 ] && grep -qi 'busy' '$OUT/netns-shared.txt'"

ip link add c1e type veth peer name c2e
ip link set c1e netns c1
ip link set c2e netns c2
in1 ip addr add $c1/24 dev c1e
in2 ip addr add $c2/24 dev c2e
for ns in c1 c2; do
	ip -n $ns link set lo up
	ip -n $ns link set ${ns}e up
done

setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
check "in c1: rdma link add rsiw0 type rsiw netdev c1e" in1 rdma link add rsiw0 type rsiw netdev c1e
check "in c2: rdma link add rsiw1 type rsiw netdev c2e" in2 rdma link add rsiw1 type rsiw netdev c2e
rdma link add rsiwx type rsiw netdev c1e >"$OUT/netns-unseen.txt" 2>&1
rc=$?
sed 's/^/#   /' "$OUT/netns-unseen.txt"
check "the initial namespace cannot see c1's netdev (ENODEV)" \
	bash -c "[ $rc != 0 ] && grep -qi 'no such device' '$OUT/netns-unseen.txt'"
expect_eq "rdma dev in c1" rsiw0 "$(devs_in c1)"
expect_eq "rdma dev in c2" rsiw1 "$(devs_in c2)"
expect_eq "rdma dev in the initial namespace" "" "$(devs_in)"
expect_eq "ibv_devices in c1" rsiw0 "$(ibv_in c1)"
expect_eq "ibv_devices in c2" rsiw1 "$(ibv_in c2)"
expect_eq "ibv_devices in the initial namespace" "" "$(ibv_in)"
check "in c1: rsiw0's port is active" bash -c 'ip netns exec c1 ibv_devinfo -d rsiw0 | grep -q PORT_ACTIVE'
check "rsiw0's uverbs device cannot be opened from outside c1" \
	bash -c '! ibv_devinfo -d rsiw0 >/dev/null 2>&1'

# --- rdma_cm traffic inside: rping between the two containers ---
in1 timeout 120 rping -s -a $c1 -C 20 -S 4096 -v >"$OUT/rping-server.txt" 2>&1 &
server=$!
wait_for $((30 * TF)) listening 7174
check "rping from c2 to c1: 20 rounds of 4 KiB, data verified" \
	to "$OUT/rping-client.txt" in2 timeout 120 rping -c -a $c1 -I $c2 -C 20 -S 4096 -V -v
wait $server
expect_eq "rping server (c1) exit status" 0 $?
expect_eq "rping client rounds verified" 20 "$(grep -c 'ping data' "$OUT/rping-client.txt")"
check "perftest ib_write_bw -R between the containers" bash -c "
	ip netns exec c1 timeout 120 ib_write_bw -R -d rsiw0 -s 65536 -n 100 >$OUT/bw-server.txt 2>&1 &
	s=\$!
	for i in \$(seq 150); do ip netns exec c1 ss -Hltn 'sport = :18515' | grep -q . && break; sleep 0.2; done
	LD_PRELOAD=$PERFTEST_SHIM ip netns exec c2 timeout 120 ib_write_bw -R -d rsiw1 --source_ip $c2 -s 65536 -n 100 $c1 >$OUT/bw-client.txt 2>&1 &&
		wait \$s && grep -qE '^ +65536 +100 ' $OUT/bw-client.txt"

# --- moving a device: rdma dev set NAME netns NS ---
# The initial namespace gets a name so that a device can come back.
touch /run/netns/init
mount --bind /proc/1/ns/net /run/netns/init
ip link add m0 type veth peer name m1
ip link set m0 up
ip link set m1 up
check "rdma link add rsiw2 in the initial namespace" rdma link add rsiw2 type rsiw netdev m0
expect_eq "rsiw2 visible here" rsiw2 "$(devs_in)"
check "rdma dev set rsiw2 netns c1" rdma dev set rsiw2 netns c1
expect_eq "rsiw2 has left the initial namespace" "" "$(devs_in)"
expect_eq "rdma dev in c1 after the move" "rsiw0 rsiw2" "$(devs_in c1)"
expect_eq "ibv_devices in c1 after the move" "rsiw0 rsiw2" "$(ibv_in c1)"
check "in c1: rdma dev set rsiw2 netns init (back)" in1 rdma dev set rsiw2 netns init
expect_eq "rsiw2 back in the initial namespace" rsiw2 "$(devs_in)"
expect_eq "rdma dev in c1" rsiw0 "$(devs_in c1)"
# A process holding the device, with objects on it, does not keep it:
# moving it takes the process's resources away (disassociation), the
# process lives on and sees errors. ibv_rc_pingpong's server opens rsiw2,
# creates its PD, MR, CQ and QP, then waits for a TCP peer that never comes.
timeout 120 ibv_rc_pingpong -d rsiw2 -g 0 >"$OUT/holder.txt" 2>&1 &
holder=$!
check "a process holds a QP on rsiw2" wait_for $((30 * TF)) bash -c 'rdma resource show qp | grep -q "link rsiw2/"'
check "rdma dev set rsiw2 netns c2 while it does" timeout 60 rdma dev set rsiw2 netns c2
check "the holder's QP went with the move" bash -c '! ip netns exec c2 rdma resource show qp | grep -q "link rsiw2/"'
check "the holder is still running" kill -0 $holder
kill $holder 2>/dev/null
wait $holder 2>/dev/null
expect_eq "rdma dev in c2 after the move" "rsiw1 rsiw2" "$(devs_in c2)"
check "in c2: rdma link delete rsiw2" in2 rdma link delete rsiw2

# --- NVMe-oF: the kernel ULPs use the initial namespace ---
setup "memory-backed null_blk" modprobe null_blk nr_devices=1 memory_backed=1 gb=1 queue_mode=2
setup "nvmet-rdma, nvme-rdma" modprobe -a nvmet-rdma nvme-rdma
nvmet_export rsiw-netns-nqn /dev/nullb0 $c1 2>"$OUT/nvmet-c1.txt"
rc=$?
sed 's/^/#   /' "$OUT/nvmet-c1.txt"
# The bind, at the port's enable (the symlink), fails with EADDRNOTAVAIL;
# any other step failing would say nothing about the namespace.
check "nvmet-rdma cannot bind c1's address (it binds in the initial namespace: EADDRNOTAVAIL)" \
	bash -c "[ $rc != 0 ] && grep -q 'Cannot assign requested address' '$OUT/nvmet-c1.txt'"
nvmet_unexport rsiw-netns-nqn
ip link add nv0 type veth peer name nv1
ip addr add 10.93.1.1/24 dev nv0
ip link set nv0 up
ip link set nv1 up
check "rdma link add rsiwn0 in the initial namespace" rdma link add rsiwn0 type rsiw netdev nv0
check "nvmet port on rsiwn0 (initial namespace, exclusive mode)" nvmet_export rsiw-netns-nqn /dev/nullb0 10.93.1.1
check "nvme connect over rsiwn0" nvme_connect rsiw-netns-nqn 10.93.1.1
check "namespace appears" wait_for $((10 * TF)) bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'
dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
head -c $((8 << 20)) /dev/urandom >/tmp/pattern
check "write 8 MiB over NVMe-oF" dd if=/tmp/pattern of="$dev" bs=1M oflag=direct status=none
check "read back 8 MiB, identical" bash -c "dd if=$dev bs=1M count=8 iflag=direct status=none | cmp - /tmp/pattern"
check "nvme disconnect" bash -c "nvme disconnect -n rsiw-netns-nqn | grep -q 'disconnected 1'"
nvmet_unexport rsiw-netns-nqn
check "unload the ULPs" modprobe -r nvme-rdma nvmet-rdma
check "rdma link delete rsiwn0" rdma link delete rsiwn0

# --- a container goes away: its netdev goes, and the device with it ---
# Deleting c2 deletes c2e, and with it its veth peer c1e in c1.
check "ip netns del c2" ip netns del c2
check "rsiw1 (on c2e) and rsiw0 (on c2e's peer c1e) are gone" wait_for $((20 * TF)) bash -c \
	'[ -z "$(ip netns exec c1 rdma dev show 2>/dev/null)" ] && [ -z "$(rdma dev show 2>/dev/null)" ]'
check "rmmod rsiw" rmmod rsiw
ip netns del c1
umount /run/netns/init
rm -f /run/netns/init
check "rdma system set netns shared (no namespace left)" rdma system set netns shared
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
