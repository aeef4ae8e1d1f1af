#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Parse the KTAP output of rsiw's KUnit suites from a guest dmesg with the
# kernel's own parser (tools/testing/kunit/kunit.py parse) and fail on any
# failed test or on any suite declared in rust/ that did not run.
#   scripts/kunit-check.sh DMESG_FILE
# Prints "kunit: N passed, N failed" last.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

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
set +e
python3 - "$json" $expected <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
expected = set(sys.argv[2:])
suites = {}
def walk(group):
    if group.get("test_cases"):
        suites[group["name"]] = group["test_cases"]
    for sub in group.get("sub_groups", []):
        walk(sub)
walk(data)
passed = failed = 0
for name, cases in sorted(suites.items()):
    for case in cases:
        if case["status"] == "PASS":
            passed += 1
        else:
            failed += 1
            print(f"kunit: {name}.{case['name']}: {case['status']}")
for name in sorted(expected - suites.keys()):
    failed += 1
    print(f"kunit: suite {name} did not run")
print(f"kunit: {passed} passed, {failed} failed")
sys.exit(1 if failed or not passed else 0)
PY
prc2=$?
set -e
[ "$prc" = 0 ] && [ "$prc2" = 0 ]
