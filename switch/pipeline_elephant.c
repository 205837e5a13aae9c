/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control ElephantDetector (p4src/include/elephant.p4; the sketch and
 * filter of p4src/v1model/sketch.p4).
 */
#include "pipeline_internal.h"

#include <string.h>

/* -- ElephantDetector (elephant.p4) -------------------------------------------
 */

/* A row cell's word: the bytes counted in the cell's epoch, and the epoch. */
static uint64_t sketch_cell(uint32_t bytes, uint16_t epoch)
{
	return (uint64_t)epoch << 32 | bytes;
}

static uint32_t cell_bytes(uint64_t cell)
{
	return (uint32_t)cell;
}

static uint16_t cell_epoch(uint64_t cell)
{
	return (uint16_t)(cell >> 32);
}

/* action count_flow (control FlowSketch, v1model/sketch.p4) */
static uint32_t count_flow(struct sw_sketch *sketch, uint32_t wire_bytes,
			   const struct sw_sketch_cells *cells, uint16_t epoch)
{
	uint32_t estimate = UINT32_MAX;

	for (int row = 0; row < 3; row++) {
		uint32_t index = cells->row[row];
		uint64_t cell = __atomic_load_n(&sketch->row[row][index],
						__ATOMIC_RELAXED);
		uint32_t count = cell_bytes(cell);

		/* A counter stamped with an older epoch starts from zero. */
		count = (cell_epoch(cell) == epoch ? count : 0) + wire_bytes;
		__atomic_store_n(&sketch->row[row][index],
				 sketch_cell(count, epoch), __ATOMIC_RELAXED);
		estimate = count < estimate ? count : estimate;
	}
	return estimate;
}

/* action mark_reported (control ReportedFilter, v1model/sketch.p4) */
static bool mark_reported(struct sw_sketch *sketch,
			  const struct sw_sketch_cells *cells, uint16_t epoch)
{
	uint16_t seen0 = __atomic_exchange_n(
		&sketch->bloom_epoch[cells->bloom[0]], epoch, __ATOMIC_RELAXED);
	uint16_t seen1 = __atomic_exchange_n(
		&sketch->bloom_epoch[cells->bloom[1]], epoch, __ATOMIC_RELAXED);

	return seen0 != epoch || seen1 != epoch;
}

/* control ElephantDetector */
void sw_elephant_detector(struct sw_pipeline *pipeline, unsigned int worker,
			  struct metadata *meta,
			  const uint8_t flow_key[SW_KEY_MAX], uint64_t now_ns,
			  uint32_t wire_bytes)
{
	const struct flow *flow = &meta->flow;
	uint64_t now_us = (now_ns - pipeline->start_ns) / 1000;
	struct sw_elephant_digest digest;
	struct sw_sketch_cells cells;
	uint32_t estimate;
	uint16_t epoch;

	meta->elephant_threshold = pipeline->tables.elephant_threshold;
	if (meta->elephant_threshold == 0)
		return;
	/* The top bit is always set so that a never-written cell (stamp 0)
	 * never looks current. */
	epoch = (uint16_t)((now_us >> P4_ELEPHANT_EPOCH_LOG2_US) | 0x8000);
	sw_sketch_cells(flow_key, &cells);
	/* The frame as received, never the length the packet claims. */
	estimate = count_flow(&pipeline->sketch, wire_bytes, &cells, epoch);
	if (estimate < meta->elephant_threshold ||
	    !mark_reported(&pipeline->sketch, &cells, epoch))
		return;
	digest.ip_version = flow->ip_version;
	memcpy(digest.src_addr, flow->src_addr, 16);
	memcpy(digest.dst_addr, flow->dst_addr, 16);
	digest.protocol = flow->protocol;
	digest.src_port = flow->src_port;
	digest.dst_port = flow->dst_port;
	digest.estimated_bytes = estimate;
	if (pipeline->digest_sink == NULL ||
	    !pipeline->digest_sink(pipeline->digest_context, &digest))
		pipeline->internal[worker].digests_lost++;
}
