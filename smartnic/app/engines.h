/* SPDX-License-Identifier: Apache-2.0 */
/* Creating the engines of the workers, at start and on reconfiguration. */
#ifndef JUMBOGATE_NIC_ENGINES_H
#define JUMBOGATE_NIC_ENGINES_H

#include <jumbogate/engine.h>

#include "nic.h"

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
