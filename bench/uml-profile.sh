#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): where the host's CPU time goes while the test
# kernel, run as User-Mode Linux, carries rsiw's and siw's traffic. UML is
# a host process, so the host's perf samples it (perf record -a -e
# cpu-clock: a software event, which needs no PMU); each sample is put in
# one of: the guest kernel's code (by symbol, the modules' included, from
# the guest's /proc/kallsyms), the host kernel working for UML (its
# signals, system calls and process switches: the lane's own cost), guest
# user space, or the host idle. Two namespaces joined by veth in one boot;
# for each implementation of PROFILE_IMPLS (default "rsiw siw") and each
# workload of PROFILE_WORK (default "lat wr4"; lat: qperf -cm1 64-byte
# rc_lat; wrD, sendD, readD: rsiw-qpbench 64 KiB Writes, Sends, Reads, D
# in flight) a window of SECONDS (default 8), marked by the guest and
# sampled by the host. PROFILE_MTU: the veth's MTU (default 1500).
#   RSIW_LANE=uml bench/bench.sh --profile [SECONDS]    (the usual way)
#   bench/uml-profile.sh OUT [SECONDS]                  (host side)
#   bench/uml-profile.sh --guest                        (in the guest)
# Prints each window's figure and its breakdown; OUT keeps perf-N-*.data,
# kallsyms.txt and the guest's results (Documentation/performance.md,
# "The native lane").
set -u
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = --guest ]; then
	. "$here/../tests/common/lib.sh"
	R=$RSIW_ROOT secs=${PROFILE_SECS:-8}
	A=10.98.0.1 B=10.98.0.2
	ina() { ip netns exec bA "$@"; }
	inb() { ip netns exec bB "$@"; }
	qpb=$R/bench/qpbench/rsiw-qpbench
	mark() { echo "$1" >/tmp/out/mark.new && mv /tmp/out/mark.new /tmp/out/mark && sleep 1; }
	sysctl -qw kernel.kptr_restrict=0
	bench_netns $A $B || exit 1
	ina ip link set bcA mtu "${PROFILE_MTU:-1500}" && inb ip link set bcB mtu "${PROFILE_MTU:-1500}" || exit 1
	insmod "$R/rsiw.ko" && modprobe siw || exit 1
	cat /proc/kallsyms >/tmp/out/kallsyms.txt
	n=0 rc=0
	for impl in ${PROFILE_IMPLS:-rsiw siw}; do
		for w in ${PROFILE_WORK:-lat wr4}; do
			n=$((n + 1))
			ina rdma link add ${impl}0 type "$impl" netdev bcA &&
				inb rdma link add ${impl}1 type "$impl" netdev bcB || exit 1
			if [ "$impl" = rsiw ]; then export RDMAV_DRIVERS=$R/providers/rsiw/librsiw; else unset RDMAV_DRIVERS; fi
			res=/tmp/out/res-$n-$impl-$w.txt
			case $w in
			lat)
				ina qperf >/dev/null 2>&1 &
				qs=$!
				wait_for 30 listening 19765
				mark "$n-$impl-$w"
				inb qperf -t $((secs + 2)) -cm1 -m 64 $A rc_lat >"$res" 2>&1 || rc=1
				kill $qs 2>/dev/null
				wait $qs 2>/dev/null ;;
			wr[0-9]* | send[0-9]* | read[0-9]*)
				m=${w%%[0-9]*} d=${w#"${w%%[0-9]*}"}
				[ "$m" = wr ] && m="write"
				ina timeout 120 "$qpb" server -a $A -p $((7000 + n)) -n 1 -m "$m" -d "$d" >/dev/null 2>&1 &
				qs=$!
				wait_for 30 listening $((7000 + n))
				mark "$n-$impl-$w"
				inb timeout 120 "$qpb" client -a $A -b $B -p $((7000 + n)) -n 1 -m "$m" -d "$d" \
					-t $((secs + 2)) >"$res" 2>&1 || rc=1
				wait $qs || rc=1 ;;
			*) echo "uml-profile: unknown workload $w" >&2; exit 1 ;;
			esac
			rdma link delete ${impl}0; rdma link delete ${impl}1
		done
	done
	mark "done"
	exit $rc
fi

. "$here/../scripts/lib.sh"
out=${1:?usage: $0 OUT [SECONDS]} secs=${2:-8}
command -v perf >/dev/null || die "perf is not installed (apt install linux-perf)"
rm -f "$out"/perf-*.data "$out"/mark "$out"/res-*.txt
mkdir -p "$out"
cd "$RSIW_ROOT" || exit 1
# The guest's command carries the settings (the guest does not inherit
# this environment).
scripts/uml-run.sh --quiet --timeout 1200 --append kunit.enable=0 --out "$out" \
	-- env PROFILE_SECS="$secs" PROFILE_IMPLS="${PROFILE_IMPLS:-rsiw siw}" \
	PROFILE_WORK="${PROFILE_WORK:-lat wr4}" PROFILE_MTU="${PROFILE_MTU:-1500}" \
	"$RSIW_ROOT/bench/uml-profile.sh" --guest &
boot=$!
last=""
while kill -0 $boot 2>/dev/null; do
	m=$(cat "$out/mark" 2>/dev/null || true)
	if [ -n "$m" ] && [ "$m" != "$last" ]; then
		last=$m
		[ "$m" = "done" ] && break
		perf record -q -a -e cpu-clock -F 4999 -o "$out/perf-$m.data" -- sleep "$secs" 2>/dev/null ||
			log "perf record failed for $m"
	fi
	sleep 0.05
done
rc=0
wait $boot || rc=$?
for d in "$out"/perf-*.data; do
	[ -f "$d" ] || continue
	m=${d##*/perf-}
	m=${m%.data}
	echo "== $m: $(grep -h -E 'latency|^aggregate_mbps|^cpus_busy' "$out/res-$m.txt" 2>/dev/null | tr -s ' \n' ' ')"
	python3 "$here/uml-profile.py" "$out/kallsyms.txt" "$d" "${PROFILE_TOP:-25}"
done
exit $rc
