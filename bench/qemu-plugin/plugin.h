/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The part rsiw's QEMU plugins (insncount.c, stamp.c) share, in plugin.c:
 * the ABI version, qemu_plugin_install (out=FILE and the plugin's own
 * arguments), the output file, closed at exit, and the detection of the
 * window markers. Each plugin defines the hooks below.
 */
#ifndef RSIW_QEMU_PLUGIN_H
#define RSIW_QEMU_PLUGIN_H

#include <stdbool.h>
#include <stdio.h>

#include "qemu-plugin-abi.h"

/* The plugin's name, for its messages. */
extern const char plugin_name[];

/* plugin_arg: an argument other than out=; true if the plugin takes it. */
bool plugin_arg(const char *arg);

/* plugin_init: once the arguments are read, before out= is opened: 0, or
 * -1 when the plugin cannot run (having said why on stderr). */
int plugin_init(void);

/* plugin_tb_trans: the plugin's translation callback. */
void plugin_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

/* plugin_window_start, plugin_window_end: a vCPU executed the marker that
 * opens or closes a window (bench/qemu-plugin/marker start, stop). */
void plugin_window_start(void);
void plugin_window_end(void);

/* out=FILE, open from the install to QEMU's exit. */
extern FILE *plugin_out;

/* plugin_marker INSN: when INSN is a window marker, have its execution
 * call plugin_window_start or plugin_window_end. Called by each plugin's
 * plugin_tb_trans for each instruction. */
void plugin_marker(struct qemu_plugin_insn *insn);

#endif
