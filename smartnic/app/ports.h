/* SPDX-License-Identifier: Apache-2.0 */
/* Finding and starting the ports the program serves. */
#ifndef JUMBOGATE_NIC_PORTS_H
#define JUMBOGATE_NIC_PORTS_H

#include <stdbool.h>

#include "nic.h"

/* Map --port and --return-port names to probed ports; prints what is
 * wrong and returns false on a missing or repeated port. */
bool nic_ports_resolve(struct nic *nic);

/* Configure one queue pair per worker on every port and start them. */
bool nic_ports_start(struct nic *nic);

void nic_ports_stop(struct nic *nic);

#endif /* JUMBOGATE_NIC_PORTS_H */
