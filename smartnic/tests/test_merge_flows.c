/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Merge across time and flows: reordering, sequence wrap, overlap and
 * retransmission, the delay model and its global bound, MSS learning,
 * onload/offload, and the flow table under pressure.
 */
#include <string.h>

#include <rte_mbuf.h>

#include "../engine/internal.h"
#include "fixture.h"

#define PAYLOAD 1000u

static void id_for(struct pb_spec *spec, unsigned int index)
{
	spec->ip_id = (uint16_t)(100 + index);
}

/* Arrival A, C, B yields one packet A+B+C, in sequence order. */
static void reorder_a_c_b(void)
{
	for (uint8_t version = 4; version <= 6; version += 2) {
		struct fixture fx;
		struct pb_spec base;
		struct rte_mbuf *pkts[3];
		const unsigned int order[3] = {0, 2, 1};

		fixture_begin(&fx, &base, version);
		for (unsigned int i = 0; i < 3; i++) {
			id_for(&base, order[i]);
			pkts[i] = fixture_segment(&base, order[i] * PAYLOAD,
						  PAYLOAD);
		}
		FIXTURE_MERGE_EXPECT(&fx, pkts, 3, base.seq, 3 * PAYLOAD);
	}
}

/* With a hole that never fills, what is held leaves in sequence order. */
static void hole_releases_in_order(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[3];
	const unsigned int order[3] = {3, 0, 1}; /* 2 is lost */
	static uint8_t buffer[PB_MAX_FRAME];
	struct pb_view first, second;

	fixture_begin(&fx, &base, 4);
	for (unsigned int i = 0; i < 3; i++) {
		id_for(&base, order[i]);
		pkts[i] = fixture_segment(&base, order[i] * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 3);
	fixture_flush(&fx);
	CHECK_EQ(fx.out_count, 2);
	if (fx.out_count == 2) {
		CHECK(pb_check(fx.out[0], buffer, sizeof(buffer), &first) ==
		      NULL);
		CHECK_EQ(first.payload_length, 2 * PAYLOAD);
		CHECK(pb_check(fx.out[1], buffer, sizeof(buffer), &second) ==
		      NULL);
		CHECK_EQ(second.seq, base.seq + 3 * PAYLOAD);
		CHECK_EQ(first.seq, base.seq);
	}
	fixture_finish(&fx);
}

/* Sequence numbers wrap at 2^32 in the middle of a merged packet. */
static void sequence_wraparound(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[4];

	fixture_begin(&fx, &base, 4);
	base.seq = 0xffffffffu - 1500;
	for (unsigned int i = 0; i < 4; i++) {
		id_for(&base, i);
		pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
	}
	/* Reordered across the wrap too. */
	struct rte_mbuf *swap = pkts[1];

	pkts[1] = pkts[2];
	pkts[2] = swap;
	pkts[1]->ol_flags = 0;
	FIXTURE_MERGE_EXPECT(&fx, pkts, 4, base.seq, 4 * PAYLOAD);
}

/* Overlapping or duplicated data is passed through, never spliced. */
static void overlap_and_duplicate(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[4];
	uint64_t total = 0;

	fixture_begin(&fx, &base, 4);
	id_for(&base, 0);
	pkts[0] = fixture_segment(&base, 0, PAYLOAD);
	id_for(&base, 1);
	pkts[1] = fixture_segment(&base, PAYLOAD, PAYLOAD);
	id_for(&base, 1);
	pkts[2] = fixture_segment(&base, PAYLOAD, PAYLOAD); /* duplicate */
	id_for(&base, 2);
	pkts[3] = fixture_segment(&base, PAYLOAD + 500, PAYLOAD); /* overlap */
	fixture_merge(&fx, pkts, 4);
	fixture_flush(&fx);
	/* Every output valid and carrying the right bytes; no output
	 * contains any byte twice (each is at most one contiguous range). */
	for (unsigned int i = 0; i < fx.out_count; i++) {
		static uint8_t buffer[PB_MAX_FRAME];
		struct pb_view view;

		CHECK(pb_check(fx.out[i], buffer, sizeof(buffer), &view) ==
		      NULL);
		total += view.payload_length;
		fixture_expect_packet(&fx, i, base.seq, view.payload_length);
	}
	CHECK_EQ(total, 4 * PAYLOAD);
	CHECK_EQ(fx.out_count, 3);
	struct jg_stats stats;

	/* Both reach the end of the stream, so each began a run of its
	 * own (duplicate_then_new_data) instead of passing. */
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.overlap_passes, 0);
	CHECK_EQ(stats.merge.overlap_restarts, 2);
	fixture_finish(&fx);
}

/*
 * A duplicate of the newest segment is where the stream goes on. Linux
 * 6.18's tcp_gro_receive (net/ipv4/tcp_offload.c) finds its sequence
 * number is not the held packet's end, flushes what it holds and keeps the
 * duplicate as the new head, so the new data after it merges onto it. The
 * engine does the same: A, B, B again, C give A+B and B+C (it used to give
 * A+B, B, C). An older duplicate (A again) still passes alone, after what
 * the flow holds. The same holds when the run the duplicate repeats has
 * already left.
 */
/* Output i carries `length` stream bytes from stream offset `offset`. */
static void expect_at(struct fixture *fx, unsigned int i, uint32_t base_seq,
		      uint32_t offset, uint32_t length)
{
	static uint8_t buffer[PB_MAX_FRAME];
	struct pb_view view;

	fixture_expect_packet(fx, i, base_seq, length);
	if (i < fx->out_count &&
	    pb_check(fx->out[i], buffer, sizeof(buffer), &view) == NULL)
		CHECK_EQ(view.seq - base_seq, offset);
}

static void duplicate_then_new_data(void)
{
	for (int version = 4; version <= 6; version += 2) {
		struct fixture fx;
		struct pb_spec base;
		struct rte_mbuf *pkts[6];
		struct jg_stats stats;
		static const uint32_t offsets[6] = {
			0, PAYLOAD, PAYLOAD, 2 * PAYLOAD, 0, 3 * PAYLOAD};

		fixture_begin(&fx, &base, version);
		for (unsigned int i = 0; i < 6; i++) {
			id_for(&base, i);
			pkts[i] = fixture_segment(&base, offsets[i], PAYLOAD);
		}
		fixture_merge(&fx, pkts, 6);
		fixture_flush(&fx);
		CHECK_EQ(fx.out_count, 4);
		expect_at(&fx, 0, base.seq, 0, 2 * PAYLOAD);	   /* A+B */
		expect_at(&fx, 1, base.seq, PAYLOAD, 2 * PAYLOAD); /* B+C */
		expect_at(&fx, 2, base.seq, 0, PAYLOAD);	   /* A */
		expect_at(&fx, 3, base.seq, 3 * PAYLOAD, PAYLOAD); /* D */
		jg_engine_get_stats(fx.engine, &stats);
		CHECK_EQ(stats.merge.overlap_restarts, 1);
		CHECK_EQ(stats.merge.overlap_passes, 1);
		fixture_finish(&fx);

		/* A+B leave before B comes again. */
		fixture_begin(&fx, &base, version);
		for (unsigned int i = 0; i < 4; i++) {
			id_for(&base, i);
			pkts[i] = fixture_segment(&base, offsets[i], PAYLOAD);
		}
		fixture_merge(&fx, pkts, 2);
		fixture_flush(&fx);
		fixture_merge(&fx, pkts + 2, 2);
		fixture_flush(&fx);
		CHECK_EQ(fx.out_count, 2);
		expect_at(&fx, 0, base.seq, 0, 2 * PAYLOAD);
		expect_at(&fx, 1, base.seq, PAYLOAD, 2 * PAYLOAD);
		fixture_finish(&fx);
	}
}

/* Drive a fast flow (one segment every 100 ns) so it qualifies for
 * delayed merging, across bursts of one segment. */
static void fast_flow(struct fixture *fx, struct pb_spec *base,
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

/* The run a duplicate of the newest segment begins leaves with the call,
 * as Linux holds it only until its poll ends, even for a fast flow whose
 * runs otherwise wait: such a retransmission comes when the sender waits
 * for an ACK. */
static void restarted_run_does_not_wait(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[2];
	struct jg_stats stats;

	fixture_begin(&fx, &base, 4);
	fast_flow(&fx, &base, 0, 100, 100);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK(stats.merge.held_now > 0); /* the fast flow's tail waits */
	id_for(&base, 100);
	pkts[0] = fixture_segment(&base, 99 * PAYLOAD, PAYLOAD);
	id_for(&base, 101);
	pkts[1] = fixture_segment(&base, 100 * PAYLOAD, PAYLOAD);
	fixture_merge(&fx, pkts, 2);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.held_now, 0);
	CHECK_EQ(stats.merge.overlap_restarts, 1);
	expect_at(&fx, fx.out_count - 1, base.seq, 99 * PAYLOAD, 2 * PAYLOAD);
	fixture_finish(&fx);
}

/* A fast flow waits across bursts and fills packets; a slow one is
 * merged only within a burst. */
static void delayed_merging_fast_vs_slow(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct jg_stats stats;

	fixture_begin(&fx, &base, 4);
	/* 1000 bytes per 100 ns = 80 Gbps: above the 0.1 Gbps threshold. */
	fast_flow(&fx, &base, 0, 1000, 100);
	fixture_flush(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK(stats.merge.delayed_flows > 0);
	/* Most packets full: 8460 bytes. */
	CHECK(jg_stats_conversion_yield(&stats) > 0.8);
	fixture_finish(&fx);

	fixture_begin(&fx, &base, 4);
	/* 1000 bytes per 200 us = 40 Mbps: below the threshold. */
	fast_flow(&fx, &base, 0, 50, 200000);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.held_now, 0);
	CHECK_EQ(stats.merge.delayed_flows, 0);
	CHECK_EQ(fx.out_count, 50);
	fixture_finish(&fx);
}

/* No segment is held beyond the global bound, whatever the model says. */
static void global_delay_bound(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct jg_stats stats;

	fixture_config(&fx);
	fx.config.delay.max_delay_us = 10;
	fx.config.delay.quantile = 0.999;
	fixture_start(&fx);
	pb_defaults(&base, 4);
	fast_flow(&fx, &base, 0, 100, 100);
	/* The flow stops. A punctual caller wakes at each deadline the
	 * engine names; the tail must then leave within 10 us of the arrival
	 * of its oldest segment. (A late call would add its own lateness.) */
	for (int calls = 0; calls < 100; calls++) {
		uint64_t deadline = jg_merge_next_deadline(fx.engine);

		if (deadline == UINT64_MAX)
			break;
		CHECK(deadline >= fx.now_ns - 100);
		fx.now_ns = deadline > fx.now_ns ? deadline : fx.now_ns;
		fixture_timer(&fx);
	}
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.held_now, 0);
	/* The longest wait exactly: at most the 10 us bound (a histogram
	 * bucket would let anything below 16 us pass). */
	CHECK(stats.merge_delay_max_ns > 0);
	CHECK(stats.merge_delay_max_ns <= 10 * 1000);
	CHECK(jg_merge_next_deadline(fx.engine) == UINT64_MAX);
	fixture_finish(&fx);
}

/*
 * Segments reach the engine only when a poll hands them over. A flow of
 * one 1000-byte segment per microsecond (8 Gbps) polled in bursts of 16
 * every 16 us: any tail left at the end of a burst needs at most 9 more
 * segments, which arrive within the ETM (9 us at most, under its 0.95
 * quantile of 13 us or more) but are handed over only by the next burst,
 * 16 us later. The wait must cover that interval, or every burst ends a
 * packet short. Timers run at their own deadlines between bursts, as an
 * idle poll would run them.
 */
static void wait_covers_poll_interval(void)
{
	enum { BURSTS = 60, PER_BURST = 16, INTERVAL_NS = 16000 };
	struct rte_mbuf *pkts[PER_BURST];
	struct fixture fx;
	struct pb_spec base;
	struct jg_stats stats;
	unsigned int next = 0;

	fixture_begin(&fx, &base, 4);
	for (unsigned int b = 0; b < BURSTS; b++) {
		uint64_t burst_ns = (uint64_t)(b + 1) * INTERVAL_NS;
		uint64_t deadline;

		while ((deadline = jg_merge_next_deadline(fx.engine)) <
		       burst_ns) {
			fx.now_ns = deadline;
			fixture_timer(&fx);
		}
		for (unsigned int i = 0; i < PER_BURST; i++, next++) {
			id_for(&base, next);
			pkts[i] =
				fixture_segment(&base, next * PAYLOAD, PAYLOAD);
		}
		fx.now_ns = burst_ns;
		fixture_merge(&fx, pkts, PER_BURST);
	}
	jg_engine_get_stats(fx.engine, &stats);
	/* The first bursts come before the flow's rate and the interval
	 * are known; after that no run leaves by its deadline. */
	CHECK(stats.merge.deadline_flushes <= 3);
	CHECK(jg_stats_conversion_yield(&stats) > 0.9);
	fixture_flush(&fx);
	fixture_finish(&fx);
}

/*
 * A new flow's first burst of 8 segments reaches the engine in two polls
 * 10 us apart (5, then 3). Its rate is not known yet, but 5 segments from
 * one poll show a sender emitting back to back: the run waits two poll
 * intervals, as Linux GRO holds a packet until its NAPI poll ends, and the
 * 3 join it: one packet of 8000 bytes instead of 5000 and 3000. A new
 * flow's lone segment does not wait.
 */
static void first_burst_spans_two_polls(void)
{
	struct rte_mbuf *pkts[8];
	struct fixture fx;
	struct pb_spec base;

	fixture_begin(&fx, &base, 4);
	for (unsigned int i = 0; i < 8; i++) {
		id_for(&base, i);
		pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
	}
	jg_merge_note_poll(fx.engine, 100000);
	fx.now_ns = 110000;
	fixture_merge(&fx, pkts, 5);
	CHECK_EQ(fx.out_count, 0);
	fx.now_ns = 120000;
	fixture_merge(&fx, pkts + 5, 3);
	CHECK_EQ(fx.out_count, 0);
	fixture_flush(&fx);
	CHECK_EQ(fx.out_count, 1);
	fixture_expect_packet(&fx, 0, base.seq, 8 * PAYLOAD);
	fixture_finish(&fx);

	fixture_begin(&fx, &base, 4);
	jg_merge_note_poll(fx.engine, 100000);
	fx.now_ns = 110000;
	fixture_merge_one(&fx, fixture_segment(&base, 0, PAYLOAD));
	CHECK_EQ(fx.out_count, 1);
	fixture_finish(&fx);
}

/* The tail's deadline after the last of 20 bursts of a fast flow (16
 * segments of 1000 bytes every 16 us), with or without an empty poll
 * noted every microsecond in between. */
static uint64_t tail_wait_ns(bool note_empty_polls)
{
	enum { PER_BURST = 16, INTERVAL_NS = 16000 };
	struct rte_mbuf *pkts[PER_BURST];
	struct fixture fx;
	struct pb_spec base;
	uint64_t wait;
	unsigned int next = 0;

	fixture_config(&fx);
	fx.config.delay.yield_threshold = 2.0; /* always allowed to wait */
	fixture_start(&fx);
	pb_defaults(&base, 4);
	for (unsigned int b = 1; b <= 20; b++) {
		if (note_empty_polls)
			for (uint64_t t = (b - 1) * INTERVAL_NS + 1000;
			     t < b * INTERVAL_NS; t += 1000)
				jg_merge_note_poll(fx.engine, t);
		for (unsigned int i = 0; i < PER_BURST; i++, next++) {
			id_for(&base, next);
			/* A run holds 8460 bytes: 320 segments leave a
			 * tail of 6980 held. */
			pkts[i] =
				fixture_segment(&base, next * PAYLOAD, PAYLOAD);
		}
		fx.now_ns = (uint64_t)b * INTERVAL_NS;
		fixture_merge(&fx, pkts, PER_BURST);
	}
	wait = jg_merge_next_deadline(fx.engine) - fx.now_ns;
	fixture_flush(&fx);
	fixture_finish(&fx);
	return wait;
}

/* Empty polls noted with jg_merge_note_poll show that segments are seen
 * within a microsecond, so the wait loses the 16 us that bursts alone
 * would suggest; the rest of the wait (the ETM) is the same. */
static void noted_polls_shorten_wait(void)
{
	uint64_t bursts_only = tail_wait_ns(false);
	uint64_t with_polls = tail_wait_ns(true);

	CHECK(bursts_only > with_polls);
	CHECK(bursts_only - with_polls >= 14000);
	CHECK(bursts_only - with_polls <= 16000);
}

/*
 * A late segment that fills a run to the byte carries its rest into a new
 * run, which then joins the run held behind the hole. The joined run's
 * head is the late segment, but it holds older data: the flow's new
 * deadline must count from that data's arrival, or it waits past the
 * global bound. A slow flow under a 50-us bound, so every wait is the
 * whole bound.
 */
static void joined_run_keeps_oldest_deadline(void)
{
	enum { BOUND_US = 50, LATE_US = 40 };
	struct rte_mbuf *pkts[9];
	struct fixture fx;
	struct pb_spec base;
	struct jg_stats stats, before;
	uint64_t held_at;

	fixture_config(&fx);
	fx.config.delay.max_delay_us = BOUND_US;
	fx.config.delay.yield_threshold = 2.0;
	fx.config.delay.rate_threshold_gbps = 0;
	fixture_start(&fx);
	pb_defaults(&base, 4);
	fast_flow(&fx, &base, 0, 300, 400 * 1000);
	fx.now_ns += BOUND_US * 1000;
	fixture_timer(&fx);
	/* fast_flow runs no timers between its segments, so those waited
	 * until the next one; only what follows is checked. */
	jg_engine_get_stats(fx.engine, &before);
	/* Segments 300..307 (8000 bytes, under the 8460 a run holds) and,
	 * past a hole, 309. */
	for (unsigned int i = 0; i < 9; i++) {
		unsigned int index = 300 + (i < 8 ? i : 9);

		id_for(&base, index);
		pkts[i] = fixture_segment(&base, index * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 9);
	held_at = fx.now_ns;
	CHECK(jg_merge_next_deadline(fx.engine) <= held_at + BOUND_US * 1000);
	/* 308 arrives late: it fills the first run, which leaves, and its
	 * rest joins 309. */
	fx.now_ns = held_at + LATE_US * 1000;
	fast_flow(&fx, &base, 308, 1, 0);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.held_now, 2);
	CHECK(jg_merge_next_deadline(fx.engine) <= held_at + BOUND_US * 1000);
	fx.now_ns = held_at + BOUND_US * 1000;
	fixture_timer(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.held_now, 0);
	/* Nothing waited 64 us or more. */
	for (unsigned int b = 7; b < JG_DELAY_HISTOGRAM_BUCKETS; b++)
		CHECK_EQ(stats.merge.delay_histogram_us[b],
			 before.merge.delay_histogram_us[b]);
	fixture_finish(&fx);
}

/* A timer call before the deadline releases nothing; after, it does.
 * Checked for a fast flow under a short bound, and for slow flows (one
 * segment every 400 us or 1.2 ms) under a bound near the 10 ms limit, whose
 * deadline lies milliseconds ahead: only a wheel spanning the whole bound
 * holds it without wrapping onto an earlier slot. With `across_lap` the
 * run starts half a millisecond before the wheel's positions wrap (every
 * 2^24 ns), so its deadline sits at a lower position than the current one
 * and the search for occupied slots must wrap too. */
static void check_timer_deadline(uint32_t max_delay_us, uint32_t interval_ns,
				 uint64_t min_wait_ns, bool across_lap)
{
	struct fixture fx;
	struct pb_spec base;
	struct jg_stats stats;
	uint64_t deadline;

	fixture_config(&fx);
	fx.config.delay.max_delay_us = max_delay_us;
	fx.config.delay.yield_threshold = 2.0;	 /* always allowed to wait */
	fx.config.delay.rate_threshold_gbps = 0; /* every flow may wait */
	fixture_start(&fx);
	pb_defaults(&base, 4);
	fast_flow(&fx, &base, 0, 300, interval_ns);
	/* Let everything held leave, then one more segment starts a run. */
	fx.now_ns += (uint64_t)max_delay_us * 1000;
	fixture_timer(&fx);
	if (across_lap) {
		fx.now_ns = (((fx.now_ns >> 24) + 1) << 24) - 500 * 1000;
		fixture_timer(&fx);
	}
	fast_flow(&fx, &base, 300, 1, 0); /* leaves a tail held */
	jg_engine_get_stats(fx.engine, &stats);
	CHECK(stats.merge.held_now > 0);
	deadline = jg_merge_next_deadline(fx.engine);
	CHECK(deadline != UINT64_MAX &&
	      deadline <= fx.now_ns + (uint64_t)max_delay_us * 1000);
	CHECK(deadline >= fx.now_ns + min_wait_ns);
	fixture_timer(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK(stats.merge.held_now > 0);
	/* The deadline given is exact, not the start of its wheel slot:
	 * a nanosecond before it nothing leaves, at it everything does. */
	fx.now_ns = deadline - 1;
	fixture_timer(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK(stats.merge.held_now > 0);
	CHECK_EQ(jg_merge_next_deadline(fx.engine), deadline);
	fx.now_ns = deadline;
	fixture_timer(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.held_now, 0);
	CHECK(jg_merge_next_deadline(fx.engine) == UINT64_MAX);
	fixture_finish(&fx);
}

static void timer_respects_deadline(void)
{
	for (int lap = 0; lap <= 1; lap++) {
		check_timer_deadline(50, 100, 0, lap);
		check_timer_deadline(9000, 400 * 1000, 2 * 1000 * 1000, lap);
		/* 6.7 Mbps, under a byte per microsecond: the measured rate
		 * must not round down to nothing. */
		check_timer_deadline(9000, 1200 * 1000, 2 * 1000 * 1000, lap);
	}
}

/* The SYN the rack side sends out carries its MSS; a legacy MSS means
 * the flow must not be merged, a jumbo MSS means it may. */
static void mss_learning(void)
{
	for (int legacy = 0; legacy <= 1; legacy++) {
		struct fixture fx;
		struct pb_spec base, syn;
		struct rte_mbuf *out[4], *pkts[4];
		uint16_t consumed, count;
		uint16_t mss = legacy ? 1460 : 8960;

		fixture_begin(&fx, &base, 4);
		/* The rack host (dst of inbound) sends SYN-ACK outbound. */
		pb_defaults(&syn, 4);
		syn.src_v4 = base.dst_v4;
		syn.dst_v4 = base.src_v4;
		syn.src_port = base.dst_port;
		syn.dst_port = base.src_port;
		syn.tcp_flags = PB_TCP_SYN | PB_TCP_ACK;
		syn.tcp_options[0] = 2;
		syn.tcp_options[1] = 4;
		syn.tcp_options[2] = (uint8_t)(mss >> 8);
		syn.tcp_options[3] = (uint8_t)mss;
		syn.tcp_options_length = 4;
		pkts[0] = pb_build(fixture_pool, &syn);
		count = jg_split_burst(fx.engine, pkts, 1, out, 4, &consumed);
		CHECK_EQ(count, 1);
		rte_pktmbuf_free_bulk(out, count);

		struct jg_flow_key key = {.ip_version = 4, .protocol = 6};

		key.src.v4 = rte_cpu_to_be_32(base.src_v4);
		key.dst.v4 = rte_cpu_to_be_32(base.dst_v4);
		key.src_port = rte_cpu_to_be_16(base.src_port);
		key.dst_port = rte_cpu_to_be_16(base.dst_port);
		CHECK_EQ(jg_flow_internal_mss(fx.engine, &key), mss);

		for (unsigned int i = 0; i < 4; i++) {
			id_for(&base, i);
			pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
		}
		fixture_merge(&fx, pkts, 4);
		fixture_flush(&fx);
		CHECK_EQ(fx.out_count, legacy ? 4 : 1);
		fixture_finish(&fx);
	}
}

static void key_of(const struct pb_spec *base, struct jg_flow_key *key)
{
	memset(key, 0, sizeof(*key));
	key->ip_version = 4;
	key->protocol = 6;
	key->src.v4 = rte_cpu_to_be_32(base->src_v4);
	key->dst.v4 = rte_cpu_to_be_32(base->dst_v4);
	key->src_port = rte_cpu_to_be_16(base->src_port);
	key->dst_port = rte_cpu_to_be_16(base->dst_port);
}

/* Offload releases what the flow holds and stops merging it; unknown
 * flows are merged only when configured so; onload overrides that. */
static void onload_offload(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct jg_flow_key key;
	struct rte_mbuf *out[8];
	int released;

	fixture_config(&fx);
	fx.config.delay.rate_threshold_gbps = 0; /* everything may wait */
	fixture_start(&fx);
	pb_defaults(&base, 4);
	key_of(&base, &key);
	fast_flow(&fx, &base, 0, 3, 100);
	released = jg_flow_offload(fx.engine, &key, out, 8);
	CHECK(released >= 0);
	for (int i = 0; i < released; i++)
		fx.out[fx.out_count++] = out[i];
	struct jg_stats stats;

	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.held_now, 0);
	fixture_drop_outputs(&fx);
	fast_flow(&fx, &base, 3, 4, 100);
	CHECK_EQ(fx.out_count, 4); /* passed one by one */
	fixture_finish(&fx);

	fixture_config(&fx);
	fx.config.merge_unknown_flows = false;
	fixture_start(&fx);
	pb_defaults(&base, 4);
	key_of(&base, &key);
	struct rte_mbuf *pkts[4];

	for (unsigned int i = 0; i < 4; i++) {
		id_for(&base, i);
		pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 4);
	CHECK_EQ(fx.out_count, 4);
	fixture_drop_outputs(&fx);
	CHECK_EQ(jg_flow_onload(fx.engine, &key), 0);
	for (unsigned int i = 4; i < 8; i++) {
		id_for(&base, i);
		pkts[i - 4] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 4);
	fixture_flush(&fx);
	CHECK_EQ(fx.out_count, 1);
	fixture_finish(&fx);
}

/* A key of the n-th flow of a family (the first octet tells families
 * apart). */
static void numbered_key(uint8_t family, uint32_t n, struct jg_flow_key *key)
{
	memset(key, 0, sizeof(*key));
	key->ip_version = 4;
	key->protocol = 6;
	key->src.v4 = rte_cpu_to_be_32((uint32_t)family << 24 | n);
	key->dst.v4 = rte_cpu_to_be_32(0xc0a80001u);
	key->src_port = rte_cpu_to_be_16((uint16_t)(1024 + n % 60000));
	key->dst_port = rte_cpu_to_be_16(443);
}

/*
 * Onload and offload are open to any control client, and the controller
 * cycles every expiring elephant through them. Cycling ten tables' worth
 * of flows through onload and offload, then onloading as many more and
 * never offloading them, must still leave room for a new flow to merge.
 */
static void pinned_entries_bounded(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct jg_flow_key key;
	struct jg_stats stats;
	struct rte_mbuf *out[8], *pkts[6];

	fixture_config(&fx);
	fx.config.max_flows = 1024;
	fixture_start(&fx);
	for (uint32_t i = 0; i < 10 * 1024; i++) {
		numbered_key(12, i, &key);
		(void)jg_flow_onload(fx.engine, &key);
		CHECK_EQ(jg_flow_offload(fx.engine, &key, out, 8), 0);
	}
	for (uint32_t i = 0; i < 10 * 1024; i++) {
		numbered_key(13, i, &key);
		(void)jg_flow_onload(fx.engine, &key);
	}
	pb_defaults(&base, 4);
	for (unsigned int i = 0; i < 6; i++) {
		id_for(&base, i);
		pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 6);
	fixture_flush(&fx);
	CHECK_EQ(fx.out_count, 1); /* six segments, one packet */
	jg_engine_get_stats(fx.engine, &stats);
	CHECK(stats.flows_now <= stats.flow_capacity);
	/* A quarter of the table may be pinned; the rest were refused. */
	CHECK_EQ(stats.merge.onloads_refused, 10 * 1024 - 1024 / 4);
	fixture_finish(&fx);
}

/* Pins age: an onloaded flow not seen for onload_idle_s is an ordinary
 * flow again, and its share of the budget is free for a new onload. */
static void idle_pins_expire(void)
{
	struct fixture fx;
	struct jg_flow_key key;
	struct jg_stats stats;

	fixture_config(&fx);
	fx.config.max_flows = 1024;
	fx.config.max_onloaded_flows = 100;
	fx.config.onload_idle_s = 2;
	fixture_start(&fx);
	for (uint32_t i = 0; i < 100; i++) {
		numbered_key(12, i, &key);
		CHECK_EQ(jg_flow_onload(fx.engine, &key), 0);
	}
	numbered_key(13, 0, &key);
	CHECK_EQ(jg_flow_onload(fx.engine, &key), -ENOSPC);
	/* Onloading a pinned flow again refreshes it, using no budget. */
	numbered_key(12, 7, &key);
	CHECK_EQ(jg_flow_onload(fx.engine, &key), 0);

	fx.now_ns += 3000000000ull;
	fixture_timer(&fx);
	numbered_key(13, 0, &key);
	CHECK_EQ(jg_flow_onload(fx.engine, &key), 0);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.onloads_refused, 1);
	CHECK(stats.merge.pins_expired >= 1);
	fixture_finish(&fx);
}

/*
 * Flow identity is the whole 5-tuple. Build a tuple whose primary hash
 * equals a victim's (the test reads the engine's secret; an outsider
 * cannot): the NH sum is unchanged when the two address words trade
 * their key-offset values. A spoofed segment from it, in the middle of
 * the victim's segments, must neither join nor break the victim's run.
 */
static void colliding_tuple_leaves_victim_alone(void)
{
	struct fixture fx;
	struct pb_spec victim, attacker;
	struct jg_flow_key victim_key, attacker_key;
	struct jg_flow_hash victim_hash, attacker_hash;
	struct rte_mbuf *pkts[7];
	struct jg_stats stats;

	fixture_config(&fx);
	fixture_start(&fx);
	pb_defaults(&victim, 4);
	key_of(&victim, &victim_key);
	const uint32_t *k = fx.engine->hash_key[0];
	uint32_t a = victim_key.src.v4 + k[2], b = victim_key.dst.v4 + k[3];

	attacker_key = victim_key;
	attacker_key.src.v4 = b - k[2];
	attacker_key.dst.v4 = a - k[3];
	jg_flow_hash(fx.engine, &victim_key, &victim_hash);
	jg_flow_hash(fx.engine, &attacker_key, &attacker_hash);
	CHECK_EQ(victim_hash.primary, attacker_hash.primary);
	CHECK(!jg_flow_key_equal(&victim_key, &attacker_key));

	attacker = victim;
	attacker.src_v4 = rte_be_to_cpu_32(attacker_key.src.v4);
	attacker.dst_v4 = rte_be_to_cpu_32(attacker_key.dst.v4);
	/* Bytes the victim already sent: to the victim, a retransmission. */
	attacker.seq = victim.seq;
	for (unsigned int i = 0; i < 3; i++) {
		id_for(&victim, i);
		pkts[i] = fixture_segment(&victim, i * PAYLOAD, PAYLOAD);
	}
	pkts[3] = fixture_segment(&attacker, 0, PAYLOAD);
	for (unsigned int i = 3; i < 6; i++) {
		id_for(&victim, i);
		pkts[i + 1] = fixture_segment(&victim, i * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 7);
	fixture_flush(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.flows_now, 2);
	CHECK_EQ(stats.merge.overlap_passes, 0);
	/* The victim's six segments in one packet, the spoofed one alone. */
	CHECK_EQ(fx.out_count, 2);
	CHECK_EQ(stats.merge.merged_packets, 1);
	fixture_finish(&fx);
}

/* Each engine draws its own hash secret unless a seed is given. */
static void hash_secret_per_engine(void)
{
	struct fixture fx;
	uint32_t first[2][10];

	fixture_config(&fx);
	fx.config.hash_seed = 0;
	fixture_start(&fx);
	memcpy(first, fx.engine->hash_key, sizeof(first));
	fixture_finish(&fx);
	fixture_config(&fx);
	fx.config.hash_seed = 0;
	fixture_start(&fx);
	CHECK(memcmp(first, fx.engine->hash_key, sizeof(first)) != 0);
	fixture_finish(&fx);
}

/*
 * Below capacity nothing is evicted: a new flow goes to the emptier of its
 * two buckets, so with the table half full no bucket pair is full (first
 * free way instead: about one flow in a thousand lost its entry). Eight
 * hash keys, 2048 flows each in a table of 4096.
 */
static void half_full_table_evicts_nothing(void)
{
	uint64_t evicted = 0;

	for (uint64_t seed = 1; seed <= 8; seed++) {
		struct fixture fx;
		struct jg_stats stats;

		fixture_config(&fx);
		fx.config.max_flows = 4096;
		fx.config.hash_seed = seed;
		fixture_start(&fx);
		for (uint32_t i = 0; i < 2048; i++) {
			struct jg_flow_key key = {
				.ip_version = 4,
				.protocol = IPPROTO_TCP,
				.src_port = rte_cpu_to_be_16(443),
				.dst_port =
					rte_cpu_to_be_16((uint16_t)(10000 + i)),
			};

			key.src.v4 = rte_cpu_to_be_32(0xc6336400u + i % 251);
			key.dst.v4 = rte_cpu_to_be_32(0x0a000002u);
			CHECK(jg_flow_find_or_create(fx.engine, &key) != NULL);
		}
		jg_engine_get_stats(fx.engine, &stats);
		CHECK_EQ(stats.flows_now, 2048);
		evicted += stats.merge.flows_evicted;
		fixture_finish(&fx);
	}
	CHECK_EQ(evicted, 0);
}

/*
 * A flood of one-packet flows, far beyond the table, mixed with one fast
 * flow: memory stays fixed, the mice are evicted among themselves (and
 * flushed when evicted), and the big flow keeps merging.
 */
static void mice_flood_eviction(void)
{
	struct fixture fx;
	struct pb_spec base, mouse;
	struct jg_stats stats;
	uint64_t memory_before;
	unsigned int next_segment = 0;

	fixture_config(&fx);
	fx.config.max_flows = 256;
	fixture_start(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	memory_before = stats.memory_bytes;
	pb_defaults(&base, 4);
	pb_defaults(&mouse, 4);
	for (unsigned int round = 0; round < 400; round++) {
		struct rte_mbuf *pkts[32];
		unsigned int n = 0;

		for (unsigned int k = 0; k < 24; k++) {
			mouse.src_v4 = 0x0b000000u + round * 24 + k;
			mouse.src_port = (uint16_t)(1024 + k);
			pkts[n++] = fixture_segment(&mouse, 0, 100);
		}
		for (unsigned int k = 0; k < 8; k++) {
			id_for(&base, next_segment);
			pkts[n++] = fixture_segment(
				&base, next_segment * PAYLOAD, PAYLOAD);
			next_segment++;
		}
		fixture_merge(&fx, pkts, (uint16_t)n);
		fx.now_ns += 800;
		/* Keep memory use of the test bounded. */
		if (fx.out_count > FIXTURE_MAX_OUT / 2)
			fixture_drop_outputs(&fx);
	}
	fixture_flush(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.memory_bytes, memory_before);
	CHECK(stats.flows_now <= stats.flow_capacity);
	CHECK(stats.merge.flows_evicted > 9000);
	/* The big flow's payload: 3200 segments; most left full. */
	CHECK(stats.merge.tcp_payload_full > 3200u * PAYLOAD * 8 / 10);
	fixture_finish(&fx);
}

/* Eviction of a flow that holds data releases that data. */
static void eviction_flushes_held(void)
{
	struct fixture fx;
	struct pb_spec spec;
	struct jg_stats stats;

	fixture_config(&fx);
	fx.config.max_flows = 16; /* two buckets of eight */
	fx.config.delay.rate_threshold_gbps = 0;
	fixture_start(&fx);
	pb_defaults(&spec, 4);
	/* Within one burst every flow holds its segment until the end of
	 * the burst, so evictions during the burst must release them. */
	struct rte_mbuf *pkts[64];

	for (unsigned int i = 0; i < 64; i++) {
		spec.src_port = (uint16_t)(2000 + i);
		pkts[i] = fixture_segment(&spec, 0, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 64);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK(stats.merge.evictions_flushing > 0);
	CHECK(stats.flows_now <= 16);
	CHECK_EQ(stats.merge.packets_in,
		 stats.merge.segments_out + stats.merge.held_now);
	fixture_finish(&fx);
}

/* A too-small output array leaves packets in the ready queue; they come
 * out on the next call and are never lost. */
static void ready_queue_carries_over(void)
{
	struct fixture fx;
	struct pb_spec spec;
	struct rte_mbuf *pkts[16], *out[16];
	uint16_t count, total = 0;

	fixture_config(&fx);
	fixture_start(&fx);
	pb_defaults(&spec, 4);
	spec.tcp_flags |= PB_TCP_PSH; /* each passes */
	for (unsigned int i = 0; i < 16; i++) {
		spec.src_port = (uint16_t)(3000 + i);
		pkts[i] = fixture_segment(&spec, 0, PAYLOAD);
	}
	count = jg_merge_burst(fx.engine, pkts, 16, fx.now_ns, out, 5);
	CHECK_EQ(count, 5);
	total = count;
	rte_pktmbuf_free_bulk(out, count);
	while ((count = jg_merge_timer(fx.engine, fx.now_ns, out, 5)) > 0) {
		total = (uint16_t)(total + count);
		rte_pktmbuf_free_bulk(out, count);
	}
	CHECK_EQ(total, 16);
	fixture_finish(&fx);
}

static void flow_entry_size(void)
{
	struct fixture fx;
	struct jg_stats stats;

	fixture_config(&fx);
	fixture_start(&fx);
	jg_engine_get_stats(fx.engine, &stats);
	/* One cache line, as docs/engine.md promises. */
	CHECK(stats.flow_entry_bytes <= 64);
	CHECK(jg_drop_reason_name(JG_DROP_CARAVAN_BAD_MAGIC) != NULL &&
	      strcmp(jg_drop_reason_name(JG_DROP_CARAVAN_BAD_MAGIC),
		     "caravan-bad-magic") == 0);
	fixture_finish(&fx);
}

/*
 * A Configure from the controller used to replace the engines: every flow,
 * its sequence state and learned MSS were forgotten and held data flushed,
 * even for a change that touches no merge rule. jg_engine_reconfigure
 * keeps them; a change of the merge rules wants nothing held.
 */
static void reconfigure_keeps_flows(void)
{
	struct fixture fx;
	struct jg_engine_config next;
	struct pb_spec base;
	struct jg_stats before, after;

	fixture_begin(&fx, &base, 4);
	/* Fast enough (10 Gbit/s) for the delay model to hold its tail. */
	fast_flow(&fx, &base, 0, 100, 100);
	jg_engine_get_stats(fx.engine, &before);
	CHECK(before.merge.held_now > 0);
	CHECK_EQ(before.flows_now, 1);

	/* No merge rule changes: everything stays, held data included. */
	next = fx.config;
	next.default_path_mtu_v4 = 1400;
	next.default_path_mtu_v6 = 1400;
	next.merge_unknown_flows = !fx.config.merge_unknown_flows;
	next.max_flows =
		fx.config.max_flows * 2; /* not read: sizes the engine */
	CHECK(!jg_engine_merge_rules_differ(&fx.config, &next));
	CHECK_EQ(jg_engine_reconfigure(fx.engine, &next), 0);
	jg_engine_get_stats(fx.engine, &after);
	CHECK_EQ(after.merge.held_now, before.merge.held_now);
	CHECK_EQ(after.flows_now, 1);
	CHECK_EQ(after.flow_capacity, before.flow_capacity);
	next.merge_unknown_flows = fx.config.merge_unknown_flows;
	CHECK_EQ(jg_engine_reconfigure(fx.engine, &next), 0);

	/* A smaller internal MTU while runs are held: refused, nothing
	 * changed; after a flush it applies and the flow is still known. */
	next.internal_mtu = 4000;
	CHECK(jg_engine_merge_rules_differ(&fx.config, &next));
	CHECK_EQ(jg_engine_reconfigure(fx.engine, &next), -EBUSY);
	fixture_flush(&fx);
	fixture_drop_outputs(&fx);
	CHECK_EQ(jg_engine_reconfigure(fx.engine, &next), 0);
	next.internal_mtu = 100; /* below what an engine accepts */
	CHECK_EQ(jg_engine_reconfigure(fx.engine, &next), -EINVAL);
	next.internal_mtu = 4000;
	next.default_path_mtu_v6 = 1279; /* below the IPv6 minimum */
	CHECK_EQ(jg_engine_reconfigure(fx.engine, &next), -EINVAL);
	jg_engine_get_stats(fx.engine, &after);
	CHECK_EQ(after.flows_now, 1);

	/* The flow goes on where it stopped and merges to the new MTU. */
	fast_flow(&fx, &base, 100, 40, 100);
	fixture_flush(&fx);
	CHECK(fx.out_count > 1);
	for (unsigned int i = 0; i < fx.out_count; i++)
		CHECK(rte_pktmbuf_pkt_len(fx.out[i]) <= 14 + 4000);
	CHECK(rte_pktmbuf_pkt_len(fx.out[0]) > 14 + 4000 - PAYLOAD);
	/* Same entry throughout: never recreated, nothing seen as overlap. */
	jg_engine_get_stats(fx.engine, &after);
	CHECK_EQ(after.merge.flows_created, 1);
	CHECK_EQ(after.merge.overlap_passes, 0);
	fixture_finish(&fx);
}

/* Three segments of one connection from `seq`: merged, then released. */
static void connection_burst(struct fixture *fx, struct pb_spec *base,
			     uint32_t seq, uint8_t last_flags)
{
	struct rte_mbuf *pkts[3];

	base->seq = seq;
	base->tcp_flags = PB_TCP_ACK;
	for (unsigned int i = 0; i < 3; i++) {
		id_for(base, i);
		if (i == 2)
			base->tcp_flags |= last_flags;
		pkts[i] = fixture_segment(base, i * PAYLOAD, PAYLOAD);
	}
	base->tcp_flags = PB_TCP_ACK;
	fixture_merge(fx, pkts, 3);
	fixture_flush(fx);
}

/* A control segment (payload 0) of the flow at `seq`. */
static void connection_control(struct fixture *fx, struct pb_spec *base,
			       uint32_t seq, uint8_t flags)
{
	base->seq = seq;
	base->tcp_flags = flags;
	fixture_merge_one(fx, fixture_segment(base, 0, 0));
	base->tcp_flags = PB_TCP_ACK;
}

/*
 * SYN, FIN, RST and silence end a connection's sequence state. A new
 * connection on the same 5-tuple starting below where the old one ended
 * used to be taken as a retransmission and passed unmerged for good.
 */
static void new_connection_on_the_same_tuple(void)
{
	enum { FIN_THEN_SYN, RST_THEN_SYN, SILENCE };

	for (int ending = FIN_THEN_SYN; ending <= SILENCE; ending++) {
		struct fixture fx;
		struct pb_spec base;
		struct jg_stats stats;

		fixture_begin(&fx, &base, 4);
		connection_burst(&fx, &base, 1000000,
				 ending == FIN_THEN_SYN ? PB_TCP_FIN : 0);
		CHECK_EQ(fx.out_count, 1);
		if (ending == RST_THEN_SYN)
			connection_control(&fx, &base, 1000000 + 3 * PAYLOAD,
					   PB_TCP_RST);
		if (ending == SILENCE)
			fx.now_ns += 6000000000ull;
		else
			connection_control(&fx, &base, 4999, PB_TCP_SYN);
		fixture_drop_outputs(&fx);
		/* The new connection's data, far below the old one's end. */
		connection_burst(&fx, &base, 5000, 0);
		CHECK_EQ(fx.out_count, 1);
		fixture_expect_packet(&fx, 0, 5000, 3 * PAYLOAD);
		jg_engine_get_stats(fx.engine, &stats);
		CHECK_EQ(stats.merge.overlap_passes, 0);
		CHECK_EQ(stats.merge.connection_resets, 1);
		fixture_finish(&fx);
	}
}

HARNESS_MAIN(
	"jg_test_merge_flows", HARNESS_CASE(reorder_a_c_b),
	HARNESS_CASE(hole_releases_in_order), HARNESS_CASE(sequence_wraparound),
	HARNESS_CASE(overlap_and_duplicate),
	HARNESS_CASE(duplicate_then_new_data),
	HARNESS_CASE(restarted_run_does_not_wait),
	HARNESS_CASE(new_connection_on_the_same_tuple),
	HARNESS_CASE(delayed_merging_fast_vs_slow),
	HARNESS_CASE(global_delay_bound), HARNESS_CASE(timer_respects_deadline),
	HARNESS_CASE(wait_covers_poll_interval),
	HARNESS_CASE(first_burst_spans_two_polls),
	HARNESS_CASE(noted_polls_shorten_wait),
	HARNESS_CASE(joined_run_keeps_oldest_deadline),
	HARNESS_CASE(mss_learning), HARNESS_CASE(onload_offload),
	HARNESS_CASE(pinned_entries_bounded), HARNESS_CASE(idle_pins_expire),
	HARNESS_CASE(colliding_tuple_leaves_victim_alone),
	HARNESS_CASE(hash_secret_per_engine),
	HARNESS_CASE(half_full_table_evicts_nothing),
	HARNESS_CASE(mice_flood_eviction), HARNESS_CASE(eviction_flushes_held),
	HARNESS_CASE(ready_queue_carries_over), HARNESS_CASE(flow_entry_size),
	HARNESS_CASE(reconfigure_keeps_flows))
