/* SPDX-License-Identifier: Apache-2.0 */
/* The switch's ports and the pools they receive into (ports.c). */
#ifndef JUMBOGATE_SWITCH_PORTS_H
#define JUMBOGATE_SWITCH_PORTS_H

#include <stdbool.h>

#include "options.h"
#include "switch.h"

/* Makes the receive pools (one per socket and buffer size, sized to what
 * the queues can keep, or --mbufs) and sets up and starts every port.
 * Prints why and returns false when a pool or a port cannot be made. */
bool sw_ports_start(struct sw_switch *sw, const struct options *options);

#endif /* JUMBOGATE_SWITCH_PORTS_H */
