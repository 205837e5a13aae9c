/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runs keys through the switch's constant tables for check_const_tables.py.
 * Each line of standard input is a table's name and its key fields, each
 * as HI:LO (two 64-bit words in hex); each line of output is the action
 * the switch's lookup chose, by its P4 name, and the action's data words
 * in hex. A table name or key count the switch does not have is an error.
 */
#include "const_tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct p4_const_table *const tables[] = P4_CONST_TABLES;

static const struct p4_const_table *find_table(const char *name)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (strcmp(tables[i]->name, name) == 0)
			return tables[i];
	}
	return NULL;
}

int main(void)
{
	char line[4096];
	unsigned long number = 0;

	while (fgets(line, sizeof(line), stdin) != NULL) {
		struct p4_const_key_field key[P4_CONST_KEY_MAX];
		const struct p4_const_table *table;
		const struct p4_action_call *call;
		unsigned int fields = 0;
		char *token = strtok(line, " \n");

		number++;
		table = token != NULL ? find_table(token) : NULL;
		if (table == NULL) {
			fprintf(stderr, "line %lu: no constant table %s\n",
				number, token != NULL ? token : "");
			return 1;
		}
		while ((token = strtok(NULL, " \n")) != NULL) {
			char *colon = strchr(token, ':');

			if (fields == P4_CONST_KEY_MAX || colon == NULL) {
				fprintf(stderr, "line %lu: bad key field\n",
					number);
				return 1;
			}
			key[fields].hi = strtoull(token, NULL, 16);
			key[fields].lo = strtoull(colon + 1, NULL, 16);
			fields++;
		}
		if (fields != table->keys) {
			fprintf(stderr,
				"line %lu: %s has %u key fields, not %u\n",
				number, table->name, table->keys, fields);
			return 1;
		}
		call = sw_const_table_apply(table, key);
		fputs(p4_action_names[call->action], stdout);
		for (int i = 0; i < P4_CONST_DATA_MAX; i++)
			printf(" %llx", (unsigned long long)call->data[i]);
		putchar('\n');
	}
	return 0;
}
