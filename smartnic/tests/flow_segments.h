/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Driving one flow's segments through a fixture: what test_merge_flows.c
 * and test_flow_table.c share.
 */
#ifndef JUMBOGATE_TEST_FLOW_SEGMENTS_H
#define JUMBOGATE_TEST_FLOW_SEGMENTS_H

#include "fixture.h"

#define PAYLOAD 1000u

static inline void id_for(struct pb_spec *spec, unsigned int index)
{
	spec->ip_id = (uint16_t)(100 + index);
}

/* Drive a fast flow (one segment every 100 ns) so it qualifies for
 * delayed merging, across bursts of one segment. */
static inline void fast_flow(struct fixture *fx, struct pb_spec *base,
			     unsigned int first, unsigned int count,
			     uint32_t interval_ns)
{
	for (unsigned int i = first; i < first + count; i++) {
		id_for(base, i);
		fixture_merge_one(fx,
				  fixture_segment(base, i * PAYLOAD, PAYLOAD));
		fx->now_ns += interval_ns;
	}
}

#endif /* JUMBOGATE_TEST_FLOW_SEGMENTS_H */
