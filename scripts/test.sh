#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The whole test suite, from a fresh machine: toolchain, host tests, test
# kernel, module build, and the VM tests (KUnit suites on insmod, device
# create/delete). Logs go to out/test/. Ends with "rsiw: N passed, N failed".
#
#   scripts/test.sh            everything
#   RSIW_SKIP_HOST=1 ...       skip the host cargo tests, clippy and fuzzing
#   RSIW_FUZZ_SECONDS=N ...    fuzz smoke time per target (default 15)
#   RSIW_ONLY="NAME ..." ...   only these VM tests (foundation, nvmeof, ...,
#                              memcg, dkms, anywhere, rsiw-vm, interop);
#                              the host tests and builds still run
#   RSIW_KERNEL_FLAVOUR=debug  on the debug kernel (KASAN, lockdep,
#                              kmemleak, UBSAN); guest time limits 4x
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT"

logs="$RSIW_ROOT/out/test"
rm -rf "$logs"
mkdir -p "$logs"
total_pass=0
total_fail=0
summary=()

# record NAME PASSED FAILED
record() {
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	summary+=("$(printf '%-28s %5d passed, %d failed' "$1" "$2" "$3")")
}

fatal() {
	record "$1" 0 1
	log "FAILED: $1 (log: $2)"
	tail -40 "$2" >&2
	finish
}

finish() {
	# Every failed check in one place, next to the summary (the end of
	# the output is what a CI log shows first), and for a guest that
	# ended without finishing, the last lines it printed.
	if [ "$total_fail" != 0 ]; then
		echo
		echo "==== failed checks ===="
		grep -rh --include='*.log' --exclude-dir=interop -E '(^|\] )not ok - ' "$logs" | awk '!seen[$0]++' | head -60
		grep -h -E '^\[[^]]*\] # (unfinished|tail)' "$logs/interop.log" 2>/dev/null | head -60
		grep -h -E '\[FAILED\]|ASSERTION FAILED|rsiw kunit:' "$logs/kunit.log" 2>/dev/null | head -20
	fi
	echo
	echo "==== rsiw test summary ===="
	printf '%s\n' "${summary[@]}"
	echo "rsiw: $total_pass passed, $total_fail failed"
	[ "$total_fail" = 0 ] && exit 0
	exit 1
}

log "== toolchain"
scripts/setup-toolchain.sh >"$logs/toolchain.log" 2>&1 || fatal "toolchain setup" "$logs/toolchain.log"

if [ "${RSIW_SKIP_HOST:-0}" != 1 ]; then
	log "== host tests (cargo test)"
	cargo test --workspace 2>&1 | tee "$logs/host.log" | grep -E '^test result|^error|panicked' || true
	hp=$(grep -oE '[0-9]+ passed' "$logs/host.log" | awk '{s += $1} END {print s + 0}')
	hf=$(grep -oE '[0-9]+ failed' "$logs/host.log" | awk '{s += $1} END {print s + 0}')
	if ! grep -q '^test result' "$logs/host.log" || grep -qE '^error(\[|:)' "$logs/host.log"; then
		hf=$((hf + 1))
	fi
	record "host (cargo test)" "$hp" "$hf"

	log "== lint (cargo clippy, warnings are errors)"
	if cargo clippy --workspace --all-targets -- -D warnings >"$logs/clippy.log" 2>&1; then
		record "clippy" 1 0
	else
		grep -E '^(warning|error)' -A5 "$logs/clippy.log" | head -40
		record "clippy" 0 1
	fi

	log "== fuzz smoke (15 s per target)"
	scripts/fuzz.sh --seconds "${RSIW_FUZZ_SECONDS:-15}" 2>&1 | tee "$logs/fuzz.log" | grep -E '^(ok|not ok)'
	fp=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$logs/fuzz.log")
	ff=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$logs/fuzz.log")
	record "fuzz smoke" "${fp:-0}" "${ff:-1}"
fi

log "== test kernel"
kdir=$(scripts/build-kernel.sh 2>"$logs/kernel.log") || fatal "test kernel build" "$logs/kernel.log"
tail -1 "$logs/kernel.log" >&2

# has_kunit KO: whether KO carries KUnit suites. The section list is read
# whole (not `objdump | grep -q`: under pipefail grep's early exit can kill
# objdump with SIGPIPE once the list outgrows one stdio buffer, failing
# the pipeline although the section is there).
has_kunit() {
	local sections
	sections=$(objdump -h "$1") || return 2
	grep -q kunit_test_suites <<<"$sections"
}

log "== module"
# The production module first: it must carry no test code (no KUnit
# suite section), then the test module the VM suites load (`make test`).
make -s KDIR="$kdir" modules >"$logs/module.log" 2>&1 || fatal "module build" "$logs/module.log"
if has_kunit rsiw.ko; then
	log "FAILED: the production rsiw.ko has KUnit suites"
	record "production module without tests" 0 1
else
	record "production module without tests" 1 0
fi
# The message path's functions (rust/hot-functions.txt) packed at the head
# of the module's text (Kbuild, scripts/hot-text.sh).
if scripts/hot-text.sh --check "llvm-nm$RSIW_LLVM" rust/hot-functions.txt rsiw.ko >"$logs/hot-text.log" 2>&1; then
	record "hot functions first in rsiw.ko's text" 1 0
else
	log "FAILED: rsiw.ko's text does not start with rust/hot-functions.txt's functions:"
	head -5 "$logs/hot-text.log" >&2
	record "hot functions first in rsiw.ko's text" 0 1
fi
make -s KDIR="$kdir" test >>"$logs/module.log" 2>&1 || fatal "test module build" "$logs/module.log"
has_kunit rsiw.ko || fatal "test module has KUnit suites" "$logs/module.log"
grep -iE 'warning' "$logs/module.log" >&2 || true
record "module build" 1 0

log "== userspace provider (providers/rsiw)"
make -s -C providers/rsiw >"$logs/provider.log" 2>&1 || fatal "provider build" "$logs/provider.log"
make -s -C tests/progs >>"$logs/provider.log" 2>&1 || fatal "rsiw-storm, rsiw-uvfuzz, rsiw-hostile-ring build" "$logs/provider.log"
make -s -C bench/qpbench >>"$logs/provider.log" 2>&1 || fatal "rsiw-qpbench build" "$logs/provider.log"
# rdma-core 55 in a private prefix (ibv_wr_flush) and the provider and
# checks built against it.
rc55=$(scripts/build-rdma-core.sh 2>>"$logs/provider.log") &&
	make -s -C providers/rsiw RDMA_CORE="$rc55" >>"$logs/provider.log" 2>&1 &&
	make -s -C tests/progs RDMA_CORE="$rc55" >>"$logs/provider.log" 2>&1 ||
	fatal "provider against rdma-core 55" "$logs/provider.log"
record "provider build" 1 0

# only NAME: whether RSIW_ONLY (if set) names this VM test.
only() {
	[ -z "${RSIW_ONLY:-}" ] && return 0
	case " $RSIW_ONLY " in *" $1 "*) return 0 ;; esac
	return 1
}
# The debug kernel runs everything several times slower (lib.sh).
tfactor=$RSIW_TIME_FACTOR
# vm_test NAME MEM CMDLINE SCRIPT [ARGS...]: a guest test script's ok/not
# ok lines. CMDLINE is extra kernel command line ("" for none); the guest
# gets VM_TIMEOUT seconds (default 600; 4x on the debug kernel).
vm_test() {
	local name=$1 mem=$2 append=$3 out="$logs/vm-$1"
	shift 3
	only "$name" || return 0
	log "== VM: $name"
	# shellcheck disable=SC2086 # VM_ARGS: extra vm-run.sh options, split
	scripts/vm-run.sh --quiet --timeout $((${VM_TIMEOUT:-600} * tfactor)) --mem "$mem" --append "$append" --out "$out" ${VM_ARGS:-} -- "$@"
	local rc=$? vp=0 vf=0
	if [ -f "$out/output.log" ]; then
		grep -E '^(ok|not ok|#)' "$out/output.log"
		vp=$(grep -c '^ok - ' "$out/output.log")
		vf=$(grep -c '^not ok - ' "$out/output.log")
	fi
	[ "$rc" = 0 ] || [ "$vf" -gt 0 ] || vf=1
	record "VM $name" "$vp" "$vf"
}

# Device lifecycle; the KUnit suites run at its first insmod.
vm_test foundation 2G "" tests/core/foundation.sh
# A real kernel ULP end to end: NVMe-oF over rsiw (the KUnit suites ran
# above; they need not run again at each insmod here).
vm_test nvmeof 3G kunit.enable=0 tests/nvmeof/nvmeof.sh 64
# rmmod rsiw under NVMe-oF I/O: bounded, devices and controller gone,
# only the expected kernel messages.
vm_test nvmeof-rmmod 3G kunit.enable=0 tests/nvmeof/nvmeof-rmmod.sh
# Sustained NVMe-oF writes (1 GiB through dd and fio, then a flush), MPA
# CRC off and on: nvmet-rdma's pooled MRs, fast-registered and
# invalidated by RDMA Read with Local Invalidate for every command; no
# Terminate, no I/O timeout, data verified.
VM_TIMEOUT=1200 vm_test nvmeof-sustained 3G kunit.enable=0 tests/nvmeof/nvmeof-sustained.sh 1024
# One Terminate injected under NVMe-oF I/O (the test build's
# kunit_terminate_after_mib): recovery from the flushed completions and a
# reconnect within seconds, no I/O timeout, the data intact.
vm_test nvmeof-terminate 3G kunit.enable=0 tests/nvmeof/nvmeof-terminate.sh 256
# nvmet-rdma on shared receive queues (use_srq=1): a disconnect under I/O
# on another connection without the drain's one-minute wait for Last WQE.
vm_test nvmeof-srq 3G kunit.enable=0 tests/nvmeof/nvmeof-srq.sh 64
# The other kernel ULP users of soft RNICs run: NFS over RDMA (nfsd's
# svcrdma and the xprtrdma client, NFSv4.2 over rsiw), data compared on
# both sides, with siw's and NFS/TCP's figures beside rsiw's.
vm_test nfs 2G kunit.enable=0 tests/nfs/nfs.sh 32
# RDMA Commit into persistent memory: emulated pmem (RAM-backed below the
# 2G), an fsdax namespace, the rsiw_flush suite with its pmem case.
vm_test pmem 2G 'memmap=64M!1G kunit.filter_glob=rsiw_flush' tests/commit/pmem.sh
# Unchanged rdma-core applications through rsiw's provider: rping,
# perftest -R, qperf -cm1.
vm_test userspace 2G kunit.enable=0 tests/userspace/userspace.sh
# The provider built against rdma-core 55: its tools, and RDMA Commit
# from userspace (ibv_wr_flush through the send ring).
vm_test userspace55 2G kunit.enable=0 tests/userspace/userspace55.sh
# RDMA Commit into QEMU's emulated NVDIMM (ACPI NFIT): from a process into
# device-DAX and from a kernel consumer into fs-DAX, read back in the guest
# and (nvdimm-image.sh) in the host's backing file.
VM_ARGS="--nvdimm 256M" vm_test nvdimm 2G kunit.filter_glob=rsiw_flush tests/commit/nvdimm.sh
if only nvdimm; then
	log "== host: the NVDIMM's backing file"
	tests/commit/nvdimm-image.sh "$logs/vm-nvdimm" >"$logs/nvdimm-image.log" 2>&1
	grep -E '^(ok|not ok)' "$logs/nvdimm-image.log"
	record "NVDIMM image" "$(grep -c '^ok - ' "$logs/nvdimm-image.log")" "$(grep -c '^not ok - ' "$logs/nvdimm-image.log")"
fi
# Trace events, per-QP attributes and port counters (Documentation/usage.md).
vm_test observe 2G kunit.enable=0 tests/core/observe.sh
# rdma-core's own test suite (Debian's python3-pyverbs) on rsiw and on siw
# in one boot: rsiw passes every test siw passes.
VM_TIMEOUT=1200 vm_test rdmacore 2G kunit.enable=0 tests/userspace/rdmacore.sh
# make install / uninstall into the guest's own /lib/modules and libibverbs
# directory: modprobe by name, rdma link add autoloading, the provider
# without RDMAV_DRIVERS.
vm_test install 2G kunit.enable=0 tests/install/install.sh
# Containers: exclusive netns mode, devices in namespaces, rping inside,
# a device moved, NVMe-oF's initial-namespace limit.
vm_test netns 3G kunit.enable=0 tests/netns/netns.sh
# The main job's demo (scripts/run.sh) keeps working.
vm_test demo 3G kunit.enable=0 tools/rsiw-vm/guest.sh 2 "" 0 tools/rsiw-vm/demo.sh
# kernel_quiet FILE...: rsiw-vm's guest notes any kernel warning, oops,
# KASAN/UBSAN report or hang in dmesg; a test run through it fails on
# that note as the other guests fail on check_dmesg_clean.
kernel_quiet() {
	local f
	for f; do [ -f "$f" ] || return 1; done
	! grep -q 'note: the kernel logged warnings or errors' "$@"
}

# DKMS's pre-build check: passes for the test kernel, fails clearly for a
# build tree without CONFIG_RUST.
dkms_check() {
fake=$(mktemp -d)
mkdir -p "$fake/include/config"
grep -v '^CONFIG_RUST' "$kdir/.config" >"$fake/.config"
echo 1.2.3-norust >"$fake/include/config/kernel.release"
dp=0 df=0
if scripts/dkms-check.sh "$kdir" >"$logs/dkms-check.log" 2>&1; then dp=$((dp + 1)); else df=$((df + 1)); fi
if ! scripts/dkms-check.sh "$fake" >>"$logs/dkms-check.log" 2>&1 &&
	grep -q 'the kernel has no Rust support (CONFIG_RUST is not y)' "$logs/dkms-check.log"; then
	dp=$((dp + 1))
else
	df=$((df + 1))
fi
rm -rf "$fake"
record "dkms-check (test kernel, no-Rust tree)" "$dp" "$df"
}
! only dkms || dkms_check
# Reliability (issue 13, Documentation/reliability.md): connection storms
# rsiw<->rsiw and rsiw<->siw, a scale soak, link faults under userspace
# load, a malformed-FPDU flood against the logs and counters.
vm_test storm 2G kunit.enable=0 tests/stress/storm.sh
vm_test soak 2G kunit.enable=0 tests/stress/soak.sh 1024
# The same scale as a kernel ULP: 1024 QP pairs through the in-kernel
# rdma_cm (KUnit rsiw_scale), three rounds per load, two loads.
VM_TIMEOUT=1200 vm_test soak-kernel 3G kunit.filter_glob=rsiw_scale tests/stress/soak-kernel.sh 1024
vm_test linkfault 2G kunit.enable=0 tests/stress/linkfault.sh
# Link faults under a kernel ULP: NVMe-oF I/O over rsiw on a veth pair.
VM_TIMEOUT=900 vm_test nvmeof-linkfault 3G kunit.enable=0 tests/stress/nvmeof-linkfault.sh
vm_test logattack 2G kunit.enable=0 tests/security/logattack.sh
# A hostile peer against an unprivileged QP: Write FPDUs and Read
# Responses stalled while the target re-registers at the same STag (the
# test module's kunit_stag_reuse), and every length/offset at its edge.
vm_test hostile-peer 2G kunit.enable=0 tests/security/hostile-peer.sh
# Hostile userspace: rsiw-uvfuzz as nobody (random verbs, raw uverbs
# commands, connections, exits with objects alive); then nothing left,
# the devices still work. And user objects' kernel memory is charged to
# the owner's memory cgroup: its limit stops the process, not the machine.
vm_test uvfuzz 2G kunit.enable=0 tests/security/uvfuzz.sh
# A hostile process as nobody: a full CQ never drained (one CQ_ERR), poll
# after destroy on a ringless CQ, another process's QP number in
# rdma_connect/rdma_accept (refused).
vm_test hostile-process 2G kunit.enable=0 tests/security/hostile-process.sh
# A hostile process against the shared rings (as nobody): its producer
# indices raced against the doorbells of a QP in Error (bounded flushes,
# no lockup), and two QPs on one SRQ with one peer closing (the other
# keeps its receives).
vm_test hostile-ring 2G kunit.enable=0 tests/security/hostile-ring.sh
vm_test memcg 2G kunit.enable=0 tests/security/memcg.sh

# host_check NAME COMMAND...: a host-side check of a VM test, as an ok /
# not ok line counted in $vp / $vf.
host_check() {
	local name=$1
	shift
	if "$@"; then echo "ok - $name"; vp=$((vp + 1)); else echo "not ok - $name"; vf=$((vf + 1)); fi
}
# The demo's guest (above) ran through rsiw-vm's: its dmesg note.
if only demo; then
	vp=0 vf=0
	host_check "demo: the guest kernel logged no warning, oops or report" kernel_quiet "$logs/vm-demo/output.log"
	record "VM demo dmesg" "$vp" "$vf"
fi

# A checkout anywhere: the guest's own tmpfs on /tmp, /run, /var/tmp and
# /mnt must not hide a tree there. A copy of what a guest needs of this
# checkout under a fresh /tmp directory, KDIR a symlink there, run with
# scripts/rsiw-vm.sh from a working directory there, output there too
# (tests/vm-tool/anywhere.sh checks the guest's view).
vm_anywhere() {
	local tmp token rc vp=0 vf=0 out="$logs/vm-anywhere"
	log "== VM: a checkout, working directory, KDIR and output under /tmp"
	tmp=$(mktemp -d /tmp/rsiw-anywhere.XXXXXX)
	token=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
	mkdir -p "$tmp/rsiw/providers/rsiw" "$tmp/rsiw/tests" "$tmp/rsiw/tools" "$tmp/work"
	cp -r scripts "$tmp/rsiw/"
	cp -r tests/common "$tmp/rsiw/tests/"
	cp -r tools/rsiw-vm "$tmp/rsiw/tools/"
	cp rsiw.ko "$tmp/rsiw/"
	cp providers/rsiw/librsiw-rdmav*.so "$tmp/rsiw/providers/rsiw/"
	ln -s "$kdir" "$tmp/kdir"
	echo "$token" >"$tmp/work/token"
	cp tests/vm-tool/anywhere.sh "$tmp/work/probe.sh"
	(cd "$tmp/work" && KDIR="$tmp/kdir" RSIW_CACHE="$tmp/cache" "$tmp/rsiw/scripts/rsiw-vm.sh" \
		--no-build --nodes 1 --mtu 1400 --crc --timeout $((400 * tfactor)) --out "$tmp/out" \
		-- ./probe.sh "$tmp" "$token") >"$tmp/stdout" 2>"$tmp/stderr"
	rc=$?
	rm -rf "$out"
	cp -r "$tmp/out" "$out"
	cp "$tmp/stdout" "$tmp/stderr" "$out/"
	if [ -f "$out/output.log" ]; then
		grep -E '^(ok|not ok|#)' "$out/output.log"
		vp=$(grep -c '^ok - ' "$out/output.log")
		vf=$(grep -c '^not ok - ' "$out/output.log")
	fi
	host_check "rsiw-vm.sh from /tmp: the command's exit status (0) comes back" [ "$rc" = 0 ]
	host_check "rsiw-vm.sh printed the command's whole output as it ran" cmp -s "$out/stdout" "$out/output.log"
	host_check "the guest wrote the output directory at its host path" \
		[ "$(cat "$tmp/out/at-host-path" 2>/dev/null)" = "$token" ]
	host_check "the guest's /tmp stayed the guest's" [ ! -e "/tmp/rsiw-guest-only-$token" ]
	host_check "the guest kernel logged no warning, oops or report" kernel_quiet "$out/output.log"
	rm -rf "$tmp"
	record "VM checkout under /tmp" "$vp" "$vf"
}

# Your own program on rsiw: scripts/rsiw-vm.sh runs rdma-core's rping
# (tools/rsiw-vm/examples/rping.sh) between two nodes, and a failing
# command's status comes back.
vm_rsiw_vm() {
	local rc vp=0 vf=0 out="$logs/vm-rsiw-vm"
	log "== VM: scripts/rsiw-vm.sh --nodes 2 -- tools/rsiw-vm/examples/rping.sh"
	# --no-build: the test module built above stays (rsiw-vm.sh alone
	# would build the production one).
	KDIR="$kdir" scripts/rsiw-vm.sh --no-build --nodes 2 --timeout $((300 * tfactor)) --out "$out" \
		-- tools/rsiw-vm/examples/rping.sh >"$logs/rsiw-vm.log" 2>&1
	rc=$?
	grep '^rsiw-vm: node' "$logs/rsiw-vm.log"
	host_check "rsiw-vm.sh rping example: exit status 0" [ "$rc" = 0 ]
	host_check "rsiw-vm.sh rping example: 10 verified rounds printed" \
		[ "$(grep -c '^ping data' "$logs/rsiw-vm.log")" = 10 ]
	host_check "rsiw-vm.sh: node 1 (netns n1) and node 2 (netns n2) set up" \
		[ "$(grep -cE '^rsiw-vm: node [12] \(netns n[12]\): rsiw[01] on' "$logs/rsiw-vm.log")" = 2 ]
	KDIR="$kdir" scripts/rsiw-vm.sh --no-build --nodes 2 --timeout $((200 * tfactor)) --out "$out-status" \
		-- bash -c 'rsiw-node 2 ip -br addr show rsiwv2; exit 7' >"$logs/rsiw-vm-status.log" 2>&1
	rc=$?
	host_check "rsiw-vm.sh returns the command's status (7)" [ "$rc" = 7 ]
	host_check "rsiw-node 2 runs in node 2 (its veth, RSIW_NODE2_ADDR)" \
		grep -qE '^rsiwv2@[^ ]+ +UP +10\.96\.0\.2/24' "$logs/rsiw-vm-status.log"
	host_check "the guest kernels logged no warning, oops or report" \
		kernel_quiet "$logs/rsiw-vm.log" "$logs/rsiw-vm-status.log"
	record "VM rsiw-vm.sh (your program)" "$vp" "$vf"
}

! only anywhere || vm_anywhere
! only rsiw-vm || vm_rsiw_vm

# Interoperability with Linux siw: two guests, NVMe-oF both ways.
if only interop; then
	log "== VM: interop with siw (two guests)"
	scripts/interop.sh "$logs/interop" 2>&1 | tee "$logs/interop.log" | grep -E '(ok|not ok) - |^interop:'
	ip_=$(sed -n 's/^interop: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$logs/interop.log")
	if_=$(sed -n 's/^interop: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$logs/interop.log")
	record "VM interop with siw" "${ip_:-0}" "${if_:-1}"
fi

if ! only foundation; then
	: # KUnit runs in the foundation guest
elif [ -f "$logs/vm-foundation/kunit-dmesg.txt" ]; then
	log "== KUnit"
	scripts/kunit-check.sh "$logs/vm-foundation/kunit-dmesg.txt" | tee "$logs/kunit.log"
	kp=$(sed -n 's/^kunit: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$logs/kunit.log")
	kf=$(sed -n 's/^kunit: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$logs/kunit.log")
	record "KUnit (in the VM)" "${kp:-0}" "${kf:-1}"
else
	log "== KUnit"
	record "KUnit (in the VM)" 0 1
fi

finish
