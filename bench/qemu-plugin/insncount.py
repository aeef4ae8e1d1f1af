#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Instructions (and pages) per round trip from insncount windows.

    insncount.py COUNTS MANIFEST KALLSYMS [TOP] [--sites MODULE.ko]

COUNTS is the plugin's output (out=), MANIFEST the guest script's
"WINDOW IMPL ITERS T_AVG" lines, KALLSYMS the guest's /proc/kallsyms. For
each driver, the window with the most iterations less the one with the
fewest, divided by the iterations between them: what one more round trip
(two 64-byte messages) executes. Prints the split by place (user space,
the kernel, each module), the TOP kernel functions of each driver, the
code pages and (mem=on) kernel data pages touched at least once per round
trip on average. --sites: the module's calls of memcpy, memset and
memmove (its struct copies and clears, sized where the size is a
constant), each with how often it ran per round trip, read from the
module's disassembly (objdump) and the blocks that contain the calls.
--hot FILE: writes FILE, the list of the rsiw module's functions run every
round trip, hottest first, demangled as `nm -C` prints them: the input of
bench/hot-text.sh (bench/hot-functions.txt; bench/README.md, "The code
layout of the message path").
"""
import bisect
import collections
import re
import subprocess
import sys


def read_windows(path):
    wins, cur = {}, None
    with open(path) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "window":
                cur = {"tb": {}, "pg": {}, "op": {}}
                wins[int(p[1])] = cur
            elif p[0] == "tb" and cur is not None:
                cur["tb"][int(p[1], 16)] = (int(p[2]), int(p[3]), int(p[4]) if len(p) > 4 else 0)
                if len(p) > 5 and int(p[5]):
                    cur.setdefault("pause", {})[int(p[1], 16)] = int(p[5])
            elif p[0] == "xp" and cur is not None:
                cur.setdefault("xp", {})[int(p[1], 16)] = int(p[2])
            elif p[0] == "tr" and cur is not None:
                cur["tr"] = (int(p[1]), int(p[2]))
            elif p[0] == "wp" and cur is not None:
                cur.setdefault("wp", []).append((int(p[1]), [int(x, 16) for x in p[2:]]))
            elif p[0] == "op" and cur is not None:
                cur["op"][p[1]] = (int(p[2]), int(p[3]))
            elif p[0] == "pg" and cur is not None:
                a = int(p[1], 16)
                cur["pg"][a] = cur["pg"].get(a, 0) + int(p[2])
            elif p[0] == "end":
                cur = None
    return wins


def read_syms(path):
    syms = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 3 or p[1] not in "tTwW":
                continue
            mod = p[3].strip("[]") if len(p) > 3 else "vmlinux"
            syms.append((int(p[0], 16), p[2], mod))
    syms.sort()
    return syms


class Resolver:
    def __init__(self, syms):
        self.addrs = [s[0] for s in syms]
        self.syms = syms

    def __call__(self, a):
        if a < 1 << 63:
            return ("[user]", "user")
        i = bisect.bisect_right(self.addrs, a) - 1
        if i < 0 or a - self.addrs[i] > 1 << 20:
            return ("[unknown]", "?")
        return (self.syms[i][1], self.syms[i][2])


def mem_sites(ko, kallsyms, a, b, d):
    """(runs per round trip, callee, constant size or '?', function) for
    each call of memcpy/memset/memmove in module `ko` that ran."""
    mod = re.sub(r"\.ko$", "", ko.split("/")[-1])
    starts = {}
    with open(kallsyms) as f:
        for line in f:
            p = line.split()
            if len(p) >= 4 and p[3] == f"[{mod}]":
                starts[p[2]] = int(p[0], 16)
    blocks = sorted(set(a["tb"]) | set(b["tb"]))
    dis = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", ko], capture_output=True, text=True,
                         check=True).stdout
    out, fn, fstart, prev = [], None, 0, []
    for line in dis.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m:
            fn, fstart, prev = m.group(2), int(m.group(1), 16), []
            continue
        call = re.search(r"R_X86_64_(PLT|PC)32\s+(memcpy|memset|memmove)\b", line)
        if call and prev and fn in starts:
            at = re.match(r"\s*([0-9a-f]+):", prev[-1])
            if at:
                size = "?"
                for q in reversed(prev[-10:]):
                    mm = re.search(r"mov\s+\$0x([0-9a-f]+),%edx", q)
                    if mm:
                        size = str(int(mm.group(1), 16))
                        break
                rt = starts[fn] + int(at.group(1), 16) - fstart
                i = bisect.bisect_right(blocks, rt) - 1
                if i >= 0:
                    t = blocks[i]
                    _, ea, la = a["tb"].get(t, (0, 0, 0))
                    _, eb, lb = b["tb"].get(t, (0, 0, 0))
                    if t + max(la, lb) > rt:
                        out.append(((eb - ea) / d, call.group(2), size, fn))
        prev.append(line)
    return sorted((o for o in out if o[0] >= 0.5), key=lambda o: -o[0])


def demangle(names):
    for tool in ("llvm-cxxfilt-19", "llvm-cxxfilt", "rustfilt"):
        try:
            out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True,
                                 check=True).stdout.splitlines()
        except (OSError, subprocess.CalledProcessError):
            continue
        if len(out) == len(names):
            return out
    sys.exit("insncount.py --hot: no demangler (llvm-cxxfilt or rustfilt)")


def write_hot(path, hot_ins, d):
    names = [s for s, _ in hot_ins.most_common()]
    with open(path, "w") as f:
        f.write("# rsiw's functions run every round trip of the counted runs, hottest first (instructions\n"
                "# per round trip): bench/qemu-plugin/insncount.py --hot, read by bench/hot-text.sh.\n")
        for name, dem in zip(names, demangle(names)):
            f.write(f"{dem}  # {hot_ins[name] / d:.0f}\n")
    print(f"   {len(names)} hot rsiw functions written to {path}")


def main():
    args = sys.argv[1:]
    ko = hot = None
    if "--hot" in args:
        i = args.index("--hot")
        hot = args[i + 1]
        del args[i:i + 2]
    if "--sites" in args:
        i = args.index("--sites")
        ko = args[i + 1]
        del args[i:i + 2]
    counts, manifest, kallsyms = args[0:3]
    top = int(args[3]) if len(args) > 3 else 25
    wins = read_windows(counts)
    res = Resolver(read_syms(kallsyms))
    runs = collections.defaultdict(list)
    with open(manifest) as f:
        for line in f:
            w, impl, n, lat = line.split()
            runs[impl].append((int(n), int(w), lat))
    summary = {}
    for impl, rs in runs.items():
        rs.sort()
        (n1, w1, l1), (n2, w2, l2) = rs[0], rs[-1]
        if w1 not in wins or w2 not in wins or n2 == n1:
            print(f"{impl}: windows {w1}/{w2} missing or equal iterations")
            continue
        d = n2 - n1
        a, b = wins[w1], wins[w2]
        by_sym = collections.Counter()
        by_mod = collections.Counter()
        hot_mod = collections.defaultdict(lambda: (set(), set()))
        hot_ins = collections.Counter()
        for addr in set(a["tb"]) | set(b["tb"]):
            ia, ea, _ = a["tb"].get(addr, (0, 0, 0))
            ib, eb, _ = b["tb"].get(addr, (0, 0, 0))
            di = ib - ia
            sym, mod = res(addr)
            by_sym[(sym, mod)] += di
            by_mod[mod] += di
            if addr >= 1 << 63 and eb - ea >= d:
                hot_mod[mod][0].add(addr >> 12)
                hot_mod[mod][1].add(sym)
                if hot and impl == "rsiw" and mod == "rsiw":
                    hot_ins[sym] += di
        data_pages = [p for p in set(a["pg"]) | set(b["pg"]) if b["pg"].get(p, 0) - a["pg"].get(p, 0) >= d]
        kern = sum(v for m, v in by_mod.items() if m != "user")
        summary[impl] = (kern / d, by_mod, d)
        print(f"== {impl}: windows {w1} ({n1} iterations, t_avg {l1} us) and {w2} ({n2}, {l2} us)")
        print(f"   per round trip: kernel {kern / d:,.0f} instructions, user {by_mod['user'] / d:,.0f}")
        for m, v in by_mod.most_common():
            if m != "user" and abs(v) / d >= 50:
                print(f"     {m:<16} {v / d:>10,.0f}")
        code_pages = set().union(*(pg for pg, _ in hot_mod.values()))
        print(f"   kernel code pages run every round trip: {len(code_pages)} (" +
              ", ".join(f"{m} {len(pg)} pages, {len(fn)} functions" for m, (pg, fn) in
                        sorted(hot_mod.items(), key=lambda t: -len(t[1][0])) if m != "vmlinux") + ")")
        if "tr" in a and "tr" in b:
            print(f"   blocks translated per round trip: kernel {(b['tr'][0] - a['tr'][0]) / d:.2f}, "
                  f"user {(b['tr'][1] - a['tr'][1]) / d:.2f} (code run anew or translated again)")
        if "xp" in a or "xp" in b:
            xp = collections.Counter()
            for addr in set(a.get("xp", {})) | set(b.get("xp", {})):
                xp[res(addr)[1]] += b.get("xp", {}).get(addr, 0) - a.get("xp", {}).get(addr, 0)
            tot = sum(xp.values())
            print(f"   block entries from another page (lookups, not chained) per round trip: {tot / d:,.0f}: " +
                  ", ".join(f"{m} {v / d:,.0f}" for m, v in xp.most_common() if abs(v) / d >= 1))
        spins = collections.Counter()
        for addr in set(a.get("pause", {})) | set(b.get("pause", {})):
            spins[res(addr)] += (b.get("pause", {}).get(addr, 0) - a.get("pause", {}).get(addr, 0)) / d
        spins = [(k, v) for k, v in spins.most_common(6) if v >= 0.05]
        if spins:
            print("   `pause` (spin-wait) per round trip by function: " +
                  ", ".join(f"{sym} [{mod}] {v:.1f}" for (sym, mod), v in spins))
        ops = [(k, (b["op"][k][0] - a["op"].get(k, (0, 0))[0]) / d, (b["op"][k][1] - a["op"].get(k, (0, 0))[1]) / d)
               for k in b["op"]]
        if ops:
            print("   notable instructions per round trip (kernel/user): " +
                  ", ".join(f"{k} {kv:.1f}/{uv:.1f}" for k, kv, uv in ops if abs(kv) >= 0.05 or abs(uv) >= 0.05))
        if a["pg"] or b["pg"]:
            print(f"   kernel data pages touched every round trip: {len(data_pages)}")
        paths = collections.Counter()
        for n, path in b.get("wp", []):
            names = []
            for x in path:
                sym = res(x)[0]
                if not names or names[-1] != sym:
                    names.append(sym)
            paths[" < ".join(names[:5])] += n
        if paths:
            print("   entries of the watched block (plugin watch=) in the longer window, by the blocks before:")
            for p, n in paths.most_common(8):
                print(f"     {n:6}  {p}")
        print(f"   top {top} kernel functions, instructions per round trip:")
        for (sym, mod), v in by_sym.most_common(top):
            if mod == "user":
                continue
            print(f"     {v / d:>8,.0f}  {sym} [{mod}]")
        if hot_ins:
            write_hot(hot, hot_ins, d)
        if ko and impl == "rsiw":
            print(f"   calls of memcpy/memset/memmove in {ko} per round trip (size in octets):")
            for n, callee, size, fn in mem_sites(ko, kallsyms, a, b, d):
                print(f"     {n:6.2f}  {callee:<7} {size:>5}  {fn}")
    if "rsiw" in summary and "siw" in summary:
        r, s = summary["rsiw"][0], summary["siw"][0]
        print(f"== kernel instructions per round trip: rsiw {r:,.0f}, siw {s:,.0f}, rsiw/siw {r / s:.2f}")


if __name__ == "__main__":
    main()
