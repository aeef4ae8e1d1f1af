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

#include "plugin.h"

const char plugin_name[] = "stamp";

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

void plugin_window_start(void)
{
	pthread_mutex_lock(&lock);
	__atomic_store_n(&n_stamps, 0, __ATOMIC_RELAXED);
	window_open = 1;
	pthread_mutex_unlock(&lock);
}

void plugin_window_end(void)
{
	pthread_mutex_lock(&lock);
	if (window_open) {
		window_open = 0;
		/* A stamp racing the close may still land: it is written
		 * before the next window clears the count, and dropped. */
		uint32_t n = __atomic_load_n(&n_stamps, __ATOMIC_RELAXED);
		if (n > MAX_STAMPS)
			n = MAX_STAMPS;
		windows++;
		fprintf(plugin_out, "window %d\n", windows);
		for (uint32_t i = 0; i < n; i++)
			if (stamps[i].ns)
				fprintf(plugin_out, "s %llu %u %u\n", (unsigned long long)stamps[i].ns,
					stamps[i].vcpu, stamps[i].k);
		fprintf(plugin_out, "end %d\n", windows);
		fflush(plugin_out);
		memset(stamps, 0, (size_t)n * sizeof(*stamps));
	}
	pthread_mutex_unlock(&lock);
}

void plugin_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
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
		plugin_marker(insn);
	}
}

bool plugin_arg(const char *arg)
{
	if (strncmp(arg, "at=", 3) || n_at >= MAX_AT)
		return false;
	at[n_at++] = strtoull(arg + 3, NULL, 16);
	return true;
}

int plugin_init(void)
{
	if (!n_at) {
		fprintf(stderr, "stamp: at least one at=ADDR is required\n");
		return -1;
	}
	stamps = calloc(MAX_STAMPS, sizeof(*stamps));
	if (!stamps) {
		perror("stamp");
		return -1;
	}
	return 0;
}
