#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of core/004: the per-device settings of two rsiw devices on
# the ends of a veth pair (rsiw0 on 10.97.0.1, the rping servers; rsiw1
# on 10.97.0.2, the clients):
#   attributes      present on each device, 0644, root's
#   defaults        the module parameters' values, also after a reload
#                   with other parameters
#   writes          read back on their device only; out-of-bounds values
#                   refused with EINVAL, writes by nobody with EACCES
#   mpa_crc         never vs required: an MPA reject; required vs the
#                   default: CRC on both ends (rsiw_mpa)
#   mpa_markers     markers on what the client receives (rsiw_mpa)
#   p2p_rtr         0: client-server mode, no RTR (rsiw_mpa)
#   rtr_delay_ms    1000: a second between the MPA Reply and the stream
#                   (rsiw_mpa, rsiw_qp_state)
set -u
. "$(dirname "$0")/../common/lib.sh"

export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
# Bounds: each rping below ends within a second or two on the lean
# kernel; the timeouts of 60 s only keep a hang from taking the guest's
# whole limit, and the waits scale with TF on the debug kernel.
a=10.97.0.1
b=10.97.0.2
local_veth rsiws0 $a rsiws1 $b
ko=$RSIW_ROOT/rsiw.ko
settings="mpa_crc mpa_markers p2p_rtr rtr_delay_ms"
S0=/sys/class/infiniband/rsiw0
S1=/sys/class/infiniband/rsiw1

# devices: both rsiw devices, on the two ends of the veth pair.
devices() {
	rdma link add rsiw0 type rsiw netdev rsiws0 && rdma link add rsiw1 type rsiw netdev rsiws1
}

# values DIR: every setting of the device at DIR, "name=value ...".
values() {
	local n out=""
	for n in $settings; do out="$out $n=$(cat "$1/$n")"; done
	echo "${out# }"
}
defaults="mpa_crc=if_peer_asks mpa_markers=0 p2p_rtr=7 rtr_delay_ms=0"

# write_error FILE VALUE [COMMAND...]: what writing VALUE to FILE (under
# COMMAND, e.g. setpriv) said: nothing when it was taken, else the error.
write_error() {
	local f=$1 v=$2
	shift 2
	"$@" bash -c 'printf "%s\n" "$2" >"$1"' bash "$f" "$v" 2>&1 | sed 's/.*: //'
}

dmesg -C
setup "insmod rsiw.ko" insmod "$ko"
setup "rdma link add rsiw0 on rsiws0, rsiw1 on rsiws1" devices

# --- the attributes ---
check "both devices have $settings, mode 0644, owned by root" bash -c "
	for d in $S0 $S1; do for n in $settings; do
		[ \"\$(stat -c '%a %U' \$d/\$n)\" = '644 root' ] || exit 1
	done; done"
expect_eq "rsiw0: the module parameters' defaults" "$defaults" "$(values $S0)"
expect_eq "rsiw1: the module parameters' defaults" "$defaults" "$(values $S1)"

# --- writes read back, on their device only ---
echo required >$S1/mpa_crc
echo 1 >$S1/mpa_markers
echo 0 >$S1/p2p_rtr
echo 1000 >$S1/rtr_delay_ms
expect_eq "rsiw1: what was written reads back" \
	"mpa_crc=required mpa_markers=1 p2p_rtr=0 rtr_delay_ms=1000" "$(values $S1)"
expect_eq "rsiw0: untouched by rsiw1's writes" "$defaults" "$(values $S0)"
echo 0 >$S1/mpa_crc
expect_eq "rsiw1: mpa_crc 0, as the module parameter's false" if_peer_asks "$(cat $S1/mpa_crc)"
echo 1 >$S1/mpa_crc
expect_eq "rsiw1: mpa_crc 1, as the module parameter's true" required "$(cat $S1/mpa_crc)"
echo never >$S1/mpa_crc
expect_eq "rsiw1: mpa_crc never" never "$(cat $S1/mpa_crc)"

# --- out of bounds: EINVAL, the value kept ---
for w in "mpa_crc Required" "mpa_crc 2" "mpa_crc" "mpa_markers 2" "mpa_markers yes" \
	"p2p_rtr 8" "p2p_rtr -1" "p2p_rtr 0x7" "rtr_delay_ms 1001" "rtr_delay_ms 4294967296" \
	"rtr_delay_ms 5ms"; do
	set -- $w
	expect_eq "rsiw1 $1 refuses '${2:-}' (EINVAL)" "Invalid argument" "$(write_error $S1/$1 "${2:-}")"
done
expect_eq "rsiw1: the refused writes changed nothing" \
	"mpa_crc=never mpa_markers=1 p2p_rtr=0 rtr_delay_ms=1000" "$(values $S1)"

# --- only root writes ---
for n in $settings; do
	expect_eq "rsiw0 $n: a write by nobody is refused (EACCES)" "Permission denied" \
		"$(write_error $S0/$n default setpriv --reuid=65534 --regid=65534 --clear-groups)"
done
expect_eq "nobody reads rsiw1's settings" "never 1 0 1000" \
	"$(cd $S1 && setpriv --reuid=65534 --regid=65534 --clear-groups cat $settings | xargs)"

# --- default: the module parameter again ---
for n in $settings; do echo default >$S1/$n; done
expect_eq "rsiw1: 'default' returns every setting to the module parameter" "$defaults" "$(values $S1)"

# --- their effect on MPA, in the trace and the counters ---
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T
setup "tracefs has events/rsiw/rsiw_mpa" test -f $T/events/rsiw/rsiw_mpa/format

# rping_once TAG [CLIENT_OPTION...]: an rping server on rsiw0 and one
# client on rsiw1 (10 rounds of 64 octets, verified); the client's exit
# status, with the trace of the two in $OUT/trace-TAG.txt.
rping_once() {
	local tag=$1 server rc
	shift
	wait_for $((30 * TF)) not_listening 7174
	echo 0 >$T/tracing_on
	echo >$T/trace
	echo 1 >$T/events/rsiw/rsiw_mpa/enable
	echo 1 >$T/events/rsiw/rsiw_qp_state/enable
	echo 1 >$T/tracing_on
	timeout 60 rping -s -a $a -C 10 -S 64 >"$OUT/rping-$tag-server.txt" 2>&1 &
	server=$!
	wait_for $((30 * TF)) listening 7174
	timeout 60 rping -c -a $a -I $b -C 10 -S 64 -V "$@" >"$OUT/rping-$tag-client.txt" 2>&1
	rc=$?
	# A server whose connection was refused keeps listening.
	[ $rc = 0 ] || kill $server 2>/dev/null
	wait $server 2>/dev/null
	echo 0 >$T/tracing_on
	cp $T/trace "$OUT/trace-$tag.txt"
	echo 0 >$T/events/rsiw/rsiw_mpa/enable
	echo 0 >$T/events/rsiw/rsiw_qp_state/enable
	return $rc
}
# mpa TAG SIDE: the fields of SIDE's (initiator, responder) accepted
# exchange in trace TAG: "crc=.. markers_tx=.. markers_rx=.. rtr=..".
mpa() {
	grep -m1 -E "rsiw_mpa: cm_id=[0-9]+ $2 accepted" "$OUT/trace-$1.txt" |
		grep -oE 'crc=[01] markers_tx=[01] markers_rx=[01] ird=[0-9]+ ord=[0-9]+ rtr=[a-z_]+' |
		sed -E 's/ ird=[0-9]+ ord=[0-9]+//'
}
# rtr_gap TAG: ms in trace TAG from the initiator's accepted exchange (the
# MPA Reply taken, before any RTR delay) to its QP's INIT -> RTS (its
# stream attached, after the delay; the responder's QP goes INIT -> RTR
# -> RTS at rdma_accept).
rtr_gap() {
	awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { t = $i + 0; break } }
		/rsiw_mpa: .* initiator accepted/ && !a { a = t }
		/rsiw_qp_state: .* INIT -> RTS/ && !r { r = t }
		END { if (a && r) printf "%d\n", (r - a) * 1000; else print "none" }' "$OUT/trace-$1.txt"
}

# CRC: the server never, the client required: the server rejects.
echo never >$S0/mpa_crc
echo required >$S1/mpa_crc
r0=$(counter rsiw0 mpa_reject_sent)
r1=$(counter rsiw1 mpa_reject_received)
rping_once crc-refused
expect_eq "mpa_crc never vs required: the connection is refused" 1 $(($? != 0))
expect_eq "rsiw0 mpa_reject_sent +1" 1 $(($(counter rsiw0 mpa_reject_sent) - r0))
expect_eq "rsiw1 mpa_reject_received +1" 1 $(($(counter rsiw1 mpa_reject_received) - r1))
check "trace: the responder rejected" grep -qE 'rsiw_mpa: cm_id=[0-9]+ responder reject_sent' "$OUT/trace-crc-refused.txt"

# CRC: the server back to the default, the client required: CRC on.
echo default >$S0/mpa_crc
check "mpa_crc default vs required: rping's data verified" rping_once crc
expect_eq "trace: initiator with CRC, peer-to-peer" "crc=1 markers_tx=0 markers_rx=0 rtr=" \
	"$(mpa crc initiator | sed -E 's/rtr=(send|write|read)$/rtr=/')"
expect_eq "trace: responder with CRC, peer-to-peer" "crc=1 markers_tx=0 markers_rx=0 rtr=" \
	"$(mpa crc responder | sed -E 's/rtr=(send|write|read)$/rtr=/')"

# Markers and client-server mode, asked for by the client only.
echo default >$S1/mpa_crc
echo 1 >$S1/mpa_markers
echo 0 >$S1/p2p_rtr
check "mpa_markers 1, p2p_rtr 0: rping's data verified" rping_once markers
expect_eq "trace: initiator receives markers, no RTR, no CRC" "crc=0 markers_tx=0 markers_rx=1 rtr=none" \
	"$(mpa markers initiator)"
expect_eq "trace: responder sends markers, no RTR, no CRC" "crc=0 markers_tx=1 markers_rx=0 rtr=none" \
	"$(mpa markers responder)"
echo default >$S1/mpa_markers
echo default >$S1/p2p_rtr

# The RTR delay of the initiator: a second between the MPA Reply and its
# stream (then RTR), beside the same rping without it (the CRC one above).
echo 1000 >$S1/rtr_delay_ms
check "rtr_delay_ms 1000: rping's data verified" rping_once delay
base=$(rtr_gap crc)
ms=$(rtr_gap delay)
echo "# from the MPA Reply to the initiator's RTS: $base ms, with rtr_delay_ms=1000 $ms ms"
check "trace: without a delay, under a second from the Reply to RTS ($base ms)" test "$base" -lt 1000
check "trace: rtr_delay_ms 1000, at least a second from the Reply to RTS ($ms ms)" test "$ms" -ge 1000
echo default >$S1/rtr_delay_ms
expect_eq "rsiw0 and rsiw1: back to the defaults" "$defaults $defaults" "$(values $S0) $(values $S1)"

# --- a device's settings live with it; the module parameters are the defaults ---
echo required >$S1/mpa_crc
check "rdma link delete rsiw1" rdma link delete rsiw1
check "rdma link add rsiw1 again" rdma link add rsiw1 type rsiw netdev rsiws1
expect_eq "a new rsiw1 starts from the defaults" "$defaults" "$(values $S1)"
check "rdma link delete rsiw0, rsiw1" bash -c "rdma link delete rsiw0 && rdma link delete rsiw1"
check "rmmod rsiw" rmmod rsiw
setup "insmod rsiw.ko mpa_crc=1 p2p_rtr=2 rtr_delay_ms=5000" insmod "$ko" mpa_crc=1 p2p_rtr=2 rtr_delay_ms=5000
setup "rdma link add rsiw0, rsiw1" devices
expect_eq "the new module parameters are the defaults (rtr_delay_ms at most 1000)" \
	"mpa_crc=required mpa_markers=0 p2p_rtr=2 rtr_delay_ms=1000" "$(values $S0)"
echo never >$S0/mpa_crc
expect_eq "an override beside them" "mpa_crc=never mpa_markers=0 p2p_rtr=2 rtr_delay_ms=1000" "$(values $S0)"
expect_eq "rsiw1 keeps the module parameters' values" \
	"mpa_crc=required mpa_markers=0 p2p_rtr=2 rtr_delay_ms=1000" "$(values $S1)"
check "rdma link delete rsiw0, rsiw1" bash -c "rdma link delete rsiw0 && rdma link delete rsiw1"
check "rmmod rsiw" rmmod rsiw
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
