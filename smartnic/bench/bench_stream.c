/* SPDX-License-Identifier: Apache-2.0 */
#include "bench_stream.h"

#include <string.h>

#include <rte_mbuf.h>

#define ETHER_TYPE_VLAN	  0x8100u
#define ETHER_TYPE_QINQ	  0x88a8u
#define ETHER_TYPE_IPV4	  0x0800u
#define ETHER_TYPE_IPV6	  0x86ddu
#define PROTOCOL_TCP	  6u
#define MAX_PACKET_BYTES  (65535u + 64u)
#define DIGEST_SEQ_WEIGHT 0x9e3779b97f4a7c15ull
#define DIGEST_OTHER_SALT 0x5bd1e9955bd1e995ull
#define FNV_OFFSET	  0xcbf29ce484222325ull
#define FNV_PRIME	  0x100000001b3ull

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint64_t fnv(const uint8_t *data, uint32_t length, uint64_t hash)
{
	for (uint32_t i = 0; i < length; i++)
		hash = (hash ^ data[i]) * FNV_PRIME;
	return hash;
}

/* Headers must lie in the first `length` bytes; the packet is `total`
 * bytes long (the payload may continue in further mbufs). */
static bool parse(const uint8_t *f, uint32_t length, uint32_t total,
		  struct bench_headers *h)
{
	uint32_t l2 = 14, l3, protocol;
	uint16_t type;

	memset(h, 0, sizeof(*h));
	if (length < l2)
		return false;
	type = get16(f + 12);
	for (int tags = 0;
	     tags < 2 && (type == ETHER_TYPE_VLAN || type == ETHER_TYPE_QINQ);
	     tags++) {
		if (length < l2 + 4)
			return false;
		type = get16(f + l2 + 2);
		l2 += 4;
	}
	if (type == ETHER_TYPE_IPV4) {
		if (length < l2 + 20)
			return false;
		l3 = (f[l2] & 0xfu) * 4u;
		h->ip_length = get16(f + l2 + 2);
		protocol = f[l2 + 9];
		/* A fragment's bytes are not where its header says. */
		if ((get16(f + l2 + 6) & 0x3fffu) != 0)
			protocol = 0;
		if (h->ip_length < l3 || l3 < 20)
			return false;
		h->flow_key = fnv(f + l2 + 12, 8, FNV_OFFSET ^ 4);
	} else if (type == ETHER_TYPE_IPV6) {
		if (length < l2 + 40)
			return false;
		l3 = 40;
		h->ip_length = 40u + get16(f + l2 + 4);
		protocol = f[l2 + 6];
		h->flow_key = fnv(f + l2 + 8, 32, FNV_OFFSET ^ 6);
	} else {
		return false;
	}
	h->l2_length = (uint16_t)l2;
	h->l3_length = (uint16_t)l3;
	if (l2 + h->ip_length > total)
		return false;
	if (protocol == PROTOCOL_TCP && h->ip_length >= l3 + 20 &&
	    l2 + l3 + 20 <= length) {
		const uint8_t *tcp = f + l2 + l3;
		uint32_t l4 = (tcp[12] >> 4) * 4u;

		if (l4 < 20 || l3 + l4 > h->ip_length || l2 + l3 + l4 > length)
			return true;
		h->is_tcp = true;
		h->l4_length = (uint16_t)l4;
		h->payload_length = h->ip_length - l3 - l4;
		h->seq = (uint32_t)get16(tcp + 4) << 16 | get16(tcp + 6);
		h->flow_key = fnv(tcp, 4, h->flow_key);
	}
	return true;
}

bool bench_parse(const struct rte_mbuf *m, struct bench_headers *h)
{
	return parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len,
		     m->pkt_len, h);
}

bool bench_parse_frame(const uint8_t *frame, uint32_t length,
		       struct bench_headers *h)
{
	return parse(frame, length, length, h);
}

uint32_t bench_tcp_payload(const uint8_t *frame, uint32_t length)
{
	struct bench_headers h;

	return bench_parse_frame(frame, length, &h) && h.is_tcp
		       ? h.payload_length
		       : 0;
}

uint64_t bench_digest_frame(const uint8_t *f, uint32_t length)
{
	struct bench_headers h;
	uint64_t digest = 0;

	if (!bench_parse_frame(f, length, &h) || !h.is_tcp)
		return fnv(f, length, FNV_OFFSET) ^ DIGEST_OTHER_SALT;
	const uint8_t *payload = f + h.l2_length + h.l3_length + h.l4_length;

	for (uint32_t i = 0; i < h.payload_length; i++)
		digest += (payload[i] + 1u) *
			  (h.flow_key +
			   (uint32_t)(h.seq + i) * DIGEST_SEQ_WEIGHT);
	return digest;
}

uint64_t bench_digest_packet(const struct rte_mbuf *m)
{
	/* One per thread: the benchmark's workers digest at once. */
	static _Thread_local uint8_t frame[MAX_PACKET_BYTES];
	uint32_t length =
		m->pkt_len < sizeof(frame) ? m->pkt_len : sizeof(frame);
	const uint8_t *bytes = rte_pktmbuf_read(m, 0, length, frame);

	return bench_digest_frame(bytes, length);
}
