/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The matcher of the constant tables (const_tables.h): one loop for all of
 * them, as their entries are data. Exact and LPM entries are value/mask
 * pairs too (gen_const_tables.py makes the masks), so one test serves
 * every match kind.
 */
#include "const_tables.h"

#include <stdbool.h>

static bool entry_matches(const struct p4_const_entry *entry,
			  const struct p4_key_field *key, unsigned int keys)
{
	for (unsigned int i = 0; i < keys; i++) {
		if (((key[i].hi ^ entry->value[i].hi) & entry->mask[i].hi) |
		    ((key[i].lo ^ entry->value[i].lo) & entry->mask[i].lo))
			return false;
	}
	return true;
}

const struct p4_action_call *
sw_const_table_apply(const struct p4_const_table *table,
		     const struct p4_key_field *key)
{
	for (unsigned int i = 0; i < table->size; i++) {
		if (entry_matches(&table->entries[i], key, table->keys))
			return &table->entries[i].call;
	}
	return &table->default_call;
}
