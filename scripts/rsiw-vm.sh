#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run your own program on rsiw: boot the test kernel with rsiw loaded and
# its devices ready, run COMMAND inside, print its output and exit with its
# status. The soft iWARP device for the CI of RDMA software whose own
# kernel cannot load a Rust module.
#
#   scripts/rsiw-vm.sh [options] -- COMMAND [ARGS...]
#
# Options:
#   --nodes 1|2       2: two nodes (network namespaces n1, n2) joined by a
#                     veth pair, rsiw0 in n1, rsiw1 in n2. 1 (default): both
#                     devices in one namespace
#   --mtu N           the veth MTU (default 1500)
#   --crc             load rsiw with mpa_crc=1 (MPA CRC on every connection)
#   --timeout SECONDS whole run (default 600)
#   --mem SIZE        guest memory (default 2G)
#   --out DIR         output.log, console.log, dmesg.txt, status (default: a
#                     fresh directory under $RSIW_CACHE/vm)
#   --share DIR       also show DIR in the guest at its path (repeatable)
#   --no-build        use rsiw.ko and providers/rsiw as they are (default:
#                     `make` them first; the test kernel is built if missing)
#
# COMMAND runs as root in the guest's initial namespace, from the caller's
# working directory (any path, /tmp included; the guest sees the host's
# files read-only, its /tmp, /run, /var/tmp and /mnt are its own). A
# COMMAND or an argument naming a file or directory there (/tmp/x/try.sh)
# is shown to the guest: its directory is shared (--share) and a note
# says so. A COMMAND the guest cannot find is refused before the boot. With:
#   RSIW_NODE1_ADDR, RSIW_NODE2_ADDR   the addresses of rsiw0 and rsiw1
#   RSIW_NODE1_DEV, RSIW_NODE2_DEV     rsiw0, rsiw1
#   RSIW_NODES                         1 or 2
#   RDMAV_DRIVERS                      rsiw's provider in this checkout
#   rsiw-node N CMD...                 on PATH: CMD in node N
#   RSIW_VM_OUT                        a writable directory (the output dir)
# Its stdout and stderr appear here as it runs. Exit status: COMMAND's; 124
# on timeout; 125 if the guest could not set up rsiw or run it.
# Documentation/usage.md, "Your own program on rsiw".
set -euo pipefail
. "$(dirname "$0")/lib.sh"

nodes=1
mtu=""
crc=0
timeout_s=600
mem=2G
out=""
build=1
shares=()
while [ $# -gt 0 ]; do
	case "$1" in
	--nodes) nodes=$2; shift 2 ;;
	--mtu) mtu=$2; shift 2 ;;
	--crc) crc=1; shift ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--share) shares+=(--share "$2"); shift 2 ;;
	--no-build) build=0; shift ;;
	--) shift; break ;;
	*) die "unknown option $1 (see the header of $0)" ;;
	esac
done
[ $# -gt 0 ] || die "usage: $0 [--nodes 1|2] [--mtu N] [--crc] [options] -- COMMAND [ARGS...]"
case "$nodes" in 1 | 2) ;; *) die "--nodes takes 1 or 2" ;; esac
case "$mtu" in "" | *[!0-9]*) [ -z "$mtu" ] || die "--mtu takes a number" ;; esac

# The guest's own directories (scripts/vm-init.sh): the host's files
# there are hidden unless shared. /proc, /sys and /dev are the guest's.
guest_private=(/tmp /run /var/tmp /var/lib/nvme /etc/nvme /mnt)
# The guest's PATH (scripts/vm-init.sh, tools/rsiw-vm/guest.sh).
guest_path=$RSIW_ROOT/tools/rsiw-vm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# hidden PATH: the guest-private directory PATH (absolute, symlinks kept)
# lies in, outside everything shared with the guest; fails if none.
hidden() {
	local p=$1 d s
	for s in "$RSIW_ROOT" "$PWD" ${KDIR:+"$KDIR"} "${share_dirs[@]}"; do
		s=$(realpath -sm "$s")
		case "$p" in "$s" | "$s"/*) return 1 ;; esac
	done
	for d in "${guest_private[@]}"; do
		case "$p" in "$d" | "$d"/*) echo "$d"; return 0 ;; esac
	done
	return 1
}
# show PATH WHAT: share PATH's directory (PATH itself if a directory, or
# if the directory is a guest-private one) when the guest would not see it.
show() {
	local p d top
	p=$(realpath -s "$1")
	top=$(hidden "$p") || return 0
	d=$p
	[ -d "$p" ] || d=$(dirname "$p")
	[ "$d" != "$top" ] || d=$p
	share_dirs+=("$d")
	shares+=(--share "$d")
	log "note: $2 $1 is in $top, which the guest has its own of: sharing $d with it (read-only, at the same path)"
}
share_dirs=()
for ((i = 1; i < ${#shares[@]}; i += 2)); do share_dirs+=("${shares[i]}"); done
case "$1" in
*/*)
	[ -e "$1" ] || die "COMMAND $1: no such file or directory (the guest runs it at the same path as here)"
	[ -d "$1" ] && die "COMMAND $1 is a directory"
	show "$1" COMMAND ;;
*)
	PATH=$guest_path type -P "$1" >/dev/null ||
		die "COMMAND $1 is not on the guest's PATH ($guest_path): give its path (./$1, or an absolute one)" ;;
esac
for a in "${@:2}"; do
	case "$a" in -*) continue ;; esac
	[ -e "$a" ] || continue
	show "$a" argument
done

if [ -z "${KDIR:-}" ] && ! kdir=$(resolve_kdir 2>/dev/null); then
	log "no test kernel for this configuration yet: building it (about 15 minutes the first time)"
	kdir=$("$RSIW_ROOT/scripts/build-kernel.sh")
fi
export KDIR=${KDIR:-$kdir}
if [ "$build" = 1 ]; then
	log "building rsiw.ko and the provider (make)"
	make -s -C "$RSIW_ROOT" KDIR="$KDIR" modules >&2 || die "module build failed"
	make -s -C "$RSIW_ROOT/providers/rsiw" >&2 || die "provider build failed"
fi

if [ -z "$out" ]; then
	mkdir -p "$RSIW_CACHE/vm"
	out=$(mktemp -d "$RSIW_CACHE/vm/rsiw-vm.XXXXXX")
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out/output.log"

"$RSIW_ROOT/scripts/vm-run.sh" --quiet --timeout "$timeout_s" --mem "$mem" --append kunit.enable=0 \
	--out "$out" "${shares[@]}" -- \
	bash "$RSIW_ROOT/tools/rsiw-vm/guest.sh" "$nodes" "$mtu" "$crc" "$@" &
vm=$!
# The command's output as it comes (the guest writes it through 9p).
tail -c +1 -F --pid="$vm" "$out/output.log" 2>/dev/null || true
rc=0
wait "$vm" || rc=$?
exit "$rc"
