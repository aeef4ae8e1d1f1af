#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Parse the KTAP output of rsiw's KUnit suites from a guest dmesg with the
# kernel's own parser (tools/testing/kunit/kunit.py parse) and fail on any
# failed test or on any suite declared in rust/ that did not run. Skipped
# cases (a precondition the guest lacks, e.g. no pmem device) are listed
# and counted apart, not as failures.
#   scripts/kunit-check.sh [--suites A,B] [--require SUITE.CASE]... DMESG_FILE
#   --suites    only these suites are expected (a kunit.filter_glob run)
#   --require   this case must have passed (a skip fails it)
# Prints "kunit: N skipped" (if any), then "kunit: N passed, N failed" last.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

only=""
required=()
while [ $# -gt 1 ]; do
	case "$1" in
	--suites) only=$2; shift 2 ;;
	--require) required+=("$2"); shift 2 ;;
	*) die "unknown option $1 (see the header of $0)" ;;
	esac
done
[ $# = 1 ] || die "usage: $0 [--suites A,B] [--require SUITE.CASE]... DMESG_FILE"
dmesg_file=$(realpath "$1")
kdir=$(resolve_kdir)
src=$(readlink -f "$kdir/source" 2>/dev/null || true)
[ -f "$src/tools/testing/kunit/kunit.py" ] || src=$(sed -n 's/^# *source: *//p' "$kdir/Makefile" | head -1)
[ -f "$src/tools/testing/kunit/kunit.py" ] || die "kunit.py not found for $kdir"

parsed=$(mktemp)
json=$(mktemp)
trap 'rm -f "$parsed" "$json"' EXIT
set +e
python3 "$src/tools/testing/kunit/kunit.py" parse --json="$json" "$dmesg_file" >"$parsed" 2>&1
prc=$?
set -e
cat "$parsed"

# Every suite declared in rust/ must have run, and every case passed.
expected=$(grep -rhoE 'kunit_tests\([a-z0-9_]+\)' "$RSIW_ROOT/rust" | sed 's/kunit_tests(\(.*\))/\1/' | sort -u)
[ -z "$only" ] || expected=$(echo "$only" | tr , '\n')
set +e
python3 - "$json" "${required[*]:-}" $expected <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
required = set(sys.argv[2].split())
expected = set(sys.argv[3:])
suites = {}
def walk(group):
    if group.get("test_cases"):
        suites[group["name"]] = group["test_cases"]
    for sub in group.get("sub_groups", []):
        walk(sub)
walk(data)
passed = failed = skipped = 0
seen = set()
for name, cases in sorted(suites.items()):
    for case in cases:
        full = f"{name}.{case['name']}"
        if case["status"] == "PASS":
            passed += 1
            seen.add(full)
        elif case["status"] == "SKIP":
            skipped += 1
            print(f"kunit: {full}: SKIP")
        else:
            failed += 1
            print(f"kunit: {full}: {case['status']}")
for name in sorted(expected - suites.keys()):
    failed += 1
    print(f"kunit: suite {name} did not run")
for full in sorted(required - seen):
    failed += 1
    print(f"kunit: {full} is required to pass and did not")
if skipped:
    print(f"kunit: {skipped} skipped")
print(f"kunit: {passed} passed, {failed} failed")
sys.exit(1 if failed or not passed else 0)
PY
prc2=$?
set -e
[ "$prc" = 0 ] && [ "$prc2" = 0 ]
