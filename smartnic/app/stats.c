/* SPDX-License-Identifier: Apache-2.0 */
#include "stats.h"

#include <math.h>
#include <string.h>

#include <rte_common.h>

/* The engine's statistics blocks consist of uint64_t counters only, which
 * lets them be summed as arrays; the asserts catch a future field of
 * another type. */
_Static_assert(sizeof(struct jg_merge_stats) % sizeof(uint64_t) == 0,
	       "jg_merge_stats holds only uint64_t counters");
_Static_assert(sizeof(struct jg_split_stats) % sizeof(uint64_t) == 0,
	       "jg_split_stats holds only uint64_t counters");
_Static_assert(sizeof(struct jg_caravan_stats) % sizeof(uint64_t) == 0,
	       "jg_caravan_stats holds only uint64_t counters");

static void add_counters(void *sum, const void *add, size_t size)
{
	uint64_t *to = sum;
	const uint64_t *from = add;

	for (size_t i = 0; i < size / sizeof(uint64_t); i++)
		to[i] += from[i];
}

void nic_stats_add(struct jg_stats *sum, const struct jg_stats *add)
{
	add_counters(&sum->merge, &add->merge, sizeof(sum->merge));
	add_counters(&sum->split, &add->split, sizeof(sum->split));
	add_counters(&sum->caravan, &add->caravan, sizeof(sum->caravan));
	add_counters(sum->drops, add->drops, sizeof(sum->drops));
	sum->flows_now += add->flows_now;
	sum->flow_capacity += add->flow_capacity;
	sum->flow_entry_bytes = add->flow_entry_bytes;
	sum->flow_state_bytes = add->flow_state_bytes;
	sum->memory_bytes += add->memory_bytes;
	sum->merge_delay_max_ns =
		RTE_MAX(sum->merge_delay_max_ns, add->merge_delay_max_ns);
}

void nic_totals_compute(struct nic_totals *totals,
			const struct nic_worker_snapshot *snapshots,
			unsigned int count)
{
	const struct jg_merge_stats *merge = &totals->engine.merge;
	const struct jg_split_stats *split = &totals->engine.split;
	const struct jg_caravan_stats *caravan = &totals->engine.caravan;

	memset(totals, 0, sizeof(*totals));
	for (unsigned int w = 0; w < count; w++) {
		add_counters(&totals->counters, &snapshots[w].counters,
			     sizeof(totals->counters));
		nic_stats_add(&totals->engine, &snapshots[w].engine);
	}
	totals->held = merge->held_now + merge->ready_now +
		       totals->counters.caravan_held_now;
	for (unsigned int r = 0; r < JG_DROP_REASON_COUNT; r++)
		totals->dropped += totals->engine.drops[r];
	for (unsigned int r = 0; r < NIC_APP_DROP_REASON_COUNT; r++)
		totals->dropped += totals->counters.drops[r];
	/* A merged packet of n inputs absorbed n - 1 of them. */
	totals->segments_merged = merge->segments_out -
				  (merge->packets_out - merge->merged_packets);
	totals->absorbed = merge->segments_out - merge->packets_out +
			   caravan->datagrams_packed -
			   caravan->caravans_packed +
			   totals->counters.pmtu_consumed;
	totals->created = split->segments_out - split->packets_segmented +
			  caravan->datagrams_unpacked -
			  caravan->caravans_unpacked +
			  totals->counters.pmtu_created;
	totals->conversion_yield = jg_stats_conversion_yield(&totals->engine);
}

double nic_delay_bucket_upper_us(unsigned int bucket)
{
	if (bucket + 1 >= JG_DELAY_HISTOGRAM_BUCKETS)
		return INFINITY;
	return ldexp(1.0, (int)bucket);
}
