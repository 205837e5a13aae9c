/* SPDX-License-Identifier: Apache-2.0 */
/* Creating the engines of the workers, at start and on reconfiguration. */
#ifndef JUMBOGATE_NIC_ENGINES_H
#define JUMBOGATE_NIC_ENGINES_H

#include <jumbogate/engine.h>

#include "nic.h"

/* Buffers of a port's pool the rings, caches and bursts of every worker
 * may take (jg_ports_pool_reserved), for the port that takes the most. */
uint32_t nic_pool_reserved(const struct nic *nic);

/* Buffers of each port's pool one worker may hold in merge runs: what
 * nic_pool_reserved leaves, shared evenly. 0 when the pool is too small
 * to hold anything. */
uint32_t nic_held_share(const struct nic *nic);

/* The smallest share that lets merging work at all: a burst's worth of
 * segments per flow for a few flows. */
#define NIC_MIN_HELD_SHARE 256u

/*
 * An engine for (worker, port) built from config plus what the program
 * decides itself: the header pool, a unique name, the NUMA socket, and a
 * cap on held segments that leaves receive buffers for the port.
 * Returns NULL with rte_errno set.
 */
struct jg_engine *nic_engine_create(const struct nic *nic,
				    const struct jg_engine_config *config,
				    unsigned int worker, unsigned int port);

#endif /* JUMBOGATE_NIC_ENGINES_H */
