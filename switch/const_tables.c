/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The matcher of the constant tables (const_tables.h): one for all of
 * them, as their entries are data. Exact and LPM entries are value/mask
 * pairs too (gen_const_tables.py makes the masks), so one comparison
 * serves every match kind.
 */
#include "const_tables.h"

#include <stdbool.h>
#include <stddef.h>

/* Only the fields the entry does not leave to a wildcard are compared:
 * most entries name a few of their table's fields. */
static bool entry_matches(const struct p4_const_entry *entry,
			  const struct p4_const_key_field *key)
{
	for (uint32_t cares = entry->cares; cares != 0; cares &= cares - 1) {
		unsigned int i = (unsigned int)__builtin_ctz(cares);

		if (((key[i].hi ^ entry->value[i].hi) & entry->mask[i].hi) |
		    ((key[i].lo ^ entry->value[i].lo) & entry->mask[i].lo))
			return false;
	}
	return true;
}

/* A table of few key bits has its first matches worked out by the
 * generator (p4_const_table.dense): the key's bits index them. */
static const struct p4_action_call *
dense_apply(const struct p4_const_table *table,
	    const struct p4_const_key_field *key)
{
	unsigned int index = 0;
	int entry;

	for (unsigned int i = 0; i < table->keys; i++)
		index = index << table->widths[i] |
			(unsigned int)(key[i].lo &
				       ((1u << table->widths[i]) - 1));
	entry = table->dense[index];
	return entry < 0 ? &table->default_call : &table->entries[entry].call;
}

const struct p4_action_call *
sw_const_table_apply(const struct p4_const_table *table,
		     const struct p4_const_key_field *key)
{
	if (table->dense != NULL)
		return dense_apply(table, key);
	for (unsigned int i = 0; i < table->size; i++) {
		if (entry_matches(&table->entries[i], key))
			return &table->entries[i].call;
	}
	return &table->default_call;
}
