#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's own test suite, as Debian's python3-pyverbs ships it
# (/usr/share/doc/rdma-core/tests; nothing of it is in this repository),
# against rsiw (through its provider) and against Linux siw in the same
# boot: rsiw0 on one end of a veth pair, siw0 on the other. Each test has
# a timeout (tests/userspace/rdmacore-run.py, which also gives the suite the
# device's IP and changes none of its tests). Prints both results side by
# side and checks that rsiw passes every test siw passes, save the
# exceptions listed below with their reasons (Documentation/usage.md).
set -u
. "$(dirname "$0")/../common/lib.sh"

export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"
PER_TEST=${RSIW_RDMACORE_TIMEOUT:-60}
a=10.98.0.1
b=10.98.0.2

# Tests siw passes that rsiw is not expected to, and why (none today).
declare -A EXCEPT=()

tdir=$(mktemp -d)
cp -r /usr/share/doc/rdma-core/tests "$tdir/"
gunzip -f "$tdir"/tests/*.gz

ip link add rsiwc0 type veth peer name rsiwc1
for c in rsiwc0 rsiwc1; do
	sysctl -qw net.ipv6.conf.$c.disable_ipv6=1
done
ip addr add $a/24 dev rsiwc0
ip addr add $b/24 dev rsiwc1
ip link set rsiwc0 up
ip link set rsiwc1 up
for c in all rsiwc0 rsiwc1; do
	sysctl -qw net.ipv4.conf.$c.accept_local=1 net.ipv4.conf.$c.rp_filter=0
done

dmesg -C
check "insmod rsiw.ko" insmod "$RSIW_ROOT/rsiw.ko"
check "modprobe siw" modprobe siw
check "rdma link add rsiw0 on rsiwc0" rdma link add rsiw0 type rsiw netdev rsiwc0
check "rdma link add siw0 on rsiwc1" rdma link add siw0 type siw netdev rsiwc1

# run DEV NETDEV: the suite on DEV, its RESULT lines in $OUT/rdmacore-DEV.txt.
run() {
	(cd "$tdir" && timeout 1500 /usr/bin/python3 "$RSIW_ROOT/tests/userspace/rdmacore-run.py" \
		"$tdir/tests" "$2" "$PER_TEST" --dev "$1" --gid 0 \
		>"$OUT/rdmacore-$1.txt" 2>"$OUT/rdmacore-$1.log")
	echo "# rdma-core suite on $1: exit $?, $(grep -c '^RESULT ' "$OUT/rdmacore-$1.txt") results"
}
run siw0 rsiwc1
run rsiw0 rsiwc0

# Both results per test, "TEST SIW RSIW" (a test one run lacks: none).
r=$OUT/rdmacore-rsiw0.txt s=$OUT/rdmacore-siw0.txt both=$OUT/rdmacore-both.txt
awk 'FNR == 1 { f++ } $1 == "RESULT" { st[f, $2] = $3; id[$2] = 1 }
     END { for (t in id) print t, ((1, t) in st ? st[1, t] : "none"), ((2, t) in st ? st[2, t] : "none") }' \
	"$s" "$r" | sort >"$both"

for dev in siw0 rsiw0; do
	echo "# $dev: $(grep '^RESULT ' "$OUT/rdmacore-$dev.txt" | awk '{print $3}' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')"
done
echo "# side by side (tests not skipped on both): siw | rsiw"
awk '!($2 == "skip" && $3 == "skip") { sub(/^tests\./, "", $1); printf "#   %-7s | %-7s %s\n", $2, $3, $1 }' "$both"
echo "# why rsiw does not pass them:"
grep '^RESULT ' "$r" | awk '$3 != "ok" && $3 != "skip"' | cut -c1-220 | sed 's/^RESULT tests\./#   /'

expect_eq "the suite ran the same tests on siw0 and rsiw0" 0 "$(awk '$2 == "none" || $3 == "none"' "$both" | wc -l)"
check "the suite ran (more than 200 tests)" test "$(wc -l <"$both")" -gt 200
while read -r id sst rst; do
	[ "$sst" = ok ] || continue
	if [ -n "${EXCEPT[$id]:-}" ]; then
		echo "# ${id#tests.}: siw passes, rsiw $rst: ${EXCEPT[$id]}"
		continue
	fi
	expect_eq "rsiw passes ${id#tests.} (siw does)" ok "$rst"
done <"$both"
echo "# rsiw passes, siw does not: $(awk '$3 == "ok" && $2 != "ok" { sub(/^tests\./, "", $1); printf "%s ", $1 }' "$both")"

check "rdma link delete rsiw0" rdma link delete rsiw0
check "rdma link delete siw0" rdma link delete siw0
check "rmmod rsiw" rmmod rsiw
rm -rf "$tdir"
dmesg >"$OUT/dmesg.txt"
check_dmesg_clean "dmesg has no warnings, oopses, leaks or user-space crashes"
finish
