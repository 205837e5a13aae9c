/* SPDX-License-Identifier: Apache-2.0 */
/* An engine with pools for one test, and checks every test shares:
 * outputs are valid packets, nothing leaks, every input is accounted. */
#ifndef JUMBOGATE_TEST_FIXTURE_H
#define JUMBOGATE_TEST_FIXTURE_H

#include <jumbogate/engine.h>

#include "harness.h"
#include "packet_builder.h"

#define FIXTURE_MAX_OUT 8192

struct fixture {
	struct jg_engine_config config;
	struct jg_engine *engine;
	struct rte_mbuf *out[FIXTURE_MAX_OUT];
	unsigned int out_count;
	uint64_t now_ns;
};

extern struct rte_mempool *fixture_pool;	/* 2 KB mbufs */
extern struct rte_mempool *fixture_header_pool; /* engine's own mbufs */

/* Create pools once per process. */
void fixture_pools(void);
/* Config with test defaults (pools set); adjust, then fixture_start. */
void fixture_config(struct fixture *fx);
void fixture_start(struct fixture *fx);
/* Merge a burst at fx->now_ns; outputs append to fx->out. */
void fixture_merge(struct fixture *fx, struct rte_mbuf **pkts, uint16_t n);
void fixture_merge_one(struct fixture *fx, struct rte_mbuf *m);
void fixture_timer(struct fixture *fx);
void fixture_flush(struct fixture *fx);
/* Free collected outputs. */
void fixture_drop_outputs(struct fixture *fx);
/* Check accounting, free everything, destroy, and check no mbuf leaked. */
void fixture_finish(struct fixture *fx);

/* A TCP segment of stream 0 at byte offset `offset` of the stream. */
struct rte_mbuf *fixture_segment(const struct pb_spec *base, uint32_t offset,
				 uint32_t length);

/* Check output i: valid, payload length, and the stream bytes it carries
 * (stream 0, stream offset = seq - base_seq). */
void fixture_expect_packet(struct fixture *fx, unsigned int i,
			   uint32_t base_seq, uint32_t payload_length);
/* Check all outputs are the given payload lengths in order. */
void fixture_expect_lengths(struct fixture *fx, uint32_t base_seq,
			    const uint32_t *lengths, unsigned int count);

/* Build `spec` as a chain of 2048-byte segments (as a jumbo RX would give
 * it), split it with jg_split_burst, check it was taken, and return the
 * number of packets written to out (at most cap). */
uint16_t fixture_split_one(struct fixture *fx, const struct pb_spec *spec,
			   struct rte_mbuf **out, uint16_t cap);

/* The start most merge tests share: test defaults, the engine started, and
 * `base` the defaults of IP version `version`. */
void fixture_begin(struct fixture *fx, struct pb_spec *base, int version);

/* The end most merge tests share: merge the burst, flush what is held,
 * expect outputs of these payload lengths in order from `base_seq`, then
 * fixture_finish. */
#define FIXTURE_MERGE_EXPECT(fx, pkts, n, base_seq, ...)                       \
	fixture_merge_expect((fx), (pkts), (n), (base_seq),                    \
			     (const uint32_t[]){__VA_ARGS__},                  \
			     sizeof((const uint32_t[]){__VA_ARGS__}) /         \
				     sizeof(uint32_t))
void fixture_merge_expect(struct fixture *fx, struct rte_mbuf **pkts,
			  uint16_t n, uint32_t base_seq,
			  const uint32_t *lengths, unsigned int count);

#endif /* JUMBOGATE_TEST_FIXTURE_H */
