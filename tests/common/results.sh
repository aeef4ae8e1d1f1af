# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The output convention of rsiw's tests and the one parser of it. Source it.
#
#   ok - DESC                 a check of rsiw that passed
#   not ok - DESC             a check of rsiw that failed
#   skip - DESC: REASON       a check that did not run (counted apart,
#                             never as a pass)
#   ok - [siw] DESC           a check of a baseline driver (Linux siw, TCP),
#   not ok - [siw] DESC       counted as the baseline's, not as rsiw's
#   # ...                     information
#
# Guests print these lines (tests/common/lib.sh), the runner (tests/check)
# counts them in what each test printed, and so do scripts/interop.sh and
# the host-side checks of VM tests.

# results_count [FILE...]: "PASSED FAILED SKIPPED BASE_PASSED BASE_FAILED"
# of the lines in FILEs (or stdin).
results_count() {
	awk '
		/^ok - \[siw\] /     { bp++; next }
		/^not ok - \[siw\] / { bf++; next }
		/^ok - /             { p++; next }
		/^not ok - /         { f++; next }
		/^skip - /           { s++; next }
		END { printf "%d %d %d %d %d\n", p, f, s, bp, bf }
	' "$@"
}

# results_lines [FILE...]: the result and information lines of FILEs (or
# stdin), as a test re-prints a guest's output.
results_lines() { grep -aE '^(ok - |not ok - |skip - |#)' "$@"; }

# results_tag TAG: the result lines on stdin with TAG after the "ok - ",
# "not ok - " or "skip - " (and after a baseline's "[siw] "), information
# lines with "# TAG"; other lines are dropped. For the output of one of
# several guests (scripts/interop.sh).
results_tag() {
	local tag=$1
	sed -nE -e "s/^(ok|not ok|skip) - (\[siw\] )?/\1 - \2$tag /p" -e "s/^# ?/# $tag /p"
}
