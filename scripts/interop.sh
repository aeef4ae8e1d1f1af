#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Interoperability with Linux siw: two guests joined by a virtual link run
# NVMe over Fabrics, one over siw and one over rsiw, in both directions,
# with MPA CRC off and on, and NFS over RDMA in both directions:
#   scripts/interop.sh [OUTDIR]
# Prints the guests' checks and ends with "interop: N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT"
out=${1:-$RSIW_ROOT/out/interop}
mkdir -p "$out"
passed=0
failed=0
port=$((46000 + RANDOM % 1000))
tf=$RSIW_TIME_FACTOR # 4 on the debug kernel (lib.sh)

# pair NAME TARGET_KIND HOST_KIND [crc]: NVMe-oF; with NFS_PAIR=1, NFS
# (interop-nfs.sh: the target is the server, the host the client).
pair() {
	local name=$1 tk=$2 hk=$3 crc=${4:-} script=interop-nvmeof.sh tr=target hr=host
	[ "${NFS_PAIR:-0}" = 1 ] && { script=interop-nfs.sh tr=server hr=client; }
	port=$((port + 1))
	log "== interop: $name (target over $tk, host over $hk)"
	scripts/vm-run.sh --quiet --timeout $((540 * tf)) --mem 2G --append kunit.enable=0 --nic "listen:$port" --out "$out/$name-target" \
		-- tests/interop/$script $tr "$tk" $crc &
	local tpid=$!
	# (vm-run.sh --nic connect: waits until the target's QEMU listens.)
	scripts/vm-run.sh --quiet --timeout $((500 * tf)) --mem 2G --append kunit.enable=0 --nic "connect:$port" --out "$out/$name-host" \
		-- tests/interop/$script $hr "$hk" $crc
	wait "$tpid"
	local side
	for side in target host; do
		local f="$out/$name-$side/output.log"
		if [ -f "$f" ]; then
			sed "s/^/[$name $side] /" "$f" | grep -E '\] (ok|not ok)'
			passed=$((passed + $(grep -c '^ok - ' "$f")))
			local nf
			nf=$(grep -c '^not ok - ' "$f")
			local st
			st=$(cat "$out/$name-$side/status" 2>/dev/null)
			[ "$st" = 0 ] || [ "$nf" -gt 0 ] || nf=1
			failed=$((failed + nf))
			# A side that failed: what it printed last, and how the
			# guest ended (status 124: killed at its time limit).
			if [ "$nf" -gt 0 ]; then
				echo "[$name $side] # unfinished or failed: guest status ${st:-none}"
				tail -25 "$f" | sed "s/^/[$name $side] # tail: /"
				tail -12 "$out/$name-$side/dmesg.txt" 2>/dev/null | sed "s/^/[$name $side] # tail: dmesg: /"
			fi
		else
			echo "[$name $side] not ok - the guest produced no output"
			failed=$((failed + 1))
		fi
	done
}

pair siw-target-rsiw-host siw rsiw
pair rsiw-target-siw-host rsiw siw
# rsiw asks for MPA CRC (siw only uses it when asked).
pair siw-target-rsiw-host-crc siw rsiw crc
pair rsiw-target-siw-host-crc rsiw siw crc
NFS_PAIR=1 pair nfs-siw-server-rsiw-client siw rsiw
NFS_PAIR=1 pair nfs-rsiw-server-siw-client rsiw siw
echo "interop: $passed passed, $failed failed"
[ "$failed" = 0 ]
