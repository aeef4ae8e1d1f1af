#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core for rsiw's provider, in three ways; each prints one path on
# stdout and is idempotent (a second run checks and prints it).
#
#   scripts/build-rdma-core.sh [55|59]
#       rdma-core 55 (the default) or 59 built into a private prefix with
#       rsiw's provider inside its tree (providers/rsiw and the kernel's
#       rdma/rsiw-abi.h copied in at build time: --drop-in below), built
#       by rdma-core's own CMake with -Werror. Prints the prefix, which
#       holds libibverbs, librdmacm, their tools (bin/) and the provider
#       (lib/libibverbs/librsiw-rdmavNN.so, etc/libibverbs.d/rsiw.driver,
#       lib/librsiw.so.1 with the direct verbs, include/infiniband/
#       rsiwdv.h), and from 59 on pyverbs (lib/python3/dist-packages, for
#       /usr/bin/python3, with Debian's cython3) and rdma-core's own test
#       suite (share/doc/rdma-core/tests). Nothing lands outside the
#       prefix. A later run copies the provider's source in again and
#       rebuilds it if it changed (seconds).
#       Sources: 55 is the tree the ibverbs-sys crate vendors (crates.io),
#       59 the one in PyPI's pyverbs 59.0 source distribution, each checked
#       against the sha256 below.
#   scripts/build-rdma-core.sh --src DIR
#       the same with a rdma-core source tree of your own (60 and later:
#       Documentation/usage.md); the prefix is $RSIW_CACHE/rdma-core/VERSION
#       unless RSIW_RDMA_CORE_PREFIX says otherwise.
#   scripts/build-rdma-core.sh --drop-in DIR
#       only puts the provider into rdma-core source tree DIR (for a
#       distribution's package build); prints DIR.
#   scripts/build-rdma-core.sh --source VERSION
#       only fetches and unpacks a known version's source (55, 59); prints
#       the tree (without rsiw's provider until a full build drops it in).
#   scripts/build-rdma-core.sh --headers
#       the private provider headers (infiniband/driver.h, config.h,
#       kernel-abi/, ccan/, util/) of the installed libibverbs's private ABI,
#       for the out-of-tree build (providers/rsiw/Makefile). The ABI is the
#       IBVERBS_PRIVATE_NN symbol version the installed libibverbs.so
#       exports. The source: Debian's source package of the installed
#       libibverbs-dev (apt-get source, a private apt configuration), else a
#       rdma-core of the same private ABI this script can fetch (55 for
#       ABI 34: rdma-core keeps a private ABI's layouts until it changes
#       the number), else RSIW_RDMA_CORE_HEADERS_SRC=<source tree>. Only
#       the private headers are taken: the public ones (verbs.h) stay the
#       installed libibverbs-dev's. Prints the directory.
#
#   RSIW_RDMA_CORE_PREFIX  where a full build installs (one version at a time)
#   RSIW_JOBS              ninja -j (default: cores)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

base=$RSIW_CACHE/rdma-core
dl=$base/dl

# The sources this script fetches: VERSION kind name sha256 url.
sources() {
	cat <<-'EOF'
		55 crate ibverbs-sys-0.3.2+55.0.crate 8149ab8d940ea7e7073a24ba6e3ec6b0cc8ceab6ea3d562d60a21ca5cc23413a https://static.crates.io/crates/ibverbs-sys/ibverbs-sys-0.3.2+55.0.crate
		59 sdist pyverbs-59.0.tar.gz b30d56bb620b3d3b4301876f9a04c964be1c76cc6553a451e1465f1c6ac9f20e https://files.pythonhosted.org/packages/98/f5/c7f7425c53b313492f35cea6785fefe5d9b98040ce94a66a6f6354fc91ab/pyverbs-59.0.tar.gz
	EOF
}
# The private ABI (IBVERBS_PABI_VERSION) of each of them.
pabi_of_known() {
	case $1 in
	55) echo 34 ;;
	59) echo 59 ;;
	esac
}

# cmake_var SRC NAME: a set(NAME "value") of SRC's top CMakeLists.txt.
cmake_var() { sed -n "s/^set($2 \"\([^\"]*\)\")$/\1/p" "$1/CMakeLists.txt" | head -1; }

# The Python pyverbs is built for and its tests run with: Debian's, the
# guest's (not one of PATH's own, such as pyenv's).
PYTHON=/usr/bin/python3

# cmake_opts PREFIX [pyverbs]: a private prefix: libraries in lib (no
# multiarch directory), providers in lib/libibverbs, their configuration
# in etc/libibverbs.d. No man pages, udev/systemd files or static
# libraries; every warning an error (rdma-core's own ENABLE_WERROR: the
# provider builds without one). pyverbs only when asked (59 and later:
# rdma-core's own test suite, tests/userspace/rdmacore.sh), into
# lib/python3/dist-packages and the suite into share/doc/rdma-core/tests.
cmake_opts() {
	local prefix=$1 py
	if [ "${2:-}" = pyverbs ]; then
		py=("-DPYTHON_EXECUTABLE=$PYTHON" "-DCMAKE_INSTALL_PYTHON_ARCH_LIB=$prefix/lib/python3/dist-packages")
	else
		py=(-DNO_PYVERBS=1)
	fi
	printf '%s\n' -GNinja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		"-DCMAKE_INSTALL_PREFIX=$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
		-DNO_MAN_PAGES=1 "${py[@]}" -DENABLE_STATIC=0 -DENABLE_VALGRIND=0 \
		-DENABLE_WERROR=1 \
		-DCMAKE_DISABLE_FIND_PACKAGE_Systemd=1 -DCMAKE_DISABLE_FIND_PACKAGE_UDev=1 \
		"-DCMAKE_INSTALL_UDEV_RULESDIR=$prefix/lib/udev/rules.d" \
		"-DCMAKE_INSTALL_SYSTEMD_SERVICEDIR=$prefix/lib/systemd/system" \
		"-DCMAKE_INSTALL_SYSTEMD_BINDIR=$prefix/lib/systemd" \
		"-DCMAKE_INSTALL_PERLDIR=$prefix/share/perl5" \
		"-DSYSUSERS_DIR=$prefix/lib/sysusers.d"
}

need_build_tools() {
	local tool
	for tool in cmake ninja pkg-config curl python3; do
		command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup-toolchain.sh"
	done
	pkg-config --exists libnl-3.0 libnl-route-3.0 ||
		die "libnl-3 development files not found: run scripts/setup-toolchain.sh"
}

# pyverbs's build: Cython (Debian 12's 0.29 builds rdma-core 59's) and
# Python's headers, for $PYTHON.
need_pyverbs_tools() {
	need_debs cython3 python3-dev
	"$PYTHON" -c 'import Cython' 2>/dev/null || die "$PYTHON cannot import Cython (cython3)"
}

# cython_version: the Cython pyverbs is built with (part of the build's key).
cython_version() { "$PYTHON" -c 'import Cython; print(Cython.__version__)' 2>/dev/null || echo none; }

# lock NAME: one build of NAME at a time (other callers wait).
lock() {
	mkdir -p "$base"
	exec 9>"$base/$1.lock"
	if ! flock -n 9; then
		log "another build of $1 is running; waiting for it"
		flock 9
	fi
}

# fetched_source VERSION: the unpacked, checked source tree of a known
# version (downloaded once into $dl).
fetched_source() {
	local v=$1 kind name sum url file src
	read -r _ kind name sum url < <(sources | awk -v v="$v" '$1 == v')
	[ -n "${name:-}" ] || die "no source known for rdma-core $v (known: $(sources | awk '{print $1}' | paste -sd' '); or --src DIR)"
	mkdir -p "$dl"
	file=$dl/$name
	if [ ! -f "$file" ] || ! echo "$sum  $file" | sha256sum -c --status; then
		log "downloading $url"
		curl -fsSL --retry 3 -o "$file.part" "$url"
		echo "$sum  $file.part" | sha256sum -c --status || die "checksum mismatch for $url (expected $sum)"
		mv "$file.part" "$file"
	fi
	src=$base/src-$v
	if [ ! -f "$src/.rsiw-unpacked-$sum" ]; then
		log "unpacking rdma-core $v from $name"
		rm -rf "$src"
		mkdir -p "$src"
		case $kind in
		crate) tar -xzf "$file" -C "$src" --strip-components=3 "${name%.crate}/vendor/rdma-core" ;;
		sdist) tar -xzf "$file" -C "$src" --strip-components=2 "${name%.tar.gz}/rdma-core" ;;
		esac
		[ "$(cmake_var "$src" PACKAGE_VERSION)" = "$v.0" ] || die "$name does not hold rdma-core $v.0"
		touch "$src/.rsiw-unpacked-$sum"
	fi
	echo "$src"
}

# provider_files: the provider's source as it goes into rdma-core's tree
# (providers/rsiw: its files but the out-of-tree Makefile and .driver
# file, which rdma-core's CMake writes itself, and what git ignores: the
# out-of-tree build's output), one path a line, relative to providers/rsiw.
provider_files() {
	(cd "$RSIW_ROOT/providers/rsiw" &&
		{ git ls-files --cached --others --exclude-standard . 2>/dev/null ||
			find . -type f ! -name '*.so' -printf '%P\n'; } |
		grep -vxE 'Makefile|rsiw\.driver' | sort -u | while read -r f; do [ ! -f "$f" ] || echo "$f"; done)
}

# sync FROM TO: copy FROM to TO when their contents differ (a new mtime
# only for what changed, so ninja rebuilds only that).
sync() {
	cmp -s "$1" "$2" && return 0
	mkdir -p "$(dirname "$2")"
	cp "$1" "$2"
}

# drop_in SRC: rsiw's provider into rdma-core tree SRC, as an in-tree
# provider is laid out: providers/rsiw/, the kernel's ABI header in
# kernel-headers/rdma/ (listed with the other providers' headers), and
# the provider's directory in the top CMakeLists.txt after siw's.
drop_in() {
	local src=$1 f
	[ -f "$src/CMakeLists.txt" ] && [ -d "$src/providers" ] && [ -f "$src/kernel-headers/CMakeLists.txt" ] ||
		die "$src is not an rdma-core source tree"
	local files
	files=$(provider_files)
	while read -r f; do
		sync "$RSIW_ROOT/providers/rsiw/$f" "$src/providers/rsiw/$f"
	done <<<"$files"
	# A file the provider no longer has goes from the tree too.
	while read -r f; do
		grep -qxF "$f" <<<"$files" || rm -f "$src/providers/rsiw/$f"
	done < <(cd "$src/providers/rsiw" && find . -type f -printf '%P\n')
	sync "$RSIW_ROOT/include/uapi/rdma/rsiw-abi.h" "$src/kernel-headers/rdma/rsiw-abi.h"
	if ! grep -q 'rdma/rsiw-abi.h' "$src/kernel-headers/CMakeLists.txt"; then
		# The first list is publish_internal_headers(rdma ...).
		sed -i '0,/^  rdma\/siw-abi.h$/s//  rdma\/rsiw-abi.h\n&/' "$src/kernel-headers/CMakeLists.txt"
		grep -q 'rdma/rsiw-abi.h' "$src/kernel-headers/CMakeLists.txt" ||
			die "cannot list rdma/rsiw-abi.h in $src/kernel-headers/CMakeLists.txt"
	fi
	if ! grep -q '^add_subdirectory(providers/rsiw)' "$src/CMakeLists.txt"; then
		sed -i '0,/^add_subdirectory(providers\/siw)$/s//&\nadd_subdirectory(providers\/rsiw)/' "$src/CMakeLists.txt"
		grep -q '^add_subdirectory(providers/rsiw)' "$src/CMakeLists.txt" ||
			die "cannot add providers/rsiw to $src/CMakeLists.txt (no add_subdirectory(providers/siw))"
	fi
}

# provider_key: the provider this checkout drops in (a hash of its files).
provider_key() {
	{
		provider_files | (cd "$RSIW_ROOT/providers/rsiw" && xargs sha256sum)
		sha256sum <"$RSIW_ROOT/include/uapi/rdma/rsiw-abi.h"
	} | sha256sum | cut -c1-12
}

# full_build SRC ID: rdma-core from SRC (rsiw dropped in) into a prefix,
# and from 59 on pyverbs and the suite into it too (pyverbs_build).
full_build() {
	local src=$1 id=$2 version pabi prefix build stamp key pkey outside jobs start lib stage
	version=$(cmake_var "$src" PACKAGE_VERSION)
	pabi=$(cmake_var "$src" IBVERBS_PABI_VERSION)
	[ -n "$version" ] && [ -n "$pabi" ] || die "$src: no PACKAGE_VERSION or IBVERBS_PABI_VERSION in its CMakeLists.txt"
	prefix=${RSIW_RDMA_CORE_PREFIX:-$base/${version%.0}}
	# One build directory a prefix (its CMake cache names the prefix).
	build=$base/build-$id
	[ "$prefix" = "$base/${version%.0}" ] || build=$build-$(echo "$prefix" | sha256sum | cut -c1-8)
	stamp=$prefix/.rsiw-built
	mapfile -t opts < <(cmake_opts "$prefix")
	# What changes rdma-core's build: its source and the options.
	key=$( (echo "$id $src"; printf '%s\n' "${opts[@]}") | sha256sum | cut -c1-12)
	pkey=$(provider_key)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key $pkey" ]; then
		log "rdma-core $version with rsiw's provider is up to date in $prefix"
	else
		need_build_tools
		lock "build-$id"
		drop_in "$src"
		if [ ! -f "$stamp" ] || [ "$(cut -d' ' -f1 "$stamp")" != "$key" ] || [ ! -f "$build/build.ninja" ]; then
			# Only ever remove a prefix this script made (or an empty one).
			if [ -d "$prefix" ] && [ ! -f "$stamp" ] && [ -n "$(ls -A "$prefix")" ]; then
				die "$prefix exists and was not made by $0: choose another RSIW_RDMA_CORE_PREFIX"
			fi
			log "configuring rdma-core $version (private ABI $pabi) for $prefix (the whole build: two or three minutes on 2 cores)"
			rm -rf "$build" "$prefix"
			mkdir -p "$build"
			(cd "$build" && cmake "${opts[@]}" "$src" >"$build/cmake.log" 2>&1) ||
				{ tail -30 "$build/cmake.log" >&2; die "cmake failed (log: $build/cmake.log)"; }
		fi
		jobs=${RSIW_JOBS:-$(nproc)}
		log "building rdma-core $version with rsiw's provider, -j$jobs"
		start=$(date +%s)
		ninja -C "$build" -j"$jobs" >"$build/ninja.log" 2>&1 ||
			{ grep -E 'error|warning' "$build/ninja.log" | head -30 >&2; die "rdma-core $version build failed (log: $build/ninja.log)"; }
		# Installed into a staging directory first: nothing may land outside
		# the prefix (the system's rdma-core stays as is; rdma-core 60 and
		# later install a sysusers.d file wherever systemd keeps them unless
		# told, say).
		stage=$build/stage
		rm -rf "$stage"
		DESTDIR=$stage ninja -C "$build" install >"$build/install.log" 2>&1 ||
			{ tail -30 "$build/install.log" >&2; die "rdma-core $version install failed (log: $build/install.log)"; }
		outside=$(cd "$stage" && find . ! -type d | sed 's|^\.||' | grep -v "^$prefix/" || true)
		[ -z "$outside" ] || die "rdma-core would install files outside $prefix: $outside"
		mkdir -p "$prefix"
		cp -a "$stage$prefix/." "$prefix/"
		lib=$prefix/lib/libibverbs/librsiw-rdmav$pabi.so
		[ -e "$lib" ] || die "no $lib after the build (is providers/rsiw in $src/CMakeLists.txt?)"
		[ "$(cat "$prefix/etc/libibverbs.d/rsiw.driver" 2>/dev/null)" = "driver rsiw" ] ||
			die "$prefix/etc/libibverbs.d/rsiw.driver does not name the provider"
		[ "$(cat "$prefix/etc/libibverbs.d/siw.driver" 2>/dev/null)" = "driver siw" ] &&
			[ -e "$prefix/lib/libibverbs/libsiw-rdmav$pabi.so" ] ||
			die "no siw provider in $prefix (libsiw-rdmav$pabi.so, siw.driver): the suite's baseline"
		echo "$version" >"$prefix/VERSION"
		echo "$pkey" >"$prefix/share/rsiw-provider.key"
		log "rdma-core $version (ABI $pabi) with $(basename "$lib"): $(($(date +%s) - start)) s, $prefix"
		echo "$key $pkey" >"$stamp"
	fi
	# pyverbs and the suite from 59 on (tests/userspace/rdmacore.sh runs
	# them); 55 stays without.
	[ "${version%%.*}" -lt 59 ] || pyverbs_build "$src" "$id" "$prefix" "$build-pyverbs"
	echo "$prefix"
}

# pyverbs_build SRC ID PREFIX BUILD: pyverbs (for $PYTHON) and rdma-core's
# test suite of SRC into PREFIX, from a configuration of their own in
# BUILD: the prefix's main build stays the one without pyverbs, its key
# unchanged (a checkout whose script knows no pyverbs rebuilds none of
# it), and a provider's change rebuilds no pyverbs. Only pyverbs
# (lib/python3/dist-packages) and the suite (share/doc/rdma-core/tests)
# of this build go into the prefix; they use its libibverbs (the same
# source), and are put in again, from BUILD, when the prefix lacks them
# (a rebuild of the prefix removes them). The key holds the options and
# the Cython version, so a cached build without pyverbs gets it.
pyverbs_build() {
	local src=$1 id=$2 prefix=$3 build=$4 key pstamp version stage outside start
	pstamp=$prefix/.rsiw-pyverbs
	version=$(cmake_var "$src" PACKAGE_VERSION)
	mapfile -t opts < <(cmake_opts "$prefix" pyverbs)
	key=$( (echo "$id $src pyverbs"; printf '%s\n' "${opts[@]}"; echo "cython $(cython_version)") | sha256sum | cut -c1-12)
	if [ -f "$pstamp" ] && [ "$(cat "$pstamp")" = "$key" ]; then
		log "pyverbs and the test suite of rdma-core $version are up to date in $prefix"
		return
	fi
	need_build_tools
	need_pyverbs_tools
	lock "build-$id"
	stage=$build/stage
	if [ "$(cat "$build/.rsiw-pyverbs" 2>/dev/null)" != "$key" ]; then
		drop_in "$src"
		log "building pyverbs and the test suite of rdma-core $version (its own configuration: three or four minutes on 2 cores)"
		start=$(date +%s)
		rm -rf "$build"
		mkdir -p "$build"
		(cd "$build" && cmake "${opts[@]}" "$src" >"$build/cmake.log" 2>&1) ||
			{ tail -30 "$build/cmake.log" >&2; die "cmake with pyverbs failed (log: $build/cmake.log)"; }
		grep -q 'Found cython' "$build/cmake.log" || die "CMake found no Cython for pyverbs (log: $build/cmake.log)"
		ninja -C "$build" -j"${RSIW_JOBS:-$(nproc)}" >"$build/ninja.log" 2>&1 ||
			{ grep -E 'error|warning' "$build/ninja.log" | head -30 >&2; die "rdma-core $version with pyverbs: build failed (log: $build/ninja.log)"; }
		DESTDIR=$stage ninja -C "$build" install >"$build/install.log" 2>&1 ||
			{ tail -30 "$build/install.log" >&2; die "rdma-core $version with pyverbs: install failed (log: $build/install.log)"; }
		outside=$(cd "$stage" && find . ! -type d | sed 's|^\.||' | grep -v "^$prefix/" || true)
		[ -z "$outside" ] || die "rdma-core with pyverbs would install files outside $prefix: $outside"
		ls "$stage$prefix"/lib/python3/dist-packages/pyverbs/device.*so >/dev/null 2>&1 ||
			die "no pyverbs in the install of $build (log: $build/cmake.log)"
		[ -f "$stage$prefix/share/doc/rdma-core/tests/run_tests.py" ] ||
			die "no test suite in the install of $build"
		echo "$key" >"$build/.rsiw-pyverbs"
		log "pyverbs of rdma-core $version (Cython $(cython_version)): $(($(date +%s) - start)) s"
	fi
	rm -rf "$prefix/lib/python3" "$prefix/share/doc/rdma-core/tests"
	mkdir -p "$prefix/lib" "$prefix/share/doc/rdma-core"
	cp -a "$stage$prefix/lib/python3" "$prefix/lib/"
	cp -a "$stage$prefix/share/doc/rdma-core/tests" "$prefix/share/doc/rdma-core/"
	log "pyverbs in $prefix/lib/python3/dist-packages, the test suite in $prefix/share/doc/rdma-core/tests"
	echo "$key" >"$pstamp"
}

# ---- --headers: the private headers for the out-of-tree provider ----

# The Debian mirror this machine uses and its release, for apt-get source.
debian_source() {
	local pkg=$1 ver=$2 dir=$3 mirror codename apt_dir
	command -v dpkg-source >/dev/null || return 1
	mirror=$(debian_mirror) || return 1
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$codename" ] || return 1
	apt_dir=$base/apt
	debian_apt_opts "$apt_dir"
	printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
		"$mirror" "$codename" "$mirror" "$codename-updates" >"$apt_dir/sources.list"
	local o=("${DEBIAN_APT_OPTS[@]}")
	apt-get -qq "${o[@]}" update >&2 || return 1
	rm -rf "$dir.part"
	mkdir -p "$dir.part"
	chmod 777 "$dir.part" # apt downloads as the _apt user
	# dpkg-source applies Debian's patches (source format 3.0 (quilt)).
	if ! (cd "$dir.part" && apt-get -qq "${o[@]}" source --download-only "$pkg=$ver" >&2 &&
		dpkg-source -x ./*.dsc src >&2); then
		rm -rf "$dir.part"
		return 1
	fi
	rm -rf "$dir"
	mv "$dir.part/src" "$dir"
	rm -rf "$dir.part"
}

headers() {
	local libdir lib pabi version dver dpkg src note out key spabi build h
	libdir=$(pkg-config --variable=libdir libibverbs 2>/dev/null) ||
		die "no libibverbs.pc: install libibverbs-dev (rdma-core's development files)"
	lib=$libdir/libibverbs.so
	[ -e "$lib" ] || die "no $lib: install libibverbs-dev"
	pabi=$(objdump -T "$lib" | sed -n 's/.*IBVERBS_PRIVATE_\([0-9][0-9]*\).*/\1/p' | sort -u)
	[ -n "$pabi" ] && [ "$(echo "$pabi" | wc -l)" = 1 ] ||
		die "$lib exports no single IBVERBS_PRIVATE_NN symbol version (${pabi:-none})"
	version=$(pkg-config --modversion libibverbs | cut -d. -f3-) # 1.14.44.0: 44.0
	out=$base/headers-$version-pabi$pabi
	if [ -f "$out/.rsiw-headers" ]; then
		echo "$out"
		return
	fi
	need_build_tools
	lock "headers-$version"
	if [ -n "${RSIW_RDMA_CORE_HEADERS_SRC:-}" ]; then
		src=$RSIW_RDMA_CORE_HEADERS_SRC
		note="the given source $src"
	else
		dver=$(dpkg-query -W -f='${source:Version}' libibverbs-dev 2>/dev/null || true)
		dpkg=$(dpkg-query -W -f='${source:Package}' libibverbs-dev 2>/dev/null || true)
		src=$base/debian-$dpkg-$dver
		if [ -n "$dver" ] && { [ -f "$src/CMakeLists.txt" ] || debian_source "$dpkg" "$dver" "$src"; }; then
			note="Debian's source package $dpkg $dver"
		else
			[ -z "$dver" ] || log "Debian's source of $dpkg $dver cannot be fetched from this machine's mirror"
			local v
			src=""
			for v in $(sources | awk '{print $1}'); do
				if [ "$(pabi_of_known "$v")" = "$pabi" ]; then
					src=$(fetched_source "$v")
					note="rdma-core $v.0 (private ABI $pabi, like the installed $version)"
					break
				fi
			done
			[ -n "$src" ] || die "no rdma-core source of private ABI $pabi: set RSIW_RDMA_CORE_HEADERS_SRC to the source of the installed rdma-core $version"
		fi
	fi
	spabi=$(cmake_var "$src" IBVERBS_PABI_VERSION)
	[ "$spabi" = "$pabi" ] || die "$note has private ABI ${spabi:-?}, the installed libibverbs $pabi"
	log "the provider's private headers: $note"
	# Configure (config.h, the headers' links) and generate the kernel ABI
	# wrappers (kernel-abi/) only: nothing else is built.
	build=$base/build-headers-$version
	rm -rf "$build" "$out" "$out.part"
	mkdir -p "$build"
	mapfile -t opts < <(cmake_opts "$build/unused-prefix")
	(cd "$build" && cmake "${opts[@]}" "$src" >"$build/cmake.log" 2>&1 && ninja kern-abi >>"$build/cmake.log" 2>&1) ||
		{ tail -30 "$build/cmake.log" >&2; die "configuring $src failed (log: $build/cmake.log)"; }
	mkdir -p "$out.part/infiniband"
	# libibverbs's publish_internal_headers(infiniband ...): the provider
	# interface rdma-core does not install.
	for h in cmd_ioctl.h cmd_write.h driver.h kern-abi.h marshall.h; do
		cp -L "$build/include/infiniband/$h" "$out.part/infiniband/"
	done
	cp -rL "$build/include/kernel-abi" "$build/include/rdma" "$build/include/linux" "$build/include/config.h" "$out.part/"
	mkdir -p "$out.part/ccan" "$out.part/util"
	cp "$src"/ccan/*.h "$out.part/ccan/"
	cp "$src"/util/*.h "$out.part/util/"
	[ -f "$src/.clang-format" ] && cp "$src/.clang-format" "$out.part/"
	key="private ABI $pabi for the installed libibverbs $version ($lib), from $note"
	echo "$key" >"$out.part/.rsiw-headers"
	mv "$out.part" "$out"
	rm -rf "$build"
	echo "$out"
}

case ${1:-55} in
--headers) headers ;;
--source)
	[ -n "${2:-}" ] || die "usage: $0 --source VERSION"
	fetched_source "$2"
	;;
--drop-in)
	[ -n "${2:-}" ] || die "usage: $0 --drop-in RDMA_CORE_SOURCE_DIR"
	src=$(cd "$2" && pwd)
	drop_in "$src"
	echo "$src"
	;;
--src)
	[ -n "${2:-}" ] || die "usage: $0 --src RDMA_CORE_SOURCE_DIR"
	src=$(cd "$2" && pwd)
	full_build "$src" "src-$(echo "$src" | sha256sum | cut -c1-8)"
	;;
[0-9]*) full_build "$(fetched_source "$1")" "$1" ;;
*) die "usage: $0 [55|59] | --src DIR | --drop-in DIR | --headers" ;;
esac
