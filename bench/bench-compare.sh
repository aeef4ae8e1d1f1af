#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of `bench/bench.sh --compare`: rsiw, Linux siw and plain TCP
# over the same path in one boot, interleaved rounds. Prints progress lines
# ("bench: ..."); writes every measurement to $OUT/raw.csv
# (metric,config,impl,round,value,unit,extra) and the run's facts to
# $OUT/meta.txt. bench/bench.sh turns them into tables and plots.
#   bench-compare.sh [--quick]
#
# The path. Userspace tools: two network namespaces (bA: 10.98.0.1 on bcA,
# bB: 10.98.0.2 on bcB) joined by a veth pair; RDMA devices in the RDMA
# core's "shared" netns mode, server in bA, client in bB. Kernel ULPs
# (nvme-rdma, nvmet-rdma, nvme-tcp, nvmet-tcp) open their sockets and
# rdma_cm IDs in the initial namespace only, so NVMe-oF runs over a second
# veth pair there (nv0: 10.98.1.1 host, nv1: 10.98.1.2 target) with policy
# routing that sends traffic between the two local addresses out of the
# veth instead of over lo. Both pairs get each configuration's MTU.
#
# Implementations per round, in this order: rsiw (mpa_crc=0), rsiw with
# mpa_crc=1 (module reloaded), siw (its CRC is compiled off in Linux), tcp.
# Overrides: BENCH_ROUNDS, BENCH_MTUS ("1500 9000"), BENCH_CRC ("off on"),
# BENCH_BW ("send write read"), BENCH_QPB ("send:4 write:4 read:1
# read:16": rsiw-qpbench's steady 64 KiB rows, OP:DEPTH), BENCH_FIO,
# BENCH_ITERS (perftest N),
# BENCH_MEM_PAIRS (connection pairs of the memory runs), BENCH_SCALE,
# BENCH_RPS=1 (receive packet steering on the veth pair), BENCH_SCALE_QPS,
# BENCH_IMPLS (the implementations of a round), BENCH_ALT (a second built
# tree, outside /tmp, measured as rsiw-alt), BENCH_SCALE_THREADS.
set -u
. "$(dirname "$0")/../tests/common/lib.sh"

quick=0
[ "${1:-}" = --quick ] && quick=1
export PATH="$RSIW_ROOT/bench/qpbench:$PATH"
provider="$RSIW_ROOT/providers/rsiw/librsiw"
raw=$OUT/raw.csv
mkdir -p "$OUT/logs"
logs=$OUT/logs

if [ $quick = 1 ]; then
	rounds=${BENCH_ROUNDS:-1}
	mtus=${BENCH_MTUS:-1500}
	crcs=${BENCH_CRC:-off}
	bw_ops=${BENCH_BW:-write}
	qpb_ops=${BENCH_QPB:-read:1 read:16}
	fio_jobs=${BENCH_FIO:-randread seqwrite}
	iters=${BENCH_ITERS:-300}  # perftest: N and 2N messages of 64 KiB
	qtime=${BENCH_QTIME:-1}  # qperf seconds per test
	fio_time=2          # fio seconds per job
	scale_qps=${BENCH_SCALE_QPS:-1 16}
	scale_time=1
	mem_qps=${BENCH_MEM_PAIRS:-64}
else
	rounds=${BENCH_ROUNDS:-3}
	mtus=${BENCH_MTUS:-1500 9000}
	crcs=${BENCH_CRC:-off on}
	bw_ops=${BENCH_BW:-send write read}
	qpb_ops=${BENCH_QPB:-send:4 write:4 read:1 read:16}
	fio_jobs=${BENCH_FIO:-randread seqread seqwrite}
	iters=${BENCH_ITERS:-1500}
	qtime=${BENCH_QTIME:-3}
	fio_time=5
	scale_qps=${BENCH_SCALE_QPS:-1 4 16 64}
	scale_time=3
	# 64 pairs: where Linux siw still creates its QPs (it refuses them
	# with ENOSPC at 256 pairs here); 512 pairs: 1024 connected QPs.
	mem_qps=${BENCH_MEM_PAIRS:-64 512}
fi
A=10.98.0.1
B=10.98.0.2
NT=10.98.1.2        # NVMe target (nv1)
NH=10.98.1.1        # NVMe host (nv0)
NQN=rsiw-bench-nqn
HOSTID=5b2f1c2e-6d7a-4b8c-9e0f-112233445577
nerr=0
t_start=$(date +%s)

progress() { printf 'bench: [%4ds] %s\n' $(($(date +%s) - t_start)) "$*"; }
# emit METRIC CONFIG IMPL ROUND VALUE UNIT [EXTRA]
emit() {
	echo "$1,$2,$3,$4,$5,$6,${7:-}" >>"$raw"
	progress "round $4 $2 $3: $1 = $5 $6${7:+ ($7)}"
}
problem() { nerr=$((nerr + 1)); progress "PROBLEM: $*"; }
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
# listening PORT: a TCP listener on PORT in bA or the initial namespace
# (where a driver's kernel socket may live).
listening() { { ina ss -Hltn "sport = :$1"; ss -Hltn "sport = :$1"; } 2>/dev/null | grep -q .; }
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }

# ------------------------------------------------------------------ setup
dmesg -C
ulimit -n 65536
echo "date=$(date -u +%Y-%m-%dT%H:%MZ)" >"$OUT/meta.txt"
{
	echo "kernel=$(uname -r)"
	if uml_guest; then echo "lane=uml"; else echo "lane=qemu"; fi
	echo "cpus=$(nproc)"
	echo "mem=$(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
	echo "mode=$([ $quick = 1 ] && echo quick || echo full)"
	echo "rounds=$rounds"
	echo "mtus=$mtus"
	echo "crc=$crcs"
	echo "bw_ops=$bw_ops"
	echo "qpb_ops=$qpb_ops"
	echo "fio_jobs=$fio_jobs"
	echo "perftest_iters=$iters"
	echo "qperf_time=$qtime"
	echo "fio_time=$fio_time"
	echo "scale_qps=$scale_qps"
	echo "mem_qps=$mem_qps"
	echo "scale_threads=${BENCH_SCALE_THREADS:-min(N, $(nproc))}"
	[ -z "${BENCH_ALT:-}" ] || echo "alt=$BENCH_ALT $(git -C "$BENCH_ALT" log -1 --format=%h 2>/dev/null)"
} >>"$OUT/meta.txt"
: >"$raw"
progress "mode $([ $quick = 1 ] && echo quick || echo full): $rounds round(s), MTU $mtus, rsiw CRC $crcs"

bench_netns $A $B
# BENCH_RPS=1: receive packet steering on both veth ends, every vCPU: the
# receive softirq of a packet leaves the CPU that sent it (over veth it
# otherwise runs on the sender's CPU, at its local_bh_enable).
if [ "${BENCH_RPS:-0}" = 1 ]; then
	cpus=$(printf '%x' $(((1 << $(nproc)) - 1)))
	ina sh -c "echo $cpus >/sys/class/net/bcA/queues/rx-0/rps_cpus" &&
		inb sh -c "echo $cpus >/sys/class/net/bcB/queues/rx-0/rps_cpus" ||
		problem "BENCH_RPS: rps_cpus"
	echo "rps=$cpus" >>"$OUT/meta.txt"
	progress "RPS on the veth pair: CPUs $cpus"
fi

ip link add nv0 type veth peer name nv1
ip addr add $NH/24 dev nv0
ip addr add $NT/24 dev nv1
ip link set nv0 up
ip link set nv1 up
for c in all nv0 nv1; do
	sysctl -qw net.ipv4.conf.$c.accept_local=1 net.ipv4.conf.$c.rp_filter=0
done
# Locally generated packets to the other end's address leave through the
# veth (tables 10, 11) before the local table is consulted. Without policy
# routing in the kernel (CONFIG_IP_MULTIPLE_TABLES) they go over lo, whose
# MTU then takes each configuration's value instead.
nvme_path=veth
if ip rule add pref 10 to $NT iif lo lookup 10 2>/dev/null; then
	ip rule add pref 11 to $NH iif lo lookup 11
	ip route add $NT dev nv0 src $NH table 10
	ip route add $NH dev nv1 src $NT table 11
	ip rule add pref 100 lookup local
	ip rule del pref 0
	case "$(ip route get $NT from $NH)" in
	*"dev nv0"*) ;;
	*) problem "routing $NH -> $NT does not leave through nv0" ;;
	esac
else
	nvme_path=lo
	progress "NVMe-oF: no policy routing in this kernel (CONFIG_IP_MULTIPLE_TABLES): host and target talk over lo, lo's MTU set to each configuration's"
fi
echo "nvme_path=$nvme_path" >>"$OUT/meta.txt"

set_mtu() {
	ina ip link set bcA mtu "$1"
	inb ip link set bcB mtu "$1"
	ip link set nv0 mtu "$1"
	ip link set nv1 mtu "$1"
	[ $nvme_path = lo ] && ip link set lo mtu "$1"
	return 0
}

check "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
check "modprobe siw" modprobe siw
check "null_blk" modprobe null_blk nr_devices=1 gb=4 queue_mode=2
check "nvmet-rdma, nvme-rdma" modprobe -a nvmet-rdma nvme-rdma
nvme_tcp=0
if modprobe -a nvmet-tcp nvme-tcp 2>/dev/null; then
	nvme_tcp=1
else
	progress "NVMe/TCP: nvme-tcp/nvmet-tcp are not in this kernel (CONFIG_NVME_TCP, CONFIG_NVME_TARGET_TCP): n/a"
	echo "nvme_tcp=n/a (not in kernel)" >>"$OUT/meta.txt"
fi
[ "$failed" = 0 ] || { finish; exit 1; }

# rsiw_load IMPL: (re)load rsiw with the module parameters of variant IMPL
# (rsiw-crc: MPA CRC requested; rsiw-crck: the same with the kernel's
# crc32c() whatever the module measured at load, crc32c_impl=1; rsiw-copy: no zero-copy TX, zcopy_min=0;
# rsiw-zcl: zero-copy TX over loopback and veth too, zcopy_local=1;
# rsiw-seg1: one TCP segment per FPDU on local routes too,
# fpdu_segs_local=1; rsiw-rxsoft: bulk read in the receive softirq,
# rx_offload_min=0; rsiw-alt: the module and provider of another built
# tree, BENCH_ALT, e.g. an older commit; the others: the defaults) unless it is loaded with them.
rsiw_params=""
rsiw_load() {
	local want=""
	case $1 in
	rsiw-crc) want="mpa_crc=1" ;;
	rsiw-crck) want="mpa_crc=1 crc32c_impl=1" ;;
	rsiw-copy) want="zcopy_min=0" ;;
	rsiw-zcl) want="zcopy_local=1" ;;
	rsiw-seg1) want="fpdu_segs_local=1" ;;
	rsiw-rxsoft) want="rx_offload_min=0" ;;
	rsiw-alt) want="alt" ;;
	esac
	[ "$want" = "$rsiw_params" ] && grep -q '^rsiw ' /proc/modules && return 0
	rmmod rsiw || problem "rmmod rsiw"
	if [ "$want" = alt ]; then
		insmod "$BENCH_ALT/rsiw.ko" || problem "insmod $BENCH_ALT/rsiw.ko"
	else
		# shellcheck disable=SC2086 # the parameters, split
		insmod "$RSIW_ROOT/rsiw.ko" $want || problem "insmod rsiw.ko $want"
	fi
	rsiw_params=$want
}

crc_lines() { dmesg | grep -c "rsiw: qp .* connected as .*: CRC $1"; }

# dev_up IMPL / dev_down IMPL: the userspace pair of devices (0 in bA, 1 in bB).
drv_of() { case "$1" in rsiw*) echo rsiw ;; *) echo "$1" ;; esac; }
dev_up() {
	local d
	d=$(drv_of "$1")
	ina rdma link add ${d}0 type $d netdev bcA || problem "rdma link add ${d}0"
	inb rdma link add ${d}1 type $d netdev bcB || problem "rdma link add ${d}1"
	if [ "$1" = rsiw-alt ]; then
		export RDMAV_DRIVERS="$BENCH_ALT/providers/rsiw/librsiw"
	elif [ $d = rsiw ]; then
		export RDMAV_DRIVERS="$provider"
	else
		unset RDMAV_DRIVERS
	fi
	# rsiw-cmds: rsiw with its provider on uverbs commands (no shared
	# rings), what the rings are measured against.
	if [ "$1" = rsiw-cmds ]; then export RSIW_NO_RINGS=1; else unset RSIW_NO_RINGS; fi
}
dev_down() {
	local d
	d=$(drv_of "$1")
	rdma link delete ${d}0 || problem "rdma link delete ${d}0"
	rdma link delete ${d}1 || problem "rdma link delete ${d}1"
	unset RDMAV_DRIVERS RSIW_NO_RINGS
}

# ------------------------------------------------------------ userspace
# perftest_secs TOOL DEV N: wall-clock seconds of one client run of N 64 KiB
# messages (server in bA, client in bB); one retry (siw's accept race).
# PERFTEST_EXTRA: more options for both ends (the rsiw-d16 variant's).
perftest_secs() {
	local tool=$1 d=$2 n=$3 try t0 t1 s
	for try in 1 2; do
		# shellcheck disable=SC2086 # the options, split
		ina timeout 120 $tool -R -F -d ${d}0 -s 65536 -n $n ${PERFTEST_EXTRA:-} >"$logs/$tool-server.txt" 2>&1 &
		s=$!
		wait_for 30 listening 18515 || true
		t0=$(now)
		# shellcheck disable=SC2086 # the options, split
		if inb timeout 120 $tool -R -F -d ${d}1 --source_ip $B -s 65536 -n $n ${PERFTEST_EXTRA:-} $A >"$logs/$tool-client.txt" 2>&1; then
			t1=$(now)
			wait $s
			calc "$t1 - $t0"
			return 0
		fi
		kill $s 2>/dev/null
		wait $s 2>/dev/null
		progress "$tool over ${d}: client failed (try $try): $(tail -1 "$logs/$tool-client.txt")" >&2
		sleep 1
	done
	return 1
}

# qpb IMPL CONFIG ROUND: 64 KiB bandwidth in steady state, one process
# pair and no setup inside the timing (rsiw-qpbench, one QP for qtime
# seconds): for each "OP:DEPTH" of BENCH_QPB, Sends, RDMA Writes or Reads
# with DEPTH of them in flight (a Read client's connection asks for an
# ORD of DEPTH; a Send server keeps 1024 receives posted). qperf's
# rc_rdma_read_bw is the read:1 case: its rdma_cm connect asks for
# initiator_depth 1, so it keeps one Read in flight, a 64 KiB request and
# response loop. TCP: one rsiw-qpbench stream of 64 KiB writes, the
# baseline of every row.
qpb() {
	local impl=$1 cfg=$2 r=$3 op mode d line
	for op in $qpb_ops; do
		mode=${op%%:*} d=${op##*:}
		[ $impl = tcp ] && mode=tcp
		if qpbench_run 1 $mode $qtime -d $d; then
			line=$(grep ^aggregate_mbps "$logs/qpbench-client.txt")
			set -- $line
			if [ $impl = tcp ]; then
				local o
				for o in $qpb_ops; do
					emit "qp_${o%%:*}_d${o##*:}" "$cfg" tcp "$r" "$2" MB/s "one TCP stream (rsiw-qpbench -m tcp)"
				done
				return
			fi
			emit "qp_${mode}_d$d" "$cfg" "$impl" "$r" "$2" MB/s "$(grep ^cpus_busy "$logs/qpbench-client.txt")"
		else
			problem "rsiw-qpbench -m $mode -d $d over $impl: $(tail -1 "$logs/qpbench-client.txt")"
		fi
	done
}

# bw_rdma IMPL CONFIG ROUND: 64 KiB Send, Write, Read bandwidth (MB/s,
# 10^6 octets) as N messages over the difference of the 2N and N runs.
# The difference must be at least 1.5 s to stand above the run-to-run
# noise of connection setup (0.5-2 s under TCG): N starts at BENCH_ITERS
# and grows (up to 32x; from 8x on, 1 s will do) until it is, so a fast
# implementation is timed over as many seconds as a slow one.
bw_rdma() {
	local impl=$1 cfg=$2 r=$3 d t m s1 s2 n grow next
	d=$(drv_of "$impl")
	PERFTEST_EXTRA=""
	# rsiw-d16: perftest keeps 16 messages in flight (-t 16) instead of
	# its default 128 (8 MiB of 64 KiB messages, more than the socket's
	# send buffer holds).
	[ "$impl" = rsiw-d16 ] && PERFTEST_EXTRA="-t 16"
	for t in $bw_ops; do
		m=bw_$t
		n=$iters
		while :; do
			if ! { s1=$(perftest_secs ib_${t}_bw $d $n) && s2=$(perftest_secs ib_${t}_bw $d $((2 * n))); }; then
				problem "$m $impl: perftest failed (N=$n)"
				break
			fi
			# At the largest N a second will do.
			if awk "BEGIN { exit !($s2 - $s1 >= 1.5 || ($n >= 8 * $iters && $s2 - $s1 >= 1.0)) }"; then
				emit $m "$cfg" "$impl" "$r" "$(calc "$n * 65536 / ($s2 - $s1) / 1e6")" MB/s "N=$n ${s1}s 2N=${s2}s"
				break
			fi
			# Aim at a 3 s difference from what this pair suggests.
			# (At most 32x BENCH_ITERS: a step that would pass it runs
			# at 32x itself, and only a 32x pair that is still too close
			# is a problem.)
			grow=$(awk "BEGIN { d = $s2 - $s1; if (d < 0.2) d = 0.2; g = int(3 / d + 0.999); if (g < 2) g = 2; if (g > 8) g = 8; print g }")
			next=$((n * grow))
			[ $next -gt $((32 * iters)) ] && next=$((32 * iters))
			if [ $next -le $n ]; then
				problem "$m $impl: 2N run ($s2 s) not 1 s slower than N run ($s1 s) at N=$n"
				break
			fi
			progress "$m $impl: N=$n gave ${s1}s and 2N ${s2}s; again with N=$next"
			n=$next
		done
	done
}

# qperf_val FILE: the figure qperf printed, as us or MB/s.
qperf_val() {
	awk '$1 == "bw" || $1 == "latency" {
		v = $3; u = $4
		if (u == "ns") v /= 1000; else if (u == "ms") v *= 1000; else if (u == "sec") v *= 1e6
		else if (u == "GB/sec") v *= 1000; else if (u == "KB/sec") v /= 1000
		else if (u == "bytes/sec") v /= 1e6
		printf "%.3f\n", v; exit }' "$1"
}

# qperf_run IMPL CONFIG ROUND METRIC UNIT ARGS...: one qperf client test,
# its RDMA CM connect delayed 200 ms: qperf 0.4.11's server sends its port
# before it listens (tests/progs/perftest-connect-delay.c).
qperf_run() {
	local impl=$1 cfg=$2 r=$3 m=$4 unit=$5 v try
	shift 5
	for try in 1 2; do
		if inb timeout 60 env PERFTEST_CONNECT_DELAY_FIRST=1 PERFTEST_CONNECT_DELAY_MS=200 \
			LD_PRELOAD="$PERFTEST_SHIM" qperf -t $qtime "$@" >"$logs/qperf-$m.txt" 2>&1 &&
			v=$(qperf_val "$logs/qperf-$m.txt") && [ -n "$v" ]; then
			emit "$m" "$cfg" "$impl" "$r" "$v" "$unit"
			return 0
		fi
		progress "qperf $m over $impl failed (try $try): $(tail -1 "$logs/qperf-$m.txt")"
	done
	problem "qperf $m $impl"
}

qperf_server_start() {
	ina qperf >"$logs/qperf-server.txt" 2>&1 &
	qserver=$!
	wait_for 30 listening 19765 || problem "qperf server did not listen"
}
qperf_server_stop() {
	kill $qserver 2>/dev/null
	wait $qserver 2>/dev/null
}

# ------------------------------------------------------------ NVMe-oF
nvmet_port() { # TRTYPE: export nullb0 at $NT:4420
	local cfg=/sys/kernel/config/nvmet
	mkdir -p $cfg/subsystems/$NQN/namespaces/1 &&
		echo 1 >$cfg/subsystems/$NQN/attr_allow_any_host &&
		echo /dev/nullb0 >$cfg/subsystems/$NQN/namespaces/1/device_path &&
		echo 1 >$cfg/subsystems/$NQN/namespaces/1/enable &&
		mkdir -p $cfg/ports/1 &&
		echo "$1" >$cfg/ports/1/addr_trtype &&
		echo ipv4 >$cfg/ports/1/addr_adrfam &&
		echo $NT >$cfg/ports/1/addr_traddr &&
		echo 4420 >$cfg/ports/1/addr_trsvcid &&
		ln -s $cfg/subsystems/$NQN $cfg/ports/1/subsystems/$NQN
}
nvmet_unport() {
	local cfg=/sys/kernel/config/nvmet
	rm -f $cfg/ports/1/subsystems/$NQN
	rmdir $cfg/ports/1 2>/dev/null
	echo 0 >$cfg/subsystems/$NQN/namespaces/1/enable 2>/dev/null
	rmdir $cfg/subsystems/$NQN/namespaces/1 $cfg/subsystems/$NQN 2>/dev/null
}
nvme_dev() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = $NQN ] || continue
		ls -d /dev/${c##*/}n1 2>/dev/null && return 0
	done
	return 1
}

# fio_run NAME DEV ARGS...: prints "READ_KIBS READ_IOPS WRITE_KIBS WRITE_IOPS".
fio_run() {
	local name=$1 dev=$2
	shift 2
	timeout $((fio_time + 60)) fio --name="$name" --filename="$dev" --direct=1 --ioengine=libaio \
		--iodepth=16 --runtime=$fio_time --time_based --ramp_time=1 --minimal "$@" \
		>"$logs/fio-$name.txt" 2>&1 || return 1
	awk -F';' '/^3;/ { print $7, $8, $48, $49; exit }' "$logs/fio-$name.txt"
}

# nvme_bench IMPL CONFIG ROUND: 4 KiB random read IOPS, 128 KiB sequential
# read and write MB/s from the nvme host on nv0 to the nvmet target on nv1.
nvme_bench() {
	local impl=$1 cfg=$2 r=$3 d tr dev out
	# The kernel ULP has no userspace rings: rsiw-cmds is rsiw here.
	[ "$impl" = rsiw-cmds ] && return 0
	[ -n "${fio_jobs// /}" ] || return 0
	d=$(drv_of "$impl")
	if [ $d = tcp ]; then
		tr=tcp
		if [ $nvme_tcp = 0 ]; then
			for m in $fio_jobs; do
				m=${m/randread/randread_4k}
				m=${m/seqread/seqread_128k}
				echo "nvme_${m/seqwrite/seqwrite_128k},$cfg,tcp,$r,NA,,not in kernel" >>"$raw"
			done
			return
		fi
	else
		tr=rdma
		rdma link add ${d}n0 type $d netdev nv0 || problem "rdma link add ${d}n0"
		rdma link add ${d}n1 type $d netdev nv1 || problem "rdma link add ${d}n1"
	fi
	if nvmet_port $tr; then
		host_addr=()
		[ $nvme_path = veth ] && host_addr=("--host-traddr=$NH")
		if timeout 60 nvme connect -t $tr -a $NT -s 4420 -n $NQN "${host_addr[@]}" \
			--hostnqn=nqn.2014-08.org.nvmexpress:uuid:$HOSTID --hostid=$HOSTID \
			>"$logs/nvme-connect.txt" 2>&1 && wait_for 20 nvme_dev >/dev/null; then
			dev=$(nvme_dev)
			for job in $fio_jobs; do
				case $job in
				randread) m=nvme_randread_4k a=(--rw=randread --bs=4k) f=2 scale="/ 1000" u=kIOPS ;;
				seqread) m=nvme_seqread_128k a=(--rw=read --bs=128k) f=1 scale="* 1024 / 1e6" u=MB/s ;;
				seqwrite) m=nvme_seqwrite_128k a=(--rw=write --bs=128k) f=3 scale="* 1024 / 1e6" u=MB/s ;;
				*) problem "unknown fio job $job"; continue ;;
				esac
				if out=$(fio_run $job "$dev" "${a[@]}"); then
					emit $m "$cfg" "$impl" "$r" "$(calc "$(echo "$out" | cut -d' ' -f$f) $scale")" $u
				else
					problem "fio $job over $impl"
				fi
			done
			timeout 60 nvme disconnect -n $NQN >/dev/null || problem "nvme disconnect ($impl)"
		else
			problem "nvme connect over $impl: $(tail -1 "$logs/nvme-connect.txt")"
		fi
	else
		problem "nvmet port ($tr)"
	fi
	nvmet_unport
	if [ $d != tcp ]; then
		rdma link delete ${d}n0 || problem "rdma link delete ${d}n0"
		rdma link delete ${d}n1 || problem "rdma link delete ${d}n1"
	fi
}

# ------------------------------------------------------ scaling, memory
port_seq=18600
# qpbench_run N MODE SECS [ARGS...]: an rsiw-qpbench server in bA and its
# client in bB over N connections of MODE for SECS seconds, on a port of
# their own, ARGS to both; the client's output in
# $logs/qpbench-client.txt. Fails if either did.
qpbench_run() {
	local n=$1 mode=$2 t=$3 p s
	shift 3
	port_seq=$((port_seq + 1))
	p=$port_seq
	ina timeout 120 rsiw-qpbench server -a $A -p $p -n $n -m $mode "$@" >"$logs/qpbench-server.txt" 2>&1 &
	s=$!
	wait_for 30 listening $p || true
	if inb timeout 120 rsiw-qpbench client -a $A -b $B -p $p -n $n -m $mode -t $t "$@" \
		>"$logs/qpbench-client.txt" 2>&1 && wait $s; then
		return 0
	fi
	kill $s 2>/dev/null
	wait $s 2>/dev/null
	return 1
}

# scale IMPL ROUND N: N QPs (or TCP connections) of 64 KiB Writes for
# scale_time seconds from min(N, vCPUs) client threads (BENCH_SCALE_THREADS
# sets the count; 1: one thread posts to every QP): aggregate MB/s, and
# per-QP min/max MB/s.
scale() {
	local impl=$1 r=$2 n=$3 mode=write line th mrs=""
	[ "$impl" = tcp ] && mode=tcp
	# rsiw-mrs: every connection with an MR of its own at both ends.
	[ "$impl" = rsiw-mrs ] && mrs=-M
	th=${BENCH_SCALE_THREADS:-$(nproc)}
	[ "$th" -gt "$n" ] && th=$n
	if qpbench_run $n $mode $scale_time -T $th $mrs; then
		line=$(grep ^aggregate_mbps "$logs/qpbench-client.txt")
		set -- $line
		emit scale_agg "mtu1500 q=$n" "$impl" "$r" "$2" MB/s "per-QP min $4 max $6"
		emit scale_fair "mtu1500 q=$n" "$impl" "$r" "$(calc "$4 / $6")" min/max "per-QP min $4 max $6 MB/s"
		# How many vCPUs the whole guest kept busy meanwhile (both ends,
		# the kernel's work included): near all of them, the machine is
		# what bounds the aggregate.
		line=$(grep ^cpus_busy "$logs/qpbench-client.txt")
		if [ -n "$line" ]; then
			set -- $line
			emit scale_cpu "mtu1500 q=$n" "$impl" "$r" "$2" vCPUs "of $4; user $6 system $8 softirq ${10}"
		fi
	else
		problem "rsiw-qpbench $n over $impl: $(tail -1 "$logs/qpbench-client.txt")"
	fi
}

kmem_kb() { # Slab + KernelStack + VmallocUsed + PageTables, kB
	awk '/^(Slab|KernelStack|VmallocUsed|PageTables):/ { s += $2 } END { print s }' /proc/meminfo
}
settle() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	sleep 2
}

connected_or_gone() { # PID FILE
	grep -q '^connected' "$2" || ! kill -0 "$1" 2>/dev/null
}

# memory IMPL ROUND N [warmup]: kernel memory per connected QP end (QP,
# rdma_cm ID, TCP socket; both ends live in this guest) for N QP pairs.
# With "warmup" nothing is recorded: the first run of a boot also pays
# the slab caches' one-time growth (measured: 43.9 KiB per QP end for
# rsiw's first run, 18.3-19.9 for its next two, siw 22.6-27.9), which
# would bias whichever implementation runs first.
memory() {
	local impl=$1 r=$2 n=$3 warm=${4:-} mode=write s c before after qps p hold=/tmp/bench-hold
	[ "$impl" = tcp ] && mode=tcp
	port_seq=$((port_seq + 1))
	p=$port_seq
	rm -f $hold
	settle
	before=$(kmem_kb)
	ina timeout 600 rsiw-qpbench server -a $A -p $p -n $n -m $mode >"$logs/qpmem-server.txt" 2>&1 &
	s=$!
	wait_for 30 listening $p || true
	inb timeout 600 rsiw-qpbench client -a $A -b $B -p $p -n $n -m $mode -w $hold >"$logs/qpmem-client.txt" 2>&1 &
	c=$!
	# Connected, or the client gave up (Linux siw refuses QPs past its
	# limits with ENOSPC): no point waiting the 500 s out.
	wait_for 500 connected_or_gone $c "$logs/qpmem-client.txt"
	if grep -q '^connected' "$logs/qpmem-client.txt"; then
		sleep 2
		after=$(kmem_kb)
		qps=$(rdma resource show qp 2>/dev/null | grep -c "link $(drv_of $impl)[01]/")
		[ "$impl" = tcp ] && qps=$(inb ss -Htn state established "dport = :$p" | wc -l)
		[ -n "$warm" ] || emit mem_per_qp "$n pairs" "$impl" "$r" "$(calc "($after - $before) / (2 * $n)")" KiB/QP \
			"kernel kB $before -> $after; $qps QPs (or client sockets) seen"
	elif [ "$impl" = siw ] && grep -q 'rdma_create_qp: No space left on device' "$logs/qpmem-client.txt"; then
		# Linux siw's own limit here, not a failed measurement.
		progress "note: siw refuses QPs at $n pairs (rdma_create_qp: ENOSPC); no figure"
		[ -n "$warm" ] || echo "mem_per_qp,$n pairs,siw,$r,NA,KiB/QP,siw refuses the QPs: ENOSPC" >>"$raw"
		# The tools themselves: $s and $c are the subshells around them,
		# and a server left waiting holds the device.
		pkill -f "rsiw-qpbench .* -p $p " 2>/dev/null
		wait $c $s 2>/dev/null
		return
	else
		problem "$n connections over $impl did not all connect: $(tail -1 "$logs/qpmem-client.txt")"
		# The tools themselves: $s and $c are the subshells around them,
		# and a server left waiting holds the device.
		pkill -f "rsiw-qpbench .* -p $p " 2>/dev/null
		wait $c $s 2>/dev/null
		return
	fi
	touch $hold
	wait $c || problem "rsiw-qpbench client ($impl, $n)"
	wait $s || problem "rsiw-qpbench server ($impl, $n)"
	rm -f $hold
}

# ------------------------------------------------------------ the rounds
impls_for() { # the implementations of one round at MTU $1
	# BENCH_IMPLS: a list of its own (rsiw, rsiw-crc, rsiw-crck, rsiw-cmds, rsiw-copy,
	# rsiw-zcl, rsiw-seg1, rsiw-rxsoft, rsiw-alt with BENCH_ALT, rsiw-d16 (perftest -t 16),
	# rsiw-mrs (scaling: an MR per connection), siw, tcp).
	if [ -n "${BENCH_IMPLS:-}" ]; then
		echo "$BENCH_IMPLS"
		return
	fi
	local l="rsiw"
	case " $crcs " in *" on "*) l="$l rsiw-crc" ;; esac
	case " $crcs " in *" off "*) ;; *) l=${l#rsiw } ;; esac
	echo "$l siw tcp"
}

for r in $(seq 1 "$rounds"); do
	for mtu in $mtus; do
		set_mtu $mtu
		for impl in $(impls_for $mtu); do
			cfg=mtu$mtu
			progress "round $r/$rounds MTU $mtu: $impl"
			crc=""
			case $impl in
			rsiw | rsiw-cmds | rsiw-copy | rsiw-zcl | rsiw-seg1 | rsiw-rxsoft | rsiw-alt | rsiw-d16) crc=off ;;
			rsiw-crc | rsiw-crck) crc=on ;;
			esac
			if [ -n "$crc" ]; then
				rsiw_load $impl
				crc_on0=$(crc_lines on)
				crc_off0=$(crc_lines off)
			fi
			if [ $impl = tcp ]; then
				qperf_server_start
				# One tcp_bw figure is the baseline of every 64 KiB
				# perftest row (none without them: BENCH_BW=" ").
				first=$(echo $bw_ops | cut -d' ' -f1)
				if [ -n "$first" ] && qperf_run tcp $cfg $r bw_$first MB/s -m 64K $A tcp_bw; then
					v=$(tail -1 "$raw" | cut -d, -f5)
					for m in $bw_ops; do
						[ $m = $first ] || echo "bw_$m,$cfg,tcp,$r,$v,MB/s,same tcp_bw run" >>"$raw"
					done
				fi
				qperf_run tcp $cfg $r lat_64 us -m 64 $A tcp_lat
				qperf_server_stop
				qpb tcp $cfg $r
			else
				dev_up $impl
				bw_rdma $impl $cfg $r
				qpb $impl $cfg $r
				qperf_server_start
				qperf_run $impl $cfg $r lat_64 us -cm1 -m 64 $A rc_lat
				qperf_server_stop
				dev_down $impl
			fi
			nvme_bench $impl $cfg $r
			if [ -n "$crc" ]; then
				# rsiw's connection log (rate-limited): this turn's
				# connections used the CRC setting it is labelled with.
				on=$(($(crc_lines on) - crc_on0))
				off=$(($(crc_lines off) - crc_off0))
				progress "rsiw connections logged this turn: $on with CRC on, $off with CRC off"
				if [ $crc = on ]; then ok=$((on > 0 && off == 0)); else ok=$((off > 0 && on == 0)); fi
				[ $ok = 1 ] || problem "rsiw turn labelled CRC $crc: $on connections with CRC on, $off off"
			fi
		done
	done
	set_mtu 1500
	rsiw_load rsiw
	# BENCH_SCALE: which implementations get the scaling and memory runs
	# (" ": none; rsiw variants as in BENCH_IMPLS).
	for impl in ${BENCH_SCALE:-rsiw siw tcp}; do
		case $impl in rsiw*) rsiw_load $impl ;; esac
		[ $impl != tcp ] && dev_up $impl
		for n in $scale_qps; do
			progress "round $r/$rounds scaling: $impl, $n QPs"
			scale $impl $r $n
		done
		for n in $mem_qps; do
			if [ "${mem_warmed:-0}" = 0 ]; then
				progress "round $r/$rounds memory: warm-up ($impl, $n QP pairs, not recorded)"
				memory $impl $r $n warmup
				mem_warmed=1
			fi
			progress "round $r/$rounds memory: $impl, $n QP pairs"
			memory $impl $r $n
		done
		[ $impl != tcp ] && dev_down $impl
	done
done

progress "done: $nerr problem(s)"
echo "problems=$nerr" >>"$OUT/meta.txt"
check "every measurement ran ($nerr problems)" test $nerr = 0
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg-bench.txt"
# Debian 12's qperf 0.4.11 server segfaults after every RDMA test, on
# any device (siw too): rdma_destroy_qp on its listening id, which has no
# QP (qperf's bug, fixed upstream; Documentation/usage.md). userspace.sh
# proves each such crash is that one from its core; here it is counted.
echo "# qperf server crashes (qperf 0.4.11's cm_close bug): $(dmesg | grep -cE 'qperf\[[0-9]+\]: segfault at 0 ')"
check_dmesg_clean "dmesg has no warnings, oopses or leaks (qperf's known crash aside)" \
	'qperf\[[0-9]+\]: segfault at 0 ip [0-9a-f]+ sp [0-9a-f]+ error 4 in libibverbs'

finish
