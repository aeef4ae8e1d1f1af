#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The main job's demo (scripts/run.sh): what rsiw does, step by step, with
# one result line each, and a small table against Linux siw in the same
# boot. Runs as the command of scripts/rsiw-vm.sh --nodes 2 (its guest side,
# tools/rsiw-vm/guest.sh, loaded rsiw and made rsiw0 in node 1 and
# rsiw1 in node 2, two network namespaces joined by a veth pair):
#
#   scripts/rsiw-vm.sh --nodes 2 -- tools/rsiw-vm/demo.sh
#
# Steps: the devices, ibv_devinfo, rping -V, perftest bandwidth and latency
# (rdma_cm, -R, timed with -D), NVMe over Fabrics over rsiw (a file written
# to an ext4 filesystem on the remote namespace and read back), RDMA Commit
# to emulated pmem (only with the test module, see below), then the same
# bandwidth, latency and rping over siw. Figures under QEMU without KVM are
# for the side-by-side comparison, not absolute.
set -u
. "$(dirname "$0")/../../tests/common/lib.sh"

a=$RSIW_NODE1_ADDR
b=$RSIW_NODE2_ADDR
secs=${DEMO_SECONDS:-2}
rsiw_provider=${RDMAV_DRIVERS:-}
t_start=$(date +%s)
step() { printf '\n== %s\n' "$*"; }
note() { echo "#   $*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# listening PORT: a TCP listener (an rdma_cm listener on iWARP is one) in node 1.
listening() { rsiw-node 1 ss -Hltn "sport = :$1" | grep -q .; }
declare -A fig

# rping_run IMPL: 20 rounds of 4 KiB from node 2 to node 1, every payload
# verified; sets fig[IMPL.rping] to the seconds it took.
rping_run() {
	local impl=$1 s t0 rc
	rsiw-node 1 timeout 120 rping -s -a "$a" -C 20 -S 4096 >"$OUT/rping-$impl-server.txt" 2>&1 &
	s=$!
	# 30 s: a listener is up within a second on the lean kernel.
	wait_for $((30 * TF)) listening 7174
	t0=$(now)
	rsiw-node 2 timeout 120 rping -c -a "$a" -I "$b" -C 20 -S 4096 -V -v >"$OUT/rping-$impl-client.txt" 2>&1
	rc=$?
	fig[$impl.rping]=$(elapsed "$t0")
	wait $s || rc=1
	[ $rc = 0 ] && [ "$(grep -c 'ping data' "$OUT/rping-$impl-client.txt")" = 20 ]
}

# perftest_run IMPL TOOL SIZE: TOOL -R for $secs seconds, server in node 1,
# client in node 2; the client's output in $OUT/TOOL-IMPL.txt. rsiw gets
# one try: a failure is a failure. siw, the baseline, gets three: its
# ib_write_bw -R failed now and then in CI (an error at connection, no
# hang), and a failed baseline only leaves its figure out.
perftest_run() {
	local impl=$1 tool=$2 size=$3 s rc src try t0 tries=1
	[ "$impl" = rsiw ] || tries=3
	for try in $(seq $tries); do
		rsiw-node 1 timeout 60 $tool -R -d ${impl}0 -s $size -D $secs >"$OUT/$tool-$impl-server.txt" 2>&1 &
		s=$!
		wait_for $((30 * TF)) listening 18515
		t0=$(now)
		perftest_client rsiw-node 2 timeout 60 $tool -R -d ${impl}1 --source_ip "$b" -s $size -D $secs "$a" \
			>"$OUT/$tool-$impl.txt" 2>&1
		rc=$?
		wait $s
		src=$?
		[ $rc = 0 ] && [ $src = 0 ] && return 0
		# Both sides' exit codes (124: timed out) and outputs, and
		# what the kernel said meanwhile.
		note "$tool over $impl: try $try failed after $(elapsed "$t0") s: client exit $rc, server exit $src"
		# Whole: stderr is unbuffered, stdout (a file) is not, so an
		# error line comes before the lines printed ahead of it.
		sed 's/^/#     client: /' "$OUT/$tool-$impl.txt"
		sed 's/^/#     server: /' "$OUT/$tool-$impl-server.txt"
		dmesg | tail -5 | sed 's/^/#     dmesg: /'
		sleep 1
	done
	return 1
}

# broken IMPL WHAT: a step that failed. A failure of rsiw fails the demo;
# one of siw, the baseline the table sets rsiw beside, is a baseline
# failure ("[siw]"), reported with its output (above), no check of rsiw.
broken() {
	if [ "$1" = rsiw ]; then
		fail "$1: $2"
	else
		base_fail "$1: $2; its figure is left out"
	fi
}

# result IMPL FIGURE WHAT: WHAT passed and gave FIGURE (a number): a
# pass of rsiw, or of the baseline ("[siw]"); no figure is a failure.
result() {
	if ! [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
		broken "$1" "$3: no figure in its output ('$2')"
	elif [ "$1" = rsiw ]; then
		pass "$1: $3"
	else
		base_pass "$1: $3"
	fi
}

# measure IMPL: bandwidth, latency and rping over IMPL's two devices.
measure() {
	local impl=$1 row
	if perftest_run "$impl" ib_write_bw 65536; then
		# "#bytes #iterations BW-peak BW-average MsgRate" (MB/s)
		row=$(grep -E '^ +65536 ' "$OUT/ib_write_bw-$impl.txt" | tail -1)
		fig[$impl.bw]=$(echo "$row" | awk '{print $4}')
		result "$impl" "${fig[$impl.bw]}" "ib_write_bw -R, 64 KiB RDMA Writes for ${secs} s from node 2 to node 1: ${fig[$impl.bw]} MB/s"
	else
		fig[$impl.bw]=failed
		broken "$impl" "ib_write_bw -R ($OUT/ib_write_bw-$impl.txt)"
	fi
	if perftest_run "$impl" ib_write_lat 64; then
		# duration mode: "#bytes #iterations t_avg[usec] tps average"
		row=$(grep -E '^ +64 ' "$OUT/ib_write_lat-$impl.txt" | tail -1)
		fig[$impl.lat]=$(echo "$row" | awk '{print $3}')
		result "$impl" "${fig[$impl.lat]}" "ib_write_lat -R, 64-byte RDMA Write ping-pong for ${secs} s: ${fig[$impl.lat]} us average"
	else
		fig[$impl.lat]=failed
		broken "$impl" "ib_write_lat -R ($OUT/ib_write_lat-$impl.txt)"
	fi
	if rping_run "$impl"; then
		result "$impl" "${fig[$impl.rping]}" "rping -V, 20 rounds of 4 KiB (Send, RDMA Read, RDMA Write), every payload verified, in ${fig[$impl.rping]} s"
	else
		fig[$impl.rping]=failed
		broken "$impl" "rping -V ($OUT/rping-$impl-client.txt)"
	fi
}

echo "rsiw demo: a software iWARP RNIC in Rust, in a $(nproc)-CPU QEMU guest, kernel $(uname -r)"
test_build=0
objdump -h "$RSIW_ROOT/rsiw.ko" 2>/dev/null | grep -q kunit_test_suites && test_build=1

step "1. the module and the two nodes"
# rsiw-vm's guest side set them up: setup lines here.
setup "rsiw.ko loaded: $([ $test_build = 1 ] && echo "the test build (make test)" || echo "the production build, no tests"), $(awk '$1 == "rsiw" {print int($2 / 1024)}' /proc/modules) KiB" \
	grep -q '^rsiw ' /proc/modules
for n in 1 2; do
	dev=RSIW_NODE${n}_DEV addr=RSIW_NODE${n}_ADDR netdev=RSIW_NODE${n}_NETDEV
	setup "node $n (netns n$n): ${!dev} on ${!netdev} (${!addr}/24), node type $(cat /sys/class/infiniband/${!dev}/node_type 2>/dev/null), port $(cut -d' ' -f2 /sys/class/infiniband/${!dev}/ports/1/state 2>/dev/null)" \
		grep -q ACTIVE /sys/class/infiniband/${!dev}/ports/1/state
done
rdma link show | sed 's/^/#   /'

step "2. userspace sees them: ibv_devinfo (rdma-core, rsiw's provider)"
rsiw-node 1 ibv_devinfo -d rsiw0 >"$OUT/ibv_devinfo.txt" 2>&1
grep -E 'hca_id|transport|fw_ver|node_guid|state|active_mtu' "$OUT/ibv_devinfo.txt" | sed 's/^[[:space:]]*/#   /'
check "ibv_devinfo -d rsiw0: transport $(sed -n 's/.*transport:[[:space:]]*\([^ ]*\).*/\1/p' "$OUT/ibv_devinfo.txt"), $(grep -o 'PORT_[A-Z]*' "$OUT/ibv_devinfo.txt" | head -1)" \
	bash -c "grep -qE 'transport:[[:space:]]+iWARP' $OUT/ibv_devinfo.txt && grep -q PORT_ACTIVE $OUT/ibv_devinfo.txt"

step "3. rdma_cm traffic between the nodes: rping, perftest"
measure rsiw

step "4. a kernel ULP over rsiw: NVMe over Fabrics, a file written and read back"
# nvme-rdma and nvmet-rdma open their rdma_cm IDs in the initial network
# namespace: a third rsiw device there, target and host on one address.
nqn=rsiw-demo-nqn
nv=10.95.0.1
ip link add rsiwd0 type veth peer name rsiwd1
ip addr add $nv/24 dev rsiwd0
ip link set rsiwd0 up
ip link set rsiwd1 up
nvme_ok=0
if rdma link add rsiwn0 type rsiw netdev rsiwd0 &&
	modprobe null_blk nr_devices=1 memory_backed=1 gb=1 queue_mode=2 &&
	modprobe -a nvmet-rdma nvme-rdma && nvmet_export $nqn /dev/nullb0 $nv &&
	nvme_connect $nqn $nv >"$OUT/nvme-connect.txt" 2>&1 &&
	wait_for $((10 * TF)) bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'; then
	dev=$(ls /dev/nvme*n1 | head -1)
	pass "nvme connect -t rdma: $dev is nvmet-rdma's null_blk namespace, reached through rsiwn0 ($nv:4420)"
	mkdir -p /mnt/rsiw-demo
	head -c $((32 << 20)) /dev/urandom >/tmp/demo-file
	sum=$(sha256sum </tmp/demo-file | cut -c1-16)
	if mkfs.ext4 -q -F "$dev" && mount "$dev" /mnt/rsiw-demo; then
		t0=$(now)
		cp /tmp/demo-file /mnt/rsiw-demo/file && sync
		wt=$(elapsed "$t0")
		# Unmounted and mounted again: the file comes back over the wire.
		umount /mnt/rsiw-demo && mount "$dev" /mnt/rsiw-demo
		t0=$(now)
		back=$(sha256sum </mnt/rsiw-demo/file | cut -c1-16)
		rt=$(elapsed "$t0")
		umount /mnt/rsiw-demo
		expect_eq "NVMe-oF over rsiw: a 32 MiB file on ext4 written (${wt} s) and, after a remount, read back identical (${rt} s), sha256 $sum..." "$sum" "$back"
		# shellcheck disable=SC2034 # kept for the summary below
		nvme_ok=1
	else
		fail "NVMe-oF over rsiw: mkfs.ext4 and mount $dev"
	fi
	nvme disconnect -n $nqn >/dev/null 2>&1 || fail "nvme disconnect"
else
	fail "NVMe-oF over rsiw: target or connection ($OUT/nvme-connect.txt)"
fi
nvmet_unexport $nqn
modprobe -r nvme-rdma nvmet-rdma 2>/dev/null
rdma link delete rsiwn0 2>/dev/null

step "5. RDMA Commit (IB_WR_FLUSH) into emulated persistent memory"
if [ $test_build = 1 ] && [ -b /dev/pmem0 ] && [ "$(cat /sys/module/kunit/parameters/enable 2>/dev/null)" = Y ]; then
	# The test module's rsiw_flush suite commits into /dev/pmem0
	# (tests/commit/pmem.sh); it reloads rsiw, so it comes last but siw.
	for d in rsiw0 rsiw1; do rdma link delete $d; done
	rmmod rsiw
	if bash "$RSIW_ROOT/tests/commit/pmem.sh" >"$OUT/pmem.txt" 2>&1; then
		pass "RDMA Commit: 256 KiB RDMA-written into /dev/pmem0 (fsdax) and committed with IB_WR_FLUSH, read back after rmmod"
	else
		fail "RDMA Commit into pmem ($OUT/pmem.txt)"
	fi
else
	skip "RDMA Commit into pmem: this boot has no KUnit-enabled test module with a /dev/pmem0 (the demo's own boot has neither a test build nor a memmap= region); make test and a boot with memmap=64M!1G run it here, and the test suite's pmem.sh, nvdimm.sh (a kernel consumer) and userspace-rdma-core.sh (ibv_wr_flush through the provider in rdma-core 55's and 59's trees) check it"
	for d in rsiw0 rsiw1; do rdma link delete $d; done
fi

step "6. the same over Linux siw, in this boot"
# One iWARP device per netdev at a time: rdma_cm picks the device by the
# address's netdev, so rsiw's left the veth ends above.
unset RDMAV_DRIVERS
if rsiw-node 1 rdma link add siw0 type siw netdev "$RSIW_NODE1_NETDEV" &&
	rsiw-node 2 rdma link add siw1 type siw netdev "$RSIW_NODE2_NETDEV"; then
	measure siw
	rdma link delete siw0
	rdma link delete siw1
else
	base_fail "rdma link add siw0, siw1"
fi
[ -n "$rsiw_provider" ] && export RDMAV_DRIVERS=$rsiw_provider

step "7. side by side (QEMU without KVM: compare, do not quote)"
printf '#   %-38s %12s %12s\n' "" rsiw siw
printf '#   %-38s %12s %12s\n' "ib_write_bw -R, 64 KiB, MB/s (higher)" "${fig[rsiw.bw]:-n/a}" "${fig[siw.bw]:-n/a}"
printf '#   %-38s %12s %12s\n' "ib_write_lat -R, 64 B, us (lower)" "${fig[rsiw.lat]:-n/a}" "${fig[siw.lat]:-n/a}"
printf '#   %-38s %12s %12s\n' "rping -V 20 x 4 KiB, s (lower)" "${fig[rsiw.rping]:-n/a}" "${fig[siw.rping]:-n/a}"
echo
echo "demo: done in $(($(date +%s) - t_start)) s"
finish
