#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make install` and `make uninstall` as a user runs them, into the guest's
# own system: the module into /lib/modules/$(uname -r)/extra with depmod,
# the provider into libibverbs's provider directory and its .driver file
# into /etc/libibverbs.d. Then `modprobe rsiw` by name, `rdma link add ...
# type rsiw` loading the module by its alias, libibverbs finding the
# provider without RDMAV_DRIVERS (ibv_devinfo, rping), and `make
# uninstall` taking it all away. Also a staged install (DESTDIR).
#
# The guest's root is the host's, read-only: /usr/lib (so /lib/modules and
# libibverbs's directory) and /etc become overlays here, the host's files
# below and the guest's writes in a tmpfs above; /lib/modules/RELEASE starts
# as the test kernel's own module tree (KDIR/modroot). Nothing reaches the
# host. The make runs from a writable view of the checkout (the same kind
# of overlay), as a user's checkout is.
set -u
. "$(dirname "$0")/../common/lib.sh"

krel=$(uname -r)
modroot=$(sed -n 's/.* rsiw\.modroot=\([^ ]*\).*/\1/p' /proc/cmdline)
scratch=/run/rsiw-install
mkdir -p $scratch

# overlay LOWER TARGET: TARGET shows LOWER, writable, writes in a tmpfs.
n=0
overlay() {
	n=$((n + 1))
	mkdir -p $scratch/$n/upper $scratch/$n/work &&
		mount -t overlay overlay -o "lowerdir=$1,upperdir=$scratch/$n/upper,workdir=$scratch/$n/work" "$2"
}
mount -t tmpfs tmpfs $scratch
setup "a writable /usr/lib over the host's (guest only)" overlay /usr/lib /usr/lib
setup "a writable /etc over the host's (guest only)" overlay /etc /etc
mkdir -p /lib/modules/$krel
setup "/lib/modules/$krel is the test kernel's module tree" \
	overlay "$modroot/lib/modules/$krel" /lib/modules/$krel
# The module the guest loads is what it sees at the checkout's rsiw.ko:
# on User-Mode Linux the UML build shown over the checkout's
# (scripts/uml-run.sh). An overlay shows its lower directory's own files,
# not what is mounted over them, so the view gets that module copied in.
cp "$RSIW_ROOT/rsiw.ko" $scratch/rsiw.ko
setup "a writable view of the checkout" overlay "$RSIW_ROOT" "$RSIW_ROOT"
cmp -s $scratch/rsiw.ko "$RSIW_ROOT/rsiw.ko" ||
	setup "the view holds the module this kernel loads" cp $scratch/rsiw.ko "$RSIW_ROOT/rsiw.ko"
# The system's own modprobe, as the kernel's request_module() helper too
# (vm-init.sh points both at the test kernel's tree instead).
PATH=$(echo "$PATH" | tr : '\n' | grep -v '^/tmp/rsiw-bin$' | paste -sd:)
modprobe=$(command -v modprobe)
echo "$modprobe" >/proc/sys/kernel/modprobe
unset RDMAV_DRIVERS
ko=/lib/modules/$krel/extra/rsiw.ko
provdir=$(pkg-config --variable=libdir libibverbs)/libibverbs

setup "veth pair rsiwi0/rsiwi1" local_veth rsiwi0 10.94.0.1 rsiwi1 10.94.0.2
loaded() { grep -q '^rsiw ' /proc/modules; }
dmesg -C

# --- a staged install: everything below DESTDIR, nothing outside ---
stage=/tmp/stage
check "make install DESTDIR=$stage" to "$OUT/install-staged.txt" make -C "$RSIW_ROOT" DESTDIR=$stage install
check "staged: the module in lib/modules/$krel/extra" test -f $stage/lib/modules/$krel/extra/rsiw.ko
check "staged: depmod ran there (modules.dep names it)" grep -q '^extra/rsiw.ko:' $stage/lib/modules/$krel/modules.dep
check "staged: the provider in libibverbs's directory" test -f $stage$provdir/librsiw-rdmav34.so
expect_eq "staged: rsiw.driver names the provider" "driver rsiw" "$(cat $stage/etc/libibverbs.d/rsiw.driver 2>/dev/null)"
check "staged: nothing installed outside DESTDIR" bash -c "[ ! -e $ko ] && [ ! -e /etc/libibverbs.d/rsiw.driver ]"
check "make uninstall DESTDIR=$stage" to "$OUT/uninstall-staged.txt" make -C "$RSIW_ROOT" DESTDIR=$stage uninstall
expect_eq "staged: only empty directories and depmod's files left" "" \
	"$(find $stage -type f ! -name 'modules.*' | sort)"

# --- the real install ---
check "make install" to "$OUT/install.txt" make -C "$RSIW_ROOT" install
sed 's/^/#   /' "$OUT/install.txt"
check "the module is in /lib/modules/$krel/extra" test -f $ko
check "depmod ran (modules.dep names extra/rsiw.ko)" grep -q '^extra/rsiw.ko:' /lib/modules/$krel/modules.dep
expect_eq "modinfo rsiw: alias rdma-link-rsiw" rdma-link-rsiw "$(modinfo -F alias rsiw 2>/dev/null)"
check "modules.alias maps rdma-link-rsiw to rsiw" grep -qx 'alias rdma-link-rsiw rsiw' /lib/modules/$krel/modules.alias
check "the provider is in libibverbs's provider directory ($provdir)" test -f $provdir/librsiw-rdmav34.so
expect_eq "/etc/libibverbs.d/rsiw.driver" "driver rsiw" "$(cat /etc/libibverbs.d/rsiw.driver 2>/dev/null)"

check "modprobe rsiw (by name)" modprobe rsiw
check "rsiw is loaded" loaded
expect_eq "loaded from $ko" "$ko" "$(modinfo -n rsiw 2>/dev/null)"
check "modprobe -r rsiw" modprobe -r rsiw
check "rsiw is not loaded" bash -c '! grep -q "^rsiw " /proc/modules'

# The RDMA core asks for "rdma-link-rsiw" when a link type is unknown.
check "rdma link add rsiw0 type rsiw (module not loaded)" rdma link add rsiw0 type rsiw netdev rsiwi0
check "the kernel loaded rsiw by its alias" loaded
setup "rdma link add rsiw1 on rsiwi1" rdma link add rsiw1 type rsiw netdev rsiwi1

# libibverbs finds the installed provider through /etc/libibverbs.d.
check "ibv_devices lists rsiw0 and rsiw1 (no RDMAV_DRIVERS)" \
	bash -c 'ibv_devices | grep -qw rsiw0 && ibv_devices | grep -qw rsiw1'
to "$OUT/ibv_devinfo.txt" ibv_devinfo -d rsiw0
sed 's/^/#   /' "$OUT/ibv_devinfo.txt"
check "ibv_devinfo -d rsiw0: transport iWARP" grep -qE 'transport:[[:space:]]+iWARP' "$OUT/ibv_devinfo.txt"
check "ibv_devinfo -d rsiw0: port active" grep -q 'PORT_ACTIVE' "$OUT/ibv_devinfo.txt"
check "ibv_devinfo: no provider warnings" bash -c "! grep -qi 'warning\|couldn.t load' $OUT/ibv_devinfo.txt"
timeout 60 rping -s -a 10.94.0.1 -C 5 >"$OUT/rping-server.txt" 2>&1 &
server=$!
# 30 s: rping's server listens within a second on the lean kernel.
wait_for $((30 * TF)) listening 7174
check "rping -V through the installed provider: 5 rounds" \
	to "$OUT/rping-client.txt" timeout 60 rping -c -a 10.94.0.1 -I 10.94.0.2 -C 5 -V -v
wait $server
expect_eq "rping rounds verified" 5 "$(grep -c 'ping data' "$OUT/rping-client.txt")"

# --- uninstall ---
check "make uninstall" to "$OUT/uninstall.txt" make -C "$RSIW_ROOT" uninstall
sed 's/^/#   /' "$OUT/uninstall.txt"
check "the module file is gone" test ! -e $ko
check "depmod forgot it (modules.dep, modules.alias)" \
	bash -c "! grep -q rsiw /lib/modules/$krel/modules.dep /lib/modules/$krel/modules.alias"
check "the provider and rsiw.driver are gone" \
	bash -c "[ ! -e $provdir/librsiw-rdmav34.so ] && [ ! -e /etc/libibverbs.d/rsiw.driver ]"
check "ibv_devices no longer lists rsiw0 (no provider)" bash -c '! ibv_devices 2>/dev/null | grep -qw rsiw0'
check "rdma link delete rsiw0, rsiw1" bash -c 'rdma link delete rsiw0 && rdma link delete rsiw1'
check "rmmod rsiw" rmmod rsiw
check "modprobe rsiw now fails" bash -c '! modprobe rsiw 2>/dev/null'
check "rdma link add no longer loads it" bash -c '! rdma link add rsiw0 type rsiw netdev rsiwi0 2>/dev/null && ! grep -q "^rsiw " /proc/modules'
# --- DKMS: dkms.conf builds, installs and removes the module ---
# With the host's dkms (Debian's package, which scripts/setup-toolchain.sh
# installs; RSIW_DKMS names another dkms script): it builds rsiw.ko in
# the guest, against /lib/modules/RELEASE/build. Without one, a skip line
# says so: the README promises dkms.conf, so that is never silent.
# The whole module is compiled inside the guest, under TCG: 860 s on the
# lean kernel (2 CPUs, the host shared with another guest). BUILD_S, 1500
# s, bounds it (a hung compiler fails rather than eating the guest's whole
# time limit); TF for the debug kernel. The guest's limit (vm-run.sh's
# --timeout less 30 s, from the command's start) must leave room for it
# and the steps after it, or a skip line says what limit would.
BUILD_S=${RSIW_DKMS_BUILD_S:-1500}
dkms_need=$((BUILD_S * TF + 120))
dkms_left=$(($(cat "$OUT/guest-timeout" 2>/dev/null || echo 570) - SECONDS))
dkms=${RSIW_DKMS:-$(command -v dkms)}
if [ -z "$dkms" ]; then
	skip "dkms add, build, install and remove of dkms.conf: no dkms on this host (scripts/setup-toolchain.sh installs Debian's, or set RSIW_DKMS)"
elif [ "$dkms_left" -lt "$dkms_need" ]; then
	skip "dkms add, build, install and remove of dkms.conf: $dkms_left s left of the guest's limit, and building the module in the guest takes up to $((BUILD_S * TF)) s: vm-run.sh --timeout $((SECONDS + dkms_need + 60)) or more runs it"
else
	for d in /root/.cargo/bin "$(dirname "$(command -v rustc 2>/dev/null || echo /x/y)")"; do
		[ -x "$d/rustc" ] && { export PATH=$d:$PATH CARGO_HOME=${d%/bin} RUSTUP_HOME=${d%/.cargo/bin}/.rustup; break; }
	done
	export LIBCLANG_PATH=/usr/lib/llvm-19/lib
	# dkms uses process substitution: /dev/fd, which udev makes on a
	# real system and this guest's devtmpfs lacks.
	[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
	dk=(--dkmstree /tmp/dkms --sourcetree /tmp/dkms-src)
	src=/tmp/dkms-src/rsiw-0.1.0
	mkdir -p /tmp/dkms $src
	git -C "$RSIW_ROOT" ls-files -z | (cd "$RSIW_ROOT" && tar --null -cf - -T -) | tar -C $src -xf -
	check "dkms add rsiw/0.1.0" to "$OUT/dkms-add.txt" "$dkms" add rsiw/0.1.0 "${dk[@]}"
	t0=$(date +%s)
	check "dkms build rsiw/0.1.0 -k $krel (PRE_BUILD scripts/dkms-check.sh passes)" \
		to "$OUT/dkms-build.txt" timeout $((BUILD_S * TF)) "$dkms" build rsiw/0.1.0 -k "$krel" "${dk[@]}"
	echo "# dkms build took $(($(date +%s) - t0)) s"
	sed 's/^/#   /' "$OUT/dkms-build.txt" | tail -15
	check "dkms install rsiw/0.1.0 -k $krel" to "$OUT/dkms-install.txt" "$dkms" install rsiw/0.1.0 -k "$krel" "${dk[@]}"
	sed 's/^/#   /' "$OUT/dkms-install.txt" | tail -8
	check "modinfo finds dkms's rsiw.ko in /lib/modules/$krel" bash -c 'case "$(modinfo -n rsiw)" in /lib/modules/*/rsiw.ko*) ;; *) false ;; esac'
	check "modprobe rsiw (dkms's build)" modprobe rsiw
	check "its alias loads it too: rdma link add" bash -c 'rmmod rsiw && rdma link add rsiw0 type rsiw netdev rsiwi0 && grep -q "^rsiw " /proc/modules && rdma link delete rsiw0 && rmmod rsiw'
	check "dkms remove rsiw/0.1.0 --all" to "$OUT/dkms-remove.txt" "$dkms" remove rsiw/0.1.0 --all "${dk[@]}"
	check "dkms remove took its rsiw.ko away" bash -c "! find /lib/modules/$krel -name 'rsiw.ko*' | grep -q ."
	check "after dkms remove, modprobe rsiw fails" bash -c '! modprobe rsiw 2>/dev/null'
fi

check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
