/* SPDX-License-Identifier: Apache-2.0 */
#include "engines.h"

#include <stdatomic.h>
#include <stdio.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>

struct jg_engine *nic_engine_create(const struct nic *nic,
				    const struct jg_engine_config *config,
				    unsigned int worker, unsigned int port)
{
	/* Engines name DPDK objects, which must be unique for the life of
	 * the process, so every engine ever built gets its own number. */
	static atomic_uint generation;
	struct jg_engine_config local = *config;
	char name[32];
	unsigned int share;

	snprintf(name, sizeof(name), "jg%u_w%u_p%u",
		 atomic_fetch_add(&generation, 1), worker, port);
	local.name = name;
	local.header_pool = nic->header_pool;
	local.socket_id = rte_eth_dev_socket_id(nic->ports[port].port_id);
	/* Held segments keep their receive buffers; leave half of each
	 * port's pool to the receive rings so that holding never starves
	 * reception. */
	share = nic->options->mbufs_per_port / 2 / nic->worker_count;
	if (local.max_held_segments > share)
		local.max_held_segments = share;
	return jg_engine_create(&local);
}
