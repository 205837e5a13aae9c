/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checksums without reading payload twice. A TCP segment whose checksum is
 * known good tells us the ones' complement sum of its payload for free:
 * it is what remains after removing the pseudo-header and header sums
 * from 0xffff. Merged packets then get their checksum from those sums.
 */
#include "internal.h"

#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/*
 * The ones' complement sum of a payload, as rte_raw_cksum gives it, at
 * several times its speed. DPDK's loop adds one 16-bit word at a time
 * into one register; built as jumbogate ships (-O2) it is not vectorised,
 * and on ports without receive checksum offload (memif, af_packet) it was
 * half of jumbogate-nic's time (docs/performance.md). Here 32-bit words
 * are added into 64-bit lanes, where no carry is lost for 2^32 words, and
 * the total folded to 16 bits at the end: 2^16 = 1 modulo 0xffff, so the
 * sum of the 32-bit words folds to the sum of their 16-bit halves, the
 * same bytes in the same order. The result, 0 included, is rte_raw_cksum's
 * for any buffer of up to 128 KiB (test_checksum compares them at every
 * length to 9,216 bytes and every alignment, and at 128 KiB of ones); past
 * about 128 KiB DPDK's 32-bit accumulator wraps and its sum is off by one
 * per wrap, while this one stays the ones' complement sum. The engine sums
 * one mbuf segment at a time, at most 65,535 bytes.
 */
uint16_t jg_csum_raw(const void *buf, uint32_t len)
{
	const uint8_t *p = buf;
	uint64_t sum = 0;

#ifdef __SSE2__
	const __m128i zero = _mm_setzero_si128();
	__m128i low = zero, high = zero;

	for (; len >= 32; p += 32, len -= 32) {
		__m128i a = _mm_loadu_si128((const __m128i *)p);
		__m128i b = _mm_loadu_si128((const __m128i *)(p + 16));

		low = _mm_add_epi64(low, _mm_unpacklo_epi32(a, zero));
		high = _mm_add_epi64(high, _mm_unpackhi_epi32(a, zero));
		low = _mm_add_epi64(low, _mm_unpacklo_epi32(b, zero));
		high = _mm_add_epi64(high, _mm_unpackhi_epi32(b, zero));
	}
	uint64_t lanes[2];

	_mm_storeu_si128((__m128i *)lanes, _mm_add_epi64(low, high));
	sum = lanes[0] + lanes[1];
#endif
	for (; len >= 4; p += 4, len -= 4)
		sum += jg_load32(p);
	if (len >= 2) {
		uint16_t word;

		memcpy(&word, p, sizeof(word));
		sum += word;
		p += 2;
		len -= 2;
	}
	if (len > 0) {
		/* As rte_raw_cksum: the odd byte is the word's first. */
		uint16_t last = 0;

		memcpy(&last, p, 1);
		sum += last;
	}
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	return jg_csum_fold((uint32_t)sum);
}

uint16_t jg_csum_mbuf_range(const struct rte_mbuf *m, uint32_t off,
			    uint32_t len)
{
	uint32_t sum = 0;
	uint32_t done = 0;

	/* Walk to the first mbuf that holds byte off. */
	while (m != NULL && off >= m->data_len) {
		off -= m->data_len;
		m = m->next;
	}
	while (m != NULL && len > 0) {
		uint32_t take = RTE_MIN(len, (uint32_t)m->data_len - off);
		uint16_t part = jg_csum_raw(
			rte_pktmbuf_mtod_offset(m, const uint8_t *, off), take);

		/* Bytes that start at an odd position of the range land in
		 * the other half of each 16-bit word. */
		sum += (done & 1) ? jg_csum_swap(part) : part;
		done += take;
		len -= take;
		off = 0;
		m = m->next;
	}
	return jg_csum_fold(sum);
}

uint16_t jg_csum_pseudo(const uint8_t *l3, const struct jg_parsed *p,
			uint32_t l4_length)
{
	uint32_t sum;

	if (p->ip_version == 4) {
		const struct rte_ipv4_hdr *ip = (const void *)l3;

		sum = rte_raw_cksum(&ip->src_addr, 8);
		sum += rte_cpu_to_be_16((uint16_t)p->l4_protocol);
		sum += rte_cpu_to_be_16((uint16_t)l4_length);
	} else {
		const struct rte_ipv6_hdr *ip = (const void *)l3;

		sum = rte_raw_cksum(ip->src_addr, 32);
		sum += rte_cpu_to_be_16((uint16_t)(l4_length >> 16));
		sum += rte_cpu_to_be_16((uint16_t)l4_length);
		sum += rte_cpu_to_be_16((uint16_t)p->l4_protocol);
	}
	return jg_csum_fold(sum);
}

uint16_t jg_csum_l4_header(const uint8_t *l4, uint16_t l4_len,
			   uint16_t checksum_offset)
{
	uint16_t whole = rte_raw_cksum(l4, l4_len);
	uint16_t field = *(const uint16_t *)(l4 + checksum_offset);

	return jg_csum_sub(whole, field);
}

bool jg_l4_checksum_verify(const struct rte_mbuf *m, const struct jg_parsed *p,
			   uint16_t *payload_sum)
{
	const uint8_t *l3 = jg_l3(m, p);
	const uint8_t *l4 = jg_l4(m, p);
	uint32_t l4_length = p->l4_len + p->payload_length;
	uint16_t payload =
		jg_csum_mbuf_range(m, jg_header_length(p), p->payload_length);
	uint16_t total =
		jg_csum_add(jg_csum_add(jg_csum_pseudo(l3, p, l4_length),
					rte_raw_cksum(l4, p->l4_len)),
			    payload);

	*payload_sum = payload;
	return total == 0xffff;
}

uint16_t jg_payload_sum_from_header(const struct rte_mbuf *m,
				    const struct jg_parsed *p)
{
	const uint8_t *l3 = jg_l3(m, p);
	const uint8_t *l4 = jg_l4(m, p);
	uint32_t l4_length = p->l4_len + p->payload_length;
	uint16_t known = jg_csum_add(jg_csum_pseudo(l3, p, l4_length),
				     rte_raw_cksum(l4, p->l4_len));

	return jg_csum_sub(0xffff, known);
}

void jg_finish_ipv4_header(struct rte_mbuf *m, const struct jg_parsed *p,
			   enum jg_checksum_mode mode)
{
	struct rte_ipv4_hdr *ip = jg_l3(m, p);

	ip->hdr_checksum = 0;
	if (mode == JG_CHECKSUM_SOFTWARE)
		ip->hdr_checksum = rte_ipv4_cksum(ip);
	else
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
}
