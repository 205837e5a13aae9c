/* SPDX-License-Identifier: Apache-2.0 */
#include "engines.h"
#include "pathmtu.h"
#include "port.h"

#include <stdatomic.h>
#include <stdio.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>

uint32_t nic_pool_reserved(const struct nic *nic)
{
	uint16_t port_ids[NIC_MAX_PORTS];

	/* Every port's pool has --mbufs buffers, and a port's buffers may
	 * leave by any port (--return-port). */
	for (unsigned int p = 0; p < nic->port_count; p++)
		port_ids[p] = nic->ports[p].port_id;
	return jg_ports_pool_reserved(port_ids, nic->port_count,
				      (uint16_t)nic->queues.count,
				      nic->options->burst);
}

uint32_t nic_held_share(const struct nic *nic)
{
	uint32_t reserved = nic_pool_reserved(nic);

	if (nic->options->mbufs_per_port <= reserved)
		return 0;
	return (nic->options->mbufs_per_port - reserved) / nic->worker_count;
}

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
	/* Every pool of this program has the private area (ports.c, main.c). */
	local.run_meta_in_priv_area = true;
	if (nic->pathmtu != NULL) {
		local.learned_path_mtu = nic_pathmtu_learned;
		local.learned_path_mtu_context = nic->pathmtu;
	}
	/* What this engine builds leaves through its port's transmit port. */
	local.checksum_mode =
		jg_port_tx_checksum_offload(nic->ports[port].tx_port_id)
			? JG_CHECKSUM_OFFLOAD
			: JG_CHECKSUM_SOFTWARE;
	/* Held segments keep their receive buffers; what rings and caches
	 * may take is left to them, so that holding never starves
	 * reception (main checked that something is left). */
	share = nic_held_share(nic);
	if (local.max_held_segments > share)
		local.max_held_segments = share;
	return jg_engine_create(&local);
}
