#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Link faults under a kernel ULP's I/O: NVMe over
# Fabrics, the nvmet-rdma target on rsiw0 (veth nvt, 10.98.0.1) and the
# nvme-rdma host on rsiw1 (its peer nvh, 10.98.0.2), a writer running
# direct I/O on the namespace, and the link under the queues fails:
#
#   downup          nvh down for 2 s, then up
#   mtu             MTU 9000, 1280, 1500 on both ends, 2 s apart
#   addr            the host's address removed for a while, then restored
#   host-linkdel    rdma link delete rsiw1 (the host's device)
#   target-linkdel  rdma link delete rsiw0 (the target's), later added back
#                   and the nvmet port re-enabled on it
#   netdev          the net_device deleted (the pair goes, both devices too)
#
# (rmmod rsiw under NVMe-oF I/O is nvmeof-rmmod.sh.) Both ULPs bind in the
# initial namespace, so both ends are in it; policy routing sends each
# end's packets to the other out of its own veth, not over lo (the local
# table is looked up after two rules for locally generated packets, and
# an unreachable route behind each veth route keeps a downed link from
# falling back to lo), so the faults act on the wire the queues use (each
# case checks the host's veth carried the data).
#
# Each case starts from a fresh pair, fresh devices, a fresh export and
# connection (reconnect delay 1 s, controller loss timeout 60 s), and ends
# with: every fault command returned within its bound; the writer ended
# within a bound: where the link comes back, nvme-rdma's controller is
# live again (reconnected or never lost: the state timeline and
# reconnect count are printed), the writer made progress after that, and
# everything it wrote from the pass before the fault on reads back
# identical; where the fault is permanent, nvme-rdma deleted the
# controller and the writer ended with a write error. Then nvme
# disconnect returns, no controller is left, the export goes, no RDMA
# object or cm_id is left on the devices, no NVMe-oF TCP connection is
# left open, the devices and the pair go within bounds, no net_device
# reference is left waiting, dmesg is clean.
set -u
. "$(dirname "$0")/../common/lib.sh"

# nvmeof-linkfault.sh [CASE...]   (default: all, in the order above)
# NVMEOF_LINKFAULT_KIND=siw runs the same cases over siw (a comparison).
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(downup mtu addr host-linkdel target-linkdel netdev)
kind=${NVMEOF_LINKFAULT_KIND:-rsiw}

nqn=rsiw-linkfault-nqn
tip=10.98.0.1 # target (nvt, rsiw0)
hip=10.98.0.2 # host (nvh, rsiw1)
# A debug kernel (KASAN, lockdep, kmemleak: every step several times
# slower under TCG) gets every time bound of this script 4x.
slow=1
debug_kernel && slow=4
region_mib=8  # one writer pass
regions=96    # passes wrap over the first 768 MiB of the 1 GiB null_blk

# elapsed T0: seconds since T0 (an $EPOCHREALTIME), one decimal.
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# timed NAME SECONDS COMMAND...: COMMAND succeeds within SECONDS. It runs
# in the background, so a command stuck in the kernel fails the check
# rather than stopping the test.
timed() {
	local name=$1 limit=$(($2 * slow)) t0=$EPOCHREALTIME pid rc
	shift 2
	"$@" &
	pid=$!
	if ! wait_for "$limit" gone $pid; then
		fail "$name: returns within $limit s (still running after $(elapsed "$t0") s)"
		return 1
	fi
	wait $pid
	rc=$?
	echo "# $name: took $(elapsed "$t0") s (status $rc)"
	expect_eq "$name: succeeds within $limit s" 0 $rc
	return $rc
}

# Routes for locally generated packets between the two addresses (see
# the header); re-added after a fault took the veth routes away.
routes() {
	ip route replace $tip dev nvh table 98 &&
		ip route replace $hip dev nvt table 99
}
policy_routing() {
	sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
		net.ipv4.conf.all.accept_local=1 net.ipv4.conf.default.accept_local=1 &&
		ip rule add pref 10 iif lo to $tip lookup 98 &&
		ip rule add pref 11 iif lo to $hip lookup 99 &&
		ip route add unreachable $tip table 98 metric 1000 &&
		ip route add unreachable $hip table 99 metric 1000 &&
		ip rule add pref 100 lookup local &&
		ip rule del pref 0 lookup local
}
policy_routing_undo() {
	ip rule add pref 0 lookup local
	ip rule del pref 100 lookup local
	ip rule del pref 10
	ip rule del pref 11
	ip route flush table 98
	ip route flush table 99
}

pair_up() {
	ip link add nvt type veth peer name nvh &&
		ip addr add $tip/24 dev nvt && ip addr add $hip/24 dev nvh &&
		ip link set nvt up && ip link set nvh up && routes
}
port_active() { grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null; }
devices_up() {
	rdma link add ${kind}0 type $kind netdev nvt && rdma link add ${kind}1 type $kind netdev nvh &&
		wait_for 10 port_active ${kind}0 && wait_for 10 port_active ${kind}1
}
connect() {
	nvme_connect $nqn $tip --host-traddr=$hip --reconnect-delay=1 --ctrl-loss-tmo=60 >/dev/null
}
# port_cycle: the nvmet port off and on again (a listener on the device
# that now owns the address; nvmet-rdma does not re-create one itself
# after a device removal took its listener).
port_cycle() {
	rm /sys/kernel/config/nvmet/ports/1/subsystems/$nqn &&
		ln -s /sys/kernel/config/nvmet/subsystems/$nqn /sys/kernel/config/nvmet/ports/1/subsystems/$nqn
}

state() {
	local s
	{ read -r s <"$ctrl/state"; } 2>/dev/null || s=gone
	echo "$s"
}
ctrl_live() { [ "$(state)" = live ]; }
ctrl_not_live() { [ "$(state)" != live ]; }
ctrl_connecting() { [ "$(state)" = connecting ]; }
no_ctrl() { ! ls -d /sys/class/nvme/nvme* >/dev/null 2>&1; }
# No PD, QP, cm_id, MR or SRQ, and no CQ but the RDMA core's CQ pool
# (nvme-rdma's and nvmet-rdma's queues take their CQs from it; the pool
# keeps them, unused, until the device goes).
no_objects() {
	! rdma resource show 2>/dev/null | grep -qE '(pd|qp|cm_id|mr|srq) [1-9]' &&
		! rdma resource show cq 2>/dev/null | grep -v 'users 0 .*comm \[ib_core\]' | grep -q .
}
# No NVMe-oF TCP socket rsiw still holds open (closed ones TCP finishes
# by itself: FIN-WAIT, TIME-WAIT, LAST-ACK, CLOSING).
no_conns() {
	! ss -Htan '( sport = :4420 or dport = :4420 )' | grep -qE '^(ESTAB|CLOSE-WAIT|SYN-SENT|SYN-RECV|LISTEN)'
}
passes_done() { wc -l <"$passes"; }

# sampler: the controller's state, "EPOCH STATE" at each change, until
# it is gone (or killed).
sampler() {
	local last="" s
	while :; do
		s=$(state)
		if [ "$s" != "$last" ]; then
			echo "$EPOCHREALTIME $s"
			last=$s
		fi
		[ "$s" = gone ] && return
		sleep 0.2
	done
}

# writer: direct 1 MiB writes to the namespace in passes of 8 MiB, pass
# P into region (P-1) % $regions from /tmp/rand at offset P % 7 MiB (a
# pass's data differs from that of the pass before it in the region),
# P appended to $passes after each, until $stop exists; then reads back
# the regions of the passes from the one before the fault ($fromf) on and
# compares. Status: 0 all that, 1 a write failed, 2 a read failed, 3 data
# differ.
writer() {
	local p=0 q from
	while [ ! -e "$stop" ]; do
		p=$((p + 1))
		timeout $((120 * slow)) dd if=/tmp/rand of="$dev" bs=1M count=$region_mib skip=$((p % 7)) \
			seek=$(((p - 1) % regions * region_mib)) oflag=direct conv=nocreat,notrunc status=none || return 1
		echo $p >>"$passes"
	done
	from=$(cat "$fromf" 2>/dev/null)
	[ "${from:-0}" -ge 1 ] || from=1
	[ $((p - from)) -lt $regions ] || from=$((p - regions + 1))
	echo "# verifying passes $from to $p"
	for q in $(seq "$from" "$p"); do
		timeout $((120 * slow)) dd if="$dev" of=/tmp/back bs=1M count=$region_mib \
			skip=$(((q - 1) % regions * region_mib)) iflag=direct status=none || return 2
		dd if=/tmp/rand bs=1M count=$region_mib skip=$((q % 7)) status=none | cmp -s - /tmp/back || {
			echo "# pass $q differs"
			return 3
		}
	done
	return 0
}

# case_start NAME: pair, devices, export, connection, writer running.
case_start() {
	name=$1
	echo "# --- $name"
	mark=$(dmesg | wc -l)
	passes=$OUT/nvmeof-linkfault-$name-passes.txt
	fromf=$OUT/nvmeof-linkfault-$name-from.txt
	states=$OUT/nvmeof-linkfault-$name-states.txt
	stop=/tmp/stop-$name
	rm -f "$passes" "$fromf" "$stop"
	touch "$passes"
	head -c 16M /dev/urandom >/tmp/rand
	check "$name: nvt <-> nvh, routes over the pair" pair_up
	check "$name: ${kind}0 on nvt, ${kind}1 on nvh" devices_up
	check "$name: nvmet port on ${kind}0 ($tip)" nvmet_export $nqn /dev/nullb0 $tip
	check "$name: nvme connect from $hip" connect
	check "$name: namespace appears" wait_for 20 bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'
	dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
	ctrl=$(ls -d /sys/class/nvme/nvme* 2>/dev/null | head -1)
	check "$name: host queues on ${kind}1, target queues on ${kind}0" bash -c \
		"q=\$(rdma resource show qp); grep -q 'link ${kind}1/' <<<\"\$q\" && grep -q 'link ${kind}0/' <<<\"\$q\""
	sampler >"$states" &
	samp=$!
	local tx0
	tx0=$(cat /sys/class/net/nvh/statistics/tx_bytes)
	writer >"$OUT/nvmeof-linkfault-$name-writer.txt" 2>&1 &
	io=$!
	check "$name: I/O running (a pass done)" wait_for 60 bash -c "[ -s '$passes' ]"
	local tx=$(($(cat /sys/class/net/nvh/statistics/tx_bytes) - tx0))
	check "$name: nvh carried the writes ($((tx >> 20)) MiB out)" [ $tx -ge $((region_mib << 20)) ]
	sleep 1
}

# fault_mark: the fault starts now (the writer verifies from the pass before).
fault_mark() {
	passes_fault=$(passes_done)
	echo "$passes_fault" >"$fromf"
	t_fault=$EPOCHREALTIME
}

# case_end NAME RECOVERS: the checks of the header; RECOVERS 1 where the
# link comes back, 0 where the fault is permanent.
case_end() {
	local name=$1 recovers=$2 rc n0 out t_live
	if [ "$recovers" = 1 ]; then
		if wait_for $((90 * slow)) ctrl_live; then
			t_live=$(elapsed "$t_fault")
			pass "$name: the controller is live ($t_live s after the fault began)"
		else
			fail "$name: the controller is live again within $((90 * slow)) s (state $(state))"
		fi
		n0=$(passes_done)
		check "$name: I/O goes on (2 more passes)" wait_for $((90 * slow)) bash -c "[ \$(wc -l <'$passes') -ge $((n0 + 2)) ]"
		touch "$stop"
	fi
	if ! wait_for $((120 * slow)) gone $io; then
		fail "$name: the writer ends within $((120 * slow)) s"
		kill -9 $io 2>/dev/null
	fi
	wait $io
	rc=$?
	if [ "$recovers" = 1 ]; then
		expect_eq "$name: the writer completed, data from the pass before the fault on read back identical" 0 $rc
	else
		expect_eq "$name: the writer ended with a write error" 1 $rc
	fi
	kill $samp 2>/dev/null
	wait $samp 2>/dev/null
	echo "# $name: controller: $(awk -v t0="$t_fault" '{ printf "%s%s (%+.1f s)", (NR > 1 ? " -> " : ""), $2, $1 - t0 } END { print "" }' "$states")"
	local log
	log=$(dmesg | tail -n +$((mark + 1)))
	echo "# $name: writer: $passes_fault passes before the fault, $(passes_done) in all, status $rc;" \
		"nvme-rdma: $(grep -c 'starting error recovery' <<<"$log") error recoveries," \
		"$(grep -c 'Successfully reconnected' <<<"$log") reconnects"
	grep -E 'nvme|nvmet|siw|rdma|iw_cm' <<<"$log" | sed -E 's/^\[ *[0-9.]+\] //; s/[0-9]+/N/g' |
		sort | uniq -c | sort -rn | head -12 | sed 's/^ */#   /'

	out=$OUT/nvmeof-linkfault-$name-disconnect.txt
	timed "$name: nvme disconnect" 60 bash -c "nvme disconnect -n $nqn >'$out' 2>&1"
	echo "# $name: nvme disconnect: $(cat "$out")"
	if [ "$recovers" = 1 ]; then
		check "$name: nvme disconnect disconnected the controller" grep -q 'disconnected 1' "$out"
	fi
	check "$name: no NVMe controller left" wait_for 30 no_ctrl
	timed "$name: nvmet unexport" 60 nvmet_unexport $nqn
	if wait_for 30 no_objects; then
		pass "$name: no RDMA object or cm_id left ($(ls /sys/class/infiniband | tr '\n' ' '))"
	else
		fail "$name: no RDMA object or cm_id left"
		{ rdma resource show; rdma resource show cm_id; rdma resource show qp; } 2>&1 | sed 's/^/#   /'
	fi
	check "$name: no NVMe-oF TCP connection left open" wait_for 30 no_conns
	local d
	for d in ${kind}0 ${kind}1; do
		[ -e /sys/class/infiniband/$d ] && timed "$name: rdma link delete $d" 60 rdma link delete $d
	done
	ip link show nvt >/dev/null 2>&1 && timed "$name: ip link delete nvt" 60 ip link delete nvt
	check "$name: devices and pair gone" bash -c "! ls /sys/class/infiniband/${kind}* >/dev/null 2>&1 && ! ip link show nvh >/dev/null 2>&1"
	check "$name: no net_device reference left waiting" bash -c '! dmesg | grep -q "unregister_netdevice: waiting"'
	check_dmesg_clean "$name: dmesg clean"
}

# --- netdev down for 2 s, then up ---
case_downup() {
	case_start downup
	fault_mark
	timed "downup: ip link set nvh down" 10 ip link set nvh down
	sleep 2
	timed "downup: ip link set nvh up" 10 ip link set nvh up
	check "downup: host route back" routes
	case_end downup 1
}

# --- MTU changes on both ends under I/O ---
case_mtu() {
	local m
	case_start mtu
	fault_mark
	for m in 9000 1280 1500; do
		timed "mtu: MTU $m on nvt and nvh" 10 bash -c "ip link set nvt mtu $m && ip link set nvh mtu $m"
		sleep 2
	done
	case_end mtu 1
}

# --- the host's address removed until the stall is noticed, then back ---
case_addr() {
	case_start addr
	fault_mark
	timed "addr: ip addr del $hip/24 dev nvh" 10 ip addr del $hip/24 dev nvh
	check "addr: the stall is noticed (controller leaves live)" wait_for 60 ctrl_not_live
	sleep 3
	timed "addr: ip addr add $hip/24 dev nvh" 10 ip addr add $hip/24 dev nvh
	check "addr: host route back" routes
	case_end addr 1
}

# --- rdma link delete of the host's device: nvme-rdma deletes the
# controller (its ib_client remove) ---
case_host_linkdel() {
	case_start host-linkdel
	fault_mark
	timed "host-linkdel: rdma link delete ${kind}1 (the host's)" 60 rdma link delete ${kind}1
	check "host-linkdel: nvme-rdma deleted the controller" wait_for 60 no_ctrl
	case_end host-linkdel 0
}

# --- rdma link delete of the target's device: the host reconnects in
# vain until the device is back and the port listens on it again ---
case_target_linkdel() {
	case_start target-linkdel
	fault_mark
	timed "target-linkdel: rdma link delete ${kind}0 (the target's)" 60 rdma link delete ${kind}0
	check "target-linkdel: the host is reconnecting" wait_for 60 ctrl_connecting
	sleep 3
	check "target-linkdel: still reconnecting while the target has no device" ctrl_connecting
	timed "target-linkdel: rdma link add ${kind}0 again" 10 rdma link add ${kind}0 type $kind netdev nvt
	check "target-linkdel: nvmet port re-enabled on the new ${kind}0" port_cycle
	case_end target-linkdel 1
}

# --- the net_device deleted: the pair and both devices go ---
case_netdev() {
	case_start netdev
	fault_mark
	if [ -n "${NVMEOF_LINKFAULT_SYSRQ:-}" ]; then
		(for t in 10 25 45; do sleep $((t - ${last:-0})); last=$t; echo w >/proc/sysrq-trigger; done) &
	fi
	timed "netdev: ip link delete nvh (the pair goes)" 60 ip link delete nvh
	check "netdev: ${kind}0 and ${kind}1 are gone" wait_for 30 bash -c "! ls /sys/class/infiniband/${kind}* >/dev/null 2>&1"
	check "netdev: nvme-rdma deleted the controller" wait_for 60 no_ctrl
	case_end netdev 0
}

dmesg -C
# Where the link is gone for good, nvme-rdma's controller deletion waits
# for its own command timeouts (in-flight I/O: io_timeout; the shutdown's
# Property Set: admin_timeout; 30 s and 60 s by default, the same over
# siw), holding the RDMA device and so the net_device. Shorter ones keep
# the case well inside its bounds and the hung-task threshold, and the
# kernel's "waiting for DEV to become free" report starts after 30 s
# rather than 10: a reference held longer than the bounded deletion (60 s)
# still fails the case.
sysctl -qw net.core.netdev_unregister_timeout_secs=30
if [ "$kind" = rsiw ]; then
	setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
else
	# Run on siw alone: every check below is the baseline's.
	baseline_mode
	setup "modprobe $kind" modprobe $kind
fi
setup "memory-backed null_blk" modprobe null_blk nr_devices=1 memory_backed=1 gb=1 queue_mode=2
setup "nvmet-rdma and nvme-rdma load" modprobe -a nvmet-rdma nvme-rdma
setup "nvme timeouts: I/O 5 s, admin 10 s" bash -c \
	'echo 5 >/sys/module/nvme_core/parameters/io_timeout && echo 10 >/sys/module/nvme_core/parameters/admin_timeout'
setup "policy routing: $hip <-> $tip over the veth pair" policy_routing

for c in "${cases[@]}"; do
	"case_${c//-/_}"
done

policy_routing_undo
timed "unload the ULPs" 60 modprobe -r nvme-rdma nvmet-rdma
if [ "$kind" = rsiw ]; then
	timed "rmmod rsiw" 60 rmmod rsiw
else
	timed "rmmod $kind" 60 modprobe -r $kind
fi
dmesg >"$OUT/dmesg-nvmeof-linkfault.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
