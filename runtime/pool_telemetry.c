/* SPDX-License-Identifier: Apache-2.0 */
#include "pool_telemetry.h"

#include <stdio.h>

#include <rte_mempool.h>

static void add_pool(struct rte_mempool *pool, void *arg)
{
	jg_tel_u64(arg, pool->name, rte_mempool_in_use_count(pool));
}

static int buffers_command(const char *command, const char *params,
			   struct rte_tel_data *d)
{
	(void)command;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_mempool_walk(add_pool, d);
	return 0;
}

void jg_telemetry_register_buffers(const char *path, const char *program)
{
	static char help[128];

	snprintf(help, sizeof(help),
		 "%s: buffers of each pool in use (outside the pool)", program);
	jg_telemetry_register(program, path, buffers_command, help);
}

void jg_telemetry_register(const char *program, const char *path,
			   telemetry_cb callback, const char *help)
{
	/* DPDK refuses names with characters other than letters, digits, '_'
	 * and '/', and then answers the command with null: say so. */
	if (rte_telemetry_register_cmd(path, callback, help) < 0)
		fprintf(stderr, "%s: telemetry command %s not registered\n",
			program, path);
}
