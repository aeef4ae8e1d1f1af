#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tables and plots of a side-by-side run (bench/bench.sh --compare).

    summarize.py RAW_CSV META_TXT OUTDIR

RAW_CSV rows (bench/bench-compare.sh): metric,config,impl,round,value,unit,extra
with impl one of rsiw, rsiw-crc (rsiw with mpa_crc=1), rsiw-cmds (no rings),
rsiw-copy (zcopy_min=0), rsiw-zcl (zcopy_local=1), rsiw-seg1 (fpdu_segs_local=1),
rsiw-rxsoft (rx_offload_min=0), siw, tcp. Writes
OUTDIR/results.md, OUTDIR/results.csv and OUTDIR/plot-METRIC.png (gnuplot).
Figures per cell: the median over rounds, and the min-max spread.
"""
import csv
import os
import statistics
import subprocess
import sys

METRICS = [
    ("bw_send", "Send 64 KiB, userspace (perftest -R)", "MB/s", True),
    ("bw_write", "RDMA Write 64 KiB, userspace (perftest -R)", "MB/s", True),
    ("bw_read", "RDMA Read 64 KiB, userspace (perftest -R)", "MB/s", True),
    ("qp_send_d4", "Send 64 KiB, 4 in flight, userspace (rsiw-qpbench)", "MB/s", True),
    ("qp_write_d4", "RDMA Write 64 KiB, 4 in flight, userspace (rsiw-qpbench)", "MB/s", True),
    ("qp_read_d1", "RDMA Read 64 KiB, 1 in flight (ORD 1, as qperf), userspace (rsiw-qpbench)", "MB/s", True),
    ("qp_read_d16", "RDMA Read 64 KiB, 16 in flight, userspace (rsiw-qpbench)", "MB/s", True),
    ("lat_64", "latency 64 B (qperf rc_lat / tcp_lat)", "us", False),
    ("nvme_randread_4k", "NVMe-oF 4 KiB random read QD16 (fio)", "kIOPS", True),
    ("nvme_seqread_128k", "NVMe-oF 128 KiB sequential read QD16 (fio)", "MB/s", True),
    ("nvme_seqwrite_128k", "NVMe-oF 128 KiB sequential write QD16 (fio)", "MB/s", True),
    ("scale_agg", "N QPs, 64 KiB Writes: aggregate", "MB/s", True),
    ("scale_fair", "N QPs, 64 KiB Writes: slowest/fastest QP", "min/max", True),
    ("scale_cpu", "N QPs, 64 KiB Writes: vCPUs busy (whole guest)", "vCPUs", False),
    ("mem_per_qp", "kernel memory per connected QP end", "KiB", False),
]
IMPLS = ["rsiw", "siw", "tcp"]
# rsiw variants, each a row of its own beside the same siw and TCP runs.
VARIANTS = [
    ("rsiw-crc", "rsiw CRC on"),
    ("rsiw-crck", "rsiw CRC on, the kernel's crc32c() (crc32c_impl=1)"),
    ("rsiw-cmds", "rsiw on uverbs commands (no rings)"),
    ("rsiw-copy", "rsiw copying (zcopy_min=0)"),
    ("rsiw-zcl", "rsiw zero-copy over veth too (zcopy_local=1)"),
    ("rsiw-seg1", "rsiw one-segment FPDUs (fpdu_segs_local=1)"),
    ("rsiw-rxsoft", "rsiw reading in the receive softirq (rx_offload_min=0)"),
    ("rsiw-alt", "rsiw of BENCH_ALT (another build)"),
    ("rsiw-d16", "rsiw, perftest -t 16"),
    ("rsiw-mrs", "rsiw, an MR per connection"),
]


def fmt(v, ratio=False):
    if v is None:
        return "n/a"
    if ratio:
        return "%.2f" % v
    a = abs(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    return "%.2f" % v


def cfg_key(cfg):
    """Sort configurations: MTU, then QP count."""
    parts = cfg.replace("=", " ").split()
    key = []
    for p in parts:
        digits = "".join(c for c in p if c.isdigit())
        key.append(int(digits) if digits else 0)
    return key


def main():
    raw_path, meta_path, outdir = sys.argv[1:4]
    meta = {}
    if os.path.exists(meta_path):
        for line in open(meta_path):
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    vals = {}  # (metric, config, impl) -> [values]
    notes = {}  # (metric, config, impl) -> note (e.g. not in kernel)
    units = {}
    with open(raw_path) as f:
        for row in csv.reader(f):
            if len(row) < 6:
                continue
            metric, config, impl, _rnd, value, unit = row[:6]
            extra = row[6] if len(row) > 6 else ""
            key = (metric, config, impl)
            if value in ("", "NA"):
                notes[key] = extra or "n/a"
                continue
            vals.setdefault(key, []).append(float(value))
            units[metric] = unit

    def stat(key):
        v = vals.get(key)
        if not v:
            return None
        return statistics.median(v), min(v), max(v), len(v)

    rows = []  # dicts for the tables
    for metric, title, unit, _higher in METRICS:
        configs = sorted({c for (m, c, _i) in list(vals) + list(notes) if m == metric}, key=cfg_key)
        for cfg in configs:
            variants = [("rsiw", "CRC off" if cfg.startswith("mtu") and not metric.startswith("scale") else "")]
            for vimpl, vlabel in VARIANTS:
                if (metric, cfg, vimpl) in vals:
                    variants.append((vimpl, vlabel))
            for rimpl, label in variants:
                cells = {}
                for impl in IMPLS:
                    src = rimpl if impl == "rsiw" else impl
                    cells[impl] = stat((metric, cfg, src))
                    if cells[impl] is None and (metric, cfg, src) in notes:
                        cells[impl] = notes[(metric, cfg, src)]
                if not any(isinstance(c, tuple) for c in cells.values()):
                    continue
                name = cfg.replace("mtu", "MTU ")
                if label:
                    name += ", " + label
                rows.append(dict(metric=metric, title=title, unit=units.get(metric, unit),
                                 config=name, cells=cells, crc=(rimpl == "rsiw-crc"), raw_cfg=cfg))

    def med(c):
        return c[0] if isinstance(c, tuple) else None

    def ratio(a, b):
        a, b = med(a), med(b)
        if a is None or b is None or b == 0:
            return None
        return a / b

    # results.csv
    with open(os.path.join(outdir, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["metric", "config", "unit", "rsiw", "siw", "tcp", "rsiw/siw", "rsiw/tcp",
                    "rsiw_min", "rsiw_max", "siw_min", "siw_max", "tcp_min", "tcp_max", "rounds"])
        for r in rows:
            c = r["cells"]
            line = [r["metric"], r["config"], r["unit"]]
            line += ["%.4g" % med(c[i]) if med(c[i]) is not None else (c[i] or "") for i in IMPLS]
            line += ["%.4g" % x if x is not None else "" for x in
                     (ratio(c["rsiw"], c["siw"]), ratio(c["rsiw"], c["tcp"]))]
            for i in IMPLS:
                line += ["%.4g" % c[i][1], "%.4g" % c[i][2]] if isinstance(c[i], tuple) else ["", ""]
            line.append(max((c[i][3] for i in IMPLS if isinstance(c[i], tuple)), default=0))
            w.writerow(line)

    # results.md
    md = []
    md.append("# rsiw, siw and TCP side by side")
    md.append("")
    if meta.get("lane") == "uml":
        lane = ("User-Mode Linux (the kernel as a host process: its code runs natively, each "
                "guest process switch and system call costs host signals)")
    else:
        lane = "QEMU under TCG (no KVM): absolute figures mean little"
    md.append("Run %s, %s mode, kernel %s, %s vCPUs, %s; ratios within this one boot are the "
              "result." % (meta.get("date", "?"), meta.get("mode", "?"), meta.get("kernel", "?"),
                           meta.get("cpus", "?"), lane))
    md.append("Medians of %s interleaved round(s) (rsiw, rsiw CRC on, siw, tcp, rsiw, ...); spread = "
              "min-max over the rounds. MB/s = 10^6 octets/s. siw's MPA CRC is compiled off in "
              "Linux, so every siw figure is without CRC; the \"rsiw CRC on\" rows compare rsiw "
              "with mpa_crc=1 against the same siw and TCP runs. For latency and memory lower "
              "is better (a ratio below 1 favours rsiw). tcp: qperf tcp_bw (one 64 KiB figure "
              "for all three perftest rows), one rsiw-qpbench TCP stream (for its rows), qperf tcp_lat, NVMe/TCP, N TCP connections, "
              "kernel memory per TCP socket end." % meta.get("rounds", "?"))
    if meta.get("nvme_tcp"):
        md.append("")
        md.append("NVMe/TCP: %s; the NVMe-oF rows have no TCP baseline "
                  "(the test kernel lacks CONFIG_NVME_TCP and CONFIG_NVME_TARGET_TCP)."
                  % meta["nvme_tcp"])
    if meta.get("nvme_path") == "lo":
        md.append("")
        md.append("NVMe-oF path: the kernel ULPs work in the initial network namespace only and this "
                  "kernel has no policy routing (CONFIG_IP_MULTIPLE_TABLES), so host and target "
                  "talked over lo, its MTU set to each configuration's (not over the veth pair).")
    if meta.get("problems") not in (None, "0"):
        md.append("")
        md.append("**%s measurement(s) failed**; see the progress log." % meta.get("problems"))
    md.append("")
    md.append("| metric | config | rsiw | siw | tcp | rsiw/siw | rsiw/tcp | spread (min-max) |")
    md.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = r["cells"]
        cell = []
        for i in IMPLS:
            if isinstance(c[i], tuple):
                cell.append(fmt(c[i][0]))
            elif isinstance(c[i], str):
                cell.append("n/a (%s)" % c[i])
            else:
                cell.append("-")
        spread = "; ".join("%s %s-%s" % (i, fmt(c[i][1]), fmt(c[i][2]))
                           for i in IMPLS if isinstance(c[i], tuple))
        md.append("| %s (%s) | %s | %s | %s | %s | %s | %s | %s |" % (
            r["title"], r["unit"], r["config"], cell[0], cell[1], cell[2],
            fmt(ratio(c["rsiw"], c["siw"]), True), fmt(ratio(c["rsiw"], c["tcp"]), True), spread))
    # CRC on / off
    crc_rows = []
    # rsiw-crck: CRC on with the kernel's crc32c() forced, beside the
    # module's own choice (rsiw-crc), when a run has it.
    has_k = any(i == "rsiw-crck" for (m, c, i) in vals)
    for metric, title, unit, _h in METRICS:
        for cfg in sorted({c for (m, c, i) in vals if m == metric and i == "rsiw-crc"}, key=cfg_key):
            on, off = stat((metric, cfg, "rsiw-crc")), stat((metric, cfg, "rsiw"))
            if on and off and off[0]:
                row = "| %s (%s) | %s | %s | %s | %s |" % (
                    title, unit, cfg.replace("mtu", "MTU "), fmt(off[0]), fmt(on[0]),
                    fmt(on[0] / off[0], True))
                if has_k:
                    k = stat((metric, cfg, "rsiw-crck"))
                    row += " %s | %s |" % ((fmt(k[0]), fmt(k[0] / off[0], True)) if k else ("-", "-"))
                crc_rows.append(row)
    if crc_rows:
        md.append("")
        md.append("rsiw with MPA CRC (mpa_crc=1) against without, same rounds:")
        md.append("")
        if has_k:
            md.append("| metric | config | rsiw CRC off | rsiw CRC on | on/off | CRC on, crc32c() | on/off |")
            md.append("|---|---|---|---|---|---|---|")
        else:
            md.append("| metric | config | rsiw CRC off | rsiw CRC on | on/off |")
            md.append("|---|---|---|---|---|")
        md.extend(crc_rows)
    md.append("")
    md.append("Run parameters: " + ", ".join("%s=%s" % (k, meta[k]) for k in (
        "mtus", "crc", "bw_ops", "qpb_ops", "fio_jobs", "perftest_iters", "qperf_time", "fio_time", "scale_qps", "scale_threads", "mem_qps")
        if k in meta) + ".")
    plots = plot(rows, outdir)
    if plots:
        md.append("")
        md.append("Plots: " + ", ".join("[%s](%s)" % (p, p) for p in plots) + ".")
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")


def plot(rows, outdir):
    """One PNG per metric: bars per configuration, rsiw/siw/tcp, min-max bars."""
    try:
        subprocess.run(["gnuplot", "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        print("summarize.py: no gnuplot, no plots", file=sys.stderr)
        return []
    done = []
    for metric, title, unit, _h in METRICS:
        mrows = [r for r in rows if r["metric"] == metric]
        if not mrows:
            continue
        dat = os.path.join(outdir, "plot-%s.dat" % metric)
        with open(dat, "w") as f:
            for r in mrows:
                line = ['"%s"' % r["config"].replace("MTU ", "")]
                for i in IMPLS:
                    c = r["cells"][i]
                    line += ["%g" % x for x in c[:3]] if isinstance(c, tuple) else ["NaN"] * 3
                f.write(" ".join(line) + "\n")
        png = "plot-%s.png" % metric
        gp = """set terminal pngcairo size 900,500 font ",10"
set output '%s'
set title "%s (%s), TCG guest: compare ratios, not absolutes"
set ylabel "%s"
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set grid ytics
set key top right
set xtics rotate by -20
""" % (png, title.replace('"', "'"), unit, unit)
        # Every implementation keeps its colour; one with no figure at
        # all (NVMe/TCP not in the kernel) is left out of the plot.
        colours = {"rsiw": "#1f77b4", "siw": "#ff7f0e", "tcp": "#2ca02c"}
        clauses = []
        for k, i in enumerate(IMPLS):
            if not any(isinstance(r["cells"][i], tuple) for r in mrows):
                continue
            col = 2 + 3 * k
            clauses.append("'%s' using %d:%d:%d%s title '%s' lc rgb '%s'" % (
                os.path.basename(dat), col, col + 1, col + 2,
                ":xtic(1)" if not clauses else "", i, colours[i]))
        gp += "plot " + ", \\\n     ".join(clauses) + "\n"
        gpf = os.path.join(outdir, "plot-%s.gp" % metric)
        with open(gpf, "w") as f:
            f.write(gp)
        res = subprocess.run(["gnuplot", os.path.basename(gpf)], cwd=outdir,
                             capture_output=True, text=True)
        if res.returncode == 0 and os.path.exists(os.path.join(outdir, png)):
            done.append(png)
        else:
            print("summarize.py: gnuplot failed for %s: %s" % (metric, res.stderr.strip()),
                  file=sys.stderr)
    return done


if __name__ == "__main__":
    main()
