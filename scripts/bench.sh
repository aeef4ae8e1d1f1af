#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Print the engine's performance figures (not a test: nothing here passes
# or fails on speed):
#   framing  MPA framing + CRC32c throughput for 4 KiB and 64 KiB messages
#            (tx build + rx parse, markers off and on), next to the fastest
#            CRC32c available on this CPU as the physical reference;
#   decode   decode + validate ns per DDP/RDMAP header.
#
#   scripts/bench.sh --vm-tx [MIB]
#            boots the test guest and runs the rsiw_tx_bench KUnit suite:
#            RDMA Write throughput over loopback TCP with copying TX
#            (zcopy_min=0) and zero-copy TX, CRC off and on, 64 KiB and
#            1 MiB messages, MIB MiB per run (default 64). Needs the
#            test module built (make test).
#
#   scripts/bench.sh --vm-atomics [OPS]
#            boots the test guest and runs the rsiw_atomic_bench KUnit
#            suite: RFC 7306 FetchAdd operations per second for 1, 4 and 16
#            QPs (each on its own loopback connection, posted from its own
#            work item) on one word and on distinct words of one MR, OPS per
#            QP (default 20000); then the responder's read-modify-write
#            called directly from 1, 2 and 4 work items (no TCP), 10 x OPS
#            each, on distinct words of one MR, one word, distinct MRs.
#            Needs the test module built (make test).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT"
if [ "${1:-}" = --vm-tx ]; then
	mib=${2:-64}
	[ -f rsiw.ko ] || die "build the test module first (make test)"
	out=$(mktemp -d "${TMPDIR:-/tmp}/rsiw-tx-bench.XXXXXX")
	rc=0
	scripts/vm-run.sh --quiet --timeout 1800 --out "$out" \
		--append 'kunit.filter_glob=rsiw_tx_bench' \
		-- tools/vmtest/tx-bench.sh "$mib" || rc=$?
	cat "$out/output.log" 2>/dev/null || true
	exit "$rc"
fi
if [ "${1:-}" = --vm-atomics ]; then
	ops=${2:-20000}
	[ -f rsiw.ko ] || die "build the test module first (make test)"
	out=$(mktemp -d "${TMPDIR:-/tmp}/rsiw-atomic-bench.XXXXXX")
	rc=0
	scripts/vm-run.sh --quiet --timeout 1200 --out "$out" \
		--append 'kunit.filter_glob=rsiw_atomic_bench*' \
		-- tools/vmtest/atomic-bench.sh "$ops" || rc=$?
	cat "$out/output.log" 2>/dev/null || true
	exit "$rc"
fi
cargo bench -p rsiw-engine --bench framing --bench decode "$@"
