/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the switch's pipeline (sw_pipeline_run) on frames an
 * outsider chooses, arriving on every kind of port, between writes to the
 * tables the controller fills (routes, path MTUs, instances, merge_flows).
 *
 * An input is a list of records: an op byte, a length (2 bytes,
 * big-endian) and that many bytes. The op's low three bits say what the
 * record is (OP_*), bit 3 picks the second port of a frame's pair, and the
 * high four bits advance the clock by that many milliseconds, so that the
 * elephant sketch's epochs turn and entries' last hits age.
 *
 * Every input starts from the pipeline programmed as the rack fixture
 * (rack_fixture.h), so that a crash replays alone: what an input wrote to
 * the tables is undone after it, and the state its frames leave (the
 * elephant sketch, the counters) is cleared. Creating the pipeline for
 * every input instead clears its 15 MB of tables each time, which left
 * the fuzzer 82 inputs a second. Besides what the sanitizers catch, it
 * checks that:
 *  - a frame leaves on a port the switch can have, or is dropped;
 *  - the pipeline reads and writes no further than the frame, plus the
 *    headers an ICMP error puts before its quote when a path MTU the
 *    input wrote lets an error be longer than its frame (the frame sits in
 *    a buffer of exactly that size, so AddressSanitizer sees any byte
 *    beyond);
 *  - a table write that succeeded is what a lookup then finds;
 *  - the routes' longest-prefix matches agree with a linear search over
 *    the routes the input holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "prefix_oracle.h"
#include "rack_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
	OP_FRAME_EXTERNAL = 0, /* uplinks 1 and 2 */
	OP_FRAME_INTERNAL = 1, /* the rack, or a port without a role */
	OP_FRAME_NIC = 2,      /* the SmartNIC, or the CPU port */
	OP_ROUTE = 3,
	OP_MERGE_FLOW = 4,
	OP_INSTANCE = 5,
	OP_PATH_MTU = 6,
};

#define MAX_FRAME   9600u
#define CPU_PORT    255u
#define PARSE_DEPTH 512u
/*
 * An ICMP error puts its own IP and ICMP headers in front of the quote in
 * place of the frame's: at most this many bytes more. It is longer than
 * the frame it answers only when the MTU it reports is below
 * SIGNAL_MAX_BYTES (the IPv6 error with its 1,232-byte quote), which only
 * a path MTU the input wrote can make: until then a frame gets no room
 * beyond its own bytes, so that reading past them is caught too.
 */
#define SIGNAL_GROWTH	 (40u + P4_ICMP_BYTES)
#define SIGNAL_MAX_BYTES (40u + P4_ICMP_BYTES + P4_ICMPV6_QUOTE_BYTES)

static bool small_path_mtu;

static const uint16_t frame_ports[3][2] = {
	[OP_FRAME_EXTERNAL] = {PORT_EXTERNAL, PORT_EXTERNAL_2},
	[OP_FRAME_INTERNAL] = {PORT_INTERNAL, 7},
	[OP_FRAME_NIC] = {PORT_NIC, CPU_PORT},
};

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* FUZZ_TRACE=1 prints what became of each frame (to read a reproducer). */
static bool trace;

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_pipeline: %s\n", what);
	abort();
}

/* ------------------------------------------------------------------ */
/* The routes the input holds, for the linear search                   */

#define MAX_ROUTES 64

struct route {
	bool v6;
	uint8_t addr[16];
	uint32_t length;
	uint64_t group;
};

static struct route routes[MAX_ROUTES];
static unsigned int route_count;

static struct route *find_route(bool v6, const uint8_t *addr, uint32_t length)
{
	for (unsigned int i = 0; i < route_count; i++)
		if (routes[i].v6 == v6 && routes[i].length == length &&
		    memcmp(routes[i].addr, addr, v6 ? 16 : 4) == 0)
			return &routes[i];
	return NULL;
}

static void check_route_lookup(struct sw_pipeline *pl, bool v6,
			       const uint8_t *addr)
{
	const struct route *best = NULL;
	uint64_t group = 0;
	bool found;

	for (unsigned int i = 0; i < route_count; i++)
		if (routes[i].v6 == v6 &&
		    prefix_covers(routes[i].addr, routes[i].length, addr) &&
		    (best == NULL || routes[i].length > best->length))
			best = &routes[i];
	found = sw_lpm_lookup(v6 ? &pl->tables.routes_v6
				 : &pl->tables.routes_v4,
			      addr, &group);
	if (found != (best != NULL) || (best != NULL && group != best->group))
		fail("a route lookup disagrees with the linear search");
}

/* Puts the routes back as the fixture has them: 10.1.0.0/16 and
 * fd00:1::/32 to the rack's group 2, the defaults to the uplinks' group 1,
 * removing what an input added. */
static void reset_routes(struct sw_pipeline *pl)
{
	static const struct route fixture[] = {
		{false, {10, 1}, 16, 2},
		{false, {0}, 0, 1},
		{true, {0xfd, 0, 0, 1}, 32, 2},
		{true, {0}, 0, 1},
	};

	for (unsigned int i = 0; i < route_count; i++)
		(void)sw_lpm_remove(routes[i].v6 ? &pl->tables.routes_v6
						 : &pl->tables.routes_v4,
				    routes[i].addr, routes[i].length);
	route_count = 0;
	for (unsigned int i = 0; i < sizeof(fixture) / sizeof(fixture[0]);
	     i++) {
		const struct route *r = &fixture[i];

		if (sw_lpm_put(r->v6 ? &pl->tables.routes_v6
				     : &pl->tables.routes_v4,
			       r->addr, r->length, r->group) != 0)
			fail("the fixture's routes do not fit");
		routes[route_count++] = *r;
	}
}

/* Bytes: flags (bit 0 IPv6, bit 1 remove, bits 2-3 the group), the prefix
 * length, the address (host bits cleared here). */
static void route_write(struct sw_pipeline *pl, const uint8_t *b, uint16_t len)
{
	struct route r = {0};
	uint32_t bytes;

	if (len < 18)
		return;
	r.v6 = b[0] & 1;
	bytes = r.v6 ? 16 : 4;
	r.length = b[1] % (bytes * 8 + 1);
	r.group = 1 + (b[0] >> 2 & 3);
	memcpy(r.addr, b + 2, bytes);
	prefix_clear_host_bits(r.addr, bytes, r.length);

	struct sw_lpm *table =
		r.v6 ? &pl->tables.routes_v6 : &pl->tables.routes_v4;
	struct route *held = find_route(r.v6, r.addr, r.length);

	if (b[0] & 2) {
		int removed = sw_lpm_remove(table, r.addr, r.length);

		if ((removed == 0) != (held != NULL))
			fail("a route removal disagrees with the list");
		if (held != NULL)
			*held = routes[--route_count];
	} else if (held != NULL || route_count < MAX_ROUTES) {
		if (sw_lpm_put(table, r.addr, r.length, r.group) != 0)
			fail("a valid route was refused");
		if (held != NULL)
			held->group = r.group;
		else
			routes[route_count++] = r;
	}
	check_route_lookup(pl, r.v6, b + 2);
	check_route_lookup(pl, r.v6, (const uint8_t[16]){0});
}

/* ------------------------------------------------------------------ */
/* Exact tables                                                        */

/*
 * The writes an input made to the exact tables and path MTUs, with what
 * they replaced, undone in reverse order after it. An input with more
 * writes than the log holds is followed by a new pipeline instead.
 */
#define MAX_UNDO 1024

struct undo {
	struct sw_hash *table; /* an exact table, or NULL for a path MTU */
	struct sw_lpm *path_mtu;
	uint8_t key[SW_KEY_MAX];
	uint32_t prefix_length;
	bool present;
	uint64_t value;
};

static struct undo undo_log[MAX_UNDO];
static unsigned int undo_count;
static bool undo_overflow;

static struct undo *undo_next(void)
{
	if (undo_count == MAX_UNDO) {
		undo_overflow = true;
		return NULL;
	}
	return &undo_log[undo_count++];
}

/* Removes the key, or puts it with `value`; the outcome must be what a
 * lookup then finds. */
static void exact_write(struct sw_hash *table, const uint8_t *key, bool remove,
			uint64_t value, uint64_t now)
{
	const struct sw_hash_slot *before = sw_hash_find(table, key);
	struct undo *undo = undo_next();

	if (undo != NULL) {
		*undo = (struct undo){.table = table,
				      .present = before != NULL,
				      .value = before ? before->value : 0};
		memcpy(undo->key, key, table->key_len);
	}
	if (remove) {
		if (sw_hash_remove(table, key) == 0 &&
		    sw_hash_find(table, key) != NULL)
			fail("a removed key is still found");
		return;
	}
	if (sw_hash_put(table, key, value, now) == 0) {
		const struct sw_hash_slot *slot = sw_hash_find(table, key);

		if (slot == NULL || slot->value != value)
			fail("a key put is not found with its value");
	}
}

static void undo_writes(void)
{
	while (undo_count > 0) {
		const struct undo *u = &undo_log[--undo_count];

		if (u->path_mtu != NULL)
			(void)sw_lpm_remove(u->path_mtu, u->key,
					    u->prefix_length);
		else if (u->present)
			(void)sw_hash_put(u->table, u->key, u->value, 0);
		else
			(void)sw_hash_remove(u->table, u->key);
	}
}

static void merge_flow_write(struct sw_pipeline *pl, const uint8_t *b,
			     uint16_t len, uint64_t now)
{
	uint8_t key[SW_KEY_MAX] = {0};

	if (len < 2)
		return;
	memcpy(key, b + 1, min_u32(len - 1u, SW_FLOW_KEY_LEN));
	exact_write(&pl->tables.merge_flows, key, b[0] & 1,
		    (uint64_t)(b[0] >> 1) * 1000000ull, now);
}

static void instance_write(struct sw_pipeline *pl, const uint8_t *b,
			   uint16_t len, uint64_t now)
{
	uint8_t key[16] = {0};
	bool v6;

	if (len < 2)
		return;
	v6 = b[0] & 2;
	memcpy(key, b + 1, min_u32(len - 1u, v6 ? 16u : 4u));
	exact_write(v6 ? &pl->tables.instances_v6 : &pl->tables.instances_v4,
		    key, b[0] & 1, b[0] >> 2 & 1, now);
}

/* Bytes: flags (bit 0 IPv6, bits 1-3 non-zero for a host route, else the
 * default), the MTU (2 bytes), the address. */
static void path_mtu_write(struct sw_pipeline *pl, const uint8_t *b,
			   uint16_t len)
{
	uint8_t addr[16] = {0};
	bool v6, host;

	if (len < 3)
		return;
	v6 = b[0] & 1;
	host = (b[0] >> 1 & 7) != 0;
	memcpy(addr, b + 3, min_u32(len - 3u, 16u));
	if (!host)
		memset(addr, 0, sizeof(addr));

	struct sw_lpm *table =
		v6 ? &pl->tables.path_mtu_v6 : &pl->tables.path_mtu_v4;
	uint32_t length = host ? (v6 ? 128 : 32) : 0;
	struct undo *undo = undo_next();

	/* The fixture has no path MTUs: undoing a put removes it. */
	if (undo != NULL) {
		*undo = (struct undo){.path_mtu = table,
				      .prefix_length = length};
		memcpy(undo->key, addr, sizeof(addr));
	}
	if (sw_lpm_put(table, addr, length, (uint64_t)(b[1] << 8 | b[2])) ==
		    0 &&
	    (uint32_t)(b[1] << 8 | b[2]) < SIGNAL_MAX_BYTES)
		small_path_mtu = true;
}

/* ------------------------------------------------------------------ */
/* Frames                                                              */

static void run_frame(struct sw_pipeline *pl, const uint8_t *bytes,
		      uint16_t len, uint16_t port, uint64_t now)
{
	uint32_t arrived = min_u32(len, MAX_FRAME), length = arrived;
	/* Exactly the room the pipeline may use, on the heap, so that
	 * AddressSanitizer reports a byte read or written beyond it. */
	uint32_t room = arrived + (small_path_mtu ? SIGNAL_GROWTH : 0);
	uint8_t *frame = malloc(room != 0 ? room : 1);
	int egress;

	if (frame == NULL)
		fail("out of memory");
	memcpy(frame, bytes, arrived);
	egress = sw_pipeline_run(pl, 0, frame, &length, port, now);
	if (trace)
		fprintf(stderr,
			"frame of %u bytes on port %u: %s %d, %u bytes\n",
			arrived, port, egress < 0 ? "dropped" : "to port",
			egress, length);
	if (egress < -1 || egress >= (int)SW_PORTS)
		fail("a frame left on a port the switch cannot have");
	if (egress >= 0 && length > room)
		fail("a frame grew past the room it may use");
	free(frame);
}

static void start_pipeline(struct sw_pipeline *pl, uint64_t now)
{
	if (sw_pipeline_init(pl, PARSE_DEPTH, CPU_PORT, now) != 0)
		fail("sw_pipeline_init");
	rack_fixture_program(pl, 4);
	/* An elephant after three full frames, so that fuzzed flows reach
	 * the steering path. */
	pl->tables.elephant_threshold = 3000;
	if (pl->tables.path_mtu_v4.length_count != 0 ||
	    pl->tables.path_mtu_v6.length_count != 0)
		fail("the fixture has path MTUs, which undo_writes removes");
	sw_lpm_clear(&pl->tables.routes_v4);
	sw_lpm_clear(&pl->tables.routes_v6);
	route_count = 0;
	reset_routes(pl);
}

/* Back to the fixture after an input. */
static void restore_pipeline(struct sw_pipeline *pl, uint64_t now)
{
	small_path_mtu = false;
	if (undo_overflow) {
		sw_pipeline_free(pl);
		undo_count = 0;
		undo_overflow = false;
		start_pipeline(pl, now);
		return;
	}
	undo_writes();
	reset_routes(pl);
	memset(&pl->sketch, 0, sizeof(pl->sketch));
	memset(&pl->counters[0], 0, sizeof(pl->counters[0]));
	memset(&pl->internal[0], 0, sizeof(pl->internal[0]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sw_pipeline pl;
	static bool started;
	const uint64_t start = 1000000000ull;
	uint64_t now = start;
	size_t at = 0;

	if (!started) {
		trace = getenv("FUZZ_TRACE") != NULL;
		start_pipeline(&pl, start);
		started = true;
	}
	while (at + 3 <= size) {
		uint8_t op = data[at];
		uint16_t len = (uint16_t)(data[at + 1] << 8 | data[at + 2]);
		const uint8_t *bytes = data + at + 3;

		at += 3;
		if (len > size - at)
			len = (uint16_t)(size - at);
		at += len;
		now += (uint64_t)(op >> 4) * 1000000ull;
		switch (op & 7) {
		case OP_FRAME_EXTERNAL:
		case OP_FRAME_INTERNAL:
		case OP_FRAME_NIC:
			run_frame(&pl, bytes, len,
				  frame_ports[op & 7][op >> 3 & 1], now);
			break;
		case OP_ROUTE:
			route_write(&pl, bytes, len);
			break;
		case OP_MERGE_FLOW:
			merge_flow_write(&pl, bytes, len, now);
			break;
		case OP_INSTANCE:
			instance_write(&pl, bytes, len, now);
			break;
		case OP_PATH_MTU:
			path_mtu_write(&pl, bytes, len);
			break;
		default:
			break;
		}
	}
	restore_pipeline(&pl, start);
	return 0;
}
