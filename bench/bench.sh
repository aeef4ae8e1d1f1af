#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Print the engine's performance figures (not a test: nothing here passes
# or fails on speed):
#   framing  MPA framing + CRC32c throughput for 4 KiB and 64 KiB messages
#            (tx build + rx parse, markers off and on), next to the fastest
#            CRC32c available on this CPU as the physical reference;
#   decode   decode + validate ns per DDP/RDMAP header.
#
#   bench/bench.sh --vm-tx [MIB [IMPLS]]
#            boots the test guest and runs the rsiw_tx_bench KUnit suite:
#            RDMA Write throughput over loopback TCP with copying TX
#            (zcopy_min=0) and zero-copy TX, CRC off and on, 64 KiB and
#            1 MiB messages, MIB MiB per run (default 64). IMPLS: the
#            crc32c_impl values to load the module with in turn (default
#            0, its own choice; "1 2": the kernel's crc32c() and rsiw's
#            table in one boot). Needs the test module built (make test).
#
#   bench/bench.sh --vm-atomics [OPS]
#            boots the test guest and runs the rsiw_atomic_bench KUnit
#            suite: RFC 7306 FetchAdd operations per second for 1, 4 and 16
#            QPs (each on its own loopback connection, posted from its own
#            work item) on one word and on distinct words of one MR, OPS per
#            QP (default 20000); then the responder's read-modify-write
#            called directly from 1, 2 and 4 work items (no TCP), 10 x OPS
#            each, on distinct words of one MR, one word, distinct MRs.
#            Needs the test module built (make test).
#
#   bench/bench.sh --compare [--quick] [--out DIR]
#            rsiw, Linux siw and plain TCP side by side in one test guest
#            (4 GiB, two network namespaces joined by veth): 64 KiB
#            Send/Write/Read bandwidth, 64 B latency, NVMe-oF with fio,
#            1-64 QPs scaling and fairness, kernel memory per QP at 1024
#            connected QPs; MTU 1500 and 9000, rsiw MPA CRC off and on,
#            3 interleaved rounds (--quick: MTU 1500, 1 round, small
#            counts; BENCH_ROUNDS, BENCH_MTUS, BENCH_CRC, BENCH_BW,
#            BENCH_FIO, BENCH_ITERS and BENCH_QTIME (qperf seconds per
#            test, default 3, --quick 1) set here are passed to the guest
#            script). Writes DIR/results.md, results.csv and a PNG per
#            metric (default DIR: $RSIW_CACHE/bench/compare-DATE). Builds
#            the module, provider and bench/qpbench if needed; installs fio
#            and gnuplot from Debian if missing. See
#            Documentation/performance.md. RSIW_LANE=uml (here and for
#            --impair): in the test kernel built as User-Mode Linux
#            (scripts/uml-run.sh) instead of QEMU.
#
#   bench/bench.sh --profile [SECONDS]
#            where a 64-byte qperf rc_lat's CPU time goes, rsiw against
#            siw (bench/profile.sh: perf record in the guest, two
#            namespaces joined by veth, SECONDS per run, default 4);
#            installs linux-perf and qperf if missing; the reports stay in
#            $RSIW_CACHE/bench/profile-DATE. PROFILE_TEST=ib_write_bw
#            (or ib_read_bw, ib_send_bw): 64 KiB perftest bandwidth
#            instead, PROFILE_ITERS messages (default 3000).
#            RSIW_LANE=uml: the host samples the test kernel run as
#            User-Mode Linux instead (bench/uml-profile.sh: 64-byte
#            latency and 64 KiB Writes, SECONDS per window, default 8),
#            and splits the time between the guest kernel's code, the host
#            kernel working for UML, guest user space and idle.
#
#   bench/bench.sh --insncount [ITERS_A ITERS_B]
#            the guest instructions a 64-byte ib_send_lat round trip costs,
#            rsiw against siw in one boot, counted by the insncount QEMU
#            plugin (bench/qemu-plugin): by place (user space, the kernel,
#            each module), by kernel function, and rsiw's struct copies
#            (calls of memcpy/memset); the difference of two runs of
#            ITERS_A and ITERS_B round trips (default 1000 and 5000).
#            INSN_EVENTS=1: both ends sleep on completion events (-e), as
#            qperf's rc_lat does; INSN_MEM=1: also the kernel data pages
#            touched (slower); INSN_XPAGE=1: also the block entries from
#            a block on another page, which TCG cannot chain (slower);
#            INSN_WATCH=ADDR: who enters the kernel block at ADDR (e.g.
#            queued_spin_lock_slowpath); INSN_TOOL=qperf: count qperf
#            -cm1 rc_lat (ITERS in seconds) instead; INSN_TOOL=qpbench:
#            one rsiw-qpbench stream, INSN_QPB="send 4" (MODE DEPTH), of
#            64 KiB messages (ITERS in seconds); INSN_SIZE: perftest's
#            message size (default 64), INSN_MTU: the veth's MTU;
#            INSN_HOT=FILE: also write rsiw's functions run every round
#            trip to FILE (bench/hot-functions.txt). The counts stay in
#            $RSIW_CACHE/bench/insncount-DATE.
#
#   bench/bench.sh --stamp [OLD_TREE [ROUNDS [SECONDS]]]
#            the host time of each phase of a 64-byte qperf -cm1 rc_lat
#            message (doorbell system call, tcp_sendmsg, the packet on the
#            veth, the peer's TCP receive, its completion event, its
#            process woken, its next post), timed by the stamp QEMU plugin
#            (bench/qemu-plugin/stamp.c) as the guest runs untraced: this
#            tree (B) against OLD_TREE (A, default this tree), Linux siw
#            and TCP, rounds interleaved in one boot (bench/lat-ab.sh,
#            ROUNDS default 7, SECONDS per run default 3). Prints
#            lat-ab's latencies, then the median host µs of each step per
#            driver. The stamps stay in $RSIW_CACHE/bench/stamp-DATE.
#
#   bench/bench.sh --jcmiss [OLD_TREE [ROUNDS [SECONDS]]]
#            how often QEMU looks up the next translated block in its
#            global table (a miss of the per-vCPU jump cache) per 64-byte
#            qperf -cm1 rc_lat round trip: this tree (B) against OLD_TREE
#            (A, default this tree), Linux siw and TCP, rounds interleaved
#            in one boot (bench/lat-ab.sh with LAT_WIN=1, ROUNDS
#            default 3, SECONDS per run default 12), counted on the host
#            with perf uprobes on QEMU's qht_lookup_custom and cpu_exec
#            (root, linux-perf; no other QEMU may run meanwhile: the count
#            is system-wide). The probes slow QEMU several times, so the
#            latencies printed beside the counts are not the drivers'.
#            JCMISS_PROBES="F ..." probes other functions QEMU exports
#            instead (nm -D), e.g. tlb_set_page_with_attrs, a fill of the
#            softmmu TLB (a guest page walk); frequent ones slow the guest
#            many times more. The counts stay in
#            $RSIW_CACHE/bench/jcmiss-DATE.
#
#   bench/bench.sh --impair [--quick] [--out DIR]
#            goodput (64 KiB RDMA Writes, 32 in flight; TCP: one stream)
#            and 64-byte latency of rsiw, Linux siw, rxe (RoCE v2) and TCP
#            under tc netem on the veth between two namespaces: no
#            impairment, 1/10/50 ms RTT, 0.1/1/5% loss, 10 ms with 1%
#            loss, reordering; 3 interleaved rounds in one boot
#            (bench/impair-bench.sh; BENCH_ROUNDS, BENCH_IMPAIR,
#            BENCH_IMPLS, BENCH_QTIME, BENCH_DEPTH passed to the guest;
#            --quick: one round of none, delay10, loss1). Writes
#            DIR/results.md, raw.csv and plot-goodput.png, plot-latency.png
#            (default DIR: $RSIW_CACHE/bench/impair-DATE).
#
#   bench/bench.sh --engine-cost
#            the engine's instructions per 64-byte Send message (TX and RX,
#            no CRC), counted by callgrind on the host: two runs of the
#            send_round_trip_cost_probe test differing by 20 000 messages;
#            installs valgrind if missing.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$RSIW_ROOT"
if [ "${1:-}" = --vm-tx ]; then
	mib=${2:-64}
	impls=${3:-0}
	[ -f rsiw.ko ] || die "build the test module first (make test)"
	out=$(mktemp -d "${TMPDIR:-/tmp}/rsiw-tx-bench.XXXXXX")
	rc=0
	scripts/vm-run.sh --quiet --timeout 1800 --out "$out" \
		--append 'kunit.filter_glob=rsiw_tx_bench' \
		-- bench/tx-bench.sh "$mib" "$impls" || rc=$?
	cat "$out/output.log" 2>/dev/null || true
	exit "$rc"
fi
if [ "${1:-}" = --vm-atomics ]; then
	ops=${2:-20000}
	[ -f rsiw.ko ] || die "build the test module first (make test)"
	out=$(mktemp -d "${TMPDIR:-/tmp}/rsiw-atomic-bench.XXXXXX")
	rc=0
	scripts/vm-run.sh --quiet --timeout 1200 --out "$out" \
		--append 'kunit.filter_glob=rsiw_atomic_bench*' \
		-- bench/atomic-bench.sh "$ops" || rc=$?
	cat "$out/output.log" 2>/dev/null || true
	exit "$rc"
fi
# guest_build NAME: builds what a benchmark guest runs (the module, the
# provider) and sets kdir and out (a new $RSIW_CACHE/bench/NAME-DATE).
guest_build() {
	kdir=$(resolve_kdir)
	make -s KDIR="$kdir" modules
	make -s -C providers/rsiw
	out="$RSIW_CACHE/bench/$1-$(date +%Y%m%d-%H%M%S)"
	mkdir -p "$out"
}
# guest_build_out NAME: builds what --compare and --impair boot (the
# production module for the lane's kernel, the provider, rsiw-qpbench);
# sets out (the --out directory made absolute, or a new
# $RSIW_CACHE/bench/NAME-DATE, never one the guest mounts a tmpfs on) and
# guest_run: the lane's runner, scripts/uml-run.sh with RSIW_LANE=uml (the
# test kernel as User-Mode Linux, native speed), else scripts/vm-run.sh.
guest_build_out() {
	if [ "${RSIW_LANE:-qemu}" = uml ]; then
		guest_run=scripts/uml-run.sh
		[ -f rsiw.ko ] || make -s KDIR="$(resolve_kdir)" modules
		scripts/uml-module.sh modules >/dev/null
	else
		guest_run=scripts/vm-run.sh
		kdir=$(resolve_kdir)
		make -s KDIR="$kdir" modules
	fi
	make -s -C providers/rsiw
	make -s -C bench/qpbench
	make -s -C tests/progs perftest-connect-delay.so
	[ -n "$out" ] || out="$RSIW_CACHE/bench/$1-$(date +%Y%m%d-%H%M%S)"
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	case "$out" in /tmp/* | /run/* | /var/tmp/* | /mnt/*)
		die "--out $out: the guest mounts a tmpfs there; choose another directory" ;;
	esac
}
if [ "${1:-}" = --profile ] && [ "${RSIW_LANE:-qemu}" = uml ]; then
	# The host samples the UML process (bench/uml-profile.sh).
	need_debs linux-perf qperf rdmacm-utils iproute2
	out=""
	guest_build_out profile-uml
	rc=0
	bench/uml-profile.sh "$out" "${2:-8}" || rc=$?
	log "perf data in $out"
	exit "$rc"
fi
if [ "${1:-}" = --profile ]; then
	secs=${2:-4}
	# The guest runs the host's programs (read-only root).
	need_debs linux-perf qperf perftest rdmacm-utils iproute2
	guest_build profile
	rc=0
	scripts/vm-run.sh --quiet --timeout 1800 --out "$out" --append kunit.enable=0 \
		-- env PROFILE_TEST="${PROFILE_TEST:-rc_lat}" PROFILE_ITERS="${PROFILE_ITERS:-3000}" \
		bench/profile.sh "$secs" || rc=$?
	cat "$out/output.log" 2>/dev/null || true
	log "reports in $out"
	exit "$rc"
fi
# plugin_run NAME: builds what a QEMU-plugin run boots (the module, the
# provider, the plugins) and sets kdir and out (a new
# $RSIW_CACHE/bench/NAME-DATE).
plugin_run() {
	guest_build "$1"
	make -s -C bench/qemu-plugin
	make -s -C bench/qpbench
}
if [ "${1:-}" = --insncount ]; then
	need_debs perftest rdmacm-utils iproute2 binutils
	plugin_run insncount
	rc=0
	scripts/vm-run.sh --quiet --timeout 1800 --out "$out" --append kunit.enable=0 \
		--plugin "$RSIW_ROOT/bench/qemu-plugin/insncount.so,out=$out/counts.txt${INSN_MEM:+,mem=on}${INSN_XPAGE:+,xpage=on}${INSN_WATCH:+,watch=$INSN_WATCH}" \
		-- env INSN_EVENTS="${INSN_EVENTS:-0}" INSN_TOOL="${INSN_TOOL:-ib_send_lat}" INSN_SIZE="${INSN_SIZE:-64}" \
		INSN_MTU="${INSN_MTU:-}" INSN_QPB="${INSN_QPB:-send 4}" bench/insncount.sh "$RSIW_ROOT" "${2:-1000}" "${3:-5000}" || rc=$?
	grep '^insncount:' "$out/output.log" || true
	[ "$rc" = 0 ] || die "the guest run failed ($rc): $out/output.log"
	# Rust symbols demangled when rustfilt is there (cargo install rustfilt).
	demangle="cat"
	command -v rustfilt >/dev/null && demangle=rustfilt
	python3 bench/qemu-plugin/insncount.py "$out/counts.txt" "$out/insncount-manifest.txt" "$out/kallsyms" 40 \
		--sites rsiw.ko ${INSN_HOT:+--hot "$INSN_HOT"} | $demangle | tee "$out/report.txt"
	log "counts and report in $out"
	exit 0
fi
if [ "${1:-}" = --stamp ]; then
	need_debs qperf rdmacm-utils iproute2 binutils
	plugin_run stamp
	old=$(realpath "${2:-$RSIW_ROOT}")
	# The phases' first instructions in the kernel image (the guest runs
	# it unrandomised): function entries, and the instruction after
	# ib_uverbs_event_read's call of schedule() (the process woken). The
	# awk reads all of objdump's output: an early exit would kill objdump
	# with SIGPIPE, which pipefail turns into the script's silent end.
	sym() { awk -v s="$1" '$3 == s { print $1; exit }' "$kdir/System.map"; }
	names="post_send kernel_sendmsg tcp_sendmsg veth_xmit tcp_v4_rcv comp_handler event_wake"
	at=
	for f in ib_uverbs_post_send kernel_sendmsg tcp_sendmsg veth_xmit tcp_v4_rcv ib_uverbs_comp_handler; do
		a=$(sym "$f")
		[ -n "$a" ] || die "no $f in $kdir/System.map"
		at="$at,at=$a"
	done
	start=$(sym ib_uverbs_event_read)
	end=$(awk -v s="$start" '$1 > s { print $1; exit }' <(sort "$kdir/System.map"))
	wake=$(objdump -d --no-show-raw-insn --start-address=0x"$start" --stop-address=0x"$end" "$kdir/vmlinux" |
		awk '/call.*<schedule>/ && !done { getline; sub(":", "", $1); print $1; done = 1 }')
	[ -n "$wake" ] || die "no call of schedule() in ib_uverbs_event_read"
	at="$at,at=$wake"
	rc=0
	scripts/vm-run.sh --quiet --timeout 3600 --out "$out" --append kunit.enable=0 \
		--plugin "$RSIW_ROOT/bench/qemu-plugin/stamp.so,out=$out/stamps.txt$at" \
		-- env LAT_STAMP=1 bench/lat-ab.sh "$old" "$RSIW_ROOT" "${3:-7}" "${4:-3}" || rc=$?
	grep '^lat-ab:' "$out/output.log" || true
	[ "$rc" = 0 ] || die "the guest run failed ($rc): $out/output.log"
	# shellcheck disable=SC2086 # the names are words
	python3 bench/qemu-plugin/stamp.py "$out/stamps.txt" "$out/stamp-manifest.txt" $names | tee "$out/report.txt"
	log "stamps and report in $out"
	exit 0
fi
if [ "${1:-}" = --jcmiss ]; then
	need_debs qperf rdmacm-utils iproute2 linux-perf
	guest_build jcmiss
	old=$(realpath "${2:-$RSIW_ROOT}")
	qemu=$(command -v qemu-system-x86_64) || die "no qemu-system-x86_64"
	pgrep -f qemu-system >/dev/null && die "another QEMU runs: the count would include it"
	perf probe -q -d 'probe_qemu:*' 2>/dev/null || true
	evs=()
	for f in ${JCMISS_PROBES:-qht_lookup_custom cpu_exec}; do
		perf probe -q -x "$qemu" "$f" || die "perf cannot place a uprobe on $qemu's $f"
		evs+=(-e "probe_qemu:$f")
	done
	rc=0
	scripts/vm-run.sh --quiet --timeout 3600 --out "$out" --append kunit.enable=0 \
		-- env LAT_WIN=1 bench/lat-ab.sh "$old" "$RSIW_ROOT" "${3:-3}" "${4:-12}" &
	vm=$!
	date +%s.%N >"$out/perf-start"
	perf stat -a -x, -I 500 "${evs[@]}" -o "$out/perf.csv" &
	ps=$!
	wait "$vm" || rc=$?
	kill -INT "$ps" 2>/dev/null || true
	wait "$ps" 2>/dev/null || true
	perf probe -q -d 'probe_qemu:*' || true
	grep '^lat-ab:' "$out/output.log" || true
	[ "$rc" = 0 ] || die "the guest run failed ($rc): $out/output.log"
	python3 bench/qpbench/jcmiss.py "$out" | tee "$out/report.txt"
	log "counts and report in $out"
	exit 0
fi
if [ "${1:-}" = --engine-cost ]; then
	need_debs valgrind
	cd rust/engine
	# The test binary, built once (cargo prints its path on stderr).
	bin=$(cargo test --release --lib --no-run 2>&1 | sed -n 's/.*Executable unittests src\/lib.rs (\(.*\))/\1/p' | tail -1)
	[ -n "$bin" ] || die "could not build the engine's test binary"
	bin=$(cd "$RSIW_ROOT" && realpath "$bin")
	count() {
		RSIW_PROBE_N=$1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" \
			--ignored --exact qp::tests::send_round_trip_cost_probe 2>&1 |
			sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
	}
	a=$(count 1000)
	b=$(count 11000)
	[ -n "$a" ] && [ -n "$b" ] || die "callgrind gave no count"
	echo "engine: $(((b - a) / 20000)) instructions per 64-byte Send message (TX + RX, no CRC; the test's mock host and libc included)"
	exit 0
fi
if [ "${1:-}" = --impair ]; then
	shift
	out=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--quick) export BENCH_ROUNDS=${BENCH_ROUNDS:-1} BENCH_IMPAIR=${BENCH_IMPAIR:-none delay10 loss1} BENCH_QTIME=${BENCH_QTIME:-3}; shift ;;
		--out) out=$2; shift 2 ;;
		*) die "--impair takes [--quick] [--out DIR]" ;;
		esac
	done
	need_debs qperf ethtool gnuplot-nox iproute2 rdmacm-utils libibverbs-dev librdmacm-dev
	guest_build_out impair
	envs=()
	for v in ${!BENCH_@}; do envs+=("$v=${!v}"); done
	log "impaired-link benchmark: guest output in $out/vm"
	rc=0
	"$guest_run" --quiet --mem 3G --timeout "${RSIW_BENCH_TIMEOUT:-10800}" --out "$out/vm" --append kunit.enable=0 \
		-- env "${envs[@]}" bench/impair-bench.sh &
	vm=$!
	tail -F --pid=$vm -n +1 "$out/vm/output.log" 2>/dev/null | grep --line-buffered -E '^(bench:|not ok)' &
	wait $vm || rc=$?
	sleep 1
	[ -s "$out/vm/results.md" ] || { log "no results (guest exit $rc): see $out/vm/output.log"; exit 1; }
	cp "$out/vm/results.md" "$out/vm/raw.csv" "$out/"
	bench/impair-plot.sh "$out/raw.csv" "$out"
	cat "$out/results.md"
	log "results: $out/results.md, $out/raw.csv, plots in $out"
	exit "$rc"
fi
if [ "${1:-}" = --compare ]; then
	shift
	quick=""
	out=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--quick) quick=--quick; shift ;;
		--out) out=$2; shift 2 ;;
		*) die "--compare takes [--quick] [--out DIR]" ;;
		esac
	done
	# The guest runs the host's programs (read-only root): install them here.
	need_debs perftest qperf fio nvme-cli gnuplot-nox iproute2 rdmacm-utils libibverbs-dev librdmacm-dev
	guest_build_out compare
	# Guest time under TCG: about 2 minutes (--quick), 1-2 hours (full).
	if [ -n "$quick" ]; then limit=${RSIW_BENCH_TIMEOUT:-1200}; else limit=${RSIW_BENCH_TIMEOUT:-10800}; fi
	rm -f "$out/vm/output.log"
	log "side-by-side benchmark${quick:+ (quick)}: guest output in $out/vm, results in $out"
	# The guest gets no host environment: pass the BENCH_* overrides on.
	envs=()
	for v in ${!BENCH_@}; do envs+=("$v=${!v}"); done
	[ ${#envs[@]} = 0 ] || log "guest overrides: ${envs[*]}"
	"$guest_run" --quiet --mem 4G --timeout "$limit" --out "$out/vm" --append "log_buf_len=16M kunit.enable=0${RSIW_BENCH_APPEND:+ $RSIW_BENCH_APPEND}" \
		-- env "${envs[@]}" bench/bench-compare.sh $quick &
	vm=$!
	# Progress lines as the guest writes them (its output file is shared).
	tail -F --pid=$vm -n +1 "$out/vm/output.log" 2>/dev/null | grep --line-buffered -E '^(bench:|not ok)' &
	rc=0
	wait $vm || rc=$?
	sleep 1
	if [ -s "$out/vm/raw.csv" ]; then
		python3 bench/qpbench/summarize.py "$out/vm/raw.csv" "$out/vm/meta.txt" "$out"
		cat "$out/results.md"
		log "results: $out/results.md, $out/results.csv, $(cd "$out" && ls plot-*.png 2>/dev/null | wc -l) plots"
	else
		log "no measurements (guest exit $rc); see $out/vm/output.log and console.log"
	fi
	[ "$rc" = 0 ] || log "guest exit status $rc: see $out/vm/output.log"
	exit "$rc"
fi
cargo bench -p rsiw-engine --bench framing --bench decode "$@"
