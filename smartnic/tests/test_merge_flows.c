/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Merge across time: reordering, sequence wrap, overlap and
 * retransmission, the delay model and its global bound, and a new
 * connection on the same tuple. The flow table is test_flow_table.c's.
 */
#include <string.h>

#include <rte_mbuf.h>

#include "../engine/internal.h"
#include "flow_segments.h"

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

HARNESS_MAIN("jg_test_merge_flows", HARNESS_CASE(reorder_a_c_b),
	     HARNESS_CASE(hole_releases_in_order),
	     HARNESS_CASE(sequence_wraparound),
	     HARNESS_CASE(overlap_and_duplicate),
	     HARNESS_CASE(duplicate_then_new_data),
	     HARNESS_CASE(restarted_run_does_not_wait),
	     HARNESS_CASE(new_connection_on_the_same_tuple),
	     HARNESS_CASE(delayed_merging_fast_vs_slow),
	     HARNESS_CASE(global_delay_bound),
	     HARNESS_CASE(timer_respects_deadline),
	     HARNESS_CASE(wait_covers_poll_interval),
	     HARNESS_CASE(first_burst_spans_two_polls),
	     HARNESS_CASE(noted_polls_shorten_wait),
	     HARNESS_CASE(joined_run_keeps_oldest_deadline))
