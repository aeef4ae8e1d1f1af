# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# Helpers for the reliability tests (storm.sh, soak.sh, linkfault.sh):
# two network namespaces n1 and n2 joined by veth pairs, rdma devices on
# their ends, tests/progs/rsiw-storm servers and clients in them, and
# the counts a leak would change. Source after lib.sh.

STORM="$RSIW_ROOT/tests/progs/rsiw-storm"
# rdma-core finds rsiw's provider in the checkout; siw's is installed.
export RDMAV_DRIVERS="$RSIW_ROOT/providers/rsiw/librsiw"

in1() { ip netns exec n1 "$@"; }
in2() { ip netns exec n2 "$@"; }

# stress_namespaces: n1 and n2 with loopback up.
stress_namespaces() {
	local n
	for n in n1 n2; do
		ip netns add $n && ip -n $n link set lo up || return 1
	done
}

# veth_pair IF1 IF2 NET: IF1 in n1 with NET.1/24, IF2 in n2 with NET.2/24.
veth_pair() {
	ip link add "$1" type veth peer name "$2" &&
		ip link set "$1" netns n1 && ip link set "$2" netns n2 &&
		in1 ip addr add "$3.1/24" dev "$1" && in2 ip addr add "$3.2/24" dev "$2" &&
		in1 ip link set "$1" up && in2 ip link set "$2" up
}

# port_active DEV: its port 1 is ACTIVE.
port_active() { grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null; }

# res_counts: the RDMA core's object counts of every device, one line.
res_counts() { rdma resource show 2>/dev/null | sed 's/^[0-9]*: //' | sort | tr '\n' ' '; }

# tcp_alloc: TCP sockets allocated (all namespaces; TIME_WAIT not counted).
tcp_alloc() { awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "alloc") print $(i + 1) }' /proc/net/sockstat; }

# established: established TCP sockets in both namespaces.
established() { echo $(($(in1 ss -Htn state established | wc -l) + $(in2 ss -Htn state established | wc -l))); }

# meminfo_kb FIELD: a /proc/meminfo field in kB.
meminfo_kb() { awk -v f="$1:" '$1 == f { print $2 }' /proc/meminfo; }

# sunreclaim_settled: SUnreclaim in kB once freed objects can go (page
# caches dropped, RCU grace periods and deferred frees given 2 s).
sunreclaim_settled() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	sleep 2
	meminfo_kb SUnreclaim
}

# in_use SLABINFO [SKIP]: kB of slab objects in use (active objects x
# size), all caches but those matching the regex SKIP: what is left
# allocated, without the capacity SLUB keeps. SLUB counts the free
# objects of per-CPU slabs as active: read slabinfo after slab_shrink.
in_use() {
	awk -v skip="${2:-^$}" '$1 !~ /^#|^slabinfo/ && $1 !~ skip { a += $2 * $4 } END { print int(a / 1024) }' "$1" 2>/dev/null
}

# slab_shrink: every slab cache shrunk (per-CPU slabs flushed, empty
# slabs released), RCU given time.
slab_shrink() {
	for f in /sys/kernel/slab/*/shrink; do echo 1 >"$f" 2>/dev/null; done
	sleep 1
}

# TCP's TIME_WAIT state (60 s after each close; counted by `tw` in
# /proc/net/sockstat, not a leak): its caches, for in_use's SKIP.
# shellcheck disable=SC2034 # read by the stress scripts that source this
TW_CACHES='^(tw_sock_TCP|tcp_bind_bucket|tcp_bind2_bucket)$'

# tw_count [NS]: TCP sockets in TIME_WAIT (/proc/net/sockstat) in this
# namespace or NS.
tw_count() {
	local ns=()
	[ -n "${1:-}" ] && ns=(ip netns exec "$1")
	"${ns[@]}" awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "tw") print $(i + 1) }' /proc/net/sockstat
}


# slab_objs CACHE: active objects of a slab cache (empty without slabinfo).
slab_objs() { awk -v c="$1" '$1 == c { print $2 }' /proc/slabinfo 2>/dev/null; }

# start_server NS ADDR PORT OUT: an rsiw-storm server in NS on ADDR:PORT,
# its pid in $server; waits until it listens.
start_server() {
	ip netns exec "$1" "$STORM" server -a "$2" -p "$3" >"$4" 2>&1 &
	server=$!
	wait_for 30 listening "$3" "$1"
}

# stop_server NAME: SIGTERM to $server, bounded (30 s); passes when it
# exits 0 (it served every request without an error).
stop_server() {
	local rc
	kill -TERM "$server" 2>/dev/null
	if ! wait_for 30 bash -c "! kill -0 $server 2>/dev/null"; then
		kill -KILL "$server" 2>/dev/null
		wait "$server" 2>/dev/null
		fail "$1: the server ends on SIGTERM within 30 s"
		return
	fi
	wait "$server"
	rc=$?
	expect_eq "$1: the server exits 0" 0 $rc
}
