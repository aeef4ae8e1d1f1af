/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * rsiw's user verbs ABI: what the kernel module and its rdma-core
 * provider (tools/provider) agree on.
 */
#ifndef RSIW_ABI_H
#define RSIW_ABI_H

/*
 * The uverbs driver id rsiw registers ("rs"). Out of tree, rsiw has no
 * RDMA_DRIVER_* value of its own; libibverbs binds a device to the
 * provider whose match table holds its id, and the kernel refuses any
 * uverbs ioctl whose header carries another.
 */
#define RSIW_DRIVER_ID 0x7273

/* The uverbs ABI version (the device's abi_version; the provider accepts this one). */
#define RSIW_ABI_VERSION 1

#endif /* RSIW_ABI_H */
