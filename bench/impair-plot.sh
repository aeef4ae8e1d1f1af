#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Plots of bench/impair-bench.sh's raw.csv: the median goodput and the
# median 64-byte latency per impairment, one bar per implementation, on
# log scales (the impairments span three orders of magnitude).
#   bench/impair-plot.sh RAW.CSV OUTDIR   (writes plot-goodput.png, plot-latency.png)
set -euo pipefail
raw=$1
out=$2
command -v gnuplot >/dev/null || { echo "impair-plot: gnuplot is not installed (gnuplot-nox); no plots" >&2; exit 0; }
for metric in goodput lat_64; do
	# One row per impairment (in the order measured), a column per impl.
	python3 - "$raw" "$metric" >"$out/$metric.dat" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
order = []
vals = {}
for r in rows:
    if r["metric"] != sys.argv[2]:
        continue
    if r["impairment"] not in order:
        order.append(r["impairment"])
    vals.setdefault((r["impairment"], r["impl"]), []).append(float(r["value"]))
# Only the implementations measured (BENCH_IMPLS may leave some out): a
# column of NaN alone stops gnuplot.
impls = [p for p in ["rsiw", "siw", "rxe", "tcp"] if any(k[1] == p for k in vals)]
print("impairment " + " ".join(impls))
for i in order:
    print(i + " " + " ".join(
        "%.3f" % statistics.median(vals[(i, p)]) if (i, p) in vals else "NaN" for p in impls))
PY
	cols=$(head -1 "$out/$metric.dat" | wc -w)
	case $metric in
	goodput) name=goodput ylabel="goodput, MB/s (median, log scale)" log="set logscale y" ;;
	lat_64) name=latency ylabel="64-byte round trip, µs (median, log scale)" log="set logscale y" ;;
	esac
	gnuplot <<GP
set terminal png size 1100,500
set output "$out/plot-$name.png"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key autotitle columnhead top right
set ylabel "$ylabel"
set xtics rotate by -30
$log
plot for [c=2:$cols] "$out/$metric.dat" using c:xtic(1)
GP
done
