/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building packets for tests and the benchmark, and checking packets the
 * engine returns. The checker shares no code with the engine: it parses
 * with its own code and recomputes every checksum from the bytes, so an
 * engine bug cannot hide behind the same bug in the test.
 */
#ifndef JUMBOGATE_PACKET_BUILDER_H
#define JUMBOGATE_PACKET_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;

#define PB_TCP_FIN 0x01
#define PB_TCP_SYN 0x02
#define PB_TCP_RST 0x04
#define PB_TCP_PSH 0x08
#define PB_TCP_ACK 0x10
#define PB_TCP_URG 0x20
#define PB_TCP_ECE 0x40
#define PB_TCP_CWR 0x80

#define PB_MAX_FRAME 70000u

struct pb_spec {
	uint8_t ip_version;  /* 4 or 6 */
	uint8_t l4_protocol; /* 6 (TCP, default) or 17 (UDP) */
	uint32_t src_v4;     /* host order */
	uint32_t dst_v4;
	uint8_t src_v6[16];
	uint8_t dst_v6[16];
	uint16_t src_port; /* host order */
	uint16_t dst_port;
	uint32_t seq;
	uint32_t ack;
	uint8_t tcp_flags; /* default ACK */
	uint16_t window;
	uint16_t urgent_pointer;
	uint8_t tos; /* TOS or traffic class, ECN included */
	uint8_t ttl; /* TTL or hop limit */
	bool dont_fragment;
	bool more_fragments;
	uint16_t fragment_offset; /* in 8-byte units */
	uint16_t ip_id;
	uint32_t flow_label;
	uint8_t tcp_options[40];
	uint8_t tcp_options_length; /* multiple of 4 */
	uint8_t ip_options[40];
	uint8_t ip_options_length;		 /* multiple of 4 */
	uint8_t ipv6_destination_options_length; /* 0 or multiple of 8 */
	uint8_t ipv6_destination_options_fill;	 /* varies the ext header */
	bool ipv6_fragment_header;
	bool vlan;
	uint16_t vlan_tci;
	bool corrupt_l4_checksum;
	uint16_t udp_checksum_override; /* UDP: 0 = compute */
	bool udp_no_checksum;		/* UDP over IPv4: send 0 */
	uint32_t ethernet_padding;	/* zero bytes after the IP packet */
	const uint8_t *payload;
	uint32_t payload_length;
	uint16_t segment_size; /* split frame into mbufs of this size; 0: one */
};

/* A TCP (or UDP) packet between two fixed hosts, DF set, TTL 64. */
void pb_defaults(struct pb_spec *spec, uint8_t ip_version);

/* Bytes of the frame; returns its length. */
uint32_t pb_frame(const struct pb_spec *spec, uint8_t *frame);

/* The frame in mbufs (one, or a chain when segment_size is set). The
 * port's RX checksum flags are left "unknown". */
struct rte_mbuf *pb_build(struct rte_mempool *pool, const struct pb_spec *spec);

/* An mbuf (chain) holding arbitrary bytes. */
struct rte_mbuf *pb_from_bytes(struct rte_mempool *pool, const uint8_t *bytes,
			       uint32_t length, uint16_t segment_size);

/* Under AddressSanitizer, mark every segment's headroom and tailroom as
 * not addressable, so that code reading past a segment's bytes is
 * reported even though the buffer goes on (a frame's mbufs are 2 KB).
 * pb_from_bytes makes a buffer whole again when it takes it from the pool,
 * so only mbufs built by it may be marked, and nothing else may allocate
 * from their pool. A no-op without AddressSanitizer. */
void pb_poison_slack(struct rte_mbuf *m);

/* Deterministic content of byte `offset` of stream `stream`. */
static inline uint8_t pb_stream_byte(uint32_t stream, uint32_t offset)
{
	uint32_t x = offset * 2654435761u ^ (stream + 1) * 0x85ebca6bu;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)x;
}

/* Fill buffer with stream bytes [offset, offset + length). */
void pb_stream_fill(uint32_t stream, uint32_t offset, uint8_t *buffer,
		    uint32_t length);

/* What the checker found in a packet. */
struct pb_view {
	uint8_t ip_version;
	uint8_t l4_protocol;
	uint32_t frame_length;
	uint32_t ip_length; /* IPv4 total length / 40 + IPv6 payload */
	uint16_t l2_length, l3_length, l4_length;
	uint32_t seq, ack;
	uint8_t tcp_flags;
	uint16_t window;
	uint16_t ip_id;
	uint8_t tos, ttl;
	bool dont_fragment;
	uint16_t src_port, dst_port;
	uint16_t l4_checksum;
	const uint8_t *payload; /* inside the caller's buffer */
	uint32_t payload_length;
	const uint8_t *frame;
};

/*
 * Copy the packet into buffer, apply what a port would do for its TX
 * offload flags (IPv4 header checksum, L4 checksum from the pseudo-header
 * sum the engine must have written), then parse it and verify lengths and
 * checksums from scratch. Returns NULL when fine, or what is wrong.
 */
const char *pb_check(const struct rte_mbuf *m, uint8_t *buffer, size_t size,
		     struct pb_view *view);

/* Ones' complement sum of big-endian 16-bit words (checker's own). */
uint32_t pb_sum(const uint8_t *data, size_t length, uint32_t sum);
uint16_t pb_fold(uint32_t sum);

/* A pool suitable for tests: mbufs of data_room bytes. */
struct rte_mempool *pb_pool(const char *name, unsigned int count,
			    uint16_t data_room);

#endif /* JUMBOGATE_PACKET_BUILDER_H */
