#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The host time of each phase of a message, from stamp.so's windows.

    stamp.py STAMPS MANIFEST NAME0 NAME1 ... [--skip S]

STAMPS is the plugin's output (out=), MANIFEST the guest script's
"WINDOW IMPL ITERS ..." lines (bench/insncount.sh writes it), and
NAMEk the name of the k-th at= address. The addresses are taken as the
stages of one message in order: from each stamp 0, the first stamp 1
after it, then the first stamp 2 after that, and so on, and the first
stamp 0 after the last stage closes the chain (the next message, usually
the reply). Prints, for each driver, the median host microseconds of each
stage-to-stage step over all chains of its windows (the first S seconds
of each window skipped, default 0.5: the connection's setup), and how
often each address ran per chain.
"""
import bisect
import collections
import statistics
import sys


def read(path):
    wins, cur = {}, None
    with open(path) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "window":
                cur = []
                wins[int(p[1])] = cur
            elif p[0] == "s" and cur is not None:
                cur.append((int(p[1]), int(p[2]), int(p[3])))
            elif p[0] == "end":
                cur = None
    return wins


def chains(stamps, n, skip_ns):
    """The steps of each chain over the stages that ran in this window
    (an address one driver never runs, e.g. the other driver's, drops out
    of its chains), the runs of each address, the number of chains."""
    stamps.sort()
    if not stamps:
        return [], collections.Counter(), 0, []
    t0 = stamps[0][0] + skip_ns
    by_k = [[s[0] for s in stamps if s[2] == k and s[0] >= t0] for k in range(n)]
    active = [k for k in range(n) if by_k[k]]
    steps, count = [], 0
    if not active or active[0] != 0:
        return [], collections.Counter(), 0, active
    for start in by_k[0]:
        t, row = start, []
        for k in active[1:] + [0]:
            lst = by_k[k]
            i = bisect.bisect_right(lst, t)
            if i == len(lst):
                row = None
                break
            row.append(lst[i] - t)
            t = lst[i]
        if row is None:
            break
        steps.append(row)
        count += 1
    per = collections.Counter({k: len(by_k[k]) for k in range(n)})
    return steps, per, count, active


def between(wins, impl_of, names, a, b, skip_ns):
    """--between A B: for each run of A, the stamps its vCPU ran up to its
    next run of B, in the order they ran; the mean host time from each
    to the next, by pair of names, per message (and the median of one
    step: the mean counts the interrupts a step took, the median not)."""
    ka, kb = names.index(a), names.index(b)
    res = {}
    for w, st in sorted(wins.items()):
        impl = impl_of.get(w, f"window{w}")
        st.sort()
        if not st:
            continue
        t0 = st[0][0] + skip_ns
        r = res.setdefault(impl, {"pairs": collections.defaultdict(list), "n": 0, "tot": []})
        by_cpu = collections.defaultdict(list)
        for s in st:
            if s[0] >= t0:
                by_cpu[s[1]].append(s)
        for seq in by_cpu.values():
            i = 0
            while i < len(seq):
                if seq[i][2] != ka:
                    i += 1
                    continue
                j = i + 1
                while j < len(seq) and seq[j][2] not in (kb, ka):
                    j += 1
                if j == len(seq) or seq[j][2] != kb:
                    i = j
                    continue
                r["n"] += 1
                r["tot"].append(seq[j][0] - seq[i][0])
                for x in range(i, j):
                    pos = x - i
                    r["pairs"][(names[seq[x][2]], names[seq[x + 1][2]])].append((seq[x + 1][0] - seq[x][0], pos))
                i = j
    for impl, r in res.items():
        n = max(r["n"], 1)
        print(f"== {impl}: {a} -> {b} on one vCPU, {r['n']} messages, median {statistics.median(r['tot']) / 1000 if r['tot'] else 0:.1f} us")
        rows = sorted(r["pairs"].items(), key=lambda kv: statistics.mean(p for _, p in kv[1]))
        for (x, y), v in rows:
            print(f"   {sum(d for d, _ in v) / n / 1000:8.2f} us/msg  {len(v) / n:5.2f}x  median {statistics.median(d for d, _ in v) / 1000:7.2f}  {x} -> {y}")


def main():
    args = sys.argv[1:]
    skip = 0.5
    pair = None
    if "--between" in args:
        i = args.index("--between")
        pair = (args[i + 1], args[i + 2])
        del args[i:i + 3]
    if "--skip" in args:
        i = args.index("--skip")
        skip = float(args[i + 1])
        del args[i:i + 2]
    path, manifest, names = args[0], args[1], args[2:]
    n = len(names)
    wins = read(path)
    impl_of = {}
    with open(manifest) as f:
        for line in f:
            p = line.split()
            if len(p) >= 2:
                impl_of[int(p[0])] = p[1]
    if pair:
        between(wins, impl_of, names, pair[0], pair[1], int(skip * 1e9))
        return
    res = {}
    for w, st in sorted(wins.items()):
        impl = impl_of.get(w, f"window{w}")
        steps, per, count, active = chains(st, n, int(skip * 1e9))
        r = res.setdefault(impl, {"steps": [], "per": collections.Counter(), "chains": 0, "active": active})
        if r["active"] != active:
            print(f"{impl}: window {w} ran other stages ({active} against {r['active']}): left out")
            continue
        r["steps"] += steps
        r["per"].update(per)
        r["chains"] += count
    for impl, r in res.items():
        act = r["active"]
        print(f"== {impl}: median host us per step, over {r['chains']} messages")
        if not r["steps"]:
            continue
        cols = list(zip(*r["steps"]))
        for j, k in enumerate(act):
            nxt = act[(j + 1) % len(act)]
            per = r["per"][k] / max(r["chains"], 1)
            print(f"   {statistics.median(cols[j]) / 1000:9.1f}  {names[k]} -> {names[nxt]}"
                  + (f"   ({names[k]} ran {per:.2f} times per message)" if abs(per - 1) > 0.02 else ""))
        print(f"   {statistics.median(sum(row) for row in r['steps']) / 1000:9.1f}  one message (median of the sums)")


if __name__ == "__main__":
    main()
