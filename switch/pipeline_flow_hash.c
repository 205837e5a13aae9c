/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hashes of p4src/include/flow_hash.p4: CRC-16 and CRC-32 as the P4
 * program computes them.
 */
#include "pipeline_internal.h"

#include <rte_hash_crc.h>

/* -- hashes -------------------------------------------------------------------
 */

/* BMv2's crc16 (CRC-16/ARC: reflected polynomial 0x8005, init 0) and
 * crc32 (the IEEE 802.3 CRC), a byte at a time from tables: the elephant
 * detector hashes every bypassed packet five times, and a bit-at-a-time
 * loop made that the pipeline's largest cost. */
static uint16_t crc16_table[256];
static uint32_t crc32_table[256];

void sw_init_crc_tables(void)
{
	for (uint32_t byte = 0; byte < 256; byte++) {
		uint16_t c16 = (uint16_t)byte;
		uint32_t c32 = byte;

		for (int bit = 0; bit < 8; bit++) {
			c16 = (c16 & 1) ? (uint16_t)((c16 >> 1) ^ 0xa001)
					: (uint16_t)(c16 >> 1);
			c32 = (c32 & 1) ? (c32 >> 1) ^ 0xedb88320 : c32 >> 1;
		}
		crc16_table[byte] = c16;
		crc32_table[byte] = c32;
	}
}

uint16_t sw_crc16(const uint8_t *data, uint32_t length)
{
	uint16_t crc = 0;

	for (uint32_t i = 0; i < length; i++)
		crc = (uint16_t)((crc >> 8) ^
				 crc16_table[(crc ^ data[i]) & 0xff]);
	return crc;
}

uint32_t sw_crc32(const uint8_t *data, uint32_t length)
{
	uint32_t crc = 0xffffffff;

	for (uint32_t i = 0; i < length; i++)
		crc = (crc >> 8) ^ crc32_table[(crc ^ data[i]) & 0xff];
	return ~crc;
}

/* FLOW_HASH_FIELDS(salt, flow) of flow_hash.p4, as an index below `size`. BMv2
 * runs CRC32 over the bit-packed field list; here the same fields, byte
 * aligned, go through the CPU's CRC32-C seeded with the salt (a few
 * instructions instead of a table walk per byte, and this runs five times
 * for every bypassed packet). The sketch's rows and the Bloom filter only
 * need independent hashes, so the cells differ from BMv2's and nothing
 * else does: no test or behaviour depends on which cell a flow lands in. */
uint32_t sw_flow_hash(const uint8_t fields[SW_KEY_MAX], uint8_t salt,
		      uint32_t size)
{
	return sw_crc32c(fields, SW_FLOW_KEY_LEN, salt * 0x9e3779b9u) % size;
}
