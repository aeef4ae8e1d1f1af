# SPDX-License-Identifier: GPL-2.0
#
# Out-of-tree build of rsiw.ko. KDIR defaults to the cached test kernel
# built by scripts/build-kernel.sh; any kernel build tree with CONFIG_RUST=y,
# built by the same rustc and clang, works.

LLVM ?= -19
KDIR ?= $(shell . scripts/lib.sh && resolve_kdir)

all: modules provider

# The production module: no KUnit suites, no test harness.
modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) RSIW_TEST=0 modules

# The test module (what scripts/test.sh loads): the same driver plus the
# KUnit suites, which run at insmod on a kernel with KUnit.
test:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) RSIW_TEST=1 modules

# rdma-core's provider for rsiw devices (userspace, against libibverbs).
provider:
	$(MAKE) -C tools/provider

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean
	$(MAKE) -C tools/provider clean
	rm -f rust/ffi/sys_generated.rs

host-test:
	cargo test --workspace

.PHONY: all modules test provider clean host-test
