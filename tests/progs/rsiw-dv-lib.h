/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The rsiw provider libibverbs has loaded, opened for dlsym() of its
 * direct verbs (providers/rsiw/rsiwdv.h): whatever its private ABI
 * (librsiw-rdmav34.so out of tree, librsiw-rdmav59.so, ...) and wherever
 * it came from (RDMAV_DRIVERS, the system's provider directory, a private
 * rdma-core's prefix). NULL if no rsiw provider is loaded: open a device
 * first.
 */
#ifndef RSIW_DV_LIB_H
#define RSIW_DV_LIB_H

#include <dlfcn.h>
#include <link.h>
#include <string.h>

static int rsiw_dv_lib_match(struct dl_phdr_info *info, size_t size, void *lib)
{
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "librsiw-rdmav", 13) && strncmp(base, "librsiw.so", 10))
		return 0;
	*(void **)lib = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	return *(void **)lib != NULL;
}

static inline void *rsiw_dv_lib(void)
{
	void *lib = NULL;

	dl_iterate_phdr(rsiw_dv_lib_match, &lib);
	return lib;
}

#endif /* RSIW_DV_LIB_H */
