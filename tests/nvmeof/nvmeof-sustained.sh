#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# NVMe over Fabrics over rsiw under sustained writes, as blktests' nvme/014
# drives it and as storage users do: nvmet-rdma and nvme-rdma in one guest
# over rsiw0 on a veth pair, a 1 GiB memory-backed null_blk namespace.
# Each pass writes MIB MiB with one direct-I/O dd stream, flushes, reads
# it all back and compares; then fio writes the namespace with several
# jobs and queue depths and verifies every block. The target reads all
# of that write data with RDMA Read with Local Invalidate into its pool
# of fast-register MRs, re-registered with a new key for every command:
# no Terminate, no I/O timeout and no error recovery may show in dmesg.
# Passes: MPA CRC off, then on (mpa_crc=1 on both ends).
#   nvmeof-sustained.sh [MIB]   (default 1024)
set -u
. "$(dirname "$0")/../common/lib.sh"

mib=${1:-1024}
ip=10.99.0.1
nqn=rsiw-sustained-nqn
chunk=64

# elapsed SINCE: seconds since SINCE (date +%s.%N), 1 decimal.
elapsed() {
	echo "$(date +%s.%N) - $1" | bc -l | xargs printf '%.1f'
}

# stream: MIB MiB of the pattern, the same every time.
stream() {
	local i
	for ((i = 0; i < mib / chunk; i++)); do cat /tmp/pattern; done
}

# The dmesg lines that mean the stream or the controller failed.
failures() {
	dmesg | grep -E 'rsiw: .*Terminate|QP fatal error|nvme nvme[0-9]+: .*(timeout|error recovery|Reconnecting|failed with status)' || true
}

one_pass() {
	local label=$1 crc=$2 t0 n
	dmesg -C
	check "$label: insmod rsiw.ko mpa_crc=$crc" insmod "$RSIW_ROOT/rsiw.ko" mpa_crc=$crc
	setup "veth0 ($ip/24) and veth1" veth_up $ip
	check "$label: rdma link add rsiw0 on veth0" rdma link add rsiw0 type rsiw netdev veth0
	check "$label: memory-backed 1 GiB null_blk" modprobe null_blk nr_devices=1 memory_backed=1 gb=1 queue_mode=2
	check "$label: nvmet-rdma and nvme-rdma load" modprobe -a nvmet-rdma nvme-rdma
	check "$label: nvmet port on rsiw" nvmet_export $nqn /dev/nullb0 $ip
	check "$label: nvme connect over rsiw" nvme_connect $nqn $ip
	check "$label: namespace appears" wait_for 10 bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'
	dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
	if [ -n "$dev" ]; then
		t0=$(date +%s.%N)
		check "$label: dd writes $mib MiB (direct I/O, one stream)" \
			bash -c "set -o pipefail; stream | dd of=$dev bs=1M iflag=fullblock oflag=direct status=none"
		echo "# $label: dd write of $mib MiB took $(elapsed "$t0") s (TCG guest)"
		check "$label: nvme flush" to "$OUT/flush-$crc.txt" nvme flush "$dev"
		t0=$(date +%s.%N)
		check "$label: $mib MiB read back equal what was written" \
			bash -c "set -o pipefail; dd if=$dev bs=1M count=$mib iflag=direct status=none | sha256sum | grep -q ^$want"
		echo "# $label: read back and compare took $(elapsed "$t0") s"
		# Four jobs, each on its own quarter, several queue depths and
		# block sizes; every block verified (crc32c) after the writes.
		t0=$(date +%s.%N)
		n=$((mib / 4))
		check "$label: fio 4 jobs x $n MiB, iodepth 4-32, 4k-256k blocks, verified" \
			to "$OUT/fio-$crc.txt" fio --name=sustained --filename="$dev" --direct=1 --ioengine=libaio \
			--rw=randwrite --bsrange=4k-256k --numjobs=4 --size=${n}M --offset_increment=${n}M \
			--iodepth=32 --iodepth_batch_submit=4 --verify=crc32c --verify_fatal=1 \
			--do_verify=1 --group_reporting --randseed=$crc
		echo "# $label: fio write and verify took $(elapsed "$t0") s"
		check "$label: nvme flush after fio" to "$OUT/flush-fio-$crc.txt" nvme flush "$dev"
	fi
	n=$(failures | wc -l)
	[ "$n" = 0 ] || failures | head -20 | sed 's/^/#   /'
	check "$label: no Terminate, QP error, I/O timeout or recovery in dmesg" [ "$n" = 0 ]
	check "$label: nvme disconnect" bash -c "nvme disconnect -n $nqn | grep -q 'disconnected 1'"
	nvmet_unexport $nqn
	check "$label: unload the ULPs and null_blk" modprobe -r nvme-rdma nvmet-rdma null_blk
	check "$label: rdma link delete rsiw0" rdma link delete rsiw0
	ip link del veth0
	check "$label: rmmod rsiw" rmmod rsiw
	dmesg >"$OUT/dmesg-sustained-$crc.txt"
	check_dmesg_clean "$label: dmesg has no warnings, oopses or leaks"
}

export mib chunk
export -f stream
head -c $((chunk << 20)) /dev/urandom >/tmp/pattern
# What the namespace must read back (the guest has no /dev/fd for a
# process substitution).
want=$(stream | sha256sum | cut -d' ' -f1)
one_pass "CRC off" 0
one_pass "CRC on" 1
finish
