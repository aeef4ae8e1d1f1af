#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of the foundation tests: load rsiw.ko (its KUnit suites run on
# load), create devices with `rdma link add`, check what rdma, sysfs and the
# port state say, remove them every way there is, unload, and check dmesg.
set -u
. "$(dirname "$0")/../common/lib.sh"

ko=$RSIW_ROOT/rsiw.ko
dmesg -C

# --- what the rdma_cm KUnit suites (rust/selftest/cm.rs) need ---
# A veth pair for two rsiw devices: rsiwkt0 10.98.0.1 fd98::1 (server),
# rsiwkt1 10.98.0.2 fd98::2 (client). Traffic between them goes over lo.
ip link add rsiwkt0 type veth peer name rsiwkt1
ip addr add 10.98.0.1/24 dev rsiwkt0
ip addr add 10.98.0.2/24 dev rsiwkt1
ip -6 addr add fd98::1/64 dev rsiwkt0 nodad
ip -6 addr add fd98::2/64 dev rsiwkt1 nodad
ip link set rsiwkt0 up
ip link set rsiwkt1 up
# Linux siw for the interop suite (rust/selftest/siw.rs), on its own veth
# pair (rdma_cm picks the device by address): siw on rsiwkt2 10.98.1.1,
# rsiw on the peer end rsiwkt3 10.98.1.2.
ip link add rsiwkt2 type veth peer name rsiwkt3
ip addr add 10.98.1.1/24 dev rsiwkt2
ip addr add 10.98.1.2/24 dev rsiwkt3
ip link set rsiwkt2 up
ip link set rsiwkt3 up
setup "siw loads" modprobe siw
setup "siw device siwkt0 on rsiwkt2" rdma link add siwkt0 type siw netdev rsiwkt2
# rdma_cm resolves the peer with ARP out of the bound device: accept
# replies about our own addresses.
for c in all rsiwkt0 rsiwkt1 rsiwkt2 rsiwkt3; do
	sysctl -qw net.ipv4.conf.$c.accept_local=1 net.ipv4.conf.$c.rp_filter=0
done
setup "veth pair rsiwkt0/rsiwkt1 for the rdma_cm suites" bash -c 'ip -6 addr show dev rsiwkt1 | grep -q fd98::2'


# --- load: KUnit runs at MODULE_STATE_LIVE, inside insmod ---
check "insmod rsiw.ko" insmod "$ko"
dmesg >"$OUT/kunit-dmesg.txt"

ip link add veth0 type veth peer name veth1
ip link set veth0 up
ip link set veth1 up
mac0=$(cat /sys/class/net/veth0/address)

# --- create ---
check "rdma link add rsiw0 on veth0" rdma link add rsiw0 type rsiw netdev veth0
echo "# rdma dev show:"; rdma dev show | sed 's/^/#   /'
echo "# rdma link show:"; rdma link show | sed 's/^/#   /'
rdma dev show rsiw0 >"$OUT/rdma-dev-show.txt" 2>&1
rdma link show >"$OUT/rdma-link-show.txt" 2>&1
check "rdma dev show lists rsiw0 as an RNIC" grep -q 'rsiw0: node_type rnic' "$OUT/rdma-dev-show.txt"
check "rdma link show binds rsiw0/1 to veth0" grep -qE 'link rsiw0/1 .*netdev veth0' "$OUT/rdma-link-show.txt"

sys=/sys/class/infiniband/rsiw0
expect_eq "sysfs node_type" "4: RNIC" "$(cat $sys/node_type)"
expect_eq "sysfs port state active" "4: ACTIVE" "$(cat $sys/ports/1/state)"
expect_eq "sysfs link_layer" "Ethernet" "$(cat $sys/ports/1/link_layer)"
# GID: the MAC in the first six bytes.
gid_mac=$(cut -d: -f1-3 $sys/ports/1/gids/0 | tr -d :)
expect_eq "GID derived from the MAC" "$(echo "$mac0" | tr -d : | cut -c1-12)" "$gid_mac"
# node_guid: modified EUI-64 of the MAC.
IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$mac0"
eui=$(printf '%02x%02x:%02xff:fe%02x:%02x%02x' $((0x$m0 ^ 2)) 0x$m1 0x$m2 0x$m3 0x$m4 0x$m5)
expect_eq "node_guid is EUI-64 of the MAC" "$eui" "$(cat $sys/node_guid)"
check "sysfs node_desc set" grep -q rsiw $sys/node_desc
# hw counters (KUnit rsiw_zcopy, rsiw_cm, the interop run and observe.sh
# check their values).
counters="tx_zcopy_octets tx_zcopy_batches tx_zcopy_copied terminate_sent terminate_received rx_crc_errors rx_protocol_errors"
counters="$counters mpa_reject_sent mpa_reject_received cm_timeouts cm_failures cm_established rx_work_octets"
# shellcheck disable=SC2010 # sysfs attribute names: plain words
expect_eq "sysfs hw_counters of port 1" "$(echo $counters | tr ' ' '\n' | sort | tr '\n' ' ')" "$(ls $sys/ports/1/hw_counters | grep -v lifespan | sort | tr '\n' ' ')"
rdma statistic show link rsiw0/1 >"$OUT/rdma-statistic.txt" 2>&1
check "rdma statistic shows every counter at 0 on a new device" bash -c "for c in $counters; do grep -qE \" \$c 0( |\$)\" $OUT/rdma-statistic.txt || exit 1; done"

# --- userspace: libibverbs binds rsiw0 to rsiw's provider (providers/rsiw) ---
# Without the provider libibverbs drops the device; with it, ibv_devinfo
# opens it and reports what the kernel does.
provider="$RSIW_ROOT/providers/rsiw/librsiw"
check "without rsiw's provider libibverbs lists no rsiw0" bash -c '! ibv_devices 2>/dev/null | grep -qw rsiw0'
check "with it, ibv_devices lists rsiw0" bash -c "RDMAV_DRIVERS=$provider ibv_devices | grep -qw rsiw0"
RDMAV_DRIVERS=$provider ibv_devinfo -v -d rsiw0 >"$OUT/ibv_devinfo.txt" 2>&1
check "ibv_devinfo opens rsiw0" grep -qE '^hca_id:[[:space:]]+rsiw0$' "$OUT/ibv_devinfo.txt"
devinfo() { sed -nE "s/^[[:space:]]+$1:[[:space:]]+//p" "$OUT/ibv_devinfo.txt" | head -1; }
expect_eq "ibv_devinfo transport" "iWARP (1)" "$(devinfo transport)"
expect_eq "ibv_devinfo node_guid is sysfs's" "$(cat $sys/node_guid)" "$(devinfo node_guid)"
expect_eq "ibv_devinfo max_qp" "16384" "$(devinfo max_qp)"
expect_eq "ibv_devinfo atomic_cap" "ATOMIC_HCA (1)" "$(devinfo atomic_cap)"
expect_eq "ibv_devinfo max_mr_size (a user MR's longest, isize::MAX)" "0x7fffffffffffffff" "$(devinfo max_mr_size)"
expect_eq "ibv_devinfo vendor_id (no OUI: all ones, as rxe)" "0xffffff" "$(devinfo vendor_id)"
expect_eq "ibv_devinfo port state" "PORT_ACTIVE (4)" "$(devinfo state)"
expect_eq "ibv_devinfo link_layer" "Ethernet" "$(devinfo link_layer)"

# --- the port follows the net_device ---
# Bounds here: the port state and a device's removal follow the netdev's
# event at once (well under a second); 5 s, or 10 s for a netdev's
# removal (RTNL and the RDMA core's unregistration), and TF on the debug
# kernel.
ip link set veth0 down
check "port goes DOWN with the netdev" wait_for $((5 * TF)) grep -q '1: DOWN' $sys/ports/1/state
ip link set veth0 up
check "port comes back ACTIVE" wait_for $((5 * TF)) grep -q '4: ACTIVE' $sys/ports/1/state

# --- several devices, one per netdev ---
check "rdma link add rsiw1 on veth1" rdma link add rsiw1 type rsiw netdev veth1
check "a second device on veth0 is refused" bash -c '! rdma link add rsiw9 type rsiw netdev veth0 2>/dev/null'
check "two rsiw devices listed" test "$(rdma dev show | grep -cE '^[0-9]+: rsiw[0-9]+: node_type rnic')" = 2

# --- removal: rdma link delete, netdev removal, rmmod ---
check "rdma link delete rsiw1" rdma link delete rsiw1
check "rsiw1 is gone" wait_for $((5 * TF)) test ! -e /sys/class/infiniband/rsiw1
setup "a third netdev (veth2)" ip link add veth2 type veth peer name veth3
ip link set veth2 up
check "rdma link add rsiw2 on veth2" rdma link add rsiw2 type rsiw netdev veth2
check "rsiw2 exists" test -e /sys/class/infiniband/rsiw2
ip link del veth2
check "removing the netdev removes rsiw2" wait_for $((10 * TF)) test ! -e /sys/class/infiniband/rsiw2
check "rdma link add rsiw1 on veth1 again" rdma link add rsiw1 type rsiw netdev veth1
check "rmmod with two live devices" rmmod rsiw
# shellcheck disable=SC2010 # sysfs device names: plain words
check "no rsiw device left" test -z "$(ls /sys/class/infiniband 2>/dev/null | grep rsiw)"
check "module gone" bash -c '! grep -q "^rsiw " /proc/modules'

# --- reload works after unload ---
check "insmod again, with the CM parameters" insmod "$ko" mpa_crc=1 p2p_rtr=2 rtr_delay_ms=10
check "rdma link add after reload" rdma link add rsiw0 type rsiw netdev veth0
check "rmmod again" rmmod rsiw

ip link del rsiwkt0
check_base "rdma link delete siwkt0" rdma link delete siwkt0
ip link del rsiwkt2
check_base "siw unloads" modprobe -r siw
dmesg >"$OUT/dmesg-final.txt"
check_dmesg_clean "dmesg has no warnings, oopses or leaks"
finish
