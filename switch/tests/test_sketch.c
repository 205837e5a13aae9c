/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The elephant sketch's rows and Bloom hashes collide independently
 * (pipeline_flow_hash.c says why salted CRCs did not): over many random
 * flows, a pair that shares a cell of one row seldom shares the cell of
 * another; and, through sw_pipeline_run, a mouse that shares one row's
 * cell with an elephant is not reported as an elephant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"
#include "rack_fixture.h"

#define RANDOM_FLOWS 100000

static uint64_t xorshift(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static int by_row0(const void *a, const void *b)
{
	const struct sw_sketch_cells *x = a, *y = b;

	return (x->row[0] > y->row[0]) - (x->row[0] < y->row[0]);
}

/* Among pairs of random flows that share row 0's cell, how many also
 * share row 1's, row 2's, and a Bloom cell pair; expected about one pair
 * in 4,096 (8,192 for the Bloom filter), and every pair when the hashes
 * are the same function in disguise. */
static int rows_collide_independently(void)
{
	struct sw_sketch_cells *all = calloc(RANDOM_FLOWS, sizeof(*all));
	uint64_t state = 0x9e3779b97f4a7c15ull, pairs = 0, also[3] = {0};
	int failed = 0;

	if (all == NULL)
		return 1;
	for (int i = 0; i < RANDOM_FLOWS; i++) {
		uint8_t key[SW_KEY_MAX] = {0};

		for (size_t b = 0; b < SW_FLOW_KEY_LEN; b += 8) {
			uint64_t word = xorshift(&state);

			memcpy(key + b, &word,
			       SW_FLOW_KEY_LEN - b < 8 ? SW_FLOW_KEY_LEN - b
						       : 8);
		}
		sw_sketch_cells(key, &all[i]);
	}
	qsort(all, RANDOM_FLOWS, sizeof(*all), by_row0);
	for (int i = 1; i < RANDOM_FLOWS; i++) {
		const struct sw_sketch_cells *a = &all[i - 1], *b = &all[i];

		if (a->row[0] != b->row[0])
			continue;
		pairs++;
		also[0] += a->row[1] == b->row[1];
		also[1] += a->row[2] == b->row[2];
		also[2] += a->bloom[0] == b->bloom[0] &&
			   a->bloom[1] == b->bloom[1];
	}
	printf("%llu pairs share row 0; of them %llu share row 1, %llu row 2, "
	       "%llu both Bloom cells\n",
	       (unsigned long long)pairs, (unsigned long long)also[0],
	       (unsigned long long)also[1], (unsigned long long)also[2]);
	/* 100,000 flows in 4,096 columns: about 96,000 pairs, 23 expected
	 * to share another row by chance. */
	if (pairs < 50000) {
		fprintf(stderr, "FAIL: only %llu pairs to judge by\n",
			(unsigned long long)pairs);
		failed = 1;
	}
	for (int k = 0; k < 3; k++) {
		if (also[k] > pairs / 400) {
			fprintf(stderr,
				"FAIL: %llu of %llu pairs that share row 0 "
				"also share %s\n",
				(unsigned long long)also[k],
				(unsigned long long)pairs,
				k == 0	 ? "row 1"
				: k == 1 ? "row 2"
					 : "their Bloom cells");
			failed = 1;
		}
	}
	free(all);
	return failed;
}

#define MAX_DIGESTS 16

struct digests {
	int count;
	struct sw_elephant_digest seen[MAX_DIGESTS];
};

static bool collect(void *context, const struct sw_elephant_digest *digest)
{
	struct digests *d = context;

	if (d->count == MAX_DIGESTS)
		return false;
	d->seen[d->count++] = *digest;
	return true;
}

static void cells_of(uint16_t sport, struct sw_sketch_cells *cells)
{
	uint8_t key[SW_KEY_MAX];
	struct flow flow = {0};

	/* The fixture's flow: 198.51.100.10:sport -> 10.1.0.5:443, TCP. */
	flow.ip_version = 4;
	memcpy(flow.src_addr + 12, "\xc6\x33\x64\x0a", 4);
	memcpy(flow.dst_addr + 12, "\x0a\x01\x00\x05", 4);
	flow.protocol = P4_IP_PROTO_TCP;
	flow.src_port = sport;
	flow.dst_port = 443;
	sw_flow_key(&flow, key);
	sw_sketch_cells(key, cells);
}

static int send(struct sw_pipeline *pipeline, uint16_t sport, uint64_t now_ns)
{
	uint8_t frame[FRAME_BYTES];
	uint32_t length = FRAME_BYTES;

	rack_fixture_frame(frame, false, P4_IP_PROTO_TCP, sport);
	return sw_pipeline_run(pipeline, 0, frame, &length, PORT_EXTERNAL,
			       now_ns);
}

static int mouse_beside_an_elephant_is_not_reported(void)
{
	static struct sw_pipeline pipeline;
	const uint16_t elephant = 10000;
	struct digests digests = {0};
	struct sw_sketch_cells big, small;
	uint64_t now = 1000000000ull;
	int failed = 0, mouse = -1;

	if (sw_pipeline_init(&pipeline, 512, 255, now) != 0)
		return 1;
	rack_fixture_program(&pipeline, 1);
	pipeline.tables.elephant_threshold = 10 * FRAME_BYTES;
	pipeline.digest_sink = collect;
	pipeline.digest_context = &digests;

	/* A source port whose flow shares the elephant's row-0 cell and
	 * neither of its Bloom cells (so only the sketch decides). */
	cells_of(elephant, &big);
	for (int port = elephant + 1; port <= 65535 && mouse < 0; port++) {
		cells_of((uint16_t)port, &small);
		if (small.row[0] == big.row[0] &&
		    small.bloom[0] != big.bloom[0] &&
		    small.bloom[0] != big.bloom[1] &&
		    small.bloom[1] != big.bloom[0] &&
		    small.bloom[1] != big.bloom[1])
			mouse = port;
	}
	if (mouse < 0) {
		fprintf(stderr, "FAIL: no source port shares the elephant's "
				"row-0 cell alone\n");
		sw_pipeline_free(&pipeline);
		return 1;
	}
	for (int i = 0; i < 12; i++)
		if (send(&pipeline, elephant, now) != PORT_INTERNAL)
			failed = 1;
	if (send(&pipeline, (uint16_t)mouse, now) != PORT_INTERNAL)
		failed = 1;
	printf("elephant port %u, mouse port %d in the same row-0 cell: %d "
	       "digest(s)\n",
	       elephant, mouse, digests.count);
	if (failed)
		fprintf(stderr, "FAIL: a packet was not routed to the rack\n");
	if (digests.count < 1 || digests.seen[0].src_port != elephant) {
		fprintf(stderr, "FAIL: the elephant was not reported\n");
		failed = 1;
	}
	for (int i = 0; i < digests.count; i++) {
		if (digests.seen[i].src_port == mouse) {
			fprintf(stderr,
				"FAIL: the mouse (one packet, %u bytes) was "
				"reported with an estimate of %u bytes\n",
				FRAME_BYTES, digests.seen[i].estimated_bytes);
			failed = 1;
		}
	}
	sw_pipeline_free(&pipeline);
	return failed;
}

int main(void)
{
	int failed = rows_collide_independently();

	failed |= mouse_beside_an_elephant_is_not_reported();
	puts(failed ? "test_sketch: FAILED" : "test_sketch: passed");
	return failed;
}
