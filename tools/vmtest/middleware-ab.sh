#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Middleware latency, rsiw beside Linux siw and plain TCP in one boot (a
# benchmark, not a test): libfabric's fi_pingpong (MSG over verbs, RDM over
# verbs;ofi_rxm, busy-polling, 64 octets) between two namespaces joined by
# veth, and an Open MPI ping-pong (OFI MTL over verbs;ofi_rxm, two ranks
# through one device, tools/vmtest/mpi-pingpong.py, 64 octets and 64 KiB),
# ROUNDS interleaved rounds (default 3). One driver's devices at a time:
# libfabric maps an address to the first iWARP device on its netdev. The
# TCP baseline is libfabric's own tcp provider in the same places (MSG:
# tcp; RDM and MPI: tcp;ofi_rxm).
#
#   scripts/vm-run.sh --append kunit.enable=0 -- tools/vmtest/middleware-ab.sh [ROUNDS]
#
# MW_FI_SIZE=N: fi_pingpong's message size (default 64; 100 messages
# instead of 1000 from 4 KiB on); MW_MPI=0: no MPI runs.
# Prints "mw: ROUND IMPL TEST us" lines, then the medians per test and
# rsiw's ratios to siw and TCP (of the medians; above 1: rsiw slower).
set -u
. "$(dirname "$0")/lib.sh"
export RDMAV_DRIVERS="$RSIW_ROOT/tools/provider/librsiw"
rounds=${1:-3}
fsize=${MW_FI_SIZE:-64}
fcount=1000
[ "$fsize" -ge 4096 ] && fcount=100
# fi_pingpong prints sizes from 1 KiB on as "Nk".
flabel=$fsize
[ "$fsize" -ge 1024 ] && flabel=$((fsize / 1024))k
A=10.95.0.1
bench_netns $A 10.95.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
insmod "$RSIW_ROOT/rsiw.ko" || exit 1
modprobe siw || exit 1
res=$OUT/middleware-ab.txt
: >"$res"
# fpp DOMAIN_A DOMAIN_B KIND PROV [COUNT]: fi_pingpong's µs per message
# over COUNT messages (default fcount).
fpp() {
	wait_for 30 not_listening 47592 bA
	ina timeout 120 fi_pingpong -p "$4" -e "$3" -d "$1" -I "${5:-$fcount}" -S $fsize -c >/dev/null 2>&1 &
	local s=$!
	wait_for 30 listening 47592 bA
	inb timeout 120 fi_pingpong -p "$4" -e "$3" -d "$2" -I "${5:-$fcount}" -S $fsize -c $A | awk -v l=$flabel '$1 == l { print $7 }'
	wait $s
}
# fpp_diff DOMAIN_A DOMAIN_B KIND PROV: µs per message from two runs of
# fcount and 10 x fcount messages. fi_pingpong's own figure includes what
# comes before the first message completes: ofi_rxm's RDM endpoint
# connects at its first send (rdma_cm and MPA for verbs), half a second
# or more under TCG, which the difference cancels. The connection's time
# varies by as much as 9 x fcount small messages take: an RDM figure can
# come out negative, and only the median of several rounds means much.
fpp_diff() {
	local a b
	a=$(fpp "$@" $fcount)
	b=$(fpp "$@" $((fcount * 10)))
	awk -v a="$a" -v b="$b" -v n=$fcount 'BEGIN { if (a > 0 && b > 0) printf "%.1f", (b * 10 * n - a * n) / (9 * n) }'
}
mpi() { # SIZE N PROV
	mpi_pingpong bA "$2" "$1" "$3" | sed -n 's/.*rank 0: .* 0 bad, \([0-9.]*\) us.*/\1/p'
}
for r in $(seq "$rounds"); do
	for d in rsiw siw tcp; do
		if [ $d = tcp ]; then
			da=bcA db=bcB msg=tcp rdm="tcp;ofi_rxm"
		else
			ina rdma link add ${d}0 type $d netdev bcA && inb rdma link add ${d}1 type $d netdev bcB || exit 1
			da=${d}0 db=${d}1 msg=verbs rdm="verbs;ofi_rxm"
		fi
		echo "mw: $r $d fi_msg_$flabel $(fpp_diff $da $db msg $msg)" | tee -a "$res"
		echo "mw: $r $d fi_rdm_$flabel $(fpp_diff $da $db rdm "$rdm")" | tee -a "$res"
		if [ "${MW_MPI:-1}" = 1 ]; then
			echo "mw: $r $d mpi_64 $(mpi 64 3000 "$rdm")" | tee -a "$res"
			echo "mw: $r $d mpi_64k $(mpi 65536 400 "$rdm")" | tee -a "$res"
		fi
		[ $d = tcp ] || { rdma link del ${d}0 && rdma link del ${d}1; }
	done
done
# ratio A B: A / B to two places, or "-" if either is missing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }
for t in fi_msg_$flabel fi_rdm_$flabel mpi_64 mpi_64k; do
	declare -A med=([rsiw]= [siw]= [tcp]=)
	for d in rsiw siw tcp; do
		v=$(awk -v d=$d -v t=$t '$3 == d && $4 == t && $5 != "" { print $5 }' "$res" | median)
		[ -n "$v" ] || grep -q " $t " "$res" || continue
		echo "mw: median $t $d ${v:-failed} us ($(awk -v d=$d -v t=$t '$3 == d && $4 == t { printf "%s ", $5 }' "$res"))"
		med[$d]=$v
	done
	[ -n "${med[rsiw]}${med[siw]}${med[tcp]}" ] || continue # not run (MW_MPI=0)
	echo "mw: ratio $t rsiw/siw $(ratio "${med[rsiw]}" "${med[siw]}") rsiw/tcp $(ratio "${med[rsiw]}" "${med[tcp]}")"
done
check_dmesg_clean "dmesg clean"
finish
