/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The program's own counters and the totals over all workers; plain data,
 * shared by the C data path and the C++ control glue.
 */
#ifndef JUMBOGATE_NIC_COUNTERS_H
#define JUMBOGATE_NIC_COUNTERS_H

#include <stdint.h>

#include <jumbogate/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reasons the program itself (not the engine) drops a packet. */
#define NIC_APP_DROP_REASONS(X)                                                \
	X(NIC_DROP_TX_FAILED, "tx-failed")                                     \
	X(NIC_DROP_OVER_PORT_MTU, "over-port-mtu")

enum nic_app_drop_reason {
#define NIC_DROP_ENUM(name, text) name,
	NIC_APP_DROP_REASONS(NIC_DROP_ENUM)
#undef NIC_DROP_ENUM
		NIC_APP_DROP_REASON_COUNT
};

/* Counters the program keeps next to the engine's, one set per worker. */
struct nic_counters {
	uint64_t rx_packets;
	uint64_t rx_bursts; /* polls that returned packets */
	uint64_t rx_bytes;
	uint64_t tx_packets;
	uint64_t tx_bytes;
	/* Packets that needed no engine: neither inbound nor outbound,
	 * or not IP. */
	uint64_t bypassed;
	uint64_t drops[NIC_APP_DROP_REASON_COUNT];
	/* Idle behaviour, to show that an idle worker sleeps. */
	uint64_t polls;
	uint64_t idle_sleeps;
	uint64_t commands;
	/* Commands run after their waiter gave up (--command-timeout-ms). */
	uint64_t commands_abandoned;
	/* Path MTU discovery: probes and replies this worker received and
	 * took (absorbed), and those it built and sent (created). */
	uint64_t pmtu_consumed;
	uint64_t pmtu_created;
	/* Caravan holds (worker.c): datagrams waiting in them now, and how
	 * often a full hold was packed before its deadline. */
	uint64_t caravan_held_now;
	uint64_t caravan_hold_full_packs;
	/* How long each datagram waited in a hold, from its receive burst to
	 * the packing, in the merge-delay histogram's buckets
	 * (jg_delay_bucket), and their sum. */
	uint64_t caravan_hold_delay_us[JG_DELAY_HISTOGRAM_BUCKETS];
	uint64_t caravan_hold_delay_sum_ns;
};

/*
 * Totals over all workers. Every packet object the program ever had is,
 * at any moment, out (sent), held (inside an engine) or dropped (by a
 * named reason), once two transformations are allowed for: merging and
 * caravan packing absorb several inputs into one output, splitting and
 * unpacking create several outputs from one input; path MTU discovery
 * absorbs the probes and replies it takes and creates those it sends:
 *
 *     in + created == out + held + dropped + absorbed
 */
struct nic_totals {
	struct nic_counters counters;
	struct jg_stats engine;
	uint64_t held;
	uint64_t dropped;
	uint64_t absorbed;
	uint64_t created;
	/* Inputs that went into merged packets. */
	uint64_t segments_merged;
	double conversion_yield;
};

const char *nic_app_drop_reason_name(enum nic_app_drop_reason reason);

/* Upper bound in microseconds of a merge-delay histogram bucket (bucket 0
 * is below 1 us, bucket i below 2^i us); the last is unbounded. */
double nic_delay_bucket_upper_us(unsigned int bucket);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_NIC_COUNTERS_H */
