#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The whole test suite, from a fresh machine (the README's test command):
# tests/check --full, the quick tier (gates, host tests, lint, fuzz smoke,
# the builds) then every VM test. Arguments and the environment go to
# tests/check (tests/README.md): e.g. RSIW_ONLY="foundation nvmeof",
# RSIW_KERNEL_FLAVOUR=debug. Logs in out/test/; ends with
# "rsiw: N passed, N failed (...)".
exec "$(dirname "$0")/../tests/check" --full "$@"
