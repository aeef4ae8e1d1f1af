#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""QEMU's block lookups per round trip, by implementation.

    tools/bench/jcmiss.py OUT

OUT is a `scripts/bench.sh --jcmiss` directory: `perf.csv` (`perf stat -a
-x, -I 500` of uprobes on QEMU's `qht_lookup_custom`, the lookup of the
next translated block when the per-vCPU jump cache misses, and
`cpu_exec`, each entry into the vCPU's execution loop), `perf-start`
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
        q = statistics.median(iv[t].get('qht_lookup_custom', 0) / step for t in sel)
        c = statistics.median(iv[t].get('cpu_exec', 0) / step for t in sel)
        res[impl].append((lat, q / rt_per_s, c / rt_per_s))
        print(f"jcmiss: {impl:4} latency {lat:7.1f} us  lookups/RT {q / rt_per_s:7.1f}  "
              f"cpu_exec/RT {c / rt_per_s:5.2f}  ({len(sel)} intervals)")
    for impl, v in res.items():
        print(f"jcmiss: median {impl:4} latency {statistics.median(x[0] for x in v):7.1f} us  "
              f"lookups/RT {statistics.median(x[1] for x in v):7.1f}  "
              f"cpu_exec/RT {statistics.median(x[2] for x in v):5.2f}  ({len(v)} runs)")


if __name__ == '__main__':
    main()
