/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jg_csum_raw, the engine's payload sum, against DPDK's rte_raw_cksum:
 * the same 16 bits for every length and alignment, for bytes that carry
 * (all ones), that sum to nothing (all zeros) and for random ones; and
 * jg_csum_mbuf_range over a chain cut at every place, odd cuts included,
 * against the sum of the same bytes in one piece.
 */
#include <stdlib.h>
#include <string.h>

#include <rte_ip.h>
#include <rte_mbuf.h>

#include "../engine/internal.h"
#include "fixture.h"
#include "harness.h"

/* Past the largest frame the engine sums (a 9,000-byte payload). */
#define LONGEST	   9216
#define ALIGNMENTS 16

static uint8_t bytes[LONGEST + ALIGNMENTS];

static unsigned int compare_all(void)
{
	unsigned int differ = 0;

	for (uint32_t offset = 0; offset < ALIGNMENTS; offset++)
		for (uint32_t length = 0; length <= LONGEST; length++)
			if (jg_csum_raw(bytes + offset, length) !=
			    rte_raw_cksum(bytes + offset, length)) {
				if (differ++ < 5)
					fprintf(stderr,
						"  offset %u length %u: %#x, "
						"rte_raw_cksum %#x\n",
						offset, length,
						jg_csum_raw(bytes + offset,
							    length),
						rte_raw_cksum(bytes + offset,
							      length));
			}
	return differ;
}

static void random_bytes_every_length_and_alignment(void)
{
	srand(36);
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)rand();
	CHECK_EQ(compare_all(), 0);
}

/* All ones: every add carries, and whole sums are multiples of 0xffff. */
static void all_ones(void)
{
	memset(bytes, 0xff, sizeof(bytes));
	CHECK_EQ(compare_all(), 0);
	CHECK_EQ(jg_csum_raw(bytes, 1448), 0xffff);
}

/* All zeros sum to 0, not to 0xffff, the other zero of ones' complement. */
static void all_zeros(void)
{
	memset(bytes, 0, sizeof(bytes));
	CHECK_EQ(compare_all(), 0);
	CHECK_EQ(jg_csum_raw(bytes, 1448), 0);
}

/* The longest buffer for which rte_raw_cksum's 32-bit accumulator cannot
 * wrap (65,536 words of 0xffff), all ones: the most carries there are. */
static void longest_comparable_buffer(void)
{
	static uint8_t ones[128 * 1024];

	memset(ones, 0xff, sizeof(ones));
	CHECK_EQ(jg_csum_raw(ones, sizeof(ones)),
		 rte_raw_cksum(ones, sizeof(ones)));
	CHECK_EQ(jg_csum_raw(ones + 1, sizeof(ones) - 1),
		 rte_raw_cksum(ones + 1, sizeof(ones) - 1));
}

/* Words whose 64-bit total, folded once to 33 bits, still carries:
 * three all-ones words and a 1 make 0x2fffffffe, 0xfffffffe + 2. */
static void total_that_carries_twice(void)
{
	static const uint8_t words[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					  0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					  0x01, 0x00, 0x00, 0x00};

	CHECK_EQ(jg_csum_raw(words, sizeof(words)),
		 rte_raw_cksum(words, sizeof(words)));
}

/* One byte set at each place of the widest step: the byte lands in the
 * right half of its 16-bit word whatever lane or tail adds it. */
static void one_byte_at_every_place(void)
{
	unsigned int differ = 0;

	memset(bytes, 0, sizeof(bytes));
	for (uint32_t length = 1; length <= 97; length++)
		for (uint32_t at = 0; at < length; at++) {
			bytes[at] = 0xa5;
			if (jg_csum_raw(bytes, length) !=
			    rte_raw_cksum(bytes, length))
				differ++;
			bytes[at] = 0;
		}
	CHECK_EQ(differ, 0);
}

/* A chain of `count` + 1 segments holding `bytes` cut at `cuts`, or NULL
 * (a failed check) when the pool runs out. */
static struct rte_mbuf *chain_of(const uint8_t *data, uint32_t length,
				 const uint32_t *cuts, unsigned int count)
{
	struct rte_mbuf *head = NULL, *tail = NULL;
	uint32_t start = 0;

	for (unsigned int i = 0; i <= count; i++) {
		uint32_t end = i < count ? cuts[i] : length;
		struct rte_mbuf *m = rte_pktmbuf_alloc(fixture_pool);

		CHECK(m != NULL);
		if (m == NULL) {
			rte_pktmbuf_free(head);
			return NULL;
		}
		memcpy(rte_pktmbuf_append(m, (uint16_t)(end - start)),
		       data + start, end - start);
		if (head == NULL) {
			head = tail = m;
		} else {
			tail->next = m;
			tail = m;
			head->nb_segs++;
			head->pkt_len += m->data_len;
		}
		start = end;
	}
	return head;
}

static void chain_cut_at_every_place(void)
{
	const uint32_t length = 1500;
	unsigned int differ = 0;

	fixture_pools();
	srand(8500);
	for (uint32_t i = 0; i < length; i++)
		bytes[i] = (uint8_t)rand();
	/* Two cuts: the first anywhere, the second 1 to 3 bytes or 700
	 * bytes later, so that parts of odd and even length meet. */
	for (uint32_t first = 1; first < length - 800; first++) {
		static const uint32_t gaps[] = {1, 2, 3, 700};

		for (unsigned int g = 0; g < RTE_DIM(gaps); g++) {
			uint32_t cuts[2] = {first, first + gaps[g]};
			struct rte_mbuf *m = chain_of(bytes, length, cuts, 2);

			if (m == NULL)
				return;
			/* Ranges starting at odd and even offsets. */
			for (uint32_t off = 0; off < 3; off++)
				if (jg_csum_mbuf_range(m, off,
						       length - off - 5) !=
				    rte_raw_cksum(bytes + off,
						  length - off - 5))
					differ++;
			/* A range ending exactly where a segment ends, one
			 * starting exactly where one starts, and none. */
			if (jg_csum_mbuf_range(m, 0, first) !=
				    rte_raw_cksum(bytes, first) ||
			    jg_csum_mbuf_range(m, first, length - first) !=
				    rte_raw_cksum(bytes + first,
						  length - first) ||
			    jg_csum_mbuf_range(m, first, 0) != 0)
				differ++;
			rte_pktmbuf_free(m);
		}
	}
	CHECK_EQ(differ, 0);
}

HARNESS_MAIN("jg_test_checksum",
	     HARNESS_CASE(random_bytes_every_length_and_alignment),
	     HARNESS_CASE(all_ones), HARNESS_CASE(all_zeros),
	     HARNESS_CASE(total_that_carries_twice),
	     HARNESS_CASE(longest_comparable_buffer),
	     HARNESS_CASE(one_byte_at_every_place),
	     HARNESS_CASE(chain_cut_at_every_place))
