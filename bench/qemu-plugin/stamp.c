// SPDX-License-Identifier: GPL-2.0
/*
 * stamp: a QEMU TCG plugin that records the host's clock each time a vCPU
 * executes one of a few guest instructions, between the two markers of
 * bench/qemu-plugin/marker (see insncount.c). Under TCG what a phase of a
 * message costs is host time, which guest tracing inflates and guest
 * clocks only sample; an instruction callback at a handful of addresses
 * costs next to nothing, so the phases between them (a doorbell's system
 * call to tcp_sendmsg, to the packet on the veth, to the receiver's
 * completion event, ...) are timed as the guest runs untraced.
 *
 *   qemu-system-x86_64 ... -plugin bench/qemu-plugin/stamp.so,out=FILE,at=ADDR[,at=ADDR...]
 *
 * ADDR: a guest virtual address (hex), the first byte of an instruction;
 * up to 16, numbered from 0 in the order given. Each window appends:
 *   window N
 *   s NS VCPU K    the vCPU executed address K at host time NS (monotonic)
 *   end N
 * bench/qemu-plugin/stamp.py turns the windows into the time of each
 * phase per message. Built like insncount.so, against QEMU's plugin ABI
 * version 1 (QEMU 7.2 and later) as qemu-plugin-abi.h declares it, with
 * no QEMU source tree.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#include "qemu-plugin-abi.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_AT 16
#define MAX_STAMPS (1u << 22)

struct stamp {
	uint64_t ns;
	uint16_t vcpu;
	uint16_t k;
};

static uint64_t at[MAX_AT];
static int n_at;
static struct stamp *stamps;
static uint32_t n_stamps; /* atomic */
static volatile int window_open;
static int windows;
static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hit(unsigned int vcpu, void *u)
{
	if (!window_open)
		return;
	uint64_t t = now();
	uint32_t i = __atomic_fetch_add(&n_stamps, 1, __ATOMIC_RELAXED);
	if (i >= MAX_STAMPS)
		return;
	stamps[i] = (struct stamp){ .ns = t, .vcpu = (uint16_t)vcpu, .k = (uint16_t)(uintptr_t)u };
}

static void marker(unsigned int vcpu, void *u)
{
	(void)vcpu;
	pthread_mutex_lock(&lock);
	if ((uintptr_t)u == '0') {
		__atomic_store_n(&n_stamps, 0, __ATOMIC_RELAXED);
		window_open = 1;
	} else if (window_open) {
		window_open = 0;
		/* A stamp racing the close may still land: it is written
		 * before the next window clears the count, and dropped. */
		uint32_t n = __atomic_load_n(&n_stamps, __ATOMIC_RELAXED);
		if (n > MAX_STAMPS)
			n = MAX_STAMPS;
		windows++;
		fprintf(out, "window %d\n", windows);
		for (uint32_t i = 0; i < n; i++)
			if (stamps[i].ns)
				fprintf(out, "s %llu %u %u\n", (unsigned long long)stamps[i].ns, stamps[i].vcpu,
					stamps[i].k);
		fprintf(out, "end %d\n", windows);
		fflush(out);
		memset(stamps, 0, (size_t)n * sizeof(*stamps));
	}
	pthread_mutex_unlock(&lock);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t va = qemu_plugin_insn_vaddr(insn);
		for (int k = 0; k < n_at; k++)
			if (va == at[k])
				qemu_plugin_register_vcpu_insn_exec_cb(insn, hit, QEMU_PLUGIN_CB_NO_REGS,
								       (void *)(uintptr_t)k);
		if (qemu_plugin_insn_size(insn) == 8) {
			const uint8_t *d = qemu_plugin_insn_data(insn);
			if (!memcmp(d, marker_magic, sizeof(marker_magic)) && (d[7] == '0' || d[7] == '1'))
				qemu_plugin_register_vcpu_insn_exec_cb(insn, marker, QEMU_PLUGIN_CB_NO_REGS,
								       (void *)(uintptr_t)d[7]);
		}
	}
}

static void at_exit(qemu_plugin_id_t id, void *u)
{
	(void)id;
	(void)u;
	if (out)
		fclose(out);
	out = NULL;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
								int argc, char **argv)
{
	(void)info;
	const char *path = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			path = argv[i] + 4;
		else if (!strncmp(argv[i], "at=", 3) && n_at < MAX_AT)
			at[n_at++] = strtoull(argv[i] + 3, NULL, 16);
		else {
			fprintf(stderr, "stamp: bad argument %s\n", argv[i]);
			return -1;
		}
	}
	if (!path || !n_at) {
		fprintf(stderr, "stamp: out=FILE and at least one at=ADDR are required\n");
		return -1;
	}
	stamps = calloc(MAX_STAMPS, sizeof(*stamps));
	out = fopen(path, "w");
	if (!stamps || !out) {
		perror(path);
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
