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
 * tools/qemu-plugin/marker (any vCPU, any mode):
 *   nopl 0x30495352(%rax,%rax,1)  "RSI0": start a window (zero the counts)
 *   nopl 0x31495352(%rax,%rax,1)  "RSI1": end it (append the counts to out=)
 * Each window appends to the output file:
 *   window N
 *   tb VADDR INSNS EXECS BYTES  one line per block address executed:
 *                             instructions run, entries, its length
 *   pg PAGE ACCESSES          kernel data pages (mem=on only)
 *   end N
 * tools/qemu-plugin/insncount.py turns two windows and the guest's
 * /proc/kallsyms into instructions per message by module and symbol.
 *
 *   qemu-system-x86_64 ... -plugin tools/qemu-plugin/insncount.so,out=FILE[,mem=on]
 *
 * Built against QEMU's plugin ABI (QEMU_PLUGIN_VERSION 1, QEMU 7.2 and
 * later keep it): only the calls below, declared here as qemu-plugin.h
 * declares them, so no QEMU source tree is needed. The counts are plain
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

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef uint32_t qemu_plugin_meminfo_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
					  void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
					      uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
				      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* One translated block: its address, size and execution count. A block
 * translated again (after a flush) gets a new record; the dump sums by
 * address. */
struct rec {
	uint64_t vaddr;
	uint64_t execs;
	uint32_t insns;
	uint32_t bytes;
	struct rec *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec *recs;
static FILE *out;
static bool mem_on;
static volatile int window_open;
static int windows;

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
	uint32_t insns;
	uint32_t bytes;
};

static int cmp_snap(const void *a, const void *b)
{
	const struct snap *x = a, *y = b;
	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static void window_start(void)
{
	pthread_mutex_lock(&lock);
	for (struct rec *r = recs; r; r = r->next)
		r->execs = 0;
	for (int v = 0; v < MAX_VCPUS; v++)
		if (pages[v])
			memset(pages[v], 0, sizeof(struct pg) * PG_SLOTS);
	window_open = 1;
	pthread_mutex_unlock(&lock);
}

static void window_end(void)
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
			v[n++] = (struct snap){ r->vaddr, e, r->insns, r->bytes };
	}
	windows++;
	if (v && out) {
		qsort(v, n, sizeof(*v), cmp_snap);
		fprintf(out, "window %d\n", windows);
		for (size_t i = 0; i < n;) {
			uint64_t execs = 0, insns = 0;
			uint32_t bytes = 0;
			size_t j = i;
			/* The same address translated twice: sum the instructions. */
			for (; j < n && v[j].vaddr == v[i].vaddr; j++) {
				execs += v[j].execs;
				insns += v[j].execs * v[j].insns;
				if (v[j].bytes > bytes)
					bytes = v[j].bytes;
			}
			fprintf(out, "tb %llx %llu %llu %u\n", (unsigned long long)v[i].vaddr,
				(unsigned long long)insns, (unsigned long long)execs, bytes);
			i = j;
		}
		for (int c = 0; c < MAX_VCPUS; c++) {
			if (!pages[c])
				continue;
			for (uint32_t s = 0; s < PG_SLOTS; s++)
				if (pages[c][s].page)
					fprintf(out, "pg %llx %llu\n", (unsigned long long)(pages[c][s].page - 1),
						(unsigned long long)pages[c][s].n);
		}
		fprintf(out, "end %d\n", windows);
		fflush(out);
	}
	free(v);
	pthread_mutex_unlock(&lock);
}

static void marker(unsigned int vcpu, void *u)
{
	(void)vcpu;
	if ((uintptr_t)u == '0')
		window_start();
	else
		window_end();
}

static const uint8_t magic[7] = { 0x0f, 0x1f, 0x84, 0x00, 'R', 'S', 'I' };

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
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
	pthread_mutex_unlock(&lock);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &r->execs, 1);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		if (qemu_plugin_insn_size(insn) == 8) {
			const uint8_t *d = qemu_plugin_insn_data(insn);
			if (!memcmp(d, magic, sizeof(magic)) && (d[7] == '0' || d[7] == '1'))
				qemu_plugin_register_vcpu_insn_exec_cb(insn, marker, QEMU_PLUGIN_CB_NO_REGS,
								       (void *)(uintptr_t)d[7]);
		}
		if (mem_on && kernel_addr(va))
			qemu_plugin_register_vcpu_mem_cb(insn, mem_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
							 NULL);
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
		else if (!strcmp(argv[i], "mem=on"))
			mem_on = true;
		else {
			fprintf(stderr, "insncount: unknown argument %s\n", argv[i]);
			return -1;
		}
	}
	if (!path) {
		fprintf(stderr, "insncount: out=FILE is required\n");
		return -1;
	}
	out = fopen(path, "w");
	if (!out) {
		perror(path);
		return -1;
	}
	if (mem_on)
		for (int v = 0; v < MAX_VCPUS; v++) {
			pages[v] = calloc(PG_SLOTS, sizeof(struct pg));
			if (!pages[v])
				return -1;
		}
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
