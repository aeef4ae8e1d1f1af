#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Print the engine's performance figures (not a test: nothing here passes
# or fails on speed):
#   framing  MPA framing + CRC32c throughput for 4 KiB and 64 KiB messages
#            (tx build + rx parse, markers off and on), next to the fastest
#            CRC32c available on this CPU as the physical reference;
#   decode   decode + validate ns per DDP/RDMAP header.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_ROOT"
cargo bench -p rsiw-engine --bench framing --bench decode "$@"
