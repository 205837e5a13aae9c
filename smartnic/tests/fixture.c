/* SPDX-License-Identifier: Apache-2.0 */
#include "fixture.h"

#include <stdlib.h>

#include <string.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

struct rte_mempool *fixture_pool;
struct rte_mempool *fixture_header_pool;

static uint8_t check_buffer[PB_MAX_FRAME];

void fixture_pools(void)
{
	if (fixture_pool != NULL)
		return;
	fixture_pool = pb_pool("test_pool", 32767, 2048);
	fixture_header_pool = pb_pool("test_headers", 32767, 2048);
	if (fixture_pool == NULL || fixture_header_pool == NULL) {
		fprintf(stderr, "cannot create mbuf pools\n");
		abort();
	}
}

void fixture_config(struct fixture *fx)
{
	static unsigned int instance;
	static char names[64][16];

	fixture_pools();
	memset(fx, 0, sizeof(*fx));
	jg_engine_config_init(&fx->config);
	fx->config.header_pool = fixture_header_pool;
	fx->config.max_flows = 1024;
	/* The same flow placement every run: a failure replays. */
	fx->config.hash_seed = 0x6a756d626f676174ull;
	snprintf(names[instance % 64], sizeof(names[0]), "t%u", instance);
	fx->config.name = names[instance % 64];
	instance++;
	fx->now_ns = 1000000;
}

void fixture_start(struct fixture *fx)
{
	fx->engine = jg_engine_create(&fx->config);
	if (fx->engine == NULL) {
		fprintf(stderr, "cannot create engine\n");
		abort();
	}
}

static void collect(struct fixture *fx, struct rte_mbuf **out, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		if (fx->out_count < FIXTURE_MAX_OUT)
			fx->out[fx->out_count++] = out[i];
		else
			rte_pktmbuf_free(out[i]);
	}
}

void fixture_merge(struct fixture *fx, struct rte_mbuf **pkts, uint16_t n)
{
	struct rte_mbuf *out[1024];
	uint16_t count = jg_merge_burst(fx->engine, pkts, n, fx->now_ns, out,
					RTE_DIM(out));

	collect(fx, out, count);
}

void fixture_merge_one(struct fixture *fx, struct rte_mbuf *m)
{
	fixture_merge(fx, &m, 1);
}

void fixture_timer(struct fixture *fx)
{
	struct rte_mbuf *out[1024];
	uint16_t count;

	while ((count = jg_merge_timer(fx->engine, fx->now_ns, out,
				       RTE_DIM(out))) > 0)
		collect(fx, out, count);
}

void fixture_flush(struct fixture *fx)
{
	struct rte_mbuf *out[1024];
	uint16_t count;

	while ((count = jg_merge_flush_all(fx->engine, out, RTE_DIM(out))) > 0)
		collect(fx, out, count);
}

void fixture_drop_outputs(struct fixture *fx)
{
	for (unsigned int i = 0; i < fx->out_count; i++)
		rte_pktmbuf_free(fx->out[i]);
	fx->out_count = 0;
}

uint16_t fixture_split_one(struct fixture *fx, const struct pb_spec *spec,
			   struct rte_mbuf **out, uint16_t cap)
{
	struct pb_spec chained = *spec;
	struct rte_mbuf *in;
	uint16_t consumed = 0, count;

	chained.segment_size = 2048;
	in = pb_build(fixture_pool, &chained);
	count = jg_split_burst(fx->engine, &in, 1, out, cap, &consumed);
	CHECK_EQ(consumed, 1);
	return count;
}

void fixture_finish(struct fixture *fx)
{
	struct jg_stats stats;

	fixture_flush(fx);
	jg_engine_get_stats(fx->engine, &stats);
	CHECK_EQ(stats.merge.packets_in, stats.merge.segments_out +
						 stats.merge.held_now +
						 stats.merge.dropped);
	CHECK_EQ(stats.merge.held_now, 0);
	fixture_drop_outputs(fx);
	jg_engine_destroy(fx->engine);
	fx->engine = NULL;
	/* Every mbuf went back: no leak, no double free. */
	CHECK_EQ(rte_mempool_in_use_count(fixture_pool), 0);
	CHECK_EQ(rte_mempool_in_use_count(fixture_header_pool), 0);
}

struct rte_mbuf *fixture_segment(const struct pb_spec *base, uint32_t offset,
				 uint32_t length)
{
	static uint8_t payload[PB_MAX_FRAME];
	struct pb_spec spec = *base;

	pb_stream_fill(0, offset, payload, length);
	spec.seq = base->seq + offset;
	spec.payload = payload;
	spec.payload_length = length;
	return pb_build(fixture_pool, &spec);
}

void fixture_expect_packet(struct fixture *fx, unsigned int i,
			   uint32_t base_seq, uint32_t payload_length)
{
	struct pb_view view;
	const char *problem;
	uint32_t offset;
	bool same = true;

	if (i >= fx->out_count) {
		CHECK(i < fx->out_count);
		return;
	}
	problem =
		pb_check(fx->out[i], check_buffer, sizeof(check_buffer), &view);
	if (problem != NULL)
		fprintf(stderr, "  packet %u: %s\n", i, problem);
	CHECK(problem == NULL);
	if (problem != NULL)
		return;
	CHECK_EQ(view.payload_length, payload_length);
	offset = view.seq - base_seq;
	for (uint32_t k = 0; k < view.payload_length; k++)
		if (view.payload[k] != pb_stream_byte(0, offset + k))
			same = false;
	CHECK(same);
}

void fixture_expect_lengths(struct fixture *fx, uint32_t base_seq,
			    const uint32_t *lengths, unsigned int count)
{
	CHECK_EQ(fx->out_count, count);
	for (unsigned int i = 0; i < count && i < fx->out_count; i++)
		fixture_expect_packet(fx, i, base_seq, lengths[i]);
}

void fixture_begin(struct fixture *fx, struct pb_spec *base, int version)
{
	fixture_config(fx);
	fixture_start(fx);
	pb_defaults(base, version);
}

void fixture_merge_expect(struct fixture *fx, struct rte_mbuf **pkts,
			  uint16_t n, uint32_t base_seq,
			  const uint32_t *lengths, unsigned int count)
{
	fixture_merge(fx, pkts, n);
	fixture_flush(fx);
	fixture_expect_lengths(fx, base_seq, lengths, count);
	fixture_finish(fx);
}
