#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Middleware latency, rsiw beside Linux siw in one boot (a benchmark, not
# a test): libfabric's fi_pingpong (MSG over verbs, RDM over
# verbs;ofi_rxm, busy-polling, 64 octets) between two namespaces joined by
# veth, and an Open MPI ping-pong (OFI MTL over verbs;ofi_rxm, two ranks
# through one device, tools/vmtest/mpi-pingpong.py, 64 octets and 64 KiB),
# ROUNDS interleaved rounds (default 3). One driver's devices at a time:
# libfabric maps an address to the first iWARP device on its netdev.
#
#   scripts/vm-run.sh --append kunit.enable=0 -- tools/vmtest/middleware-ab.sh [ROUNDS]
#
# Prints "mw: ROUND IMPL TEST us" lines, then the medians per test.
set -u
. "$(dirname "$0")/lib.sh"
export RDMAV_DRIVERS="$RSIW_ROOT/tools/provider/librsiw"
rounds=${1:-3}
A=10.95.0.1
bench_netns $A 10.95.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
insmod "$RSIW_ROOT/rsiw.ko" || exit 1
modprobe siw || exit 1
fi_listening() { ina ss -Hltn "sport = :47592" | grep -q .; }
fi_free() { ! fi_listening; }
res=$OUT/middleware-ab.txt
: >"$res"
fpp() { # IMPL KIND PROV
	wait_for 30 fi_free
	ina timeout 120 fi_pingpong -p "$3" -e "$2" -d "${1}0" -I 1000 -S 64 -c >/dev/null 2>&1 &
	local s=$!
	wait_for 30 fi_listening
	inb timeout 120 fi_pingpong -p "$3" -e "$2" -d "${1}1" -I 1000 -S 64 -c $A | awk '$1 == 64 { print $7 }'
	wait $s
}
mpi() { # SIZE N
	ina env HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun -np 2 \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "verbs;ofi_rxm" -x RDMAV_DRIVERS \
		"$RSIW_ROOT/tools/vmtest/mpi-pingpong.py" "$2" "$1" | sed -n 's/.*rank 0: .* 0 bad, \([0-9.]*\) us.*/\1/p'
}
for r in $(seq "$rounds"); do
	for d in rsiw siw; do
		ina rdma link add ${d}0 type $d netdev bcA && inb rdma link add ${d}1 type $d netdev bcB || exit 1
		for t in "fi_msg_64 msg verbs" "fi_rdm_64 rdm verbs;ofi_rxm"; do
			read -r name kind prov <<<"$t"
			echo "mw: $r $d $name $(fpp $d $kind "$prov")" | tee -a "$res"
		done
		echo "mw: $r $d mpi_64 $(mpi 64 1000)" | tee -a "$res"
		echo "mw: $r $d mpi_64k $(mpi 65536 100)" | tee -a "$res"
		rdma link del ${d}0 && rdma link del ${d}1
	done
done
for t in fi_msg_64 fi_rdm_64 mpi_64 mpi_64k; do
	for d in rsiw siw; do
		v=$(awk -v d=$d -v t=$t '$3 == d && $4 == t && $5 != "" { print $5 }' "$res" | sort -n |
			awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }')
		echo "mw: median $t $d ${v:-failed} us ($(awk -v d=$d -v t=$t '$3 == d && $4 == t { printf "%s ", $5 }' "$res"))"
	done
done
check_dmesg_clean "dmesg clean"
finish
