#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# packages-guest.sh DIR: the Debian packages that tests/install/packages.sh
# built into DIR, installed with dpkg into the guest's own system as a
# user installs them: rsiw-dkms (its postinst adds rsiw to DKMS) and
# ibverbs-providers-rsiw. The guest runs the test kernel (tests/install/005)
# or Debian's own (tests/debian/003). The module comes from DKMS: the host
# built the package's /usr/src tree against the running kernel (a private
# DKMS tree in DIR/dkms), because compiling it here, under TCG, takes
# about 15 minutes (tests/install/install.sh); this guest hands DKMS that
# build and `dkms install` puts it into /lib/modules. Then `rdma link add`
# loads it by its alias, libibverbs finds the packaged provider through
# the packaged rsiw.driver, without RDMAV_DRIVERS (ibv_devices,
# ibv_devinfo), and rping -V runs between two devices through it; dpkg -r
# takes module and provider away again.
#
# The guest's root is the host's, read-only: /usr, /etc, /var/lib and
# /var/log become overlays here (the host's files below, the guest's
# writes, dpkg's database included, in a tmpfs above), and
# /lib/modules/RELEASE starts as the running kernel's module tree
# (rsiw.modroot) less its build link, so the postinst's own build is skipped, as on a system
# without the kernel's headers. Nothing reaches the host.
set -u
. "$(dirname "$0")/../common/lib.sh"

dir=${1:?usage: packages-guest.sh DIR}
krel=$(uname -r)
modroot=$(sed -n 's/.* rsiw\.modroot=\([^ ]*\).*/\1/p' /proc/cmdline)
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$RSIW_ROOT/dkms.conf")
arch=$(dpkg --print-architecture)
scratch=/run/rsiw-packages
mkdir -p $scratch
mount -t tmpfs tmpfs $scratch
n=0
overlay() {
	n=$((n + 1))
	mkdir -p $scratch/$n/upper $scratch/$n/work &&
		mount -t overlay overlay -o "lowerdir=$1,upperdir=$scratch/$n/upper,workdir=$scratch/$n/work" "$2"
}
for d in /usr /etc /var/lib /var/log; do
	setup "a writable $d over the host's (guest only)" overlay $d $d
done
mkdir -p "/lib/modules/$krel"
setup "/lib/modules/$krel is the running kernel's module tree" \
	overlay "$modroot/lib/modules/$krel" "/lib/modules/$krel"
rm -f "/lib/modules/$krel/build" "/lib/modules/$krel/source"
check "no rsiw provider or module before the packages" \
	bash -c "! ls $(pkg-config --variable=libdir libibverbs)/libibverbs/librsiw-* /etc/libibverbs.d/rsiw.driver /usr/src/rsiw-* 2>/dev/null | grep -q . && ! modinfo rsiw >/dev/null 2>&1"
# An overlay over the 9p root cannot rename a directory (EXDEV), and dpkg
# makes each directory that is new to the system as NAME.dpkg-new, then
# renames it: the packages' directories are made beforehand (dpkg takes
# an existing directory as it is). Their files dpkg installs itself.
for deb in "$dir/rsiw-dkms_${ver}_all.deb" "$dir/ibverbs-providers-rsiw_${ver}_$arch.deb"; do
	dpkg-deb -c "$deb" | awk '$1 ~ /^d/ { print $6 }' | sed 's,^\.,,' | grep . | xargs -r mkdir -p
done
# No man-db index rebuild for rsiw.7 (minutes under TCG).
rm -f /var/lib/man-db/auto-update
# The system's own modprobe (vm-init.sh points it at the test kernel's tree).
PATH=$(echo "$PATH" | tr : '\n' | grep -v '^/tmp/rsiw-bin$' | paste -sd:)
command -v modprobe >/proc/sys/kernel/modprobe
unset RDMAV_DRIVERS
# dkms uses process substitution: /dev/fd, which this guest's devtmpfs lacks.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
provdir=$(pkg-config --variable=libdir libibverbs)/libibverbs
loaded() { grep -q '^rsiw ' /proc/modules; }

setup "veth pair rsiwp0/rsiwp1" local_veth rsiwp0 10.95.0.1 rsiwp1 10.95.0.2
dmesg -C

check "dpkg -i rsiw-dkms_${ver}_all.deb ibverbs-providers-rsiw_${ver}_$arch.deb" \
	to "$OUT/dpkg-install.txt" dpkg -i "$dir/rsiw-dkms_${ver}_all.deb" "$dir/ibverbs-providers-rsiw_${ver}_$arch.deb"
sed 's/^/#   /' "$OUT/dpkg-install.txt"
check "both are installed (dpkg-query)" bash -c \
	"dpkg-query -W -f='\${Status}\n' rsiw-dkms ibverbs-providers-rsiw | grep -c '^install ok installed$' | grep -qx 2"
check "/usr/src/rsiw-$ver/dkms.conf" test -f "/usr/src/rsiw-$ver/dkms.conf"
check "the postinst added rsiw/$ver to DKMS" bash -c "dkms status rsiw/$ver | grep -q 'rsiw/$ver'"
check "the postinst skipped the build here (no /lib/modules/$krel/build), saying so" \
	grep -q 'skipped since the' "$OUT/dpkg-install.txt"
expect_eq "/etc/libibverbs.d/rsiw.driver" "driver rsiw" "$(cat /etc/libibverbs.d/rsiw.driver 2>/dev/null)"
check "the provider in $provdir" bash -c "ls $provdir/librsiw-rdmav*.so >/dev/null"
check "man -w rsiw finds rsiw.7" bash -c 'man -w 7 rsiw 2>/dev/null | grep -q /usr/share/man/man7/rsiw.7'

# DKMS's build of the packaged source, made on the host, handed to this
# DKMS tree as its own build would have left it; dkms install takes it.
setup "the host's dkms build of rsiw/$ver for $krel into /var/lib/dkms" \
	cp -a "$dir/dkms/rsiw/$ver/$krel" "/var/lib/dkms/rsiw/$ver/"
check "dkms status: rsiw/$ver built for $krel" bash -c "dkms status rsiw/$ver -k $krel | grep -q ': built'"
check "dkms install rsiw/$ver -k $krel" to "$OUT/dkms-install.txt" dkms install "rsiw/$ver" -k "$krel"
sed 's/^/#   /' "$OUT/dkms-install.txt" | tail -6
check "modinfo finds DKMS's rsiw.ko in /lib/modules/$krel/updates/dkms" \
	bash -c 'case "$(modinfo -n rsiw)" in /lib/modules/*/updates/dkms/rsiw.ko*) ;; *) false ;; esac'
# What rdma-core's udev rules load on a real system (modules in Debian's
# kernel, built in or modules in the test kernel): the user verbs and the
# RDMA CM's user interface.
check "modprobe ib_uverbs rdma_ucm" modprobe -a ib_uverbs rdma_ucm
check "rdma link add rsiw0 type rsiw (loads rsiw by its alias)" rdma link add rsiw0 type rsiw netdev rsiwp0
check "rsiw is loaded" loaded
# An out-of-tree module taints the kernel (O, 4096), and one that is not
# signed by a key the kernel trusts also E (8192) where the kernel checks
# signatures (Debian's); nothing else may.
echo "# /proc/sys/kernel/tainted: $(cat /proc/sys/kernel/tainted); rsiw: $(cat /sys/module/rsiw/taint 2>/dev/null)"
expect_eq "the kernel's taint is only rsiw's out-of-tree (and unsigned) flags" 0 \
	$(($(cat /proc/sys/kernel/tainted) & ~(4096 | 8192)))
check "ibv_devices lists rsiw0 (packaged provider, no RDMAV_DRIVERS)" bash -c 'ibv_devices | grep -qw rsiw0'
to "$OUT/ibv_devinfo.txt" ibv_devinfo -d rsiw0
sed 's/^/#   /' "$OUT/ibv_devinfo.txt"
check "ibv_devinfo -d rsiw0: transport iWARP" grep -qE 'transport:[[:space:]]+iWARP' "$OUT/ibv_devinfo.txt"
check "ibv_devinfo -d rsiw0: port active" grep -q 'PORT_ACTIVE' "$OUT/ibv_devinfo.txt"
check "ibv_devinfo: no provider warnings" bash -c "! grep -qi 'warning\|couldn.t load' $OUT/ibv_devinfo.txt"
check "rdma link add rsiw1 type rsiw" rdma link add rsiw1 type rsiw netdev rsiwp1
rping_verified 10.95.0.1 10.95.0.2 10 "rping -V rsiw1 -> rsiw0 through the packaged provider"
setup "rdma link delete rsiw0 and rsiw1, rmmod rsiw" \
	bash -c 'rdma link delete rsiw0 && rdma link delete rsiw1 && rmmod rsiw'

# --- removal ---
check "dpkg -r ibverbs-providers-rsiw rsiw-dkms" to "$OUT/dpkg-remove.txt" dpkg -r ibverbs-providers-rsiw rsiw-dkms
sed 's/^/#   /' "$OUT/dpkg-remove.txt"
check "the provider is gone" bash -c "! ls $provdir/librsiw-* 2>/dev/null | grep -q ."
check "the prerm's dkms remove took rsiw.ko out of /lib/modules/$krel" \
	bash -c "! find /lib/modules/$krel -name 'rsiw.ko*' | grep -q ."
check "DKMS no longer knows rsiw" bash -c '! dkms status rsiw 2>/dev/null | grep -q rsiw'
check "modprobe rsiw now fails" bash -c '! modprobe rsiw 2>/dev/null'

check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
