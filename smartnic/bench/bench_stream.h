/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the benchmark reads from packets, independently of the engine:
 * header lengths for the yield, and an order-independent digest of every
 * flow's byte stream, so a run can show that a path delivered exactly the
 * bytes it was given, each at its place in its flow.
 */
#ifndef JUMBOGATE_BENCH_STREAM_H
#define JUMBOGATE_BENCH_STREAM_H

#include <stdbool.h>
#include <stdint.h>

struct rte_mbuf;

struct bench_headers {
	bool is_tcp;
	uint16_t l2_length, l3_length, l4_length;
	uint32_t ip_length;
	uint32_t payload_length; /* TCP payload */
	uint32_t seq;
	uint64_t flow_key; /* hash of version, addresses and ports */
};

/* Parse Ethernet (up to two VLAN tags), IPv4/IPv6 and TCP from the
 * contiguous bytes of a frame. false when it is not IP. */
bool bench_parse_frame(const uint8_t *frame, uint32_t length,
		       struct bench_headers *h);

/* The same on a packet whose headers lie in its first mbuf. */
bool bench_parse(const struct rte_mbuf *m, struct bench_headers *h);

/* TCP payload bytes of a frame (0 when not TCP). */
uint32_t bench_tcp_payload(const uint8_t *frame, uint32_t length);

/* Digest of one frame / packet; the digest of a set of packets is the
 * sum, so merging and splitting TCP payload between packets of the same
 * flow leaves it unchanged, and moving a byte does not. */
uint64_t bench_digest_frame(const uint8_t *frame, uint32_t length);
uint64_t bench_digest_packet(const struct rte_mbuf *m);

#endif /* JUMBOGATE_BENCH_STREAM_H */
