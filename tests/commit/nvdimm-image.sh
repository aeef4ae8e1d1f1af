#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host side of tests/commit/nvdimm.sh, after its VM has exited: what the
# guest committed to the emulated NVDIMM must be in the file backing it
# (scripts/vm-run.sh --nvdimm keeps it as OUT-DIR/nvdimm.img):
# - the KUnit pmem case's 256 KiB of "rsiw-pmem-flush\n", exactly once;
# - rsiw-flush-check's 2 MiB of "rsiw-user-flush\n", exactly once; its
#   status (devdax-check.status) must be 0: any other, 77 ("the provider
#   cannot post a Flush") included, is a failure.
#   tests/commit/nvdimm-image.sh OUT-DIR
set -u
. "$(dirname "$0")/../common/lib.sh"

out=${1:?usage: $0 OUT-DIR}
img="$out/nvdimm.img"
check "the NVDIMM's backing file is there" test -s "$img"

# count IMG PATTERN REPEAT: how many times PATTERN * REPEAT occurs in IMG,
# and that the octet after the first occurrence is not the pattern's.
count() {
	python3 - "$1" "$2" "$3" <<'PY'
import mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    line = sys.argv[2].encode() + b"\n"
    block = line * int(sys.argv[3])
    n, i = 0, m.find(block)
    first = i
    while i >= 0:
        n += 1
        i = m.find(block, i + len(block))
    # One run of exactly that length: no further line right after it.
    exact = first >= 0 and m[first + len(block):first + len(block) + len(line)] != line \
        and (first < len(line) or m[first - len(line):first] != line)
    print(n, int(exact), first)
PY
}

read -r n exact off < <(count "$img" rsiw-pmem-flush $((256 * 1024 / 16)))
expect_eq "the KUnit case's 256 KiB of rsiw-pmem-flush reached the NVDIMM, once" 1 "$n"
expect_eq "as one run of exactly 256 KiB (at offset ${off})" 1 "$exact"

status=$(cat "$out/devdax-check.status" 2>/dev/null || echo missing)
case "$status" in
0)
	read -r n exact off < <(count "$img" rsiw-user-flush $((2 * 1024 * 1024 / 16)))
	expect_eq "rsiw-flush-check's 2 MiB of rsiw-user-flush reached the NVDIMM, once" 1 "$n"
	expect_eq "as one run of exactly 2 MiB (at offset ${off})" 1 "$exact"
	;;
*) fail "rsiw-flush-check on device-DAX did not pass (status $status)" ;;
esac
finish
