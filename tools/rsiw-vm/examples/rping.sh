#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's rping over rsiw, through rdma_cm: the server in node 1, the
# client in node 2, 10 rounds with every payload verified (-V).
#
#   scripts/rsiw-vm.sh --nodes 2 -- tools/rsiw-vm/examples/rping.sh
#
# (Also works with --nodes 1: both ends in one node, rsiw0 and rsiw1.)
set -eu

# The server, in the background; rping's port is 7174.
rsiw-node 1 timeout 120 rping -s -a "$RSIW_NODE1_ADDR" -C 10 &
server=$!
# A client started before its server listens is refused: wait for it.
for _ in $(seq 150); do
	rsiw-node 1 ss -Hltn 'sport = :7174' | grep -q . && break
	sleep 0.2
done

# The client: -V verifies each payload, -v prints it.
rsiw-node 2 timeout 120 rping -c -a "$RSIW_NODE1_ADDR" -I "$RSIW_NODE2_ADDR" -C 10 -V -v
wait "$server"
echo "rping: 10 verified rounds from $RSIW_NODE2_ADDR (rsiw1) to $RSIW_NODE1_ADDR (rsiw0)"
