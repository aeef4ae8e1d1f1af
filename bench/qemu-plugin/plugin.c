// SPDX-License-Identifier: GPL-2.0
/*
 * What insncount.c and stamp.c share (plugin.h): built into each of
 * insncount.so and stamp.so.
 */
#include <stdint.h>
#include <string.h>

#include "plugin.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

FILE *plugin_out;

static const uint8_t marker_magic[] = { MARKER_PREFIX };

static void marker(unsigned int vcpu, void *u)
{
	(void)vcpu;
	if ((uintptr_t)u == '0')
		plugin_window_start();
	else
		plugin_window_end();
}

void plugin_marker(struct qemu_plugin_insn *insn)
{
	const uint8_t *d;

	if (qemu_plugin_insn_size(insn) != sizeof(marker_magic) + 1)
		return;
	d = qemu_plugin_insn_data(insn);
	if (!memcmp(d, marker_magic, sizeof(marker_magic)) && (d[7] == '0' || d[7] == '1'))
		qemu_plugin_register_vcpu_insn_exec_cb(insn, marker, QEMU_PLUGIN_CB_NO_REGS,
						       (void *)(uintptr_t)d[7]);
}

static void at_exit(qemu_plugin_id_t id, void *u)
{
	(void)id;
	(void)u;
	if (plugin_out)
		fclose(plugin_out);
	plugin_out = NULL;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
								int argc, char **argv)
{
	(void)info;
	const char *path = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			path = argv[i] + 4;
		} else if (!plugin_arg(argv[i])) {
			fprintf(stderr, "%s: bad argument %s\n", plugin_name, argv[i]);
			return -1;
		}
	}
	if (!path) {
		fprintf(stderr, "%s: out=FILE is required\n", plugin_name);
		return -1;
	}
	if (plugin_init())
		return -1;
	plugin_out = fopen(path, "w");
	if (!plugin_out) {
		perror(path);
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, plugin_tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
