/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tables' lookups (tables.c) against a reference that cannot be wrong
 * by being clever: a list of the entries, searched from end to end.
 *  - sw_hash at every key length the program's tables use (each has a
 *    lookup of its own) and at one they do not, with tombstones left by
 *    removals; every key one byte away from a live one must miss.
 *  - sw_lpm over IPv4 and IPv6, with prefixes of every length from 0 to
 *    the full address (each probe masks the address in whole words, and
 *    64 is where IPv6's two words meet).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p4_tables.h"
#include "prefix_oracle.h"
#include "tables.h"

#define ENTRIES 600

static uint64_t xorshift(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static void random_bytes(uint64_t *state, uint8_t *out, uint32_t length)
{
	for (uint32_t i = 0; i < length; i++)
		out[i] = (uint8_t)xorshift(state);
}

static int failures;

#define EXPECT(condition, ...)                                                 \
	do {                                                                   \
		if (!(condition)) {                                            \
			fprintf(stderr, "test_tables: " __VA_ARGS__);          \
			fputc('\n', stderr);                                   \
			failures++;                                            \
		}                                                              \
	} while (0)

/* -- exact match ---------------------------------------------------------- */

static void hash_at_length(uint32_t key_len)
{
	static uint8_t keys[ENTRIES][SW_KEY_MAX];
	static bool live[ENTRIES];
	struct sw_hash hash;
	uint64_t state = 0x2545f4914f6cdd1dull ^ key_len;

	if (sw_hash_init(&hash, key_len, ENTRIES, 7) != 0) {
		EXPECT(false, "sw_hash_init(%u) failed", key_len);
		return;
	}
	for (int i = 0; i < ENTRIES; i++) {
		memset(keys[i], 0, SW_KEY_MAX);
		random_bytes(&state, keys[i], key_len);
		live[i] = sw_hash_put(&hash, keys[i], (uint64_t)i, 0) == 0;
		EXPECT(live[i], "length %u: entry %d refused", key_len, i);
	}
	/* Every third entry removed: its slot becomes a tombstone that
	 * later probes must walk past. */
	for (int i = 0; i < ENTRIES; i += 3) {
		EXPECT(sw_hash_remove(&hash, keys[i]) == 0,
		       "length %u: entry %d not removed", key_len, i);
		live[i] = false;
	}
	for (int i = 0; i < ENTRIES; i++) {
		const struct sw_hash_slot *slot = sw_hash_find(&hash, keys[i]);

		EXPECT((slot != NULL) == live[i], "length %u: entry %d %s",
		       key_len, i,
		       live[i] ? "not found" : "found after removal");
		EXPECT(slot == NULL || slot->value == (uint64_t)i,
		       "length %u: entry %d found with another's value",
		       key_len, i);
		/* The same key with any one byte changed is another key.
		 * All 256 values of each byte, so that some of them hash
		 * to the entry's own probe chain and reach the compare. */
		for (uint32_t b = 0; live[i] && i < ENTRIES / 4 && b < key_len;
		     b++) {
			uint8_t other[SW_KEY_MAX];

			memcpy(other, keys[i], SW_KEY_MAX);
			for (int v = 1; v < 256; v++) {
				other[b] = (uint8_t)(keys[i][b] ^ v);
				slot = sw_hash_find(&hash, other);
				EXPECT(slot == NULL || memcmp(slot->key, other,
							      key_len) == 0,
				       "length %u: entry %d found by a key "
				       "that differs in byte %u",
				       key_len, i, b);
			}
		}
	}
	sw_hash_free(&hash);
}

/* -- longest prefix match ------------------------------------------------- */

struct prefix {
	uint8_t addr[16];
	uint32_t length;
	uint64_t value;
};

static void lpm_of_width(uint32_t bytes)
{
	static struct prefix prefixes[ENTRIES];
	struct sw_lpm lpm;
	uint64_t state = 0x9e3779b97f4a7c15ull ^ bytes;
	int count = 0, hits = 0;
	uint32_t bits = bytes * 8;

	if (sw_lpm_init(&lpm, bytes, ENTRIES, 11) != 0) {
		EXPECT(false, "sw_lpm_init(%u) failed", bytes);
		return;
	}
	/* Nested prefixes under a few roots, so that most lookups choose
	 * among several covering lengths: every length 0..bits appears. */
	for (uint32_t length = 0; length <= bits && count < ENTRIES; length++) {
		for (int root = 0; root < 3 && count < ENTRIES; root++) {
			struct prefix *p = &prefixes[count];
			uint64_t root_state = 0x51ull + (uint64_t)root;

			random_bytes(&root_state, p->addr, bytes);
			/* Under the root, bits past length/2 random. */
			for (uint32_t bit = length / 2; bit < bits; bit++)
				if (xorshift(&state) & 1)
					p->addr[bit / 8] ^=
						(uint8_t)(0x80 >> (bit % 8));
			prefix_clear_host_bits(p->addr, bytes, length);
			p->length = length;
			p->value = 1000 + (uint64_t)count;
			if (sw_lpm_put(&lpm, p->addr, length, p->value) != 0) {
				EXPECT(false, "/%u refused", length);
				continue;
			}
			/* A prefix put twice keeps the later value. */
			for (int k = 0; k < count; k++)
				if (prefixes[k].length == length &&
				    memcmp(prefixes[k].addr, p->addr, bytes) ==
					    0)
					prefixes[k].value = p->value;
			count++;
		}
	}
	for (int trial = 0; trial < 20000; trial++) {
		uint8_t addr[16];
		const struct prefix *best = NULL;
		uint64_t value = 0;
		bool found;

		/* Half near an entry, half anywhere. */
		if (trial % 2 == 0) {
			const struct prefix *near =
				&prefixes[xorshift(&state) % (uint64_t)count];

			memcpy(addr, near->addr, bytes);
			for (uint32_t bit = near->length; bit < bits; bit++)
				if (xorshift(&state) & 1)
					addr[bit / 8] ^=
						(uint8_t)(0x80 >> (bit % 8));
		} else {
			random_bytes(&state, addr, bytes);
		}
		for (int k = 0; k < count; k++)
			if (prefix_covers(prefixes[k].addr, prefixes[k].length,
					  addr) &&
			    (best == NULL || prefixes[k].length > best->length))
				best = &prefixes[k];
		found = sw_lpm_lookup(&lpm, addr, &value);
		hits += found;
		EXPECT(found == (best != NULL) &&
			       (best == NULL || value == best->value),
		       "%u-byte lookup %d: got %s %llu, the longest covering "
		       "prefix is /%d with %llu",
		       bytes, trial, found ? "a hit" : "a miss",
		       (unsigned long long)value,
		       best != NULL ? (int)best->length : -1,
		       best != NULL ? (unsigned long long)best->value : 0);
	}
	/* With /0 present every lookup hits; a table whose prefixes all go
	 * means every lookup misses. */
	EXPECT(hits == 20000, "%u-byte lookups: only %d of 20000 hit", bytes,
	       hits);
	for (int k = 0; k < count; k++)
		sw_lpm_remove(&lpm, prefixes[k].addr, prefixes[k].length);
	{
		uint64_t value;

		EXPECT(!sw_lpm_lookup(&lpm, prefixes[0].addr, &value),
		       "%u-byte lookup hit an emptied table", bytes);
	}
	sw_lpm_free(&lpm);
}

int main(void)
{
	/* The program's key lengths (tables.c has a lookup for each), and
	 * one it does not use. */
	const uint32_t lengths[] = {
		P4_TABLE_INSTANCES_V4_KEY_BYTES,
		P4_TABLE_INSTANCES_V6_KEY_BYTES,
		1 + P4_TABLE_ROUTES_V4_KEY_BYTES,
		1 + P4_TABLE_ROUTES_V6_KEY_BYTES,
		P4_TABLE_MERGE_FLOWS_KEY_BYTES,
		7,
	};

	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
		hash_at_length(lengths[i]);
	lpm_of_width(4);
	lpm_of_width(16);
	if (failures > 0) {
		fprintf(stderr, "test_tables: %d failures\n", failures);
		return 1;
	}
	printf("test_tables: exact match at %zu key lengths and LPM over "
	       "IPv4 and IPv6 agree with the reference\n",
	       sizeof(lengths) / sizeof(lengths[0]));
	return 0;
}
