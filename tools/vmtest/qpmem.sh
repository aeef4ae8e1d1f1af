#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Diagnostic (not a test): where the kernel memory of connected QPs goes,
# rsiw against Linux siw. For each implementation, N rdma_cm connections
# (rsiw-qpbench -w: no traffic, both ends in this guest, two namespaces
# joined by veth) are held while /proc/meminfo and /proc/slabinfo are read;
# prints the kernel memory per QP end (Slab + KernelStack + VmallocUsed +
# PageTables, as scripts/bench.sh --compare counts it), the meminfo fields
# that moved, and the slab caches that grew most. Then the N connections
# close and the same figures show what came back.
#   scripts/vm-run.sh --mem 4G --append kunit.enable=0 -- tools/vmtest/qpmem.sh [N [IMPLS]]
# N: connections (default 512, i.e. 1024 connected QPs); IMPLS: default
# "rsiw siw". QPMEM_SITES=1: also trace the kernel's allocations of 256
# octets and more while the connections come up (tracefs kmem:kmalloc,
# kmem:kmalloc_node and kmem:kmem_cache_alloc) and print the call sites by
# octets allocated, so a cache that grew is traced to the code that filled it.
set -u
. "$(dirname "$0")/lib.sh"
n=${1:-512}
impls=${2:-rsiw siw}
A=10.98.0.1 B=10.98.0.2
ina() { ip netns exec bA "$@"; }
inb() { ip netns exec bB "$@"; }
export PATH="$RSIW_ROOT/tools/bench:$PATH"
bench_netns $A $B || { echo "qpmem: no namespaces"; exit 1; }
insmod "$RSIW_ROOT/rsiw.ko" || exit 1
modprobe siw || exit 1
W=$(mktemp -d)
hold=$W/hold

settle() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	sleep 2
}
snap() { # NAME: meminfo and slab bytes in use per cache
	cat /proc/meminfo >"$W/$1.mem"
	awk 'NR > 2 { printf "%s %d\n", $1, $2 * $4 }' /proc/slabinfo >"$W/$1.slab"
}
kmem() { awk '/^(Slab|KernelStack|VmallocUsed|PageTables):/ { s += $2 } END { print s }' "$W/$1.mem"; }
report() { # FROM TO PER
	echo "  kernel memory: $(kmem "$1") -> $(kmem "$2") kB, $(awk -v a="$(kmem "$1")" -v b="$(kmem "$2")" -v p="$3" 'BEGIN { printf "%.1f", (b - a) / p }') KiB per QP end"
	echo "  meminfo fields that moved (kB, per QP end):"
	sort "$W/$1.mem" | awk '{ print $1, $2 }' >"$W/a"
	sort "$W/$2.mem" | awk '{ print $1, $2 }' >"$W/b"
	join "$W/a" "$W/b" |
		awk -v p="$3" '{ d = $3 - $2; if (d > 256 || d < -256) printf "    %-16s %+9d  %+8.1f\n", $1, d, d / p }' |
		grep -E 'Slab|SUnreclaim|SReclaimable|KernelStack|Vmalloc|PageTables|MemFree|AnonPages|Percpu'
	echo "  slab caches that grew most (kB, bytes per QP end):"
	sort "$W/$1.slab" >"$W/a"
	sort "$W/$2.slab" >"$W/b"
	join "$W/a" "$W/b" |
		awk -v p="$3" '{ d = $3 - $2; if (d > 0) printf "%d %s\n", d, $1 }' | sort -rn | head -12 |
		awk -v p="$3" '{ printf "    %-28s %+8d  %7.0f\n", $2, $1 / 1024, $1 / p }'
}

T=/sys/kernel/tracing
site_events="kmem/kmalloc kmem/kmem_cache_alloc"
sites_on() {
	mount -t tracefs nodev $T 2>/dev/null
	echo 0 >$T/tracing_on
	echo 16384 >$T/buffer_size_kb
	echo >$T/trace
	for e in $site_events; do
		echo 'bytes_alloc >= 256' >$T/events/$e/filter
		echo 1 >$T/events/$e/enable
	done
	echo 1 >$T/options/stacktrace
	echo 1 >$T/tracing_on
}
sites_off() { # PER: octets per QP end by size and stack
	echo 0 >$T/tracing_on
	echo 0 >$T/options/stacktrace
	head -c 4000000 $T/trace >"$OUT/qpmem-sites-trace.txt"
	for e in $site_events; do echo 0 >$T/events/$e/enable; done
	echo "  allocations of >= 256 octets while connecting, by size and the first"
	echo "  [rsiw] frames of their stacks (octets per QP end, count per QP end):"
	awk -v p="$1" '
	function flush() { if (sz != "") { n[sz " " st]++; o[sz " " st] += sz } sz = ""; st = ""; k = 0 }
	# A Rust symbol (v0 mangling, <length><identifier> segments with tags,
	# back references "B..._" and disambiguators "s..._" between them):
	# its last two segments after the crate.
	function short(f,   i, c, d, n, m, seg) {
		i = index(f, "rsiw_main"); if (i == 0) return f
		i += 9; m = 0
		while (i <= length(f)) {
			c = substr(f, i, 1)
			if (c ~ /[0-9]/) {
				d = ""; while (substr(f, i, 1) ~ /[0-9]/) { d = d substr(f, i, 1); i++ }
				n = d + 0; seg[++m] = substr(f, i, n); i += n
			} else if (c == "B" || c == "s") {
				while (i <= length(f) && substr(f, i, 1) != "_") i++
				i++
			} else i++
		}
		if (m >= 2) return seg[m - 1] "::" seg[m]
		return m ? seg[m] : f
	}
	/bytes_alloc=/ { flush(); sz = $0; sub(/.*bytes_alloc=/, "", sz); sub(/ .*/, "", sz); next }
	/=> / && sz != "" && k < 2 && /rsiw_main|=> rsiw_/ {
		f = $0; sub(/.*=> /, "", f); sub(/\+0x.*/, "", f)
		if (f ~ /^_R/) f = short(f)
		st = st " " f; k++
	}
	END { flush(); for (x in n) printf "%d %.2f %s\n", o[x] / p, n[x] / p, x }' $T/trace |
		sort -rn | head -20 | awk '{ printf "    %6d %5.2f %6s", $1, $2, $3; for (i = 4; i <= NF; i++) printf " %s", $i; printf "\n" }'
}

for impl in $impls; do
	ina rdma link add ${impl}0 type $impl netdev bcA || continue
	inb rdma link add ${impl}1 type $impl netdev bcB || continue
	if [ $impl = rsiw ]; then export RDMAV_DRIVERS=$RSIW_ROOT/tools/provider/librsiw; else unset RDMAV_DRIVERS; fi
	rm -f "$hold"
	settle
	snap before
	ina timeout 900 rsiw-qpbench server -a $A -p 18700 -n "$n" -m write >"$W/server.txt" 2>&1 &
	s=$!
	sleep 1
	[ "${QPMEM_SITES:-0}" = 1 ] && sites_on
	inb timeout 900 rsiw-qpbench client -a $A -b $B -p 18700 -n "$n" -m write -w "$hold" >"$W/client.txt" 2>&1 &
	c=$!
	wait_for 600 sh -c "grep -q '^connected' $W/client.txt || ! kill -0 $c 2>/dev/null"
	[ "${QPMEM_SITES:-0}" = 1 ] && sites_off $((2 * n))
	if grep -q '^connected' "$W/client.txt"; then
		sleep 2
		snap held
		qps=$(rdma resource show qp 2>/dev/null | grep -c "link ${impl}[01]/")
		echo "== $impl: $n connections, $qps QPs"
		report before held $((2 * n))
	else
		echo "== $impl: $n connections failed: $(tail -1 "$W/client.txt")"
		pkill -f "rsiw-qpbench server" 2>/dev/null # not $s: the subshell around it
	fi
	touch "$hold"
	wait $c
	wait $s
	settle
	snap after
	echo "== $impl: after the $n connections closed (against before)"
	report before after $((2 * n))
	rdma link delete ${impl}0
	rdma link delete ${impl}1
done
rm -rf "$W"
