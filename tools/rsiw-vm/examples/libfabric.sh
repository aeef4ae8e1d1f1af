#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# libfabric's RDM endpoint (verbs;ofi_rxm, what MPI's OFI layers use) over
# rsiw: fi_pingpong's server in node 1, its client in node 2, 1 000
# messages of 64 octets, every payload checked (-c).
#
#   scripts/rsiw-vm.sh --nodes 2 -- tools/rsiw-vm/examples/libfabric.sh
#
# (Needs two nodes: fi_pingpong takes no source address, and between two
# addresses of one namespace the client's route would be the server's
# device.)
set -eu

# The server, in the background; fi_pingpong's control port is 47592.
rsiw-node 1 timeout 120 fi_pingpong -p "verbs;ofi_rxm" -e rdm -d "$RSIW_NODE1_DEV" -I 1000 -S 64 -c &
server=$!
# A client started before its server listens is refused: wait for it.
for _ in $(seq 150); do
	rsiw-node 1 ss -Hltn 'sport = :47592' | grep -q . && break
	sleep 0.2
done

rsiw-node 2 timeout 120 fi_pingpong -p "verbs;ofi_rxm" -e rdm -d "$RSIW_NODE2_DEV" -I 1000 -S 64 -c "$RSIW_NODE1_ADDR"
wait "$server"
echo "fi_pingpong: 1000 checked RDM messages between $RSIW_NODE2_DEV and $RSIW_NODE1_DEV"
