#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Breaks a host `perf record -a -e cpu-clock` of a User-Mode Linux boot
down by where the samples fell (bench/uml-profile.sh):

  guest kernel    the UML kernel's code, by symbol (modules included),
                  resolved with the guest's /proc/kallsyms
  host kernel     the host kernel working for a UML process: UML's
                  signals, system calls and process switches (the lane's
                  own cost, which a kernel on hardware does not pay)
  UML host code   UML's own host-side code outside its kernel text (libc)
  guest user      guest processes' own code
  host idle       the host's idle task
  other           other host processes (perf itself, ...)

  uml-profile.py KALLSYMS PERF_DATA [TOP]
"""
import bisect
import collections
import subprocess
import sys

HOST_KERNEL = 0xFFFF800000000000
UML_COMMS = ("linux", "uml-userspace")


def load_kallsyms(path):
    syms = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[1] in "tTwW":
                a = int(p[0], 16)
                if a:
                    syms.append((a, p[2] + (" " + p[3] if len(p) > 3 else "")))
    syms.sort()
    return syms


def main():
    syms = load_kallsyms(sys.argv[1])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    addrs = [a for a, _ in syms]
    lo, hi = addrs[0], addrs[-1] + 0x10000
    out = subprocess.run(["perf", "script", "-i", sys.argv[2], "-F", "comm,pid,ip"],
                         capture_output=True, text=True, check=True).stdout
    kinds = collections.Counter()
    guest = collections.Counter()
    total = 0
    for line in out.splitlines():
        p = line.split()
        if len(p) < 3:
            continue
        comm, pid, ip = p[0], p[1], int(p[2], 16)
        total += 1
        if pid == "0":
            kinds["host idle"] += 1
        elif comm not in UML_COMMS:
            kinds["other"] += 1
        elif ip >= HOST_KERNEL:
            kinds["host kernel (for UML's " + ("kernel" if comm == "linux" else "processes") + ")"] += 1
        elif lo <= ip < hi and ip - addrs[bisect.bisect_right(addrs, ip) - 1] < 0x10000:
            kinds["guest kernel"] += 1
            guest[syms[bisect.bisect_right(addrs, ip) - 1][1]] += 1
        elif comm == "linux":
            kinds["UML host code"] += 1
        else:
            kinds["guest user"] += 1
    if not total:
        print("  no samples")
        return
    print("  %d samples (2 CPUs: 100%% = both busy)" % total)
    for k, v in kinds.most_common():
        print("  %6.2f%%  %s" % (100.0 * v / total, k))
    print("  guest kernel, top symbols:")
    for k, v in guest.most_common(top):
        print("  %6.2f%%    %s" % (100.0 * v / total, k))


if __name__ == "__main__":
    main()
