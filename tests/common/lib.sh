# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# Helpers for guest-side test scripts (run inside scripts/vm-run.sh).
# Each check of rsiw prints "ok - NAME" or "not ok - NAME"; a check of a
# baseline (Linux siw, TCP) rather than of rsiw prints "ok - [siw] NAME"
# or "not ok - [siw] NAME"; something not run prints "skip - NAME:
# REASON" (never a pass); a setup step prints a "# setup: ..." line, or
# "not ok - setup: ..." and ends the script. `finish` prints the "N
# passed, N failed" line and sets the exit status (from rsiw's failures;
# in baseline_mode, from the baseline's too).

RSIW_ROOT=${RSIW_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# shellcheck disable=SC2034 # read by the guest scripts that source this
OUT=${RSIW_VM_OUT:-/tmp}
passed=0
failed=0
skipped=0
base_passed=0
base_failed=0

pass() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "not ok - $*"; }
# skip NAME: REASON: NAME was not run, for REASON (what would run it).
skip() { skipped=$((skipped + 1)); echo "skip - $*"; }
# base_pass / base_fail NAME: a check of the baseline, not of rsiw.
base_pass() { base_passed=$((base_passed + 1)); echo "ok - [siw] $*"; }
base_fail() { base_failed=$((base_failed + 1)); echo "not ok - [siw] $*"; }

# check NAME COMMAND...: passes when COMMAND succeeds.
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

# check_base NAME COMMAND...: check, of the baseline (siw, TCP).
check_base() {
	local name=$1
	shift
	if "$@"; then base_pass "$name"; else base_fail "$name"; fi
}

# setup NAME COMMAND...: a step that prepares a test rather than tests
# rsiw (a module loaded, a link or a device added): a "# setup: NAME"
# line when COMMAND succeeds; otherwise "not ok - setup: NAME", the end
# of the kernel log, and the script ends (nothing after it can mean
# anything).
setup() {
	local name=$1
	shift
	if "$@"; then
		echo "# setup: $name"
		return 0
	fi
	fail "setup: $name"
	dmesg | tail -20 | sed 's/^/#   /'
	finish
	exit 1
}

# to FILE COMMAND...: runs COMMAND with its output in FILE (inside check).
to() {
	local file=$1
	shift
	"$@" >"$file" 2>&1
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; fi
}

# baseline_mode: from here on every check is the baseline's ("[siw]"):
# for a script run on siw alone (its KIND), or the end of a guest that
# checks only siw's side (its teardown and kernel log). Its exit status
# then follows the baseline's failures.
baseline_mode() {
	pass() { base_pass "$@"; }
	fail() { base_fail "$@"; }
	baseline_exit=1
}

# expect_eq_base NAME EXPECTED ACTUAL: expect_eq, of the baseline.
expect_eq_base() {
	if [ "$2" = "$3" ]; then base_pass "$1"; else base_fail "$1 (expected '$2', got '$3')"; fi
}

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds.
wait_for() {
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}

# perftest_client COMMAND...: COMMAND (a perftest -R client, under any
# wrappers) with perftest-connect-delay.so preloaded, so that its data
# connection waits for the server's listener: perftest 4.5-0.17's server
# listens for it only after the handshake the client connects right after
# (tests/progs/perftest-connect-delay.c has the details).
PERFTEST_SHIM=$RSIW_ROOT/tests/progs/perftest-connect-delay.so
perftest_client() {
	[ -f "$PERFTEST_SHIM" ] || { echo "no $PERFTEST_SHIM: make provider" >&2; return 1; }
	LD_PRELOAD="$PERFTEST_SHIM${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
}

# perftest_bw TOOL SERVER CLIENT SDEV CDEV [WRAPPER...]: perftest TOOL
# (ib_write_bw, ib_read_bw, ib_send_bw) with rdma_cm (-R), 200 messages
# of 64 KiB: its server on device SDEV at address SERVER, its client on
# CDEV from CLIENT, both run under WRAPPER (e.g. env LD_LIBRARY_PATH=...)
# if given. Checks that the client runs, the server exits 0 and the
# client's result row reports a bandwidth above 0, and prints the average.
# PERFTEST_TAG, if set, goes into the check names and output files
# ($OUT/TOOL[-TAG]-server.txt, -client.txt).
perftest_bw() {
	local t=$1 srv=$2 cli=$3 sdev=$4 cdev=$5 server row
	local f="$OUT/$t${PERFTEST_TAG:+-$PERFTEST_TAG}" d="$t -R${PERFTEST_TAG:+ ($PERFTEST_TAG)}"
	shift 5
	wait_for $((30 * TF)) not_listening 18515
	"$@" timeout 120 "$t" -R -d "$sdev" -s 65536 -n 200 >"$f-server.txt" 2>&1 &
	server=$!
	wait_for $((30 * TF)) listening 18515
	check "$d: the client runs 200 messages of 64 KiB" \
		to "$f-client.txt" perftest_client "$@" timeout 120 "$t" -R -d "$cdev" --source_ip "$cli" -s 65536 -n 200 "$srv"
	wait $server
	expect_eq "$d: the server exits 0" 0 $?
	# "#bytes #iterations BW-peak BW-average MsgRate"
	row=$(grep -E '^ +65536 +200 ' "$f-client.txt")
	echo "# $t${PERFTEST_TAG:+ ($PERFTEST_TAG)}: $(echo "$row" | awk '{print $4 " MB/s average"}')"
	check "$d: its result row for 200 messages of 64 KiB, a bandwidth above 0" \
		awk -v bw="$(echo "$row" | awk '{print $4}')" 'BEGIN { exit !(bw > 0) }'
}

# rdma_core_find VERSION: the private rdma-core VERSION with rsiw's
# provider built in its tree (scripts/build-rdma-core.sh VERSION) that
# the checks in tests/progs/rdma-core-VERSION (make -C tests/progs
# RDMA_CORE=<prefix>) are linked against. Sets RC (the prefix, from the
# checks' runpath), RC_PROGS and RC_PROVIDER (the prefix's
# lib/libibverbs/librsiw-rdmavNN.so); if any is missing, fails with the
# reason in RC_WHY (empty otherwise).
rdma_core_find() {
	local p
	RC_WHY=""
	RC_PROGS=$RSIW_ROOT/tests/progs/rdma-core-$1
	RC=$(readelf -d "$RC_PROGS/rsiw-uverbs-check" 2>/dev/null | sed -n 's/.*runpath: \[\(.*\)\/lib\]/\1/p')
	RC_PROVIDER=$(ls "$RC"/lib/libibverbs/librsiw-rdmav*.so 2>/dev/null | head -1)
	for p in rsiw-uverbs-check rsiw-ring-check rsiw-flush-check; do
		[ -x "$RC_PROGS/$p" ] || RC_WHY="no $RC_PROGS/$p (make -C tests/progs RDMA_CORE=<prefix>)"
	done
	if [ -z "$RC_WHY" ] && { [ -z "$RC" ] || [ "$(cat "$RC/VERSION" 2>/dev/null)" != "$1.0" ]; }; then
		RC_WHY="the checks' runpath (${RC:-none}) is no rdma-core $1 prefix (scripts/build-rdma-core.sh $1)"
	fi
	if [ -z "$RC_WHY" ] && { [ -z "$RC_PROVIDER" ] || [ "$(cat "$RC/etc/libibverbs.d/rsiw.driver" 2>/dev/null)" != "driver rsiw" ]; }; then
		RC_WHY="$RC has no rsiw provider (lib/libibverbs/librsiw-rdmavNN.so, etc/libibverbs.d/rsiw.driver)"
	fi
	[ -z "$RC_WHY" ]
}

# rdma_core_pabi PREFIX: the private ABI of PREFIX's libibverbs (the NN of
# the IBVERBS_PRIVATE_NN symbol version it exports).
rdma_core_pabi() {
	objdump -T "$1/lib/libibverbs.so.1" | sed -n 's/.*IBVERBS_PRIVATE_\([0-9][0-9]*\).*/\1/p' | sort -u
}

# mapped_provider PID: the rsiw provider library mapped by PID or by one
# of its children (a program started under timeout or env), as a path.
mapped_provider() {
	local p
	for p in "$1" $(pgrep -P "$1"); do
		grep -oE '/[^ ]*/librsiw[^ /]*\.so[^ /]*$' /proc/"$p"/maps 2>/dev/null | head -1
	done | head -1
}

# listening PORT [NETNS]: a TCP listener on PORT (an rdma_cm listener on
# iWARP is one), in network namespace NETNS if given.
listening() {
	if [ -n "${2:-}" ]; then
		ip netns exec "$2" ss -Hltn "sport = :$1"
	else
		ss -Hltn "sport = :$1"
	fi | grep -q .
}

# not_listening PORT [NETNS]: no TCP listener on PORT (yet, or any more).
not_listening() { ! listening "$@"; }

# counter DEV NAME: a port counter of rsiw device DEV as `rdma statistic
# show link` prints it.
counter() {
	rdma statistic show link "$1/1" | awk -v n="$2" '{ for (i = 1; i < NF; i++) if ($i == n) { print $(i + 1); exit } }'
}

# median: the median of the numbers on stdin (separated by spaces or
# newlines; nothing if there are none).
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# mpi_pingpong NETNS N SIZE [PROVIDER]: bench/mpi-pingpong.py in two
# Open MPI ranks in NETNS, as root, through libfabric's RDM endpoint only
# (the OFI MTL with PROVIDER, by default verbs;ofi_rxm: no TCP or
# shared-memory fallback).
mpi_pingpong() {
	ip netns exec "$1" env HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		timeout 300 mpirun -np 2 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "${4:-verbs;ofi_rxm}" \
		-x RDMAV_DRIVERS "$RSIW_ROOT/bench/mpi-pingpong.py" "$2" "$3"
}

# bench_netns ADDR_A ADDR_B: namespaces bA and bB joined by veth bcA
# (ADDR_A/24, in bA) and bcB (ADDR_B/24, in bB), loopback up, RDMA
# devices shared across namespaces: what the benchmarks and profiles use,
# so that traffic crosses the veth rather than lo.
bench_netns() {
	rdma system set netns shared 2>/dev/null
	ip netns add bA && ip netns add bB &&
		ip link add bcA type veth peer name bcB &&
		ip link set bcA netns bA && ip link set bcB netns bB &&
		ip -n bA addr add "$1/24" dev bcA && ip -n bB addr add "$2/24" dev bcB &&
		ip -n bA link set lo up && ip -n bA link set bcA up &&
		ip -n bB link set lo up && ip -n bB link set bcB up
}

# qperf_us: the latency in qperf's output (on stdin), in µs.
qperf_us() {
	awk '$1 == "latency" { v = $3; if ($4 == "ms") v *= 1000; if ($4 == "ns") v /= 1000; print v }'
}

# qperf_msgs: the messages qperf sent, from its -vv output on stdin.
qperf_msgs() {
	awk '$1 == "loc_send_msgs" { gsub(",", "", $3); print $3 }'
}

# local_veth IF0 ADDR0 IF1 ADDR1: a veth pair in this namespace, ADDRn/24
# on IFn, both up. A connection between the two local addresses runs over
# lo, so accept_local is on and rp_filter off (rdma_cm resolves the peer
# with ARP out of the bound device).
local_veth() {
	ip link add "$1" type veth peer name "$3" &&
		ip addr add "$2/24" dev "$1" && ip addr add "$4/24" dev "$3" &&
		ip link set "$1" up && ip link set "$3" up || return
	local c
	for c in all "$1" "$3"; do
		sysctl -qw "net.ipv4.conf.$c.accept_local=1" "net.ipv4.conf.$c.rp_filter=0"
	done
}

# debug_kernel: this guest runs the debug flavour (kmemleak present):
# KASAN's quarantine holds freed objects back and every step is several
# times slower, so slab and time bounds made for the lean kernel do not
# hold; kmemleak's scan in check_dmesg_clean decides about leaks.
debug_kernel() { [ -w /sys/kernel/debug/kmemleak ]; }
# uml_guest: this guest is the test kernel as User-Mode Linux
# (scripts/uml-run.sh names its output directory on the command line).
uml_guest() { grep -q 'rsiw\.uml_out=' /proc/cmdline; }
# TF: what a guest's time bounds are multiplied by: 4 on the debug
# kernel (the factor scripts/lib.sh's RSIW_TIME_FACTOR gives the guest's
# whole time limit there), 1 on the lean one.
TF=${RSIW_TIME_FACTOR:-1}
debug_kernel && TF=4

# slab_check NAME COMMAND...: a check of a slab bound (unreclaimable slab,
# objects in use). On the debug kernel KASAN's quarantine holds freed
# objects back (up to 1/32 of memory) and kmemleak tracks every
# allocation in objects of its own, so no such bound holds there: a skip
# line says so, and kmemleak's scan in check_dmesg_clean looks for the
# leaks instead.
slab_check() {
	local name=$1
	shift
	if debug_kernel; then
		skip "$name: the debug kernel's KASAN quarantine holds freed objects back, so no slab bound holds; kmemleak's scan (the dmesg check) looks for leaks, the lean kernel checks this bound"
	else
		check "$name" "$@"
	fi
}

# KERNEL_TROUBLE: what in a kernel log fails a test (an extended regex):
# warnings, BUGs, oopses, a crashed or trapped user process, refcount and
# sanitizer reports, hung tasks, RCU stalls, soft lockups.
KERNEL_TROUBLE='WARNING:|BUG:|Oops|general protection|segfault at|traps:|refcount_t:|UBSAN:|KASAN:|hung_task|blocked for more than|rcu_sched self-detected|soft lockup'

# check_dmesg_clean NAME [EXPLAINED]: fails on any kernel warning, bug,
# oops, leak report or hung task, and on any user-space crash the kernel
# logs (a process killed by SIGSEGV, SIGBUS, SIGILL or a trap: "segfault
# at", "traps:", "general protection"). EXPLAINED, an extended regex,
# drops lines the caller has already checked and explained (a known crash
# of a third-party tool, verified from its core).
check_dmesg_clean() {
	local bad leaks explained=${2:-}
	# Debug kernels: a kmemleak scan now, rather than at its 10-minute
	# period; suspects whose allocation trace passes through rsiw or the
	# RDMA core count, boot-time ones do not.
	if debug_kernel; then
		echo scan >/sys/kernel/debug/kmemleak
		sleep 6
		echo scan >/sys/kernel/debug/kmemleak
		leaks=$(awk 'function flush() { if (keep) print o }
			/^unreferenced object/ {flush(); o = $0; keep = 0; next}
			/rsiw|ib_|rdma|iw_cm|iwcm/ {keep = 1}
			END {flush()}' /sys/kernel/debug/kmemleak)
		if [ -n "$leaks" ]; then
			echo "# kmemleak suspects (rsiw/RDMA traces):"
			echo "$leaks" | sed 's/^/#   /'
			fail "$1 (kmemleak)"
			return
		fi
	fi
	bad=$(dmesg | grep -E "$KERNEL_TROUBLE|kmemleak:" || true)
	if [ -n "$explained" ] && [ -n "$bad" ]; then
		bad=$(echo "$bad" | grep -vE "$explained" || true)
	fi
	if [ -z "$bad" ]; then pass "$1"; else fail "$1"; echo "$bad" | sed 's/^/#   /'; fi
}

finish() {
	local extra=""
	[ "$skipped" = 0 ] || extra="$extra, $skipped skipped"
	[ "$base_passed$base_failed" = 00 ] || extra="$extra; baseline [siw]: $base_passed passed, $base_failed failed"
	echo "$passed passed, $failed failed$extra"
	[ "$failed" = 0 ] && { [ "${baseline_exit:-0}" = 0 ] || [ "$base_failed" = 0 ]; }
}

# nvmet_export NQN DEVICE ADDR: an NVMe-oF subsystem with one namespace on
# DEVICE, any host allowed, on an RDMA port at ADDR:4420 (nvmet configfs).
nvmet_export() {
	local nqn=$1 dev=$2 addr=$3 cfg=/sys/kernel/config/nvmet
	mkdir $cfg/subsystems/$nqn &&
		echo 1 >$cfg/subsystems/$nqn/attr_allow_any_host &&
		mkdir $cfg/subsystems/$nqn/namespaces/1 &&
		echo "$dev" >$cfg/subsystems/$nqn/namespaces/1/device_path &&
		echo 1 >$cfg/subsystems/$nqn/namespaces/1/enable &&
		mkdir -p $cfg/ports/1 &&
		echo rdma >$cfg/ports/1/addr_trtype &&
		echo ipv4 >$cfg/ports/1/addr_adrfam &&
		echo "$addr" >$cfg/ports/1/addr_traddr &&
		echo 4420 >$cfg/ports/1/addr_trsvcid &&
		ln -s $cfg/subsystems/$nqn $cfg/ports/1/subsystems/$nqn
}

# nvmet_unexport NQN: undoes nvmet_export.
nvmet_unexport() {
	local nqn=$1 cfg=/sys/kernel/config/nvmet
	rm -f $cfg/ports/1/subsystems/$nqn
	rmdir $cfg/ports/1 $cfg/subsystems/$nqn/namespaces/1 $cfg/subsystems/$nqn 2>/dev/null
}

# nvme_connect NQN ADDR [OPTION...]: the NVMe-oF host side (fixed host
# identity); OPTIONs go to nvme connect (e.g. --host-traddr=, --reconnect-delay=).
nvme_connect() {
	local hid=5b2f1c2e-6d7a-4b8c-9e0f-112233445566 nqn=$1 addr=$2
	shift 2
	timeout 60 nvme connect -t rdma -a "$addr" -s 4420 -n "$nqn" \
		--hostnqn=nqn.2014-08.org.nvmexpress:uuid:$hid --hostid=$hid "$@"
}

# veth_up IP: veth0 with IP/24 and its peer veth1, both up: the link of a
# one-guest test whose two ends (target and host, server and client) meet
# over an RDMA device on veth0.
veth_up() {
	ip link add veth0 type veth peer name veth1 &&
		ip addr add "$1/24" dev veth0 &&
		ip link set veth0 up && ip link set veth1 up
}

# nvmeof_over_rsiw NQN IP [PARAM...] [-- OPTION...]: one guest, both ends
# over rsiw0 on veth0 (IP/24): load rsiw (with module PARAMs), a
# memory-backed null_blk exported by nvmet-rdma, nvme-rdma connected to it
# (with nvme connect OPTIONs); sets $dev to the namespace's block device.
# The module, link and ULP loads are setup; nvmet-rdma's listener on rsiw,
# the connection and its namespace are checks.
nvmeof_over_rsiw() {
	local nqn=$1 ip=$2 params=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do params+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	setup "insmod rsiw.ko${params[*]:+ ${params[*]}}" insmod "$RSIW_ROOT/rsiw.ko" "${params[@]}"
	setup "veth0 ($ip/24) and veth1" veth_up $ip
	setup "rdma link add rsiw0 on veth0" rdma link add rsiw0 type rsiw netdev veth0
	setup "memory-backed null_blk" modprobe null_blk nr_devices=1 memory_backed=1 gb=1 queue_mode=2
	setup "nvmet-rdma and nvme-rdma load" modprobe -a nvmet-rdma nvme-rdma
	check "nvmet port on rsiw" nvmet_export $nqn /dev/nullb0 $ip
	check "nvme connect over rsiw" nvme_connect $nqn $ip "$@"
	# 10 s: the namespace's block device appears within a second of the
	# connect on the lean kernel; TF for the debug kernel.
	check "namespace appears" wait_for $((10 * TF)) bash -c 'ls /dev/nvme*n1 >/dev/null 2>&1'
	dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
}

# nvmeof_down NQN: the end of what nvmeof_over_rsiw NQN set up: nvme-rdma
# disconnected, the export removed, the ULPs unloaded, rsiw0 deleted and
# rsiw unloaded; all checks but the export's removal.
nvmeof_down() {
	check "nvme disconnect" bash -c "nvme disconnect -n $1 | grep -q 'disconnected 1'"
	nvmet_unexport "$1"
	check "unload the ULPs" modprobe -r nvme-rdma nvmet-rdma
	check "rdma link delete rsiw0" rdma link delete rsiw0
	check "rmmod rsiw" rmmod rsiw
}

# rdma_qps LINK: the QPs on LINK (DEV/PORT); no_qps LINK: none.
rdma_qps() { rdma resource show qp link "$1" 2>/dev/null | grep -c "lqpn"; }
no_qps() { [ "$(rdma_qps "$1")" = 0 ]; }

# same_tree A B: the files under A and under B, by path and content, are
# the same (what a client wrote, as its server holds it).
same_tree() { (cd "$1" && find . -type f | sort | xargs md5sum) >/tmp/sum-a; (cd "$2" && find . -type f | sort | xargs md5sum) >/tmp/sum-b; cmp -s /tmp/sum-a /tmp/sum-b; }

# netem_both NS_A DEV_A NS_B DEV_B [OPTIONS...]: the same tc netem on both
# ends of a link (so an RTT is twice a delay); without OPTIONS, none.
netem_both() {
	local na=$1 da=$2 nb=$3 db=$4
	shift 4
	ip netns exec "$na" tc qdisc del dev "$da" root 2>/dev/null
	ip netns exec "$nb" tc qdisc del dev "$db" root 2>/dev/null
	[ $# -gt 0 ] || return 0
	ip netns exec "$na" tc qdisc add dev "$da" root netem "$@" limit 10000 &&
		ip netns exec "$nb" tc qdisc add dev "$db" root netem "$@" limit 10000
}

# NFS over RDMA (nfs.sh, interop-fs.sh): NFSv4.2, RDMA on port 20049.
NFS_RDMA_PORT=20049

# nfs_server_up DIR TRANSPORT: nfsd with NFSv4 only, listening on TCP (2049;
# rpc.nfsd refuses NFSv4 without it) and, with TRANSPORT rdma, on RDMA too,
# exporting DIR as the NFSv4 root. nfs-utils keeps its export table and
# state under /var/lib/nfs: the guest's own (its root is the host's,
# read-only).
nfs_server_up() {
	local dir=$1 listen=(--tcp "--rdma=$NFS_RDMA_PORT")
	[ "$2" = tcp ] && listen=(--tcp)
	if ! mountpoint -q /var/lib/nfs; then
		mount -t tmpfs tmpfs /var/lib/nfs || return 1
		touch /var/lib/nfs/etab /var/lib/nfs/rmtab
		mkdir -p /var/lib/nfs/v4recovery
	fi
	mkdir -p "$dir"
	modprobe -a nfsd rpcrdma || return 1
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
	pgrep -x rpcbind >/dev/null || rpcbind || return 1
	exportfs -o rw,no_root_squash,insecure,fsid=0,no_subtree_check "*:$dir" || return 1
	pgrep -x rpc.mountd >/dev/null || rpc.mountd -N 3 || return 1
	# Grace period and lease at 10 s, the least nfsd takes: a new server
	# refuses OPENs until its grace period ends, and without nfsdcld (no
	# client tracking) /proc/fs/nfsd/v4_end_grace cannot end it early, so
	# wait it out here, not inside a timed transfer.
	rpc.nfsd -N 3 --no-udp "${listen[@]}" -G 10 -L 10 4 || return 1
	wait_for 30 grep -qx Y /proc/fs/nfsd/v4_end_grace
}

# nfs_server_down: undoes nfs_server_up (but the state directory).
nfs_server_down() {
	rpc.nfsd 0
	exportfs -ua
	pkill -x rpc.mountd
	pkill -x rpcbind
	umount /proc/fs/nfsd
	sleep 1
	modprobe -r nfsd rpcrdma
}

# nfs_proto MOUNTPOINT TRANSPORT: the NFS mount on MOUNTPOINT runs over
# TRANSPORT (its proto= in /proc/mounts).
nfs_proto() { grep " $1 " /proc/mounts | grep -q "proto=$2"; }

# nfs_mount ADDR MOUNTPOINT TRANSPORT [SECONDS]: mounts ADDR's NFSv4 root,
# retrying for SECONDS (default 20) while the server comes up.
nfs_mount() {
	local opts=vers=4.2,proto=rdma,port=$NFS_RDMA_PORT
	[ "$3" = tcp ] && opts=vers=4.2,proto=tcp
	mkdir -p "$2"
	wait_for "${4:-20}" mount -t nfs4 -o "$opts" "$1:/" "$2" 2>/dev/null
}

# rping_verified SERVER CLIENT ROUNDS LABEL: rping's server on SERVER and
# its client from CLIENT, ROUNDS rounds of 4 KiB (Sends, RDMA Read and
# Write) with every payload checked (-V). Checks the client, the server's
# exit status and that the client counted ROUNDS rounds. Output in
# $OUT/rping-server.txt and $OUT/rping-client.txt.
rping_verified() {
	local server
	timeout 120 rping -s -a "$1" -C "$3" -S 4096 -v >"$OUT/rping-server.txt" 2>&1 &
	server=$!
	wait_for $((30 * TF)) listening 7174
	check "$4: $3 rounds of 4 KiB, data verified" \
		to "$OUT/rping-client.txt" timeout 120 rping -c -a "$1" -I "$2" -C "$3" -S 4096 -V -v
	wait $server
	expect_eq "rping server exit status" 0 $?
	expect_eq "rping client rounds" "$3" "$(grep -c 'ping data' "$OUT/rping-client.txt")"
}

# dd_rates TAG FILE MIB: MIB of /tmp/pattern written to FILE by direct I/O,
# then read back into /tmp/back (1 MiB I/Os); prints the rates as a "#"
# line. Fails if either transfer does.
dd_rates() {
	local t0 t1 t2 w r
	rm -f /tmp/back
	t0=$(date +%s.%N)
	dd if=/tmp/pattern of="$2" bs=1M count="$3" oflag=direct status=none || return 1
	t1=$(date +%s.%N)
	dd if="$2" of=/tmp/back bs=1M count="$3" iflag=direct status=none || return 1
	t2=$(date +%s.%N)
	w=$(echo "$3 / ($t1 - $t0)" | bc -l | cut -c1-6)
	r=$(echo "$3 / ($t2 - $t1)" | bc -l | cut -c1-6)
	echo "# $1: direct write $w MiB/s, read $r MiB/s ($3 MiB, 1 MiB I/Os, TCG guest)"
}

# SMB Direct (smb.sh, interop-fs.sh): ksmbd serves SMB over TCP (445)
# and SMB Direct on iWARP's port 5445; cifs.ko mounts with `rdma`. The
# share's user is root (ksmbd maps it to uid 0); its configuration and
# password database are the guest's own, in /run/ksmbd-rsiw.
SMB_USER=root
SMB_PASS=rsiw-smb

# smb_server_up DIR [TRANSPORT]: ksmbd exporting DIR as share "rsiw",
# writable; up when it listens for TRANSPORT (rdma, the default: SMB
# Direct's iWARP port on an RDMA device; tcp: port 445).
smb_server_up() {
	local conf=/run/ksmbd-rsiw
	mkdir -p "$1" $conf || return 1
	rm -f $conf/pwd.db
	printf '[global]\n\tnetbios name = rsiw\n\tserver multi channel support = no\n[rsiw]\n\tpath = %s\n\tread only = no\n\tforce user = root\n' "$1" >$conf/ksmbd.conf
	ksmbd.adduser -i $conf/pwd.db -c $conf/ksmbd.conf -a $SMB_USER -p $SMB_PASS >/dev/null 2>&1 || return 1
	modprobe ksmbd || return 1
	ksmbd.mountd -c $conf/ksmbd.conf -u $conf/pwd.db >/dev/null 2>&1 || return 1
	if [ "${2:-rdma}" = tcp ]; then
		wait_for 20 listening 445
	else
		# The server's RDMA listener on iWARP's SMB Direct port.
		wait_for 20 bash -c 'rdma resource show cm_id 2>/dev/null | grep -q ":5445 "'
	fi
}

# smb_server_down: undoes smb_server_up.
smb_server_down() {
	ksmbd.control -s >/dev/null 2>&1
	wait_for 20 bash -c '! pgrep -x ksmbd.mountd >/dev/null'
	pkill -x ksmbd.mountd
	modprobe -r ksmbd 2>/dev/null || { sleep 2; modprobe -r ksmbd; }
}

# smb_mount ADDR MOUNTPOINT TRANSPORT [SECONDS]: mounts ADDR's share "rsiw"
# (SMB 3.1.1, no client cache: every I/O goes to the server), over SMB
# Direct with TRANSPORT rdma, else over TCP; retrying for SECONDS (default
# 20) while the server comes up.
smb_mount() {
	local opts=vers=3.1.1,cache=none,username=$SMB_USER,password=$SMB_PASS
	[ "$3" = rdma ] && opts=$opts,rdma
	mkdir -p "$2"
	wait_for "${4:-20}" mount -t cifs "//$1/rsiw" "$2" -o "$opts" 2>/dev/null
}

# smb_over_rdma: the one cifs connection is an SMB Direct one (cifs's
# DebugData marks it "RDMA").
smb_over_rdma() { grep -qx 'RDMA ' /proc/fs/cifs/DebugData; }

# small_files DIR [N]: N (default 200) small files f1..fN in DIR, one line
# each, through a mount (many small Sends); fails at the first that cannot
# be written.
small_files() {
	local i
	mkdir -p "$1" || return 1
	for i in $(seq 1 "${2:-200}"); do echo "small file $i $RANDOM" >"$1/f$i" || return 1; done
}

# nobody_bin DIR PROGRAM: tests/progs/PROGRAM and the provider copied into
# DIR, readable by all (the checkout may be private to root), and
# RDMAV_DRIVERS set to that copy of the provider: for a program run as
# nobody.
nobody_bin() {
	mkdir -p "$1" &&
		cp "$RSIW_ROOT/tests/progs/$2" "$RSIW_ROOT"/providers/rsiw/librsiw-rdmav*.so "$1/" &&
		chmod -R a+rX "$1" || return 1
	export RDMAV_DRIVERS=$1/librsiw
}

# local_rsiw_pair IF0 ADDR0 IF1 ADDR1: rsiw loaded, a local_veth pair,
# rsiw0 on IF0 and rsiw1 on IF1; each step a setup.
local_rsiw_pair() {
	setup "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
	setup "veth pair $1/$3" local_veth "$@"
	setup "rdma link add rsiw0 on $1" rdma link add rsiw0 type rsiw netdev "$1"
	setup "rdma link add rsiw1 on $3" rdma link add rsiw1 type rsiw netdev "$3"
}

# pmem_kunit_commit LEN: RDMA Commit from the kernel into /dev/pmem0 (an
# fsdax namespace; the guest's command line has
# kunit.filter_glob=rsiw_flush). Its first MiB zeroed (the pattern can only
# come from the test), loading rsiw with kunit_pmem_dev runs the rsiw_flush
# suite, whose pmem case RDMA-Writes LEN octets of "rsiw-pmem-flush\n"
# there and commits them. After rmmod: the suite's verdict, and the octets
# read back by O_DIRECT with a zero after them. Leaves the pattern in
# /tmp/pmem-expected.
pmem_kunit_commit() {
	local len=$1 maj min
	setup "zero the first MiB of /dev/pmem0" dd if=/dev/zero of=/dev/pmem0 bs=1M count=1 oflag=direct status=none
	# The case opens the device by number (KUnit cases run in kthreads,
	# which do not see this root filesystem's /dev).
	IFS=: read -r maj min </sys/block/pmem0/dev
	# The load runs the suite; its verdict is checked below.
	setup "insmod rsiw.ko (runs rsiw_flush on pmem0 = $maj:$min)" \
		insmod "$RSIW_ROOT/rsiw.ko" kunit_pmem_dev=$(((maj << 20) | min))
	dmesg >"$OUT/kunit-dmesg.txt"
	check "rmmod rsiw (after the KUnit suite)" rmmod rsiw
	check "rsiw_flush passed, pmem case included (not skipped)" \
		"$RSIW_ROOT/scripts/kunit-check.sh" --suites rsiw_flush \
		--require rsiw_flush.pmem_persistent_flush "$OUT/kunit-dmesg.txt"
	check "the pmem case says it committed $len octets" \
		grep -q "rsiw kunit: $len octets written and committed to /dev/pmem0" "$OUT/kunit-dmesg.txt"
	yes rsiw-pmem-flush | head -c "$len" >/tmp/pmem-expected
	dd if=/dev/pmem0 of=/tmp/pmem-got bs=4096 count=$((len / 4096)) iflag=direct status=none
	check "/dev/pmem0 holds the RDMA-written pattern after rmmod (O_DIRECT)" cmp /tmp/pmem-expected /tmp/pmem-got
	check "and only there: the next octet is still zero" \
		test "$(dd if=/dev/pmem0 bs=1 skip="$len" count=1 status=none | od -An -tx1 | tr -d ' ')" = 00
}
