# SPDX-License-Identifier: GPL-2.0
#
# Out-of-tree build of rsiw.ko. KDIR defaults to the cached test kernel
# built by scripts/build-kernel.sh; any kernel build tree with CONFIG_RUST=y,
# built by the same rustc and clang, works.

LLVM ?= -19
# scripts/lib.sh is bash (make runs $(shell) with /bin/sh, dash on Debian).
KDIR ?= $(shell bash -c ". scripts/lib.sh && resolve_kdir")

# The kernel's compilers by their LLVM suffix, also over a CC=clang
# LD=ld.lld on the command line (what dkms adds for a clang-built kernel,
# which fails where only clang-19 and ld.lld-19 exist). A kernel built with
# GCC (Debian's) builds its modules with its own GCC, which its Makefile
# names: no LLVM then.
kernel_cc_is_gcc = $(shell grep -qx 'CONFIG_CC_IS_GCC=y' $(KDIR)/include/config/auto.conf 2>/dev/null && echo y)
# A User-Mode Linux build tree (RSIW_KERNEL_FLAVOUR=uml) needs ARCH=um on
# every make in it.
kernel_is_uml = $(shell grep -qx 'CONFIG_UML=y' $(KDIR)/include/config/auto.conf 2>/dev/null && echo y)
KBUILD_TOOLS = $(if $(kernel_cc_is_gcc),,LLVM=$(LLVM) $(if $(filter -%,$(LLVM)),CC=clang$(LLVM) LD=ld.lld$(LLVM))) \
	$(if $(kernel_is_uml),ARCH=um)

all: modules provider

# The production module: no KUnit suites, no test harness.
modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_TOOLS) RSIW_TEST=0 modules

# The test module (what the VM tests load, tests/check): the same driver plus the
# KUnit suites, which run at insmod on a kernel with KUnit.
test:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_TOOLS) RSIW_TEST=1 modules

# rdma-core's provider for rsiw devices (userspace, against libibverbs).
provider:
	$(MAKE) -C providers/rsiw

# Install (Documentation/usage.md, "Installing"): the module into KDIR's
# kernel's module tree through kbuild's modules_install (the directory
# lib/modules/RELEASE/$(INSTALL_MOD_DIR) below $(INSTALL_MOD_PATH)), then
# depmod, so `modprobe rsiw` and `rdma link add ... type rsiw` (module
# alias rdma-link-rsiw) find it; the provider into libibverbs's provider
# directory with its /etc/libibverbs.d/rsiw.driver. DESTDIR stages both
# (INSTALL_MOD_PATH defaults to it). Nothing is rebuilt: `make` first.
INSTALL_MOD_DIR ?= extra
INSTALL_MOD_PATH ?= $(DESTDIR)
DEPMOD ?= depmod
KRELEASE = $(shell cat $(KDIR)/include/config/kernel.release 2>/dev/null)
MODDIR = $(INSTALL_MOD_PATH)/lib/modules/$(KRELEASE)
depmod_cmd = $(DEPMOD) -a $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) $(KRELEASE)

install: install-module install-provider

install-module:
	@test -n "$(KRELEASE)" || { echo "rsiw: no kernel release in $(KDIR)/include/config/kernel.release (KDIR=$(KDIR))" >&2; exit 1; }
	@test -f rsiw.ko || { echo "rsiw: no rsiw.ko: build it first (make)" >&2; exit 1; }
	@if objdump -h rsiw.ko 2>/dev/null | grep -q kunit_test_suites; then \
		echo "rsiw: note: installing the test build (make test), which runs its KUnit suites at load on a kernel with KUnit" >&2; fi
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_TOOLS) INSTALL_MOD_DIR=$(INSTALL_MOD_DIR) \
		INSTALL_MOD_PATH=$(INSTALL_MOD_PATH) modules_install
	$(depmod_cmd)

install-provider:
	$(MAKE) -C providers/rsiw install

uninstall: uninstall-module uninstall-provider

uninstall-module:
	@test -n "$(KRELEASE)" || { echo "rsiw: no kernel release in $(KDIR)/include/config/kernel.release (KDIR=$(KDIR))" >&2; exit 1; }
	rm -f $(MODDIR)/$(INSTALL_MOD_DIR)/rsiw.ko $(MODDIR)/$(INSTALL_MOD_DIR)/rsiw.ko.gz \
		$(MODDIR)/$(INSTALL_MOD_DIR)/rsiw.ko.xz $(MODDIR)/$(INSTALL_MOD_DIR)/rsiw.ko.zst
	-rmdir $(MODDIR)/$(INSTALL_MOD_DIR) 2>/dev/null
	if [ -d $(MODDIR) ]; then $(depmod_cmd); fi

uninstall-provider:
	$(MAKE) -C providers/rsiw uninstall

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_TOOLS) clean
	$(MAKE) -C providers/rsiw clean
	$(MAKE) -C tests/progs clean
	rm -f rust/ffi/sys_generated.rs

host-test:
	cargo test --workspace

.PHONY: all modules test provider clean host-test install install-module install-provider \
	uninstall uninstall-module uninstall-provider
