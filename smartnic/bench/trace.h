/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An in-memory packet trace: frames back to back with their arrival time
 * on a virtual clock. Every path of the benchmark reads the same trace, so
 * they see exactly the same packets at exactly the same (virtual) times.
 */
#ifndef JUMBOGATE_BENCH_TRACE_H
#define JUMBOGATE_BENCH_TRACE_H

#include <stdbool.h>
#include <stdint.h>

struct trace_packet {
	uint64_t time_ns; /* arrival of its last bit at the line rate */
	uint64_t offset;  /* of its frame in trace.bytes */
	uint32_t length;
};

struct trace {
	struct trace_packet *packets;
	uint32_t count;
	uint32_t capacity;
	uint8_t *bytes;
	uint64_t bytes_used;
	uint64_t bytes_capacity;
	uint32_t flows; /* distinct flows generated (0 for a capture) */
};

/*
 * What the generator makes. Elephant flows send the way Linux senders do
 * with TSO: trains of back-to-back full segments (a 64 KB send is 45
 * segments of 1448 bytes). `concurrency` trains are in flight at once and
 * their packets are interleaved at random, as they are when several
 * senders share the link into the border. Mice are one to three small
 * segments ending with PSH, each from a flow never seen before.
 */
struct trace_params {
	uint32_t flows;	      /* elephant flows */
	uint32_t packets;     /* elephant packets before loss */
	uint32_t train;	      /* segments per train */
	uint32_t concurrency; /* trains interleaved at once */
	uint32_t mss;	      /* payload of a full segment */
	uint32_t mice;	      /* mice flows mixed in */
	double reorder;	      /* share of packets moved 1..8 places later */
	double loss;	      /* share of packets lost */
	double ipv6_share;    /* share of flows over IPv6 */
	double line_gbps;     /* line rate of the virtual clock */
	uint64_t seed;
};

void trace_params_default(struct trace_params *params);

/* Generate a trace; false when memory ran out. */
bool trace_generate(struct trace *trace, const struct trace_params *params);

/* Read a pcap file (Ethernet link type). Times are the capture's,
 * relative to its first packet; with line_gbps > 0 they are instead
 * spread at that line rate. false with a message on stderr on error. */
bool trace_load_pcap(struct trace *trace, const char *path, double line_gbps);

void trace_free(struct trace *trace);

/* Time on the wire of a frame (preamble, FCS and gap included). */
uint64_t trace_wire_ns(uint32_t frame_length, double line_gbps);

#endif /* JUMBOGATE_BENCH_TRACE_H */
