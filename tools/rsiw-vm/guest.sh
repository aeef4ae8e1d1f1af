#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The guest side of scripts/rsiw-vm.sh: loads rsiw, sets up the nodes and
# their rsiw devices, then runs the user's command and exits with its
# status (125 when the setup failed and the command did not run).
#
#   rsiw-vm-guest.sh NODES MTU CRC COMMAND [ARGS...]
#
# NODES 2: namespaces n1 and n2 joined by a veth pair, rsiw0 in n1 and rsiw1
# in n2. NODES 1: both ends and both devices in the initial namespace
# (traffic between them goes over lo). The command runs in the initial
# namespace; `rsiw-node N CMD` runs CMD in node N.
set -u
nodes=$1 mtu=$2 crc=$3
shift 3

say() { echo "rsiw-vm: $*"; }
setup_failed() {
	say "setup failed: $*"
	dmesg | tail -20 | sed 's/^/rsiw-vm:   /'
	exit 125
}

addr1=10.96.0.1
addr2=10.96.0.2
[ -f "$RSIW_ROOT/rsiw.ko" ] || setup_failed "no $RSIW_ROOT/rsiw.ko (make modules)"
params=()
[ "$crc" = 1 ] && params+=(mpa_crc=1)
insmod "$RSIW_ROOT/rsiw.ko" "${params[@]}" || setup_failed "insmod rsiw.ko ${params[*]}"

# on_node NODE CMD...: CMD in node NODE's network namespace.
on_node() {
	local n=$1
	shift
	if [ "$nodes" = 2 ]; then ip netns exec "n$n" "$@"; else "$@"; fi
}

ip link add rsiwv1 type veth peer name rsiwv2 || setup_failed "veth pair"
if [ "$nodes" = 2 ]; then
	for n in 1 2; do
		ip netns add "n$n" && ip link set "rsiwv$n" netns "n$n" || setup_failed "namespace n$n"
		ip -n "n$n" link set lo up
	done
else
	# rdma_cm resolves the peer with ARP out of the bound device.
	for c in all rsiwv1 rsiwv2; do
		sysctl -qw net.ipv4.conf.$c.accept_local=1 net.ipv4.conf.$c.rp_filter=0
	done
fi
for n in 1 2; do
	a=addr$n
	dev=rsiw$((n - 1))
	on_node $n ip addr add "${!a}/24" dev "rsiwv$n" || setup_failed "address on rsiwv$n"
	[ -z "$mtu" ] || on_node $n ip link set "rsiwv$n" mtu "$mtu" || setup_failed "mtu $mtu on rsiwv$n"
	on_node $n ip link set "rsiwv$n" up || setup_failed "rsiwv$n up"
	on_node $n rdma link add "$dev" type rsiw netdev "rsiwv$n" || setup_failed "rdma link add $dev on rsiwv$n"
done
for dev in rsiw0 rsiw1; do
	for _ in $(seq 50); do
		grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state" 2>/dev/null && break
		sleep 0.2
	done
	grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state" ||
		setup_failed "$dev port not ACTIVE"
done

export RSIW_NODES=$nodes
export RSIW_NODE1_ADDR=$addr1 RSIW_NODE1_DEV=rsiw0 RSIW_NODE1_NETDEV=rsiwv1
export RSIW_NODE2_ADDR=$addr2 RSIW_NODE2_DEV=rsiw1 RSIW_NODE2_NETDEV=rsiwv2
# rdma-core finds rsiw's provider in the checkout (no install needed).
export RDMAV_DRIVERS=$RSIW_ROOT/providers/rsiw/librsiw
export PATH=$RSIW_ROOT/tools/rsiw-vm/bin:$PATH
if [ "$nodes" = 2 ]; then
	say "node 1 (netns n1): rsiw0 on rsiwv1, $addr1/24"
	say "node 2 (netns n2): rsiw1 on rsiwv2, $addr2/24"
else
	say "one node: rsiw0 on rsiwv1 $addr1/24, rsiw1 on rsiwv2 $addr2/24"
fi
say "mtu $(on_node 1 cat /sys/class/net/rsiwv1/mtu), MPA CRC $([ "$crc" = 1 ] && echo on || echo off); running: $*"

"$@"
rc=$?

if dmesg | grep -qE 'WARNING:|BUG:|Oops|general protection|refcount_t:|UBSAN:|KASAN:|hung_task|blocked for more than|soft lockup'; then
	say "note: the kernel logged warnings or errors (dmesg.txt in the output directory)"
fi
exit $rc
