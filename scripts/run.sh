#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The main job, from a fresh machine: set everything up, build the test
# kernel and rsiw.ko, boot a VM, load the module, create rsiw0 on a veth
# interface and show it with `rdma`.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT"

scripts/setup-toolchain.sh
kdir=$(scripts/build-kernel.sh)
make -s KDIR="$kdir"
exec scripts/vm-run.sh --timeout 300 -- bash -c '
	set -x
	insmod "$RSIW_ROOT/rsiw.ko"
	ip link add veth0 type veth peer name veth1
	ip link set veth0 up; ip link set veth1 up
	rdma link add rsiw0 type rsiw netdev veth0
	rdma dev show
	rdma link show
	cat /sys/class/infiniband/rsiw0/node_type /sys/class/infiniband/rsiw0/ports/1/state
	rdma link delete rsiw0
	rmmod rsiw
'
