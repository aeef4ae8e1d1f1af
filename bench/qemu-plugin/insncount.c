// SPDX-License-Identifier: GPL-2.0
/*
 * insncount: a QEMU TCG plugin that counts the guest instructions executed
 * (by translation block, so by address) and, optionally, the data pages the
 * guest kernel touches, between two markers the guest executes. Under TCG
 * a message's time is not measurable to a few percent (rounds vary by
 * +-25%), but what it executes is: this turns "rsiw's path is heavier than
 * siw's" into instructions per message, by module and function.
 *
 * The markers are two instructions no compiler emits, executed by
 * bench/qemu-plugin/marker (any vCPU, any mode):
 *   nopl 0x30495352(%rax,%rax,1)  "RSI0": start a window (zero the counts)
 *   nopl 0x31495352(%rax,%rax,1)  "RSI1": end it (append the counts to out=)
 * Each window appends to the output file:
 *   window N
 *   tb VADDR INSNS EXECS BYTES PAUSES
 *                             one line per block address executed:
 *                             instructions run, entries, its length, and
 *                             the `pause`s it ran (each ends TCG's run of
 *                             the vCPU: spinning is dear under TCG)
 *   tr KERNEL USER            blocks translated in the window
 *   op CLASS KERNEL USER      instructions of a class TCG runs slowly or
 *                             that serialise (locked, fences, rdtsc, ...),
 *                             and returns and indirect branches (TCG looks
 *                             their target up where it chains a direct one)
 *   pg PAGE ACCESSES          kernel data pages (mem=on only)
 *   wp COUNT A1 .. A8         watch=ADDR only: how often a vCPU entered the
 *                             kernel block at ADDR right after the blocks
 *                             A1 (the last) .. A8, e.g. who reached
 *                             queued_spin_lock_slowpath
 *   xp VADDR ENTRIES          xpage=on only: how often the vCPU entered the
 *                             block at VADDR from a block that starts on
 *                             another page. TCG chains a direct branch
 *                             only within its block's first page, so each
 *                             such entry went through the lookup of the
 *                             next block (helper, jump cache), as every
 *                             return and indirect branch does
 *   end N
 * bench/qemu-plugin/insncount.py turns two windows and the guest's
 * /proc/kallsyms into instructions per message by module and symbol.
 *
 *   qemu-system-x86_64 ... -plugin bench/qemu-plugin/insncount.so,out=FILE[,mem=on][,watch=ADDR][,xpage=on]
 *
 * Built against QEMU's plugin ABI (QEMU_PLUGIN_VERSION 1, QEMU 7.2 and
 * later keep it): only the calls qemu-plugin-abi.h declares, as
 * qemu-plugin.h declares them, so no QEMU source tree is needed. The counts are plain
 * (not atomic) increments from both vCPUs' threads: two vCPUs running the
 * same block at once can lose an increment, far below the differences
 * this is used for.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "plugin.h"

const char plugin_name[] = "insncount";

/* One translated block: its address, size and execution count. A block
 * translated again (after a flush) gets a new record; the dump sums by
 * address. */
/* Instructions TCG runs slowly or that serialise the vCPUs, counted per
 * block at translation (see classify()). */
enum cls { C_LOCK, C_XCHG, C_FENCE, C_PAUSE, C_TSC, C_CPUID, C_MSR, C_IRQFLAG, C_HLT, C_PORT, C_CR, C_RET, C_IND, C_N };
static const char *const cls_name[C_N] = { "lock", "xchg", "fence", "pause", "rdtsc", "cpuid", "msr", "cli/sti/popf",
					    "hlt", "in/out", "cr/invlpg", "ret", "indirect-call/jmp" };

struct rec {
	uint64_t vaddr;
	uint64_t execs;
	uint64_t xin; /* entries from a block starting on another page */
	uint32_t insns;
	uint32_t bytes;
	uint8_t cls[C_N];
	struct rec *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec *recs;
static bool mem_on;
static bool xpage_on;
static volatile int window_open;
static int windows;
/* Blocks translated while a window is open, kernel and user: code run
 * for the first time, or again after its translation was dropped (a
 * write to its page, a full code buffer). */
static uint64_t trans_k, trans_u;

/* Kernel data pages touched in the window: per vCPU open addressing, so
 * the callback takes no lock. */
#define PG_BITS 16
#define PG_SLOTS (1u << PG_BITS)
#define MAX_VCPUS 8
struct pg {
	uint64_t page; /* page number + 1; 0 = empty */
	uint64_t n;
};
static struct pg *pages[MAX_VCPUS];

static bool kernel_addr(uint64_t a)
{
	return a >> 63;
}

/* watch=ADDR: the kernel blocks each vCPU ran last before entering the
 * block at ADDR (e.g. queued_spin_lock_slowpath: who contends), counted
 * by path. */
#define PATH 8
#define W_SLOTS 4096
static uint64_t watch;
static struct {
	uint64_t last[PATH];
	unsigned at;
} trail[MAX_VCPUS];
static struct wpath {
	uint64_t path[PATH];
	uint64_t n;
} wpaths[W_SLOTS];
static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;

static void tb_watch(unsigned int vcpu, void *u)
{
	uint64_t va = (uintptr_t)u;
	if (vcpu >= MAX_VCPUS)
		return;
	if (va == watch && window_open) {
		uint64_t p[PATH];
		for (int i = 0; i < PATH; i++)
			p[i] = trail[vcpu].last[(trail[vcpu].at - 1 - i) % PATH];
		uint64_t h = 0;
		for (int i = 0; i < PATH; i++)
			h = (h ^ p[i]) * 0x100000001b3ull;
		pthread_mutex_lock(&wlock);
		for (unsigned i = 0; i < W_SLOTS; i++) {
			struct wpath *w = &wpaths[(h + i) % W_SLOTS];
			if (w->n && !memcmp(w->path, p, sizeof(p))) {
				w->n++;
				break;
			}
			if (!w->n) {
				memcpy(w->path, p, sizeof(p));
				w->n = 1;
				break;
			}
		}
		pthread_mutex_unlock(&wlock);
	}
	trail[vcpu].last[trail[vcpu].at++ % PATH] = va;
}

/* xpage=on: the start page of the block each vCPU ran last. */
static uint64_t last_page[MAX_VCPUS];

static void tb_xpage(unsigned int vcpu, void *u)
{
	struct rec *r = u;
	if (vcpu >= MAX_VCPUS)
		return;
	if (r->vaddr >> 12 != last_page[vcpu])
		r->xin++;
	last_page[vcpu] = r->vaddr >> 12;
}

static void mem_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *u)
{
	(void)info;
	(void)u;
	if (!window_open || vcpu >= MAX_VCPUS || !kernel_addr(vaddr))
		return;
	struct pg *t = pages[vcpu];
	uint64_t key = (vaddr >> 12) + 1;
	uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - PG_BITS));
	for (uint32_t i = 0; i < PG_SLOTS; i++) {
		struct pg *s = &t[(h + i) & (PG_SLOTS - 1)];
		if (s->page == key) {
			s->n++;
			return;
		}
		if (s->page == 0) {
			s->page = key;
			s->n = 1;
			return;
		}
	}
}

/* A block's counts as the window's end read them. */
struct snap {
	uint64_t vaddr;
	uint64_t execs;
	uint64_t xin;
	uint32_t insns;
	uint32_t bytes;
	const uint8_t *cls;
};

static int cmp_snap(const void *a, const void *b)
{
	const struct snap *x = a, *y = b;
	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

void plugin_window_start(void)
{
	pthread_mutex_lock(&lock);
	for (struct rec *r = recs; r; r = r->next)
		r->execs = r->xin = 0;
	for (int v = 0; v < MAX_VCPUS; v++)
		if (pages[v])
			memset(pages[v], 0, sizeof(struct pg) * PG_SLOTS);
	pthread_mutex_lock(&wlock);
	memset(wpaths, 0, sizeof(wpaths));
	pthread_mutex_unlock(&wlock);
	trans_k = trans_u = 0;
	window_open = 1;
	pthread_mutex_unlock(&lock);
}

void plugin_window_end(void)
{
	pthread_mutex_lock(&lock);
	window_open = 0;
	/* The other vCPU keeps running: read each count once, into a copy
	 * sized by the records (which only this lock adds to). */
	size_t total = 0, n = 0;
	for (struct rec *r = recs; r; r = r->next)
		total++;
	struct snap *v = calloc(total ? total : 1, sizeof(*v));
	for (struct rec *r = recs; r && v && n < total; r = r->next) {
		uint64_t e = r->execs;
		if (e)
			v[n++] = (struct snap){ r->vaddr, e, r->xin, r->insns, r->bytes, r->cls };
	}
	windows++;
	if (v && plugin_out) {
		/* Notable instructions run, kernel and user. */
		uint64_t kc[C_N] = { 0 }, uc[C_N] = { 0 };
		for (size_t i = 0; i < n; i++)
			for (int c = 0; c < C_N; c++)
				(kernel_addr(v[i].vaddr) ? kc : uc)[c] += v[i].execs * v[i].cls[c];
		qsort(v, n, sizeof(*v), cmp_snap);
		fprintf(plugin_out, "window %d\n", windows);
		fprintf(plugin_out, "tr %llu %llu\n", (unsigned long long)trans_k, (unsigned long long)trans_u);
		for (int c = 0; c < C_N; c++)
			fprintf(plugin_out, "op %s %llu %llu\n", cls_name[c], (unsigned long long)kc[c], (unsigned long long)uc[c]);
		for (size_t i = 0; i < n;) {
			uint64_t execs = 0, insns = 0, pauses = 0, xin = 0;
			uint32_t bytes = 0;
			size_t j = i;
			/* The same address translated twice: sum the instructions. */
			for (; j < n && v[j].vaddr == v[i].vaddr; j++) {
				execs += v[j].execs;
				insns += v[j].execs * v[j].insns;
				pauses += v[j].execs * v[j].cls[C_PAUSE];
				xin += v[j].xin;
				if (v[j].bytes > bytes)
					bytes = v[j].bytes;
			}
			fprintf(plugin_out, "tb %llx %llu %llu %u %llu\n", (unsigned long long)v[i].vaddr,
				(unsigned long long)insns, (unsigned long long)execs, bytes, (unsigned long long)pauses);
			if (xin)
				fprintf(plugin_out, "xp %llx %llu\n", (unsigned long long)v[i].vaddr, (unsigned long long)xin);
			i = j;
		}
		for (int c = 0; c < MAX_VCPUS; c++) {
			if (!pages[c])
				continue;
			for (uint32_t s = 0; s < PG_SLOTS; s++)
				if (pages[c][s].page)
					fprintf(plugin_out, "pg %llx %llu\n", (unsigned long long)(pages[c][s].page - 1),
						(unsigned long long)pages[c][s].n);
		}
		pthread_mutex_lock(&wlock);
		for (unsigned w = 0; w < W_SLOTS; w++) {
			if (!wpaths[w].n)
				continue;
			fprintf(plugin_out, "wp %llu", (unsigned long long)wpaths[w].n);
			for (int i = 0; i < PATH; i++)
				fprintf(plugin_out, " %llx", (unsigned long long)wpaths[w].path[i]);
			fprintf(plugin_out, "\n");
		}
		pthread_mutex_unlock(&wlock);
		fprintf(plugin_out, "end %d\n", windows);
		fflush(plugin_out);
	}
	free(v);
	pthread_mutex_unlock(&lock);
}

/* The class of one x86 instruction, from its bytes (prefixes skipped);
 * C_N: none of them. */
static int classify(const uint8_t *d, size_t n)
{
	size_t i = 0;
	bool lock = false;
	for (; i < n; i++) {
		uint8_t b = d[i];
		if (b == 0xf0)
			lock = true;
		else if (!(b == 0x66 || b == 0x67 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x3e || b == 0x26 ||
			   b == 0x64 || b == 0x65 || b == 0x36 || (b & 0xf0) == 0x40))
			break;
	}
	if (lock)
		return C_LOCK;
	if (i >= n)
		return C_N;
	uint8_t op = d[i], op2 = i + 1 < n ? d[i + 1] : 0, op3 = i + 2 < n ? d[i + 2] : 0;
	if ((op == 0x86 || op == 0x87) && i + 1 < n && (op2 >> 6) != 3)
		return C_XCHG; /* xchg with memory: locked */
	if (op == 0x90 && i > 0 && d[i - 1] == 0xf3)
		return C_PAUSE;
	if (op == 0xf4)
		return C_HLT;
	if (op == 0xfa || op == 0xfb || op == 0x9d)
		return C_IRQFLAG;
	if ((op >= 0xe4 && op <= 0xe7) || (op >= 0xec && op <= 0xef))
		return C_PORT;
	/* Returns and indirect branches: TCG looks their target block up
	 * (a helper call) where a direct branch is chained. */
	if (op == 0xc3 || op == 0xc2)
		return C_RET;
	if (op == 0xff && i + 1 < n && ((op2 >> 3 & 7) == 2 || (op2 >> 3 & 7) == 4))
		return C_IND;
	if (op != 0x0f)
		return C_N;
	if (op2 == 0x31 || (op2 == 0x01 && op3 == 0xf9))
		return C_TSC;
	if (op2 == 0xa2)
		return C_CPUID;
	if (op2 == 0x30 || op2 == 0x32)
		return C_MSR;
	if (op2 == 0xae && (op3 == 0xf0 || op3 == 0xe8 || op3 == 0xf8))
		return C_FENCE;
	if (op2 == 0x22 || (op2 == 0x01 && (op3 >> 3 & 7) == 7 && (op3 >> 6) != 3))
		return C_CR;
	if (op2 == 0xb0 || op2 == 0xb1 || op2 == 0xc0 || op2 == 0xc1 || op2 == 0xc7)
		return C_N; /* cmpxchg/xadd without lock: plain */
	return C_N;
}

void plugin_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	struct rec *r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->vaddr = va;
	r->insns = (uint32_t)n;
	if (n) {
		struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
		r->bytes = (uint32_t)(qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last) - va);
	}
	pthread_mutex_lock(&lock);
	r->next = recs;
	recs = r;
	if (window_open)
		(kernel_addr(va) ? &trans_k : &trans_u)[0]++;
	pthread_mutex_unlock(&lock);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &r->execs, 1);
	if (xpage_on)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_xpage, QEMU_PLUGIN_CB_NO_REGS, r);
	if (watch && kernel_addr(va))
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_watch, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)va);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		int c = classify(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn));
		if (c < C_N && r->cls[c] < 255)
			r->cls[c]++;
		plugin_marker(insn);
		if (mem_on && kernel_addr(va))
			qemu_plugin_register_vcpu_mem_cb(insn, mem_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
							 NULL);
	}
}

bool plugin_arg(const char *arg)
{
	if (!strcmp(arg, "mem=on"))
		mem_on = true;
	else if (!strcmp(arg, "xpage=on"))
		xpage_on = true;
	else if (!strncmp(arg, "watch=", 6))
		watch = strtoull(arg + 6, NULL, 16);
	else
		return false;
	return true;
}

int plugin_init(void)
{
	if (mem_on)
		for (int v = 0; v < MAX_VCPUS; v++) {
			pages[v] = calloc(PG_SLOTS, sizeof(struct pg));
			if (!pages[v])
				return -1;
		}
	return 0;
}
