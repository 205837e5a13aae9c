/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Summing the workers' snapshots into totals.
 */
#ifndef JUMBOGATE_NIC_STATS_H
#define JUMBOGATE_NIC_STATS_H

#include <stdint.h>

#include <jumbogate/engine.h>

#include "counters.h"
#include "nic.h"

/* Add the counters of one engine to a sum (gauges add up as well). */
void nic_stats_add(struct jg_stats *sum, const struct jg_stats *add);

void nic_totals_compute(struct nic_totals *totals,
			const struct nic_worker_snapshot *snapshots,
			unsigned int count);

#endif /* JUMBOGATE_NIC_STATS_H */
