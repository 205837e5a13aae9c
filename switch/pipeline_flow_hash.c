/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hashes the pipeline computes: BMv2's crc16, for the ECMP selector and
 * the ICMP source meter, where a flow must land where it lands on BMv2; and
 * the elephant sketch's cells (p4src/include/flow_hash.p4), where it need
 * not.
 */
#include "pipeline_internal.h"

#include <string.h>

#include <rte_hash_crc.h>

/* -- hashes -------------------------------------------------------------------
 */

/* BMv2's crc16 (CRC-16/ARC: reflected polynomial 0x8005, init 0), eight
 * bytes at a time from eight tables ("slicing-by-8"): table k holds what
 * a byte does to the CRC when k more bytes follow it, so the eight are
 * independent loads instead of a chain of eight. The ECMP selector hashes
 * 37 bytes for every packet routed over a group. */
static uint16_t crc16_tables[8][256];

void sw_init_crc_tables(void)
{
	for (uint32_t byte = 0; byte < 256; byte++) {
		uint16_t c16 = (uint16_t)byte;

		for (int bit = 0; bit < 8; bit++)
			c16 = (c16 & 1) ? (uint16_t)((c16 >> 1) ^ 0xa001)
					: (uint16_t)(c16 >> 1);
		crc16_tables[0][byte] = c16;
	}
	for (int k = 1; k < 8; k++)
		for (uint32_t byte = 0; byte < 256; byte++) {
			uint16_t before = crc16_tables[k - 1][byte];

			crc16_tables[k][byte] =
				(uint16_t)((before >> 8) ^
					   crc16_tables[0][before & 0xff]);
		}
}

uint16_t sw_crc16(const uint8_t *data, uint32_t length)
{
	const uint16_t(*t)[256] = crc16_tables;
	uint16_t crc = 0;
	uint32_t i = 0;

	for (; i + 8 <= length; i += 8) {
		const uint8_t *d = data + i;
		uint16_t x = (uint16_t)(crc ^ (d[0] | d[1] << 8));

		crc = (uint16_t)(t[7][x & 0xff] ^ t[6][x >> 8] ^ t[5][d[2]] ^
				 t[4][d[3]] ^ t[3][d[4]] ^ t[2][d[5]] ^
				 t[1][d[6]] ^ t[0][d[7]]);
	}
	for (; i < length; i++)
		crc = (uint16_t)((crc >> 8) ^ t[0][(crc ^ data[i]) & 0xff]);
	return crc;
}

/* The cells of the sketch's three rows and the Bloom filter's two
 * (flow_hash.p4). The P4 takes five CRCs, each another linear map of the
 * flow (another polynomial, or the fields in another order), since a CRC is
 * affine in its message: salts in front of the same fields, as the program
 * once had, move every flow's hash by one constant, so two flows that share
 * one row's cell share every row's, and the three rows count like one
 * (tests/test_sketch.c failed so). Here the fields, byte aligned, give 64
 * bits from two CRC32-C passes, each cell a slice of its own: disjoint
 * slices are independent functions of the flow, and the second pass reads
 * the key's words in another order (each word at another place), another
 * linear map, so there are 64 such bits and not 32. Two passes of five
 * words cost less than five CRCs.
 *
 * The cells differ from BMv2's; no test or behaviour depends on which
 * cell a flow lands in, only on the rows not sharing collisions. A CRC is
 * not secret: someone who chooses many flows can still aim them all at
 * one flow's cells, on every target (docs/dataplane.md, "Elephant
 * detection"). */
_Static_assert(P4_SKETCH_COLUMNS == 1u << SW_SKETCH_COLUMN_BITS &&
		       P4_BLOOM_BITS == 1u << SW_BLOOM_INDEX_BITS,
	       "the sketch's sizes must be the powers of two sliced here");
_Static_assert(3 * SW_SKETCH_COLUMN_BITS + 2 * SW_BLOOM_INDEX_BITS <= 64,
	       "the cells' slices must fit in the 64 hashed bits");
/* sw_flow_key zeroes the key's padding, so whole words can be hashed. */
_Static_assert(SW_KEY_MAX == 5 * sizeof(uint64_t),
	       "the passes below read the key as five words");

void sw_sketch_cells(const uint8_t fields[SW_KEY_MAX],
		     struct sw_sketch_cells *cells)
{
	uint64_t w[5], bits;
	uint32_t forward = 0, shifted = 0;
	unsigned int shift = 0;

	memcpy(w, fields, sizeof(w));
	/* Unrolled, so that the second pass's word order is constant. */
#pragma GCC unroll 5
	for (int i = 0; i < 5; i++) {
		forward = rte_hash_crc_8byte(w[i], forward);
		shifted = rte_hash_crc_8byte(w[(i + 2) % 5], shifted);
	}
	bits = (uint64_t)forward << 32 | shifted;
	for (int row = 0; row < 3; row++, shift += SW_SKETCH_COLUMN_BITS)
		cells->row[row] =
			(uint32_t)(bits >> shift) & (P4_SKETCH_COLUMNS - 1);
	for (int i = 0; i < 2; i++, shift += SW_BLOOM_INDEX_BITS)
		cells->bloom[i] =
			(uint32_t)(bits >> shift) & (P4_BLOOM_BITS - 1);
}
