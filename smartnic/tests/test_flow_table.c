/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flow table: MSS learning, onload/offload and pins, hash collisions
 * and secrets, eviction under pressure, the ready queue, the entry's size,
 * and reconfiguration that keeps the flows.
 */
#include <string.h>

#include <rte_mbuf.h>

#include "../engine/internal.h"
#include "flow_segments.h"

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

/* An onload another engine refused is taken back as if it never came:
 * a flow merged unknown keeps merging and what it holds, a flow new to
 * the engine leaves the table, an offloaded flow stays offloaded. An
 * offload instead would stop the first and keep the second. */
static void onload_undo_restores_the_flow(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct jg_flow_key key, fresh;
	struct jg_onload_undo undo;
	struct jg_stats before, after;
	struct rte_mbuf *out[8];
	unsigned int out_before;

	fixture_begin(&fx, &base, 4);
	key_of(&base, &key);
	/* Fast enough (10 Gbit/s) for the delay model to hold its tail. */
	fast_flow(&fx, &base, 0, 100, 100);
	jg_engine_get_stats(fx.engine, &before);
	CHECK(before.merge.held_now > 0);
	out_before = fx.out_count;
	CHECK_EQ(jg_flow_onload_undoable(fx.engine, &key, &undo), 0);
	CHECK(jg_flow_is_onloaded(fx.engine, &key));
	jg_flow_onload_undo(fx.engine, &key, &undo);
	CHECK(!jg_flow_is_onloaded(fx.engine, &key));
	jg_engine_get_stats(fx.engine, &after);
	CHECK_EQ(after.merge.held_now, before.merge.held_now);
	CHECK_EQ(after.flows_now, before.flows_now);
	CHECK_EQ(fx.out_count, out_before);
	/* Still merged: 24 more segments leave in far fewer packets. */
	fast_flow(&fx, &base, 100, 24, 100);
	fixture_flush(&fx);
	CHECK(fx.out_count - out_before < 12);
	fixture_drop_outputs(&fx);

	numbered_key(14, 1, &fresh);
	CHECK_EQ(jg_flow_onload_undoable(fx.engine, &fresh, &undo), 0);
	jg_flow_onload_undo(fx.engine, &fresh, &undo);
	jg_engine_get_stats(fx.engine, &after);
	CHECK_EQ(after.flows_now, before.flows_now);
	CHECK(!jg_flow_is_onloaded(fx.engine, &fresh));

	CHECK_EQ(jg_flow_offload(fx.engine, &key, out, 8), 0);
	CHECK_EQ(jg_flow_onload_undoable(fx.engine, &key, &undo), 0);
	jg_flow_onload_undo(fx.engine, &key, &undo);
	fast_flow(&fx, &base, 124, 4, 100);
	CHECK_EQ(fx.out_count, 4); /* passed one by one */
	fixture_finish(&fx);
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

/* What the control layer asks of an engine to keep its onload list: the
 * pin budget, and whether a flow still holds its pin (the idle rule of
 * eviction), by a clock that moves without traffic. */
static void onload_state_follows_the_clock(void)
{
	struct fixture fx;
	struct jg_flow_key a, b, unknown;
	struct jg_stats stats;
	struct jg_engine_config config;

	jg_engine_config_init(&config);
	config.max_flows = 1000; /* a table of 1024 */
	CHECK_EQ(jg_engine_pin_budget(&config), 256);
	config.max_onloaded_flows = 5;
	CHECK_EQ(jg_engine_pin_budget(&config), 5);
	config.max_onloaded_flows = 5000;
	CHECK_EQ(jg_engine_pin_budget(&config), 1024);

	fixture_config(&fx);
	fx.config.max_flows = 1024;
	fx.config.max_onloaded_flows = 4;
	fx.config.onload_idle_s = 1;
	fixture_start(&fx);
	numbered_key(12, 0, &a);
	numbered_key(12, 1, &b);
	numbered_key(13, 0, &unknown);
	CHECK(!jg_flow_is_onloaded(fx.engine, &a));
	CHECK_EQ(jg_flow_onload(fx.engine, &a), 0);
	CHECK_EQ(jg_flow_onload(fx.engine, &b), 0);
	CHECK(jg_flow_is_onloaded(fx.engine, &a));
	CHECK(jg_flow_is_onloaded(fx.engine, &b));
	CHECK(!jg_flow_is_onloaded(fx.engine, &unknown));

	/* No traffic: only jg_engine_advance_clock moves the clock. Onloading
	 * a again at 0.6 s refreshes its pin; at 1.2 s b's has lapsed. */
	jg_engine_advance_clock(fx.engine, fx.now_ns + 600000000ull);
	CHECK_EQ(jg_flow_onload(fx.engine, &a), 0);
	jg_engine_advance_clock(fx.engine, fx.now_ns + 1200000000ull);
	CHECK(jg_flow_is_onloaded(fx.engine, &a));
	CHECK(!jg_flow_is_onloaded(fx.engine, &b));
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.pins_expired, 1);
	/* The clock never goes back. */
	jg_engine_advance_clock(fx.engine, fx.now_ns);
	CHECK(!jg_flow_is_onloaded(fx.engine, &b));
	/* A lapsed flow onloaded again holds its pin again. */
	CHECK_EQ(jg_flow_onload(fx.engine, &b), 0);
	CHECK(jg_flow_is_onloaded(fx.engine, &b));
	/* A burst dated by the same clock agrees; asking created nothing. */
	fx.now_ns += 1900000000ull;
	fixture_timer(&fx);
	CHECK(jg_flow_is_onloaded(fx.engine, &b));
	CHECK(!jg_flow_is_onloaded(fx.engine, &a));
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.flows_now, 2);
	CHECK_EQ(stats.merge.pins_expired, 2);
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
	/* Every flow the table can hold costs what the stats say: the
	 * table's share of the engine's memory is capacity times that. */
	CHECK(stats.flow_state_bytes > stats.flow_entry_bytes);
	CHECK((uint64_t)stats.flow_capacity * stats.flow_state_bytes <=
	      stats.memory_bytes);
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

HARNESS_MAIN("jg_test_flow_table", HARNESS_CASE(mss_learning),
	     HARNESS_CASE(onload_offload),
	     HARNESS_CASE(onload_undo_restores_the_flow),
	     HARNESS_CASE(pinned_entries_bounded),
	     HARNESS_CASE(idle_pins_expire),
	     HARNESS_CASE(onload_state_follows_the_clock),
	     HARNESS_CASE(colliding_tuple_leaves_victim_alone),
	     HARNESS_CASE(hash_secret_per_engine),
	     HARNESS_CASE(half_full_table_evicts_nothing),
	     HARNESS_CASE(mice_flood_eviction),
	     HARNESS_CASE(eviction_flushes_held),
	     HARNESS_CASE(ready_queue_carries_over),
	     HARNESS_CASE(flow_entry_size),
	     HARNESS_CASE(reconfigure_keeps_flows))
