/* SPDX-License-Identifier: Apache-2.0 */
/*
 * p4src/include/counters.p4: IngressCounters, and counter access for the
 * P4Runtime server.
 */
#include "pipeline_internal.h"

#include <string.h>

/* -- counters (counters.p4)
 * ---------------------------------------------------- */

void sw_count(struct sw_packets_bytes *cell, uint32_t bytes)
{
	/* Only the owning worker writes; readers load without a lock. */
	__atomic_store_n(&cell->packets, cell->packets + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&cell->bytes, cell->bytes + bytes, __ATOMIC_RELAXED);
}

/* control IngressCounters (the first pass) */
void sw_ingress_counters(struct sw_counters *counters, uint16_t ingress_port,
			 const struct metadata *meta, uint32_t bytes)
{
	sw_count(&counters->port_rx[ingress_port % P4_PORT_COUNTER_SIZE],
		 bytes);
	if (meta->drop_reason != P4_DROP_NONE)
		sw_count(&counters->drop_reasons[meta->drop_reason], bytes);
	else if (meta->port_role == P4_PORT_ROLE_NIC)
		sw_count(&counters->paths[P4_PATH_NIC_RETURN], bytes);
	else if (meta->forward_on_outer)
		sw_count(&counters->paths[P4_PATH_DEPTH_FORWARDED], bytes);
	else if (meta->steer_reason != P4_STEER_NONE)
		sw_count(&counters->paths[P4_PATH_MERGE], bytes);
	else
		sw_count(&counters->paths[P4_PATH_BYPASS], bytes);
}

/* -- counter access for the server
 * ---------------------------------------------------- */

static struct sw_packets_bytes *counter_cell(struct sw_counters *counters,
					     enum sw_counter_id counter,
					     uint32_t index)
{
	switch (counter) {
	case SW_COUNTER_PORT_RX:
		return &counters->port_rx[index];
	case SW_COUNTER_PORT_TX:
		return &counters->port_tx[index];
	case SW_COUNTER_DROP_REASONS:
		return &counters->drop_reasons[index];
	case SW_COUNTER_PATHS:
		return &counters->paths[index];
	case SW_COUNTER_ICMP_SIGNALS:
	default:
		return &counters->icmp_signals[index];
	}
}

uint32_t sw_counter_size(enum sw_counter_id counter)
{
	switch (counter) {
	case SW_COUNTER_PORT_RX:
	case SW_COUNTER_PORT_TX:
		return P4_PORT_COUNTER_SIZE;
	case SW_COUNTER_DROP_REASONS:
		return P4_DROP_REASON_COUNTER_SIZE;
	case SW_COUNTER_PATHS:
		return P4_PATH_COUNTER_SIZE;
	case SW_COUNTER_ICMP_SIGNALS:
		return P4_ICMP_COUNTER_SIZE;
	default:
		return 0;
	}
}

static struct sw_packets_bytes worker_sum(const struct sw_pipeline *pipeline,
					  unsigned int worker_count,
					  enum sw_counter_id counter,
					  uint32_t index)
{
	struct sw_packets_bytes sum = {0, 0};

	for (unsigned int w = 0; w < worker_count; w++) {
		struct sw_packets_bytes *cell = counter_cell(
			(struct sw_counters *)&pipeline->counters[w], counter,
			index);
		sum.packets +=
			__atomic_load_n(&cell->packets, __ATOMIC_RELAXED);
		sum.bytes += __atomic_load_n(&cell->bytes, __ATOMIC_RELAXED);
	}
	return sum;
}

struct sw_packets_bytes sw_counter_read(const struct sw_pipeline *pipeline,
					unsigned int worker_count,
					enum sw_counter_id counter,
					uint32_t index)
{
	struct sw_packets_bytes sum =
		worker_sum(pipeline, worker_count, counter, index);
	const struct sw_packets_bytes *base = counter_cell(
		(struct sw_counters *)&pipeline->counter_base, counter, index);

	sum.packets += base->packets;
	sum.bytes += base->bytes;
	return sum;
}

void sw_counter_write(struct sw_pipeline *pipeline, unsigned int worker_count,
		      enum sw_counter_id counter, uint32_t index,
		      struct sw_packets_bytes value)
{
	struct sw_packets_bytes sum =
		worker_sum(pipeline, worker_count, counter, index);
	struct sw_packets_bytes *base =
		counter_cell(&pipeline->counter_base, counter, index);

	/* Unsigned wrap-around makes base + sum equal the written value. */
	base->packets = value.packets - sum.packets;
	base->bytes = value.bytes - sum.bytes;
}
