#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything rsiw needs to build the test kernel, the module and the
# host crates, and to run the VM tests. Idempotent: a second run only checks.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BINDGEN_VERSION=0.73.2   # kernel 7.3 needs >= 0.71.1
CARGO_FUZZ_VERSION=0.13.2
LIBCLANG_MIN=17

APT_PACKAGES=(
	# kernel build with LLVM=-19
	clang-19 lld-19 llvm-19 libclang-19-dev
	make flex bison bc libelf-dev libssl-dev cpio xz-utils kmod python3
	# VM and guest userspace (the guest sees the host root read-only)
	qemu-system-x86 busybox-static iproute2
	rdma-core ibverbs-utils rdmacm-utils perftest qperf libibverbs-dev librdmacm-dev
	nvme-cli ndctl
	# sustained NVMe-oF I/O with verification (tests/nvmeof/nvmeof-sustained.sh)
	fio
	# blktests' ./check and its XFS tests (tests/nvmeof/blktests-nvme.sh)
	gawk xfsprogs
	# NFS over RDMA: rpc.nfsd, rpc.mountd, exportfs, mount.nfs4 (tests/nfs/nfs.sh)
	nfs-kernel-server
	# SMB Direct (tests/smb): ksmbd.mountd and ksmbd.adduser, mount.cifs
	ksmbd-tools cifs-utils
	# rdma-core's own test suite (tests/userspace/rdmacore.sh runs it from the package)
	python3-pyverbs
	# libfabric's verbs provider and fi_pingpong, Open MPI and mpi4py
	# (tests/userspace/userspace.sh)
	libfabric-bin openmpi-bin python3-mpi4py
	# reads the cores of crashed guest processes (tests/userspace/userspace.sh)
	gdb
	# dkms.conf's build, install and remove (tests/install/install.sh runs
	# the host's dkms in the guest)
	dkms
	# private rdma-core 55 and 59 builds with ibv_wr_flush, and the private
	# headers for the provider (scripts/build-rdma-core.sh; dpkg-source
	# unpacks Debian's source package, objdump reads symbol versions)
	cmake ninja-build pkg-config libnl-3-dev libnl-route-3-dev curl binutils dpkg-dev
)

need_debs "${APT_PACKAGES[@]}"

command -v rustup >/dev/null || die "rustup not found: rsiw needs the rustup toolchain (rustc >= 1.85)"
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	log "adding rust-src"
	rustup component add rust-src
fi

have_bindgen=$(bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have_bindgen" != "$BINDGEN_VERSION" ]; then
	log "installing bindgen-cli $BINDGEN_VERSION (about 2 minutes)"
	cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION"
fi

have_fuzz=$(cargo fuzz --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have_fuzz" != "$CARGO_FUZZ_VERSION" ]; then
	log "installing cargo-fuzz $CARGO_FUZZ_VERSION"
	cargo install --locked --quiet cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

# Version checks the kernel would make for an in-tree build but not for M= builds.
clang_major=$("clang$RSIW_LLVM" --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
[ "${clang_major:-0}" -ge "$LIBCLANG_MIN" ] || die "clang$RSIW_LLVM is ${clang_major:-missing}; need >= $LIBCLANG_MIN"
[ -e "$LIBCLANG_PATH/libclang.so" ] || ls "$LIBCLANG_PATH"/libclang*.so* >/dev/null 2>&1 ||
	die "no libclang under LIBCLANG_PATH=$LIBCLANG_PATH (install libclang${RSIW_LLVM}-dev)"
bg=$(bindgen --version | awk '{print $2}')
if ! printf '0.71.1\n%s\n' "$bg" | sort -V -C; then
	die "bindgen $bg is older than the kernel's minimum 0.71.1"
fi
rustc_v=$(rustc --version | awk '{print $2}')
printf '1.85.0\n%s\n' "$rustc_v" | sort -V -C || die "rustc $rustc_v is older than 1.85.0"
log "toolchain ok: rustc $rustc_v, bindgen $bg, clang/libclang $clang_major"

# rdma-core 55 and 59 (ibv_wr_flush) with rsiw's provider in their trees,
# in private prefixes, for the userspace tests (tests/userspace/
# userspace-rdma-core.sh, tests/commit/nvdimm.sh); two minutes each the
# first time, then only a check.
for v in 55 59; do
	"$RSIW_ROOT/scripts/build-rdma-core.sh" $v >/dev/null
done
