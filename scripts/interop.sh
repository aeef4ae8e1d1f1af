#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Interoperability with Linux siw: two guests joined by a virtual link run
# NVMe over Fabrics, one over siw and one over rsiw, in both directions,
# with MPA CRC off and on, and NFS over RDMA and SMB Direct in both
# directions:
#   scripts/interop.sh [OUTDIR]
# Prints the guests' result lines, each tagged with its pair and side
# (tests/common/results.sh), and ends with "interop: N passed, N failed"
# (rsiw's; the baseline's and the skips just above).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT" || exit
out=${1:-$RSIW_ROOT/out/interop}
mkdir -p "$out"
. "$RSIW_ROOT/tests/common/results.sh"
rm -f "$out"/*/results
port=$((46000 + RANDOM % 1000))
tf=$RSIW_TIME_FACTOR # 4 on the debug kernel (lib.sh)

# pair NAME TARGET_KIND HOST_KIND [crc]: NVMe-oF; with ULP=nfs or smb,
# that protocol (interop-fs.sh ULP: the target is the server, the host
# the client). Each
# guest runs its vCPUs in one thread (--tcg-single): the rsiw side turns
# trace events on (scripts/vm-run.sh says why).
pair() {
	local name=$1 tk=$2 hk=$3 crc=${4:-} script=interop-nvmeof.sh tr=target hr=host
	[ -n "${ULP:-}" ] && { script=interop-fs.sh tr="$ULP server" hr="$ULP client"; }
	port=$((port + 1))
	log "== interop: $name (target over $tk, host over $hk)"
	scripts/vm-run.sh --quiet --timeout $((540 * tf)) --mem 2G --tcg-single --append kunit.enable=0 --nic "listen:$port" --out "$out/$name-target" \
		-- tests/interop/$script $tr "$tk" $crc &
	local tpid=$!
	# (vm-run.sh --nic connect: waits until the target's QEMU listens.)
	scripts/vm-run.sh --quiet --timeout $((500 * tf)) --mem 2G --tcg-single --append kunit.enable=0 --nic "connect:$port" --out "$out/$name-host" \
		-- tests/interop/$script $hr "$hk" $crc
	wait "$tpid"
	local side
	for side in target host; do
		local d="$out/$name-$side" st
		st=$(cat "$d/status" 2>/dev/null)
		mkdir -p "$d"
		results_lines "$d/output.log" 2>/dev/null | results_tag "[$name $side]" >"$d/results"
		# A side that did not finish is a failure even when every
		# check it printed passed (status 124: killed at its time limit);
		# what it printed last, and its kernel's last words.
		if [ "$st" != 0 ]; then
			grep -q '^not ok - ' "$d/results" ||
				echo "not ok - [$name $side] the guest did not finish (guest status ${st:-none})" >>"$d/results"
			tail -25 "$d/output.log" 2>/dev/null | sed "s/^/# [$name $side] tail: /" >>"$d/results"
			tail -12 "$d/dmesg.txt" 2>/dev/null | sed "s/^/# [$name $side] tail: dmesg: /" >>"$d/results"
			console_oops "$d/console.log" "# [$name $side] tail: console: " >>"$d/results"
		fi
		cat "$d/results"
	done
}

pair siw-target-rsiw-host siw rsiw
pair rsiw-target-siw-host rsiw siw
# rsiw asks for MPA CRC (siw only uses it when asked).
pair siw-target-rsiw-host-crc siw rsiw crc
pair rsiw-target-siw-host-crc rsiw siw crc
for ULP in nfs smb; do
	pair $ULP-siw-server-rsiw-client siw rsiw
	pair $ULP-rsiw-server-siw-client rsiw siw
done
# The counts of everything printed above (tests/common/results.sh).
read -r p f sk bp bf < <(cat "$out"/*/results | results_count)
echo "interop: baseline $bp passed, $bf failed; $sk skipped"
echo "interop: $p passed, $f failed"
[ "$f" = 0 ]
