#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One side of a two-guest NVMe-oF run (scripts/interop.sh starts both):
#   interop-nvmeof.sh target KIND [crc]   on 10.99.1.1: nvmet-rdma over KIND
#   interop-nvmeof.sh host KIND [crc]     on 10.99.1.2: nvme-rdma over KIND,
#                                         writes, reads back, compares
# KIND is rsiw or siw; with "crc" an rsiw side requests MPA CRC
# (mpa_crc=1), which both must then use. The target stays up until the
# host says it is done (a line on TCP port 5001) or 360 s pass.
set -u
. "$(dirname "$0")/../common/lib.sh"

role=$1
kind=$2
crc=${3:-}
target_ip=10.99.1.1
nqn=rsiw-interop-nqn
nic=$(for n in /sys/class/net/*; do [ -e "$n/device" ] && { echo "${n##*/}"; break; }; done)

dmesg -C
if [ "$kind" = rsiw ]; then
	if [ "$crc" = crc ]; then
		setup "insmod rsiw.ko mpa_crc=1" insmod "$RSIW_ROOT/rsiw.ko" mpa_crc=1
	else
		setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
	fi
fi
setup "rdma link add $kind on $nic" rdma link add ${kind}0 type "$kind" netdev "$nic"

# rsiw's connection-manager and MPA trace events, printed if a step fails.
T=/sys/kernel/tracing
if [ "$kind" = rsiw ]; then
	[ -d $T/events ] || mount -t tracefs nodev $T
	echo 1 >$T/events/rsiw/rsiw_cm_state/enable
	echo 1 >$T/events/rsiw/rsiw_mpa/enable
	echo 1 >$T/tracing_on
fi
# diagnose WHY: the link, the TCP sockets, rsiw's counters and trace, and
# the end of the kernel log, as comment lines.
diagnose() {
	{
		echo "diagnosis: $1"
		ip -br addr show dev "$nic"
		ip neigh show dev "$nic"
		# shellcheck disable=SC2046 # one address
		ping -c 1 -W 2 $([ "$role" = target ] && echo 10.99.1.2 || echo $target_ip) | grep -E 'transmitted|from'
		ss -tan
		if [ "$kind" = rsiw ]; then
			rdma statistic show link ${kind}0/1
			tail -30 $T/trace
		fi
		dmesg | tail -20
	} 2>&1 | sed 's/^/# /'
}

if [ "$role" = target ]; then
	setup "null_blk" modprobe null_blk nr_devices=1 memory_backed=1 gb=1 queue_mode=2
	setup "nvmet-rdma" modprobe nvmet-rdma
	check "nvmet port on $kind" nvmet_export $nqn /dev/nullb0 $target_ip
	# Serve until the host reports back.
	# (The debug kernel is several times slower: 4x there.)
	wait_s=360
	debug_kernel && wait_s=1440
	timeout $wait_s busybox nc -l -p 5001 >/tmp/host-said
	check "host finished and reported" grep -q "done" /tmp/host-said
	grep -q "done" /tmp/host-said || diagnose "the host did not report in $wait_s s"
	nvmet_unexport $nqn
	if [ "$kind" = rsiw ]; then check "unload nvmet-rdma" modprobe -r nvmet-rdma; else check_base "unload nvmet-rdma" modprobe -r nvmet-rdma; fi
else
	setup "nvme-rdma" modprobe nvme-rdma
	# The target guest boots in parallel: retry until its port is up,
	# for at most 180 s (720 on the debug kernel), well inside this
	# guest's time limit so that a failure is diagnosed here.
	connected=1
	limit=180
	debug_kernel && limit=720
	deadline=$((SECONDS + limit))
	while [ $SECONDS -lt $deadline ]; do
		if nvme_connect $nqn $target_ip >/dev/null 2>&1; then
			connected=0
			break
		fi
		sleep 2
	done
	check "nvme connect to the $target_ip target" test $connected = 0
	[ $connected = 0 ] || diagnose "no connection in $limit s"
	# 10 s: the namespace appears within a second of the connect; TF
	# for the debug kernel.
	check "namespace appears" wait_for $((10 * TF)) bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'
	dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
	if [ -n "$dev" ]; then
		head -c $((64 << 20)) /dev/urandom >/tmp/pattern
		check "write 64 MiB and read it back (direct)" dd_rates "nvme-rdma over $kind" "$dev" 64
		check "data read back equals data written" cmp /tmp/pattern /tmp/back
	fi
	check "nvme disconnect" bash -c "nvme disconnect -n $nqn | grep -q 'disconnected 1'"
	if [ "$kind" = rsiw ]; then check "unload nvme-rdma" modprobe -r nvme-rdma; else check_base "unload nvme-rdma" modprobe -r nvme-rdma; fi
	for _ in $(seq 1 20); do echo "done" >/dev/tcp/$target_ip/5001 2>/dev/null && break; sleep 1; done
fi
if [ "$kind" = rsiw ]; then
	want=off
	[ "$crc" = crc ] && want=on
	check "rsiw connections negotiated MPA CRC $want" bash -c "dmesg | grep 'rsiw: qp .* connected' | grep -q 'CRC $want' && ! dmesg | grep 'rsiw: qp .* connected' | grep -qv 'CRC $want'"
	# The data (RDMA Writes from the target, Read Responses from the
	# host) went to TCP by page reference. (This NIC has no scatter-gather
	# or checksum offload, so the stack copies while it segments and sums:
	# tx_zcopy_copied is not 0 here, nor is it a failure.)
	hw=/sys/class/infiniband/${kind}0/ports/1/hw_counters
	echo "# hw counters: $(for c in "$hw"/*; do printf '%s=%s ' "${c##*/}" "$(cat "$c")"; done)"
	# All but the short tail FPDUs of each message (under zcopy_min).
	check "nearly all 64 MiB went by page reference (tx_zcopy_octets >= 56 MiB)" test "$(cat $hw/tx_zcopy_octets)" -ge $((56 << 20))
	check "zero-copy batches were sent and released (tx_zcopy_batches > 0)" test "$(cat $hw/tx_zcopy_batches)" -gt 0
	expect_eq "no Terminate sent or received" "0 0" "$(cat $hw/terminate_sent) $(cat $hw/terminate_received)"
fi
# siw's guest: its own teardown and kernel log are siw's, the baseline.
[ "$kind" = rsiw ] || baseline_mode
check "rdma link delete" rdma link delete ${kind}0
if [ "$kind" = rsiw ]; then
	check "rmmod rsiw" rmmod rsiw
fi
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
