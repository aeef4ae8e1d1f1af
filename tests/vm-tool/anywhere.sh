#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A checkout anywhere: scripts/test.sh copies what a guest needs of a
# checkout under /tmp (hidden in the guest by its own tmpfs unless shared
# in), places this script in a working directory there and runs it as
#   cd TMP/work && KDIR=TMP/kdir TMP/rsiw/scripts/rsiw-vm.sh --no-build \
#       --nodes 1 --mtu 1400 --crc --out TMP/out -- ./probe.sh TMP TOKEN
# TMP/kdir is a symlink to the test kernel; TMP/work/token holds TOKEN.
# The host then checks what this wrote at host paths.
set -u
. "$RSIW_ROOT/tests/common/lib.sh"
tmp=$1
token=$2

expect_eq "the working directory is the caller's, under /tmp" "$tmp/work" "$PWD"
expect_eq "a file in it reads as on the host" "$token" "$(cat token 2>/dev/null)"
expect_eq "RSIW_ROOT is the checkout under /tmp" "$tmp/rsiw" "$RSIW_ROOT"
check "its rsiw.ko and provider are visible" test -f "$RSIW_ROOT/rsiw.ko" -a -d "$RSIW_ROOT/providers/rsiw"
expect_eq "KDIR is the symlink under /tmp" "$tmp/kdir" "$KDIR"
check "the test kernel's modules resolve through it" test -d "$KDIR/modroot/lib/modules"
check "modprobe finds them (siw)" bash -c 'modprobe siw && test -d /sys/module/siw'
check "/tmp is writable in the guest" bash -c "echo guest >/tmp/rsiw-guest-only-$token"
check "the output directory is writable at its host path" bash -c "echo $token >$tmp/out/at-host-path"
check "and the same as RSIW_VM_OUT" test "$(cat "$RSIW_VM_OUT/at-host-path")" = "$token"
expect_eq "--mtu 1400 on node 1's veth" 1400 "$(cat /sys/class/net/rsiwv1/mtu)"
expect_eq "--mtu 1400 on node 2's veth" 1400 "$(cat /sys/class/net/rsiwv2/mtu)"
check "the provider lists rsiw0 and rsiw1" bash -c 'ibv_devices | grep -qw rsiw0 && ibv_devices | grep -qw rsiw1'
check "the rping example from the checkout under /tmp exits 0" \
	to "$OUT/rping.txt" "$RSIW_ROOT/tools/rsiw-vm/examples/rping.sh"
expect_eq "rping example: 10 verified rounds" 10 "$(grep -c '^ping data' "$OUT/rping.txt")"
# --crc: rsiw's module parameters are not in sysfs (a Rust module's have
# no sysfs file), so what says whether CRC is on is each connection's
# kernel log line, "rsiw: qp N connected as ...: CRC on|off": rping's
# two ends (initiator and responder) must both say on, and none off.
conns=$(dmesg | grep -E 'rsiw: qp [0-9]+ connected as (initiator|responder): CRC ')
echo "$conns" | sed 's/^/#   /'
expect_eq "--crc: rping's initiator and responder both negotiated MPA CRC on" "initiator on,responder on" \
	"$(echo "$conns" | sed -n 's/.*connected as \([a-z]*\): CRC \([a-z]*\),.*/\1 \2/p' | sort -u | paste -sd,)"
finish
