/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seed corpus of the switch's pipeline target (fuzz_pipeline.c): the
 * rack fixture's traffic on each of the pipeline's paths, so that the
 * fuzzer starts from frames that get past the parser and the tables.
 */
#include <stdbool.h>
#include <string.h>

#include "rack_fixture.h"
#include "replay.h"

/* The target's ops (fuzz_pipeline.c). */
#define OP_FRAME_EXTERNAL 0u
#define OP_FRAME_INTERNAL 1u
#define OP_FRAME_NIC	  2u
#define OP_ROUTE	  3u
#define OP_MERGE_FLOW	  4u
#define OP_INSTANCE	  5u
#define OP_PATH_MTU	  6u
#define SECOND_PORT	  8u
#define AFTER_MS(ms)	  ((uint8_t)((ms) << 4))

#define JUMBO_BYTES 4014u

static void record(struct fuzz_seed *w, uint8_t op, const uint8_t *bytes,
		   uint32_t length)
{
	fuzz_seed_record(w, &op, 1, bytes, (uint16_t)length);
}

static void store16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Grows a fixture frame to JUMBO_BYTES: bigger than the Internet's 1,500
 * bytes, as the SmartNIC's merged frames are. */
static uint32_t grow(uint8_t *frame, bool v6)
{
	rack_fixture_resize(frame, v6, JUMBO_BYTES);
	return JUMBO_BYTES;
}

/* The fixture's reply from the rack, grown: the switch sends it to the
 * SmartNIC to be split, or drops and signals it when it comes from there. */
static uint32_t jumbo_reply(uint8_t *frame, bool v6)
{
	rack_fixture_reply(frame, v6, P4_IP_PROTO_TCP, 40000);
	return grow(frame, v6);
}

int fuzz_write_seeds(const char *dir)
{
	static struct fuzz_seed w;
	static uint8_t frame[JUMBO_BYTES];
	int status = 0;

	/* Bypass both ways, TCP and UDP, both IP versions. */
	for (int v6 = 0; v6 <= 1; v6++) {
		rack_fixture_frame(frame, v6, P4_IP_PROTO_TCP, 1000);
		record(&w, OP_FRAME_EXTERNAL, frame, FRAME_BYTES);
		rack_fixture_reply(frame, v6, P4_IP_PROTO_TCP, 1000);
		record(&w, OP_FRAME_INTERNAL, frame, FRAME_BYTES);
		rack_fixture_frame(frame, v6, P4_IP_PROTO_UDP, 1001);
		record(&w, OP_FRAME_EXTERNAL | SECOND_PORT, frame, FRAME_BYTES);
	}
	status |= fuzz_seed_save(&w, dir, "seed-bypass");

	/* A flow grows into an elephant, which the switch reports (it is
	 * steered once the controller puts it in merge_flows); an onloaded
	 * flow (the fixture's source ports 20000 on) is steered to the
	 * SmartNIC from its first frame, and a merged frame of it comes back
	 * to the rack. */
	rack_fixture_frame(frame, false, P4_IP_PROTO_TCP, 3000);
	for (int i = 0; i < 6; i++)
		record(&w, OP_FRAME_EXTERNAL | AFTER_MS(i == 3), frame,
		       FRAME_BYTES);
	rack_fixture_frame(frame, true, P4_IP_PROTO_TCP, 20000);
	record(&w, OP_FRAME_EXTERNAL, frame, FRAME_BYTES);
	rack_fixture_frame(frame, false, P4_IP_PROTO_TCP, 20000);
	record(&w, OP_FRAME_NIC, frame, grow(frame, false));
	status |= fuzz_seed_save(&w, dir, "seed-steer");

	/* Too big for the Internet's path: from the rack to the SmartNIC to
	 * be split, from the SmartNIC dropped and signalled with ICMP; after
	 * a smaller path MTU is measured, a 1,500-byte frame is split too. */
	for (int v6 = 0; v6 <= 1; v6++) {
		record(&w, OP_FRAME_INTERNAL, frame, jumbo_reply(frame, v6));
		record(&w, OP_FRAME_NIC, frame, jumbo_reply(frame, v6));
	}
	{
		/* 1,280 bytes towards 198.51.100.10 (flags: a host route). */
		const uint8_t mtu[] = {2, 0x05, 0x00, 198, 51, 100, 10};

		record(&w, OP_PATH_MTU, mtu, sizeof(mtu));
	}
	rack_fixture_reply(frame, false, P4_IP_PROTO_TCP, 40000);
	record(&w, OP_FRAME_INTERNAL, frame, FRAME_BYTES);
	status |= fuzz_seed_save(&w, dir, "seed-split-signal");

	/* The controller's writes between frames: a route of its own, the
	 * fixture's first flow put in merge_flows (so steered), its
	 * instance's jumbo frames turned off (so the SmartNIC's merged frame
	 * towards it is dropped and signalled). */
	{
		uint8_t route[18] = {0, 24, 10, 1, 0};

		record(&w, OP_ROUTE, route, sizeof(route));
		route[0] = 2; /* removed again */
		record(&w, OP_ROUTE, route, sizeof(route));
	}
	{
		uint8_t flow[1 + SW_FLOW_KEY_LEN] = {2}, *key = flow + 1;

		key[P4_TABLE_MERGE_FLOWS_KEY_IP_VERSION_OFFSET] = 4;
		memcpy(key + P4_TABLE_MERGE_FLOWS_KEY_SRC_ADDR_OFFSET + 12,
		       "\xc6\x33\x64\x0a", 4);
		memcpy(key + P4_TABLE_MERGE_FLOWS_KEY_DST_ADDR_OFFSET + 12,
		       "\x0a\x01\x00\x05", 4);
		key[P4_TABLE_MERGE_FLOWS_KEY_PROTOCOL_OFFSET] = P4_IP_PROTO_TCP;
		store16(key + P4_TABLE_MERGE_FLOWS_KEY_SRC_PORT_OFFSET, 1000);
		store16(key + P4_TABLE_MERGE_FLOWS_KEY_DST_PORT_OFFSET, 443);
		record(&w, OP_MERGE_FLOW, flow, sizeof(flow));
	}
	rack_fixture_frame(frame, false, P4_IP_PROTO_TCP, 1000);
	record(&w, OP_FRAME_EXTERNAL | AFTER_MS(15), frame, FRAME_BYTES);
	{
		const uint8_t instance[] = {0, 10, 1, 0, 5};

		record(&w, OP_INSTANCE, instance, sizeof(instance));
	}
	rack_fixture_frame(frame, false, P4_IP_PROTO_TCP, 1000);
	record(&w, OP_FRAME_NIC, frame, grow(frame, false));
	status |= fuzz_seed_save(&w, dir, "seed-tables");
	return status;
}
