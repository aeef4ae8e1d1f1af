#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run the engine's cargo-fuzz targets (fuzz/fuzz_targets/) with libFuzzer
# and AddressSanitizer, on the stable toolchain (RUSTC_BOOTSTRAP=1).
#
#   scripts/fuzz.sh                     every target, 15 s each (the smoke run
#                                       scripts/test.sh does)
#   scripts/fuzz.sh --seconds 3600 qp_stream   a long run of one target
#
# Corpora persist in fuzz/corpus/<target> (not committed); a crash leaves
# its input in fuzz/artifacts/<target>/. Ends with "fuzz: N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT"

seconds=15
targets=()
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds) seconds=$2; shift 2 ;;
	*) targets+=("$1"); shift ;;
	esac
done
if [ ${#targets[@]} = 0 ]; then
	mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v rsiw-engine-fuzz)
fi

export RUSTC_BOOTSTRAP=1
mkdir -p "$RSIW_CACHE"
log "building fuzz targets (${targets[*]})"
cargo fuzz build --fuzz-dir fuzz -O >/dev/null 2>"$RSIW_CACHE/fuzz-build.log" ||
	{ tail -30 "$RSIW_CACHE/fuzz-build.log"; die "fuzz build failed"; }

passed=0
failed=0
for t in "${targets[@]}"; do
	mkdir -p "fuzz/corpus/$t"
	log "fuzzing $t for ${seconds}s"
	if cargo fuzz run --fuzz-dir fuzz -O "$t" "fuzz/corpus/$t" -- \
		-max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
		>"$RSIW_CACHE/fuzz-$t.log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$RSIW_CACHE/fuzz-$t.log")
		echo "ok - fuzz $t: ${runs:-?} runs, no failure"
		passed=$((passed + 1))
	else
		echo "not ok - fuzz $t (see $RSIW_CACHE/fuzz-$t.log, inputs in fuzz/artifacts/$t)"
		grep -E 'panicked|ERROR|SUMMARY' "$RSIW_CACHE/fuzz-$t.log" | head -5
		failed=$((failed + 1))
	fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
