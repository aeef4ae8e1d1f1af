#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the test kernel (bzImage + modules) with LLVM=-19 from allnoconfig
# plus rsiw's config fragments, in a cache outside the repository keyed by
# source, fragments and toolchain. A rebuild happens only when one of those
# changes. Prints the build directory (the KDIR for the module) on stdout.
#
#   RSIW_KERNEL_TARBALL   local linux-source tarball (else Debian's package)
#   RSIW_KERNEL_FLAVOUR   lean (default), debug (adds KASAN, lockdep, kmemleak)
#                         or uml (lean as User-Mode Linux: scripts/uml-run.sh)
#   RSIW_JOBS             make -j (default: cores + 1)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mapfile -t fragments < <(kernel_fragments)
[ ${#fragments[@]} -gt 0 ] || die "unknown RSIW_KERNEL_FLAVOUR=$RSIW_KERNEL_FLAVOUR (lean, debug or uml)"
arch=$(kernel_arch)
# The image: the x86 boot image QEMU loads, or UML's executable.
image=bzImage
[ "$arch" = um ] && image=linux
mkdir -p "$RSIW_CACHE"

tarball=$("$RSIW_ROOT/scripts/fetch-kernel-source.sh")
src_dir=$(unpack_kernel_source "$tarball")
src_key=$(basename "$src_dir")
version=$(make -s -C "$src_dir" kernelversion)

# Everything that changes the build output: fragments, compilers, bindgen.
cfg_key=$(kernel_cfg_key) || die "cannot compute the kernel config key"
build_dir="$RSIW_CACHE/build/linux-$version-$RSIW_KERNEL_FLAVOUR-$src_key-$cfg_key"

# One build per directory at a time: concurrent runs (parallel test
# sessions, CI) wait here instead of configuring under each other.
mkdir -p "$RSIW_CACHE/build"
exec 9>"$build_dir.lock"
if ! flock -n 9; then
	log "another build of $(basename "$build_dir") is running; waiting for it"
	flock 9
fi

if [ -f "$build_dir/.rsiw-built" ]; then
	log "test kernel $version ($RSIW_KERNEL_FLAVOUR) is up to date: $build_dir"
else
	jobs=${RSIW_JOBS:-$(($(nproc) + 1))}
	mk=(make -s -C "$src_dir" O="$build_dir" ARCH="$arch" LLVM="$RSIW_LLVM" -j"$jobs")
	mkdir -p "$build_dir"
	log "configuring linux $version ($RSIW_KERNEL_FLAVOUR) in $build_dir"
	"${mk[@]}" allnoconfig >/dev/null
	(cd "$build_dir" && "$src_dir/scripts/kconfig/merge_config.sh" -m -O "$build_dir" \
		.config "${fragments[@]}" >/dev/null)
	"${mk[@]}" olddefconfig >/dev/null
	# Options that did not stick are worth a warning, not an error: some
	# depend on others the fragment does not spell out.
	# (rsiw.config's PC options do not exist on um: not worth a note there.)
	for f in "${fragments[@]}"; do
		[ "$arch" = um ] && [ "$f" != "${f%/rsiw.config}" ] && continue
		while IFS= read -r line; do
			case "$line" in CONFIG_*=[ym]) ;; *) continue ;; esac
			grep -qx "$line" "$build_dir/.config" || { log "note: $line did not stick"; }
		done <"$f"
	done
	grep -qx 'CONFIG_RUST=y' "$build_dir/.config" || die "CONFIG_RUST did not stick: is the Rust toolchain usable? (make rustavailable)"
	# Guests patch no code at run time (rsiw.config says why).
	! grep -qx 'CONFIG_JUMP_LABEL=y' "$build_dir/.config" ||
		die "CONFIG_JUMP_LABEL is on (an option selects it): guests under multi-threaded TCG would crash on int3 patching; turn off what selects it"
	log "building linux $version ($arch) with -j$jobs (20 to 40 minutes on 2 cores)"
	start=$(date +%s)
	"${mk[@]}" "$image" modules >&2 || die "kernel build failed"
	# The guest bind-mounts this on /lib/modules, so modprobe and the core's
	# request_module() find siw, rxe, nvme-rdma, ...
	rm -rf "$build_dir/modroot"
	"${mk[@]}" INSTALL_MOD_PATH="$build_dir/modroot" modules_install >/dev/null
	log "kernel built in $(($(date +%s) - start)) s"
	touch "$build_dir/.rsiw-built"
fi

# One pointer per configuration (what resolve_kdir reads), and the last
# build of the flavour for people.
echo "$build_dir" >"$(kernel_dir_file "$cfg_key")"
echo "$build_dir" >"$(kernel_last_file)"
echo "$build_dir"
