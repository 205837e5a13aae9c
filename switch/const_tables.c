/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The matcher of the constant tables (const_tables.h): one for all of
 * them, as their entries are data. Exact and LPM entries are value/mask
 * pairs too (gen_const_tables.py makes the masks), so one comparison
 * serves every match kind.
 *
 * The generator works out all it can per key value, so that a packet
 * pays for a few lookups instead of trying entries one by one: a table of
 * few key bits is one array index (dense); the others are bitsets of
 * their entries, one per key field, ANDed, the lowest bit left being the
 * first entry that matches.
 */
#include "const_tables.h"

#include <stdbool.h>
#include <stddef.h>

static bool pair_matches(const struct p4_const_pair *pair,
			 const struct p4_key_field *key)
{
	return (((key->hi ^ pair->value.hi) & pair->mask.hi) |
		((key->lo ^ pair->value.lo) & pair->mask.lo)) == 0;
}

/* A table of few key bits has its first matches worked out by the
 * generator (p4_const_table.dense): the key's bits index them. */
static const struct p4_action_call *
dense_apply(const struct p4_const_table *table, const struct p4_key_field *key)
{
	unsigned int index = 0;
	int entry;

	for (unsigned int i = 0; i < table->keys; i++)
		index = index << table->widths[i] |
			(unsigned int)(key[i].lo &
				       ((1u << table->widths[i]) - 1));
	entry = table->dense[index];
	return entry < 0 ? &table->default_call : &table->calls[entry];
}

const struct p4_action_call *
sw_const_table_apply(const struct p4_const_table *table,
		     const struct p4_key_field *key)
{
	uint64_t entries = table->all;

	if (table->dense != NULL)
		return dense_apply(table, key);
	/* A value beyond the field's width is cut to it, as a P4 field of
	 * that width would hold it. */
	for (unsigned int i = 0; i < table->narrow_count; i++) {
		const struct p4_const_narrow *field = &table->narrow[i];

		entries &= field->bitsets[key[field->key].lo & field->values];
	}
	for (unsigned int i = 0; i < table->wide_count; i++) {
		const struct p4_const_wide *field = &table->wide[i];
		uint64_t matched = field->wildcards;

		/* None of the entries left names the field: it cannot
		 * change the answer, so its pairs are not compared. */
		if ((entries & ~matched) == 0)
			continue;
		for (unsigned int p = 0; p < field->pair_count; p++) {
			if (pair_matches(&field->pairs[p], &key[field->key]))
				matched |= field->pairs[p].entries;
		}
		entries &= matched;
	}
	return entries == 0 ? &table->default_call
			    : &table->calls[__builtin_ctzll(entries)];
}
