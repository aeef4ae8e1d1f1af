#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run the engine's cargo-fuzz targets (fuzz/fuzz_targets/) with libFuzzer
# and AddressSanitizer, on the stable toolchain (RUSTC_BOOTSTRAP=1).
# Documentation/fuzzing.md describes the targets and the figures.
#
#   scripts/fuzz.sh                     every target, 15 s each (the smoke run
#                                       scripts/test.sh does)
#   scripts/fuzz.sh --seconds 3600 qp_stream   a long run of one target
#   scripts/fuzz.sh --long [--runs N] [--jobs J] [--max-time S] [TARGETS]
#                                       the campaign: per target N executions
#                                       (default 10^8) over J jobs (default:
#                                       the cores), then `cargo fuzz cmin`, then
#                                       `cargo fuzz coverage` + llvm-cov; the
#                                       report goes to out/fuzz/report.md.
#                                       --max-time caps each target's run.
#   --sanitizer none                    build without AddressSanitizer (about
#                                       2-3x the executions per second; the
#                                       engine forbids unsafe code, so ASan
#                                       only watches libFuzzer and the CRC
#                                       oracle). Default: address.
#
# Every build has overflow checks on (fuzz/Cargo.toml), as the kernel has
# (CONFIG_RUST_OVERFLOW_CHECKS): an overflow is a failure here as there.
#
# Corpora persist in fuzz/corpus/<target> (not committed); a crash leaves
# its input in fuzz/artifacts/<target>/ and the run prints the command that
# reproduces it. Ends with "fuzz: N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT" || exit 1

seconds=15
long=0
runs=100000000
jobs=$(nproc)
max_time=0
sanitizer=address
targets=()
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds) seconds=$2; shift 2 ;;
	--long) long=1; shift ;;
	--runs) runs=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--max-time) max_time=$2; shift 2 ;;
	--sanitizer) sanitizer=$2; shift 2 ;;
	-h|--help) sed -n '4,29p' "$0"; exit 0 ;;
	-*) die "unknown option $1" ;;
	*) targets+=("$1"); shift ;;
	esac
done
case $sanitizer in address | none) ;; *) die "--sanitizer: address or none" ;; esac
if [ ${#targets[@]} = 0 ]; then
	mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v rsiw-engine-fuzz)
fi

export RUSTC_BOOTSTRAP=1
mkdir -p "$RSIW_CACHE"
log "building fuzz targets (${targets[*]})"
cargo fuzz build --fuzz-dir fuzz -O -s "$sanitizer" >/dev/null 2>"$RSIW_CACHE/fuzz-build.log" ||
	{ tail -30 "$RSIW_CACHE/fuzz-build.log"; die "fuzz build failed"; }

# What to do with a failing target: keep the artifact, say how to replay it.
report_crash() {
	local t=$1 log=$2 a
	grep -E 'panicked|ERROR|SUMMARY' "$log" | head -5
	for a in "fuzz/artifacts/$t"/*; do
		[ -e "$a" ] || continue
		echo "#   artifact $a"
		echo "#   reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz -O -s $sanitizer $t $a"
	done
	echo "#   then make it a regression test in rust/engine (Documentation/fuzzing.md)"
}

passed=0
failed=0

if [ "$long" = 0 ]; then
	for t in "${targets[@]}"; do
		mkdir -p "fuzz/corpus/$t"
		log "fuzzing $t for ${seconds}s"
		if cargo fuzz run --fuzz-dir fuzz -O -s "$sanitizer" "$t" "fuzz/corpus/$t" -- \
			-max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
			>"$RSIW_CACHE/fuzz-$t.log" 2>&1; then
			runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$RSIW_CACHE/fuzz-$t.log")
			echo "ok - fuzz $t: ${runs:-?} runs, no failure"
			passed=$((passed + 1))
		else
			echo "not ok - fuzz $t (see $RSIW_CACHE/fuzz-$t.log, inputs in fuzz/artifacts/$t)"
			report_crash "$t" "$RSIW_CACHE/fuzz-$t.log"
			failed=$((failed + 1))
		fi
	done
	echo "fuzz: $passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
fi

# --- the long campaign ---------------------------------------------------
# llvm-tools (llvm-profdata, llvm-cov) for the coverage step; idempotent.
sysroot=$(rustc --print sysroot)
llvm_bin="$sysroot/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
if [ ! -x "$llvm_bin/llvm-cov" ]; then
	log "installing llvm-tools-preview"
	rustup component add llvm-tools-preview >&2 || die "cannot install llvm-tools-preview"
fi
triple=$(rustc -vV | sed -n 's/^host: //p')
bindir="fuzz/target/$triple/release"
outdir=out/fuzz
mkdir -p "$outdir"
report=$outdir/report.md
corpus_stat() { # files bytes
	find "$1" -type f -printf '%s\n' | awk '{n++; b += $1} END {printf "%d %d\n", n, b}'
}
# Per-job runs: libFuzzer's -runs applies to each job.
per_job=$(( (runs + jobs - 1) / jobs ))
{
	echo "# Fuzz campaign $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "\`scripts/fuzz.sh --long --runs $runs --jobs $jobs$([ "$max_time" = 0 ] || echo " --max-time $max_time")$([ "$sanitizer" = address ] || echo " --sanitizer $sanitizer")\` on $(nproc) cores, $(rustc --version)."
	echo
	echo "| target | result | executions | exec/s | time (s) | est. 10^8 | corpus before | after run | after cmin | lines | regions |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
} >"$report"
details=$(mktemp)

for t in "${targets[@]}"; do
	corpus=fuzz/corpus/$t
	mkdir -p "$corpus" "fuzz/artifacts/$t"
	read -r c0 b0 < <(corpus_stat "$corpus")
	logdir=$RSIW_CACHE/fuzz-long-$t
	rm -rf "$logdir"; mkdir -p "$logdir"
	log "fuzzing $t: $runs executions over $jobs job(s), corpus $c0 files"
	args=(-runs="$per_job" -rss_limit_mb=2048 -print_final_stats=1
		-artifact_prefix="$RSIW_ROOT/fuzz/artifacts/$t/")
	[ "$max_time" != 0 ] && args+=(-max_total_time="$max_time")
	a0=$(find "fuzz/artifacts/$t" -type f | wc -l)
	start=$(date +%s.%N)
	if [ "$jobs" -gt 1 ]; then
		(cd "$logdir" && "$RSIW_ROOT/$bindir/$t" "${args[@]}" -jobs="$jobs" -workers="$jobs" \
			"$RSIW_ROOT/$corpus" >"$logdir/main.log" 2>&1)
	else
		"$bindir/$t" "${args[@]}" "$corpus" >"$logdir/fuzz-0.log" 2>&1
	fi
	rc=$?
	# A crashing job's input lands in the artifacts whatever the exit code.
	[ "$(find "fuzz/artifacts/$t" -type f | wc -l)" = "$a0" ] || rc=1
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	isecs=$(printf '%.0f' "$secs")
	execs=$(cat "$logdir"/fuzz-*.log 2>/dev/null |
		sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
	rate=$(echo "$execs / $secs" | bc)
	est=$(if [ "$rate" -gt 0 ]; then printf '%.1f' "$(echo "scale=3; 100000000 / $rate / 3600" | bc)"; else echo "?"; fi)
	read -r c1 b1 < <(corpus_stat "$corpus")
	if [ "$rc" = 0 ]; then
		result=ok
		echo "ok - fuzz $t: $execs executions in $isecs s ($rate/s), no failure"
		passed=$((passed + 1))
	else
		result="**crash**"
		echo "not ok - fuzz $t (logs in $logdir, inputs in fuzz/artifacts/$t)"
		report_crash "$t" "$(ls "$logdir"/fuzz-*.log | head -1)"
		failed=$((failed + 1))
	fi

	log "minimising the corpus of $t"
	cargo fuzz cmin --fuzz-dir fuzz -O -s "$sanitizer" "$t" "$corpus" >"$logdir/cmin.log" 2>&1 ||
		log "cmin failed (see $logdir/cmin.log)"
	read -r c2 b2 < <(corpus_stat "$corpus")

	log "coverage of $t"
	lines='?' regions='?'
	if cargo fuzz coverage --fuzz-dir fuzz "$t" "$corpus" >"$logdir/coverage.log" 2>&1; then
		# cargo-fuzz 0.13 puts it under the workspace's target/ with --fuzz-dir.
		covbin=
		for d in target fuzz/target; do
			[ -x "$d/$triple/coverage/$triple/release/$t" ] && covbin=$d/$triple/coverage/$triple/release/$t && break
		done
		prof=fuzz/coverage/$t/coverage.profdata
		filter=(-ignore-filename-regex='/(\.cargo|rustc|\.rustup)/|fuzz_targets')
		"$llvm_bin/llvm-cov" export -summary-only -format=text "${filter[@]}" \
			-instr-profile="$prof" "$covbin" >"$logdir/coverage.json" 2>>"$logdir/coverage.log"
		"$llvm_bin/llvm-cov" report "${filter[@]}" -instr-profile="$prof" "$covbin" \
			>"$outdir/coverage-$t.txt" 2>>"$logdir/coverage.log"
		read -r lines regions < <(jq -r '
			[.data[0].files[] | select(.filename | test("rust/engine/src/"))] as $f
			| ([$f[].summary.lines.covered] | add) as $lc | ([$f[].summary.lines.count] | add) as $ln
			| ([$f[].summary.regions.covered] | add) as $rc | ([$f[].summary.regions.count] | add) as $rn
			| "\($lc)/\($ln)=\(if $ln > 0 then ($lc * 1000 / $ln | floor) / 10 else 0 end)% \($rc)/\($rn)=\(if $rn > 0 then ($rc * 1000 / $rn | floor) / 10 else 0 end)%"' \
			"$logdir/coverage.json")
		{
			echo
			echo "### $t: coverage per engine file (files it reaches)"
			echo
			echo "| file | lines | regions |"
			echo "|---|---|---|"
			jq -r '.data[0].files[] | select(.filename | test("rust/engine/src/"))
				| select(.summary.lines.covered > 0)
				| "| \(.filename | sub(".*rust/engine/src/"; "")) | \(.summary.lines.covered)/\(.summary.lines.count) (\(.summary.lines.percent | floor)%) | \(.summary.regions.covered)/\(.summary.regions.count) (\(.summary.regions.percent | floor)%) |"' \
				"$logdir/coverage.json"
		} >>"$details"
	else
		log "coverage failed (see $logdir/coverage.log)"
	fi
	echo "#   $t: corpus $c0 -> $c1 -> $c2 files after cmin; engine lines ${lines%%=*} (${lines#*=}), regions ${regions%%=*} (${regions#*=})"
	echo "| $t | $result | $execs | $rate | $isecs | ${est} h | $c0 ($b0 B) | $c1 ($b1 B) | $c2 ($b2 B) | ${lines#*=} | ${regions#*=} |" >>"$report"
done
# The union of every target's coverage (merged profiles, all binaries).
profs=() objs=()
for t in "${targets[@]}"; do
	for d in target fuzz/target; do
		b=$d/$triple/coverage/$triple/release/$t
		if [ -x "$b" ] && [ -f "fuzz/coverage/$t/coverage.profdata" ]; then
			profs+=("fuzz/coverage/$t/coverage.profdata")
			objs+=("${objs[@]:+-object}" "$b")
			break
		fi
	done
done
if [ ${#profs[@]} -gt 1 ] &&
	"$llvm_bin/llvm-profdata" merge -sparse "${profs[@]}" -o "$outdir/all.profdata" &&
	"$llvm_bin/llvm-cov" export -summary-only -format=text \
		-ignore-filename-regex='/(\.cargo|rustc|\.rustup)/|fuzz_targets' \
		-instr-profile="$outdir/all.profdata" "${objs[@]}" >"$outdir/all.json"; then
	{
		echo
		echo "### All targets together: coverage per engine file"
		echo
		echo "| file | lines | regions |"
		echo "|---|---|---|"
		jq -r '.data[0].files[] | select(.filename | test("rust/engine/src/"))
			| "| \(.filename | sub(".*rust/engine/src/"; "")) | \(.summary.lines.covered)/\(.summary.lines.count) (\(.summary.lines.percent | floor)%) | \(.summary.regions.covered)/\(.summary.regions.count) (\(.summary.regions.percent | floor)%) |"' \
			"$outdir/all.json"
		jq -r '[.data[0].files[] | select(.filename | test("rust/engine/src/"))] as $f
			| "| **total** | \([$f[].summary.lines.covered] | add)/\([$f[].summary.lines.count] | add) | \([$f[].summary.regions.covered] | add)/\([$f[].summary.regions.count] | add) |"' \
			"$outdir/all.json"
	} >>"$details"
fi
{
	echo
	echo "Lines/regions: covered share of rust/engine/src (all its files, reached or not),"
	echo "from \`cargo fuzz coverage\` over the minimised corpus. Est. 10^8: hours for 10^8"
	echo "executions at the measured rate with the same number of jobs."
	cat "$details"
} >>"$report"
rm -f "$details"
log "report: $report"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
