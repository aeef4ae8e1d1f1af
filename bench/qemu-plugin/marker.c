// SPDX-License-Identifier: GPL-2.0
/*
 * marker start|stop: executes the instruction that opens or closes a
 * counting window of the insncount QEMU plugin (insncount.c). Without the
 * plugin it is a no-op.
 */
#include <stdio.h>
#include <string.h>

#include "qemu-plugin-abi.h"

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "start")) {
		/* nopl 0x30495352(%rax,%rax,1): "RSI0" */
		__asm__ volatile(MARKER_INSN(0x30) ::: "memory");
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "stop")) {
		/* nopl 0x31495352(%rax,%rax,1): "RSI1" */
		__asm__ volatile(MARKER_INSN(0x31) ::: "memory");
		return 0;
	}
	fprintf(stderr, "usage: marker start|stop\n");
	return 2;
}
