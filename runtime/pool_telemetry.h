/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DPDK telemetry both programs serve (dpdk-telemetry.py, or the socket in
 * /var/run/dpdk/PREFIX/dpdk_telemetry.v2).
 */
#ifndef JUMBOGATE_RUNTIME_POOL_TELEMETRY_H
#define JUMBOGATE_RUNTIME_POOL_TELEMETRY_H

#include <stdint.h>

#include <rte_telemetry.h>

/* Registers `path` (e.g. /jumbogate/buffers): for every buffer pool of the
 * process, how many of its buffers are outside it (in rings, caches, held
 * or in flight). An idle program is back to its start: a leak shows. */
void jg_telemetry_register_buffers(const char *path, const char *program);

/* rte_telemetry_register_cmd, with a line on stderr when DPDK refuses. */
void jg_telemetry_register(const char *program, const char *path,
			   telemetry_cb callback, const char *help);

static inline void jg_tel_u64(struct rte_tel_data *d, const char *name,
			      uint64_t value)
{
	rte_tel_data_add_dict_u64(d, name, value);
}

#endif /* JUMBOGATE_RUNTIME_POOL_TELEMETRY_H */
