#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""QEMU's block lookups per round trip, by implementation.

    bench/qpbench/jcmiss.py OUT

OUT is a `bench/bench.sh --jcmiss` directory: `perf.csv` (`perf stat -a
-x, -I 500` of uprobes on QEMU's `qht_lookup_custom`, the lookup of the
next translated block when the per-vCPU jump cache misses, and
`cpu_exec`, each entry into the vCPU's execution loop, and any other
probed QEMU function: `tlb_set_page_with_attrs`, a fill of the softmmu
TLB, and `tlb_flush`, the whole TLB dropped), `perf-start`
(the host's clock when perf started) and `win.txt` (lat-ab.sh's runs:
implementation, guest wall-clock start and stop, one-way latency in µs).
Each run is read over its steady middle (from 2 s after its start to 0.5 s
before its end); a 64-byte round trip is two one-way latencies.
"""
import collections
import statistics
import sys


def main():
    out = sys.argv[1]
    t0 = float(open(out + '/perf-start').read())
    iv = collections.defaultdict(dict)
    for line in open(out + '/perf.csv'):
        f = line.strip().split(',')
        if line.startswith('#') or len(f) < 4:
            continue
        try:
            t, v = float(f[0]), float(f[1])
        except ValueError:
            continue
        iv[t0 + t][f[3].split(':')[-1]] = v
    times = sorted(iv)
    step = times[1] - times[0] if len(times) > 1 else 0.5
    events = sorted({e for t in times for e in iv[t]}, key=lambda e: (list(SHORT) + [e]).index(e))
    res = collections.defaultdict(list)
    for line in open(out + '/win.txt'):
        impl, s, e, lat = line.split()
        if lat == 'failed':
            continue
        s, e, lat = float(s), float(e), float(lat)
        sel = [t for t in times if t - step >= s + 2.0 and t <= e - 0.5]
        if not sel:
            continue
        rt_per_s = 1e6 / (2 * lat)
        per_rt = [statistics.median(iv[t].get(ev, 0) / step for t in sel) / rt_per_s for ev in events]
        res[impl].append((lat, per_rt))
        print(f"jcmiss: {impl:4} latency {lat:7.1f} us  " + fmt(events, per_rt) + f"  ({len(sel)} intervals)")
    for impl, v in res.items():
        med = [statistics.median(x[1][i] for x in v) for i in range(len(events))]
        print(f"jcmiss: median {impl:4} latency {statistics.median(x[0] for x in v):7.1f} us  "
              + fmt(events, med) + f"  ({len(v)} runs)")


# What each probed QEMU function counts, as printed.
SHORT = {
    'qht_lookup_custom': 'lookups',          # jump-cache misses
    'cpu_exec': 'cpu_exec',                  # entries into the vCPU loop
    'tlb_set_page_with_attrs': 'tlbfills',   # softmmu TLB fills (page walks)
    'tlb_flush': 'tlbflush',                 # whole-TLB flushes
}


def fmt(events, vals):
    return '  '.join(f"{SHORT.get(e, e)}/RT {v:7.2f}" for e, v in zip(events, vals))

if __name__ == '__main__':
    main()
