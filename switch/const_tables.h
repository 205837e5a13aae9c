/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The P4 program's constant tables (those with `const entries`), executed
 * from their entries in the committed BMv2 JSON: gen_const_tables.py writes
 * them into p4_const_tables.{h,c} at build time, and the pipeline builds
 * each table's key as the P4 lists it and runs the action the lookup
 * returns. Nothing of their decisions is restated in C, so the two cannot
 * drift.
 *
 * Each table is looked up by its p4_apply_<table>(key) (p4_const_tables.h):
 * the call of the first entry that matches key (the table's key fields, in
 * the P4's key order), else the table's const default action, as BMv2
 * tries const entries in source order (p4c numbers their priorities 1, 2,
 * ... and the smallest wins). The generator has tried the entries for
 * every value a field can take, so the function only looks its answer up.
 */
#ifndef JUMBOGATE_SWITCH_CONST_TABLES_H
#define JUMBOGATE_SWITCH_CONST_TABLES_H

#include "p4_const_tables.h"

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* p4_apply_<table>(key) for a table named at run time (tests). */
static inline const struct p4_action_call *
sw_const_table_apply(const struct p4_const_table *table,
		     const struct p4_const_key_field *key)
{
	return table->apply(key);
}

/* A key field of up to 64 bits (bools, roles, flags, lengths). */
static inline struct p4_const_key_field sw_key(uint64_t value)
{
	return (struct p4_const_key_field){0, value};
}

/* A 128-bit key field from 16 bytes in network order (flow_addr_t): two
 * loads and byte swaps, as the signal policy builds one for every packet. */
static inline struct p4_const_key_field sw_key128(const uint8_t bytes[16])
{
	uint64_t hi, lo;

	memcpy(&hi, bytes, sizeof(hi));
	memcpy(&lo, bytes + 8, sizeof(lo));
	return (struct p4_const_key_field){be64toh(hi), be64toh(lo)};
}

#endif /* JUMBOGATE_SWITCH_CONST_TABLES_H */
