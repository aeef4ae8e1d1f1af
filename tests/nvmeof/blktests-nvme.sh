#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# blktests' NVMe group (linux-blktests/blktests, fetched by the caller and
# never part of this tree) with nvme_trtype=rdma, over Linux siw and over
# rsiw in one boot, as a user runs it. blktests picks its soft RDMA driver
# with USE_RXE; a copy of the checkout in the guest gets the same kind of
# selector, USE_RSIW, which loads rsiw.ko (this checkout's) and makes
# `rdma link add ... type rsiw` devices where blktests makes siw ones.
# Prints one line per test and driver ("blktests DRIVER TEST STATUS
# SECONDS") and the two drivers' totals; the table in the note comes from
# these lines.
#   blktests-nvme.sh [--drivers "siw rsiw"] [--ko RSIW_KO] BLKTESTS_DIR [TESTS...]
#   (default: both drivers, this checkout's rsiw.ko, the nvme group)
set -u
. "$(dirname "$0")/../common/lib.sh"

drivers="siw rsiw"
ko=$RSIW_ROOT/rsiw.ko
while [ $# -gt 0 ]; do
	case $1 in
	--drivers) drivers=$2; shift 2 ;;
	--ko) ko=$2; shift 2 ;;
	*) break ;;
	esac
done
src=$1
shift
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(nvme)
work=/tmp/blktests

# blktests' ./check reads process substitutions: the guest's /dev has
# no /dev/fd of its own.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
rm -rf "$work"
cp -a "$src" "$work"
cd "$work" || exit 1
# The selector: rsiw where blktests would load siw.
python3 - <<'EOF'
import re
p = 'common/multipath-over-rdma'
s = open(p).read()
s = s.replace('''	if [ -z "$USE_RXE" ]; then
		modprobe siw || return $?
		type=siw''', '''	if [ -n "$USE_RSIW" ]; then
		[ -d /sys/module/rsiw ] || insmod "$RSIW_KO" || return $?
		type=rsiw
	elif [ -z "$USE_RXE" ]; then
		modprobe siw || return $?
		type=siw''', 1)
open(p, 'w').write(s)
p = 'common/nvme'
s = open(p).read()
s = s.replace('''		if [ -n "$USE_RXE" ]; then
			_have_driver rdma_rxe''', '''		if [ -n "$USE_RSIW" ]; then
			_have_driver rsiw
		elif [ -n "$USE_RXE" ]; then
			_have_driver rdma_rxe''', 1)
open(p, 'w').write(s)
EOF
grep -q USE_RSIW common/multipath-over-rdma && grep -q USE_RSIW common/nvme ||
	{ echo "not ok - blktests' soft-RDMA selector could be extended"; exit 1; }
make -s >/dev/null 2>&1 || echo "# blktests' helpers did not all build (some tests may skip)"

export RSIW_KO=$ko
# The network blktests binds its soft RDMA devices to: a veth pair.
setup "veth0 (10.99.0.1/24) and veth1" veth_up 10.99.0.1
# Each test runs on every driver before the next test starts: times are
# compared test by test under the same load (under TCG, with anything
# else on the host, a whole group run on one driver and then the other
# meets different conditions).
mapfile -t list < <(for t in "${tests[@]}"; do
	if [ -d "tests/$t" ]; then
		for f in "tests/$t"/[0-9][0-9][0-9]; do echo "${f#tests/}"; done
	else
		echo "$t"
	fi
done)
insmod "$RSIW_KO" || { echo "not ok - setup: insmod $RSIW_KO"; exit 1; }
dmesg -C
t0=$(date +%s)
for t in "${list[@]}"; do
	for drv in $drivers; do
		# blktests' _have_driver finds rsiw by /sys/module/rsiw: it
		# stays loaded for the whole run (siw's tests load siw).
		if [ "$drv" = rsiw ]; then export USE_RSIW=1; else unset USE_RSIW; fi
		nvme_trtype=rdma timeout 1800 ./check -o "results-$drv" "$t" >>"$RSIW_VM_OUT/blktests-$drv.log" 2>&1
		rdma link show | awk '{print $2}' | sed 's,/.*,,' | while read -r l; do rdma link delete "$l"; done
	done
done
echo "# ./check ${tests[*]}, each test on $drivers in turn, took $(($(date +%s) - t0)) s"
for drv in $drivers; do
	# One line per test from the results directory: status and runtime.
	for d in results-"$drv"/nodev*/nvme/[0-9][0-9][0-9]; do
		[ -f "$d" ] || continue
		st=$(sed -n 's/^status\t//p' "$d")
		rt=$(sed -n 's/^runtime\t//p' "$d")
		echo "blktests $drv $(basename "$(dirname "$(dirname "$d")")")/$(basename "$d") ${st:-?} ${rt:-?}"
	done | sort -u
	cp -a "results-$drv" "$RSIW_VM_OUT/blktests-results-$drv" 2>/dev/null
done
dmesg >"$RSIW_VM_OUT/dmesg-blktests.txt"
rmmod rsiw 2>/dev/null
modprobe -r siw 2>/dev/null
