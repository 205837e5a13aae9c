/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Property: whatever the interleaving, loss, duplication and reordering of
 * many flows, every byte that went in comes out exactly once per copy that
 * went in, at its right place in its own flow, in valid packets no larger
 * than the internal MTU, none held past the delay bound when timers run
 * on time. Random configurations and seeds; the seed of a failing round
 * is printed so it can be replayed.
 */
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "fixture.h"

#define FLOWS		  24
#define SEGMENTS_PER_FLOW 60
#define MAX_EVENTS	  (FLOWS * SEGMENTS_PER_FLOW * 2)
#define STREAM_BYTES	  (SEGMENTS_PER_FLOW * 1448)

struct event {
	uint16_t flow;
	uint32_t offset;
	uint32_t length;
	uint16_t ip_id;
};

static uint64_t rng_state;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static uint32_t below(uint32_t n)
{
	return rng() % n;
}

/* Bytes of each flow: how many copies went in / came out. */
static uint8_t copies_in[FLOWS][STREAM_BYTES];
static uint8_t copies_out[FLOWS][STREAM_BYTES];
static struct event events[MAX_EVENTS];
static uint8_t frame[PB_MAX_FRAME];

static void flow_spec(unsigned int flow, struct pb_spec *spec)
{
	pb_defaults(spec, flow % 3 == 2 ? 6 : 4);
	spec->src_port = (uint16_t)(10000 + flow);
	spec->seq = 0xffff0000u + flow * 7919u * 13; /* some wrap */
	spec->dont_fragment = flow % 4 != 1;
}

static struct event per_flow[FLOWS][SEGMENTS_PER_FLOW * 2];
static uint32_t flow_mss[FLOWS], flow_bytes[FLOWS];

static unsigned int make_events(void)
{
	unsigned int count = 0, per_flow_count[FLOWS], taken[FLOWS] = {0};

	for (unsigned int flow = 0; flow < FLOWS; flow++) {
		uint32_t mss = 536 + below(913); /* up to 1448 */
		uint32_t offset = 0;

		per_flow_count[flow] = 0;
		for (unsigned int s = 0; s < SEGMENTS_PER_FLOW; s++) {
			uint32_t length = s + 1 == SEGMENTS_PER_FLOW
						  ? 1 + below(mss)
						  : mss;
			unsigned int copies = 1;
			uint32_t roll = below(100);

			if (roll < 4)
				copies = 0; /* lost */
			else if (roll < 8)
				copies = 2; /* duplicated */
			for (unsigned int c = 0; c < copies; c++)
				per_flow[flow][per_flow_count[flow]++] =
					(struct event){
						.flow = (uint16_t)flow,
						.offset = offset,
						.length = length,
						.ip_id = (uint16_t)(s + 1),
					};
			offset += length;
		}
		flow_mss[flow] = mss;
		flow_bytes[flow] = offset;
	}
	/* Interleave: each step a random flow with events left sends its
	 * next one; a few flows are busier than others. */
	for (;;) {
		unsigned int candidates[FLOWS], n = 0;

		for (unsigned int f = 0; f < FLOWS; f++)
			if (taken[f] < per_flow_count[f])
				candidates[n++] = f;
		if (n == 0)
			break;
		unsigned int f = candidates[below(n) % (1 + below(n))];

		events[count++] = per_flow[f][taken[f]++];
	}
	/* Reorder: swap a few neighbours, as networks do. */
	for (unsigned int i = 0; i + 1 < count; i++)
		if (below(100) < 3) {
			struct event t = events[i];

			events[i] = events[i + 1];
			events[i + 1] = t;
		}
	return count;
}

static void verify_outputs(struct fixture *fx)
{
	for (unsigned int k = 0; k < fx->out_count; k++) {
		struct pb_view v;
		const char *problem =
			pb_check(fx->out[k], frame, sizeof(frame), &v);
		unsigned int flow;
		uint32_t offset;
		struct pb_spec spec;
		bool same = true;

		CHECK(problem == NULL);
		if (problem != NULL)
			continue;
		flow = v.src_port - 10000u;
		CHECK(flow < FLOWS);
		if (flow >= FLOWS)
			continue;
		flow_spec(flow, &spec);
		offset = v.seq - spec.seq;
		/* Only a whole input segment may exceed the internal MTU
		 * (IPv6 segments of up to 1448 bytes under a 1500 MTU). */
		CHECK(v.ip_length <= fx->config.internal_mtu ||
		      (offset % flow_mss[flow] == 0 &&
		       (v.payload_length == flow_mss[flow] ||
			offset + v.payload_length == flow_bytes[flow])));
		CHECK(offset + v.payload_length <= STREAM_BYTES);
		if (offset + v.payload_length > STREAM_BYTES)
			continue;
		for (uint32_t b = 0; b < v.payload_length; b++) {
			same &= v.payload[b] ==
				pb_stream_byte(flow, offset + b);
			copies_out[flow][offset + b]++;
		}
		CHECK(same);
	}
	fixture_drop_outputs(fx);
}

static bool round_passes(uint64_t seed)
{
	struct fixture fx;
	unsigned int count, failures_before = harness_failures;
	static const uint32_t mtus[] = {1500, 4000, 8500, 9000};

	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	memset(copies_in, 0, sizeof(copies_in));
	memset(copies_out, 0, sizeof(copies_out));
	count = make_events();

	fixture_config(&fx);
	fx.config.internal_mtu = mtus[below(4)];
	fx.config.checksum_mode = below(2);
	fx.config.delay.max_delay_us = 1 + below(100);
	fx.config.delay.rate_threshold_gbps = below(2) ? 0.0 : 1.0;
	fx.config.max_flows = below(2) ? 16 : 1024; /* pressure or not */
	fx.config.max_chain_segments = (uint16_t)(2 + below(20));
	/* Punctual rounds run every timer at its deadline, as an idle poll
	 * would, so no segment may be held past the bound; the others call
	 * the timer late and at random. */
	bool punctual = below(2);
	fixture_start(&fx);

	for (unsigned int i = 0; i < count;) {
		struct rte_mbuf *burst[32];
		unsigned int n = 1 + below(32);
		uint16_t used = 0;

		for (; used < n && i < count; used++, i++) {
			struct pb_spec spec;
			static uint8_t payload[2048];
			const struct event *e = &events[i];

			flow_spec(e->flow, &spec);
			spec.seq += e->offset;
			spec.ip_id = e->ip_id;
			pb_stream_fill(e->flow, e->offset, payload, e->length);
			spec.payload = payload;
			spec.payload_length = e->length;
			if (below(4) == 0)
				spec.segment_size = 256;
			burst[used] = pb_build(fixture_pool, &spec);
			if (below(2))
				burst[used]->ol_flags =
					RTE_MBUF_F_RX_L4_CKSUM_GOOD |
					RTE_MBUF_F_RX_IP_CKSUM_GOOD;
			for (uint32_t b = 0; b < e->length; b++)
				copies_in[e->flow][e->offset + b]++;
		}
		fixture_merge(&fx, burst, used);
		uint64_t next_burst_ns = fx.now_ns + below(3000);
		uint64_t deadline;

		if (punctual) {
			while ((deadline = jg_merge_next_deadline(fx.engine)) <=
			       next_burst_ns) {
				fx.now_ns = deadline;
				fixture_timer(&fx);
			}
		}
		fx.now_ns = next_burst_ns;
		if (!punctual && below(8) == 0)
			fixture_timer(&fx);
		verify_outputs(&fx);
	}
	if (punctual) {
		struct jg_stats stats;
		uint32_t bound_us = fx.config.delay.max_delay_us;

		/* The exact longest wait, not a power-of-two bucket (which
		 * would let waits up to twice the bound pass). */
		jg_engine_get_stats(fx.engine, &stats);
		CHECK(stats.merge_delay_max_ns <= (uint64_t)bound_us * 1000);
	}
	fixture_flush(&fx);
	verify_outputs(&fx);
	fixture_finish(&fx);
	CHECK(memcmp(copies_in, copies_out, sizeof(copies_in)) == 0);
	return harness_failures == failures_before;
}

static void random_interleavings(void)
{
	for (uint64_t seed = 1; seed <= 200; seed++)
		if (!round_passes(seed))
			fprintf(stderr, "  failing seed %llu\n",
				(unsigned long long)seed);
}

HARNESS_MAIN("jg_test_property", HARNESS_CASE(random_interleavings))
