/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prefixes bit by bit, the slow and obvious way: the oracle the tables'
 * test (test_tables.c) and the pipeline's fuzz target (fuzz/) hold the
 * longest-prefix lookups to.
 */
#ifndef JUMBOGATE_SWITCH_PREFIX_ORACLE_H
#define JUMBOGATE_SWITCH_PREFIX_ORACLE_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the first `length` bits of `addr` are those of `prefix`. */
static inline bool prefix_covers(const uint8_t *prefix, uint32_t length,
				 const uint8_t *addr)
{
	for (uint32_t bit = 0; bit < length; bit++) {
		uint8_t mask = (uint8_t)(0x80 >> (bit % 8));

		if ((prefix[bit / 8] & mask) != (addr[bit / 8] & mask))
			return false;
	}
	return true;
}

/* Clears the bits of a `bytes`-long address past the first `length`. */
static inline void prefix_clear_host_bits(uint8_t *addr, uint32_t bytes,
					  uint32_t length)
{
	for (uint32_t bit = length; bit < bytes * 8; bit++)
		addr[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
}

#endif
