#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run one command as root in the test kernel built as User-Mode Linux
# (RSIW_KERNEL_FLAVOUR=uml scripts/build-kernel.sh): the kernel is an
# ordinary host process, so its code, rsiw's included, runs natively
# rather than under QEMU's emulator. The same contract as scripts/vm-run.sh:
# the host's root read-only (hostfs instead of 9p), the same guest init
# (scripts/vm-init.sh), the same output directory (console.log,
# output.log, dmesg.txt, status) and exit status (the command's, 124 on
# timeout, 125 if the guest never ran it). rsiw.ko in the guest is the UML
# build (scripts/uml-module.sh), shown at the checkout's rsiw.ko.
#
#   scripts/uml-run.sh [options] -- COMMAND [ARGS...]
#
# Options (as vm-run.sh's): --timeout SECONDS (default 600), --out DIR,
# --mem SIZE (default 2G), --smp N (default 2), --append ARGS, --share DIR,
# --quiet. --tcg-single is accepted and means nothing here (no emulator).
# What needs QEMU's devices or a second machine (--nic, --nvdimm,
# --plugin) is refused: those tests stay on QEMU (Documentation/testing.md,
# "Lanes").
set -euo pipefail
. "$(dirname "$0")/lib.sh"

timeout_s=600
out=""
mem=2G
smp=2
append=""
quiet=0
shares=()
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--append) append="$append $2"; shift 2 ;;
	--share) shares+=("$2"); shift 2 ;;
	--tcg-single) shift ;;
	--quiet) quiet=1; shift ;;
	--nic | --nvdimm | --nvdimm-keep | --plugin)
		die "$1 needs QEMU (a NIC between guests, an NVDIMM, a TCG plugin): use scripts/vm-run.sh" ;;
	--) shift; break ;;
	*) die "unknown option $1 (see the header of $0)" ;;
	esac
done
[ $# -gt 0 ] || die "usage: $0 [options] -- COMMAND [ARGS...]"

kdir=$(RSIW_KERNEL_FLAVOUR=uml KDIR=${RSIW_UML_KDIR:-} resolve_kdir)
kernel="$kdir/linux"
[ -x "$kernel" ] || die "no UML kernel at $kernel: run RSIW_KERNEL_FLAVOUR=uml scripts/build-kernel.sh"
ko=$("$RSIW_ROOT/scripts/uml-module.sh" path) || die "build rsiw.ko for the UML kernel first: scripts/uml-module.sh"
# The guest shows the UML build at the checkout's path, which must exist
# (the guest's root is read-only).
[ -f "$RSIW_ROOT/rsiw.ko" ] ||
	die "the guest shows the UML build of rsiw.ko at $RSIW_ROOT/rsiw.ko, which must exist: build the module (make test) first"

out=$(guest_out_dir "$out" uml)
guest_prepare "$out" "$kdir" "$timeout_s" "$@"
printf '%s\t%s\n' "$ko" "$RSIW_ROOT/rsiw.ko" >"$out/binds"

# UML's memory is a file it maps: in /dev/shm (a tmpfs), not on disk.
# seccomp=on: userspace stubs driven by seccomp rather than ptrace, which
# SMP needs. panic: UML ends its own process on a panic (oops=panic).
# The host's CPU clock, which perftest needs and UML's /proc/cpuinfo
# lacks (scripts/vm-init.sh adds it).
mhz=$(sed -n 's/^cpu MHz[[:space:]]*: *//p' /proc/cpuinfo | head -1)
# shellcheck disable=SC2206,SC2054 # --append: split on spaces; con0: a comma in a value
uml=("$kernel" "mem=$mem" "ncpus=$smp" seccomp=on root=/dev/root rootfstype=hostfs rootflags=/ ro
	"init=$RSIW_ROOT/scripts/vm-init.sh" oops=panic
	"rsiw.modroot=$kdir/modroot" "rsiw.uml_out=$out" ${mhz:+"rsiw.cpu_mhz=$mhz"}
	con0=null,fd:1 con=null $append)

log "booting $(basename "$kdir") (UML), timeout ${timeout_s}s, output in $out"
# A UML process is a tree (a host thread per CPU, a stub per guest
# process): timeout signals its whole process group. No core dump on a
# guest panic; its memory file in /dev/shm.
rc=0
guest_boot "$out" "$timeout_s" "$quiet" "UML kernel" \
	sh -c 'ulimit -c 0; exec "$@"' uml env TMPDIR=/dev/shm "${uml[@]}" || rc=$?
exit "$rc"
