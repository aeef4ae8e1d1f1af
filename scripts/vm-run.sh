#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the test kernel under QEMU with the host's root filesystem shared
# read-only over 9p, run one command inside as root, copy its output, exit
# status and the guest's dmesg out, and always end within a timeout.
#
#   scripts/vm-run.sh [options] -- COMMAND [ARGS...]
#
# Options:
#   --timeout SECONDS   whole-run limit (default 600); the guest command gets
#                       this minus 30 s, QEMU is killed at the limit
#   --out DIR           where console.log, output.log, dmesg.txt and status
#                       go (default: a fresh directory under $RSIW_CACHE/vm)
#   --mem SIZE          guest memory (default 2G)
#   --smp N             guest CPUs (default 2)
#   --append ARGS       extra kernel command line (e.g. memmap=256M!1G)
#   --nic listen:PORT | connect:PORT
#                       add a virtio-net NIC joined to another guest through
#                       a QEMU socket on 127.0.0.1:PORT (two-guest tests); the
#                       guest gets 10.99.1.1 (listen) or 10.99.1.2 (connect);
#                       connect waits (60 s at most) for the listening guest's
#                       QEMU: QEMU's connect does not retry, and a refused one
#                       leaves a NIC that never carries a packet
#   --share DIR         also make DIR visible in the guest at the same path
#                       (repeatable; see below)
#   --nvdimm SIZE       add an emulated NVDIMM of SIZE (e.g. 256M) backed by
#                       the file nvdimm.img in the output directory, new and
#                       zeroed: the guest sees an ACPI NFIT region (needs
#                       CONFIG_ACPI_NFIT) with one label-less namespace; the
#                       host can read what reached it in the file afterwards
#   --nvdimm-keep       keep nvdimm.img from an earlier run with the same
#                       --out if it has the size (a second boot on the
#                       same NVDIMM)
#   --tcg-single        run every vCPU in one host thread (TCG's
#                       thread=single) rather than one thread per vCPU: for
#                       guests that turn trace events on and off, which
#                       patch the kernel's code at run time (below)
#   --quiet             do not echo the guest console
#   --plugin SPEC       load a QEMU TCG plugin (QEMU's -plugin SPEC, e.g.
#                       bench/qemu-plugin/insncount.so,out=FILE)
#   --kernel FILE       boot FILE rather than the test kernel (a
#                       distribution's vmlinuz; KDIR is then optional)
#   --initrd FILE       with it an initramfs whose /init mounts the 9p root
#                       and hands over to scripts/vm-init.sh (a kernel whose
#                       9p and virtio drivers are modules:
#                       scripts/debian-kernel.sh initrd makes one)
#   --modroot DIR       the module tree the guest's modprobe uses
#                       (DIR/lib/modules/RELEASE; default KDIR/modroot)
#
# The command runs with the working directory of the caller (the same path
# in the guest), HOME=/tmp, and RSIW_VM_OUT pointing at the shared output
# directory (writable; also mounted at its host path). The guest's /tmp,
# /run, /var/tmp and /mnt are its own tmpfs, so the checkout, the working
# directory, KDIR (and its kernel source) and every --share DIR are mounted
# into the guest at their host paths (read-only) wherever they are, /tmp
# included. Exit status: the command's, 124 on timeout, 125 if
# the guest never ran it. KVM is used only with RSIW_KVM=1 (under TCG here).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

timeout_s=600
out=""
mem=2G
smp=2
append=""
nic=""
nvdimm=""
nvdimm_keep=0
quiet=0
tcg_thread=""
shares=()
plugin_args=()
kernel=""
initrd=""
modroot=""
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--append) append="$append $2"; shift 2 ;;
	--nic) nic=$2; shift 2 ;;
	--share) shares+=("$2"); shift 2 ;;
	--nvdimm) nvdimm=$2; shift 2 ;;
	--nvdimm-keep) nvdimm_keep=1; shift ;;
	--tcg-single) tcg_thread=single; shift ;;
	--quiet) quiet=1; shift ;;
	--plugin) plugin_args+=(-plugin "$2"); shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--initrd) initrd=$2; shift 2 ;;
	--modroot) modroot=$2; shift 2 ;;
	--) shift; break ;;
	*) die "unknown option $1 (see the header of $0)" ;;
	esac
done
[ $# -gt 0 ] || die "usage: $0 [options] -- COMMAND [ARGS...]"

test_kernel=1
if [ -n "$kernel" ]; then
	# Another kernel: the test kernel's tree only if there is one (the
	# guest gets its path as KDIR).
	[ -f "$kernel" ] || die "--kernel $kernel: no such file"
	test_kernel=0
	kdir=$( (resolve_kdir) 2>/dev/null || true)
else
	kdir=$(resolve_kdir)
	kernel="$kdir/arch/x86/boot/bzImage"
	[ -f "$kernel" ] || die "no kernel image at $kernel: run scripts/build-kernel.sh"
fi
initrd_args=()
if [ -n "$initrd" ]; then
	[ -f "$initrd" ] || die "--initrd $initrd: no such file"
	initrd_args=(-initrd "$initrd")
fi
if [ -n "$modroot" ]; then
	[ -d "$modroot/lib/modules" ] || die "--modroot $modroot: no lib/modules in it"
	shares+=("$modroot")
elif [ -n "$kdir" ]; then
	modroot="$kdir/modroot"
fi

out=$(guest_out_dir "$out" run)
guest_prepare "$out" "$kdir" "$timeout_s" "$@"

accel=tcg
cpu=max
if [ "${RSIW_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then accel=kvm; cpu=host; fi
# Turning a static key (a trace event's, the tracer's hooks on the
# scheduler) patches the kernel's code through text_poke_bp: an int3
# first, the new bytes after every CPU has synced. Under multi-threaded
# TCG a vCPU can still run its old translation of the code, int3
# included, after the patch is done: "Oops: int3" with the int3 gone from
# the Code: line, seen with an event enabled on the kernel command line
# (in sched_clock_tick, during boot) and as rsiw's events were turned off
# (in ttwu_do_activate). With one thread for every vCPU, one runs at a
# time and none runs stale code.
[ "$accel" = tcg ] && [ -n "$tcg_thread" ] && accel+=",thread=$tcg_thread"

net_args=()
case "$nic" in
"") ;;
listen:*)
	net_args=(-netdev "socket,id=n0,listen=127.0.0.1:${nic#listen:}"
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:99:01:01")
	append="$append rsiw.vm_ip=10.99.1.1/24" ;;
connect:*)
	peer_listens() { ss -Hltn "sport = :${nic#connect:}" | grep -q .; }
	for _ in $(seq 1 120); do
		peer_listens && break
		sleep 0.5
	done
	peer_listens || die "--nic $nic: nothing listens on 127.0.0.1:${nic#connect:} (start the listen guest first)"
	net_args=(-netdev "socket,id=n0,connect=127.0.0.1:${nic#connect:}"
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:99:01:02")
	append="$append rsiw.vm_ip=10.99.1.2/24" ;;
*) die "--nic takes listen:PORT or connect:PORT" ;;
esac

# SIZE (K/M/G suffix, or octets) in MiB.
to_mib() {
	local n=${1%[KkMmGg]}
	[[ "$n" =~ ^[0-9]+$ ]] || die "bad size $1"
	case "$1" in
	*[Kk]) echo $((n / 1024)) ;;
	*[Mm]) echo "$n" ;;
	*[Gg]) echo $((n * 1024)) ;;
	*) echo $((n / 1048576)) ;;
	esac
}

machine=q35
mem_args=(-m "$mem")
nvdimm_args=()
if [ -n "$nvdimm" ]; then
	nv_mib=$(to_mib "$nvdimm")
	[ "$nv_mib" -ge 16 ] && [ $((nv_mib % 2)) = 0 ] || die "--nvdimm takes an even number of MiB, at least 16"
	img="$out/nvdimm.img"
	if [ "$nvdimm_keep" = 0 ] || [ ! -f "$img" ] ||
		[ "$(stat -c %s "$img")" != $((nv_mib * 1048576)) ]; then
		rm -f "$img"
		truncate -s "${nv_mib}M" "$img"
	fi
	machine=q35,nvdimm=on
	mem_args=(-m "$(to_mib "$mem")M,slots=2,maxmem=$(($(to_mib "$mem") + nv_mib))M")
	# shellcheck disable=SC2054 # QEMU option values: commas, not separators
	nvdimm_args=(-object "memory-backend-file,id=nv0,share=on,mem-path=$img,size=${nv_mib}M"
		-device nvdimm,id=nvdimm0,memdev=nv0)
fi

cmdline="console=ttyS0 root=/dev/root rootfstype=9p"
cmdline+=" rootflags=trans=virtio,version=9p2000.L,msize=1048576 ro"
cmdline+=" init=$RSIW_ROOT/scripts/vm-init.sh panic=-1 oops=panic"
cmdline+="${modroot:+ rsiw.modroot=$modroot} $append"
# TCG's TSC follows the host's on every vCPU; the clocksource watchdog,
# comparing it with the HPET (a QEMU device model) while the host is
# loaded, sometimes calls it unstable ("frequency skew") and moves the
# guest to the HPET for the rest of the boot: 2 of the ~20 boots of one
# CI run, where every clock read then became a trip into QEMU and a perftest
# server fell behind its client. The TSC stays.
cmdline+=" tsc=reliable"
# The debug (KASAN) kernel on TCG's 5-level paging sometimes reports a wild
# access in handle_edge_irq during identify_cpu, before any module loads,
# and that taint turns lockdep off for the boot: run it with 4-level paging.
# (By the tree's real name: KDIR may be a symlink, as the checkout-under-/tmp
# test makes it.)
[ "$test_kernel" = 0 ] ||
	case "$(basename "$(readlink -f "$kdir")")" in *-debug-*) cmdline+=" no5lvl" ;; esac

# shellcheck disable=SC2054 # QEMU option values: commas, not separators
qemu=(qemu-system-x86_64 -machine "$machine" -accel "$accel" -cpu "$cpu" -smp "$smp" "${mem_args[@]}"
	-kernel "$kernel" "${initrd_args[@]}" -append "$cmdline"
	-nographic -no-reboot -serial mon:stdio -nodefaults
	-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-pci,fsdev=root,mount_tag=/dev/root
	-fsdev "local,id=out,path=$out,security_model=none"
	-device virtio-9p-pci,fsdev=out,mount_tag=rsiwout
	-device virtio-rng-pci
	"${net_args[@]}" "${nvdimm_args[@]}" "${plugin_args[@]}")

what=$kernel
[ "$test_kernel" = 0 ] || what=$(basename "$kdir")
log "booting $what ($accel), timeout ${timeout_s}s, output in $out"
rc=0
guest_boot "$out" "$timeout_s" "$quiet" "QEMU guest" "${qemu[@]}" || rc=$?
exit "$rc"
