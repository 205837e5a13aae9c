/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seed corpus of the engine's fuzz target (fuzz_engine.c), which the
 * path MTU target starts from too: TCP streams to merge (in order and
 * reordered), a segment to split after a path-MTU rule, UDP datagrams to
 * pack and a caravan to unpack.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "packet_builder.h"
#include "replay.h"

static void record(struct fuzz_seed *w, uint8_t op, uint8_t split,
		   const struct pb_spec *spec)
{
	static uint8_t frame[PB_MAX_FRAME];
	const uint8_t header[] = {op, split};

	fuzz_seed_record(w, header, sizeof(header), frame,
			 (uint16_t)pb_frame(spec, frame));
}

static void raw_record(struct fuzz_seed *w, uint8_t op, const uint8_t *bytes,
		       uint16_t length)
{
	const uint8_t header[] = {op, 0};

	fuzz_seed_record(w, header, sizeof(header), bytes, length);
}

/* Ops as the target reads them (see fuzz_engine.c). */
#define OP_MERGE	   0u
#define OP_MERGE_BURST_END 1u
#define OP_SPLIT	   2u
#define OP_CARAVAN_PACK	   3u
#define OP_CARAVAN_UNPACK  4u
#define OP_SET_PMTU	   6u
#define CHECKSUM_GOOD	   8u
#define STEP(units)	   ((uint8_t)((units) << 4))

static void tcp_stream(struct fuzz_seed *w, uint8_t ip_version, bool reorder,
		       bool good)
{
	static uint8_t payload[1448];
	struct pb_spec spec;
	const unsigned int order[8] = {0, 2, 1, 3, 5, 4, 6, 7};

	pb_defaults(&spec, ip_version);
	spec.payload = payload;
	for (unsigned int i = 0; i < 8; i++) {
		unsigned int k = reorder ? order[i] : i;

		pb_stream_fill(0, k * 1448, payload, sizeof(payload));
		spec.seq = 1000 + k * 1448;
		spec.ip_id = (uint16_t)(100 + k);
		spec.payload_length = k == 7 ? 700 : 1448;
		spec.tcp_flags = k == 7 ? PB_TCP_ACK | PB_TCP_PSH : PB_TCP_ACK;
		record(w,
		       (uint8_t)((i == 7 ? OP_MERGE_BURST_END : OP_MERGE) |
				 (good ? CHECKSUM_GOOD : 0) | STEP(i % 2)),
		       i == 3 ? 32 : 0, &spec);
	}
}

int fuzz_write_seeds(const char *dir)
{
	static struct fuzz_seed w;
	static uint8_t payload[8000];
	struct pb_spec spec;
	int status = 0;

	tcp_stream(&w, 4, false, true);
	status |= fuzz_seed_save(&w, dir, "seed-merge-v4");

	tcp_stream(&w, 6, true, false);
	status |= fuzz_seed_save(&w, dir, "seed-merge-v6-reordered");

	/* A SYN from the rack with an MSS option, then a jumbo segment of
	 * the same flow to split, after a path-MTU rule. */
	{
		uint8_t rule[20] = {0, 8, 198};

		rule[18] = 0x05;
		rule[19] = 0x00; /* 1280 */
		raw_record(&w, OP_SET_PMTU, rule, sizeof(rule));
	}
	pb_defaults(&spec, 4);
	spec.src_v4 = 0x0a000002;
	spec.dst_v4 = 0xc6336401;
	spec.src_port = 40000;
	spec.dst_port = 443;
	spec.tcp_flags = PB_TCP_SYN;
	spec.tcp_options_length = 4;
	spec.tcp_options[0] = 2;
	spec.tcp_options[1] = 4;
	spec.tcp_options[2] = 0x21;
	spec.tcp_options[3] = 0x04;
	record(&w, OP_SPLIT, 0, &spec);
	spec.tcp_flags = PB_TCP_ACK;
	spec.tcp_options_length = 0;
	pb_stream_fill(1, 0, payload, sizeof(payload));
	spec.payload = payload;
	spec.payload_length = sizeof(payload);
	record(&w, OP_SPLIT, 0, &spec);
	spec.ip_version = 6;
	record(&w, OP_SPLIT, 64, &spec);
	status |= fuzz_seed_save(&w, dir, "seed-split");

	/* UDP datagrams of one flow to pack, and a caravan to unpack. */
	pb_defaults(&spec, 4);
	spec.l4_protocol = 17;
	spec.payload = payload;
	spec.payload_length = 1000;
	for (unsigned int i = 0; i < 4; i++) {
		spec.ip_id = (uint16_t)(7 + i);
		record(&w, OP_CARAVAN_PACK, 0, &spec);
	}
	{
		/* Header, two records, two 8-byte payloads. */
		uint8_t caravan[6 + 2 * 6 + 16] = {
			0x4a, 0x43, 1, 2, 0, 0, 0, 8, 0,
			1,    0,    0, 0, 8, 0, 2, 0, 0,
		};

		spec.tos = 43 << 2;
		spec.payload = caravan;
		spec.payload_length = sizeof(caravan);
		record(&w, OP_CARAVAN_UNPACK, 0, &spec);
	}
	status |= fuzz_seed_save(&w, dir, "seed-caravan");
	return status;
}
