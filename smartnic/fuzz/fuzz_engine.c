/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: arbitrary bytes become a sequence of packets and time
 * steps fed to every entry point of one engine (merge, timers, split,
 * caravan pack and unpack, flow onload, offload and an onload taken
 * back). After each input everything is flushed and the invariants every
 * caller relies on are checked: every returned packet is a well-formed
 * mbuf chain, the merge accounting balances, and every mbuf is back in
 * its pool. Under AddressSanitizer each frame's head- and tailroom are
 * unaddressable, so the engine may touch only the bytes that arrived (it
 * allocates its own mbufs from the header pool, never from the frames'
 * pool).
 *
 * Input: records of
 *   op (1 byte)  bits 0-2: what to do, bit 3: RX checksums marked good,
 *                bits 4-7: time step in units of 8 us before the record
 *   split (1)    0: one mbuf, else mbufs of split * 8 bytes
 *   length (2)   big endian, then that many packet bytes
 * The same engine lives across inputs, so state left behind by one input
 * (flows, path-MTU rules) meets the next, as it does on a NIC.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <jumbogate/engine.h>

#include "packet_builder.h"

#define MAX_PACKET    9216u
#define OUT_CAP	      512u
#define POOL_SIZE     8191u
#define TIME_STEP_NS  8000u
#define RECORD_HEADER 4u
#define MIN_SEGMENT   64u

enum op {
	OP_MERGE,
	OP_MERGE_BURST_END, /* merge, then run the timer at the same time */
	OP_SPLIT,
	OP_CARAVAN_PACK,
	OP_CARAVAN_UNPACK,
	OP_OFFLOAD_FLOW, /* offload, onload or take back an onload of the
			  * flow of the packet's bytes (their first byte's
			  * low bits say which) */
	OP_SET_PMTU,	 /* packet bytes: a prefix and an MTU */
	OP_FLUSH,
};

static struct jg_engine *engine;
static struct rte_mempool *pool, *header_pool;
static uint64_t now_ns = 1000000;

static void die(const char *what)
{
	fprintf(stderr, "fuzz invariant broken: %s\n", what);
	abort();
}

static void init_once(void)
{
	static char *eal_argv[] = {
		"fuzz",	       "--no-huge",   "--no-pci",
		"-l",	       "0",	      "-m",
		"256",	       "--no-shconf", "--no-telemetry",
		"--log-level", "*:critical",  "--file-prefix=jumbogate-fuzz",
	};
	struct jg_engine_config config;

	if (engine != NULL)
		return;
	if (rte_eal_init((int)RTE_DIM(eal_argv), eal_argv) < 0)
		die("EAL init");
	pool = pb_pool("fuzz_pool", POOL_SIZE, 2048);
	header_pool = pb_pool("fuzz_headers", POOL_SIZE, 2048);
	if (pool == NULL || header_pool == NULL)
		die("pools");
	jg_engine_config_init(&config);
	config.header_pool = header_pool;
	config.max_flows = 256;
	config.max_held_segments = 1024;
	/* Every flow waits, so the timer paths run too. */
	config.delay.rate_threshold_gbps = 0.0;
	config.delay.yield_threshold = 1.0;
	config.name = "fuzz";
	engine = jg_engine_create(&config);
	if (engine == NULL)
		die("engine create");
}

static void check_and_free(struct rte_mbuf **out, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		const char *reason = NULL;

		if (rte_mbuf_check(out[i], 1, &reason) != 0)
			die(reason);
		rte_pktmbuf_free(out[i]);
	}
}

static void set_pmtu(const uint8_t *bytes, uint16_t length)
{
	struct jg_prefix prefix;

	if (length < 20)
		return;
	memset(&prefix, 0, sizeof(prefix));
	prefix.ip_version = bytes[0] & 1 ? 6 : 4;
	prefix.depth = bytes[1];
	memcpy(&prefix.addr, bytes + 2, 16);
	/* Both outcomes are fine; errors must be reported, not crash. */
	if (bytes[0] & 2)
		(void)jg_pmtu_delete(engine, &prefix);
	else
		(void)jg_pmtu_set(engine, &prefix,
				  (uint16_t)(bytes[18] << 8 | bytes[19]));
}

/* An onload not yet taken back (offload_flow). */
static struct {
	bool held;
	struct jg_flow_key key;
	struct jg_onload_undo undo;
} undoable;

static void offload_flow(const uint8_t *bytes, uint16_t length)
{
	struct jg_flow_key key;
	struct rte_mbuf *out[OUT_CAP];
	int n;

	if (length < sizeof(key))
		return;
	memcpy(&key, bytes, sizeof(key));
	if ((bytes[0] & 3) == 3) {
		/* An onload kept to be taken back by a later record, as the
		 * program takes back one another engine refused. */
		if (!undoable.held &&
		    jg_flow_onload_undoable(engine, &key, &undoable.undo) ==
			    0) {
			undoable.key = key;
			undoable.held = true;
		}
		return;
	}
	if (bytes[0] & 1) {
		(void)jg_flow_onload(engine, &key);
		return;
	}
	if ((bytes[0] & 2) && undoable.held) {
		jg_flow_onload_undo(engine, &undoable.key, &undoable.undo);
		undoable.held = false;
		return;
	}
	n = jg_flow_offload(engine, &key, out, OUT_CAP);
	if (n > 0)
		check_and_free(out, (uint16_t)n);
	(void)jg_flow_internal_mss(engine, &key);
}

/* Split, pack and unpack stop early when out is full; feed the rest. */
typedef uint16_t (*stage_fn)(struct jg_engine *, struct rte_mbuf **, uint16_t,
			     struct rte_mbuf **, uint16_t, uint16_t *);

static void run_stage(stage_fn stage, struct rte_mbuf *m)
{
	struct rte_mbuf *out[OUT_CAP];
	uint16_t consumed = 0, n;

	n = stage(engine, &m, 1, out, OUT_CAP, &consumed);
	check_and_free(out, n);
	if (consumed != 1)
		die("stage did not take its input with room for 512");
}

static void process(uint8_t op, struct rte_mbuf *m)
{
	struct rte_mbuf *out[OUT_CAP];
	uint16_t n;

	switch (op & 7) {
	case OP_MERGE:
	case OP_MERGE_BURST_END:
		n = jg_merge_burst(engine, &m, 1, now_ns, out, OUT_CAP);
		check_and_free(out, n);
		if ((op & 7) == OP_MERGE_BURST_END) {
			n = jg_merge_timer(engine, now_ns, out, OUT_CAP);
			check_and_free(out, n);
		}
		break;
	case OP_SPLIT:
		run_stage(jg_split_burst, m);
		break;
	case OP_CARAVAN_PACK:
		run_stage(jg_caravan_pack, m);
		break;
	default:
		run_stage(jg_caravan_unpack, m);
		break;
	}
}

static void flush_and_check(void)
{
	struct rte_mbuf *out[OUT_CAP];
	struct jg_stats stats;
	uint16_t n;

	while ((n = jg_merge_flush_all(engine, out, OUT_CAP)) > 0)
		check_and_free(out, n);
	jg_engine_get_stats(engine, &stats);
	if (stats.merge.packets_in != stats.merge.segments_out +
					      stats.merge.held_now +
					      stats.merge.dropped)
		die("merge accounting");
	if (stats.merge.held_now != 0 || stats.merge.ready_now != 0)
		die("flush left packets held");
	if (rte_mempool_in_use_count(pool) != 0 ||
	    rte_mempool_in_use_count(header_pool) != 0)
		die("mbuf leak");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t at = 0;

	init_once();
	while (at + RECORD_HEADER <= size) {
		uint8_t op = data[at], split = data[at + 1];
		uint16_t length = (uint16_t)(data[at + 2] << 8 | data[at + 3]);
		struct rte_mbuf *m;

		at += RECORD_HEADER;
		if (length > size - at)
			length = (uint16_t)(size - at);
		if (length > MAX_PACKET)
			length = MAX_PACKET;
		now_ns += (uint64_t)(op >> 4) * TIME_STEP_NS;
		if ((op & 7) == OP_SET_PMTU) {
			set_pmtu(data + at, length);
		} else if ((op & 7) == OP_OFFLOAD_FLOW) {
			offload_flow(data + at, length);
		} else if ((op & 7) == OP_FLUSH) {
			flush_and_check();
		} else if (length > 0) {
			m = pb_from_bytes(
				pool, data + at, length,
				split == 0 ? 0
					   : (uint16_t)RTE_MAX(split * 8u,
							       MIN_SEGMENT));
			/* Held packets may use up the pool: that record is
			 * skipped, as a NIC drops when its ring is empty. */
			if (m == NULL) {
				at += length;
				continue;
			}
			/* A read past the frame's bytes is reported, not
			 * lost in the rest of a 2 KB buffer. */
			pb_poison_slack(m);
			if (op & 8)
				m->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_GOOD |
					       RTE_MBUF_F_RX_L4_CKSUM_GOOD;
			process(op, m);
		}
		at += length;
	}
	flush_and_check();
	return 0;
}
