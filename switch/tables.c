/* SPDX-License-Identifier: Apache-2.0 */
#include "tables.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <rte_hash_crc.h>

enum { SW_SLOT_EMPTY = 0, SW_SLOT_LIVE, SW_SLOT_TOMBSTONE };

uint32_t sw_random_seed(void)
{
	uint32_t seed;
	struct timespec now;

	if (getrandom(&seed, sizeof(seed), 0) == sizeof(seed))
		return seed;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint32_t)now.tv_nsec ^ (uint32_t)now.tv_sec;
}

static uint32_t next_power_of_two(uint32_t value)
{
	uint32_t result = 16;

	while (result < value)
		result <<= 1;
	return result;
}

int sw_hash_init(struct sw_hash *hash, uint32_t key_len, uint32_t capacity,
		 uint32_t seed)
{
	uint32_t slots = next_power_of_two(capacity * 2 + 1);

	memset(hash, 0, sizeof(*hash));
	if (key_len == 0 || key_len > SW_KEY_MAX)
		return -EINVAL;
	hash->slots = calloc(slots, sizeof(*hash->slots));
	if (hash->slots == NULL)
		return -ENOMEM;
	hash->mask = slots - 1;
	hash->key_len = key_len;
	hash->capacity = capacity;
	hash->seed = seed;
	return 0;
}

void sw_hash_free(struct sw_hash *hash)
{
	free(hash->slots);
	hash->slots = NULL;
}

uint32_t sw_crc32c(const uint8_t *bytes, uint32_t length, uint32_t seed)
{
	uint32_t crc = seed;
	uint32_t i = 0;

	for (; i + 8 <= length; i += 8) {
		uint64_t word;

		memcpy(&word, bytes + i, sizeof(word));
		crc = rte_hash_crc_8byte(word, crc);
	}
	for (; i + 4 <= length; i += 4) {
		uint32_t word;

		memcpy(&word, bytes + i, sizeof(word));
		crc = rte_hash_crc_4byte(word, crc);
	}
	for (; i < length; i++)
		crc = rte_hash_crc_1byte(bytes[i], crc);
	return crc;
}

static uint32_t key_hash(const struct sw_hash *hash, const uint8_t *key)
{
	return sw_crc32c(key, hash->key_len, hash->seed);
}

struct sw_hash_slot *sw_hash_find(const struct sw_hash *hash,
				  const uint8_t *key)
{
	uint32_t index = key_hash(hash, key) & hash->mask;

	for (uint32_t probes = 0; probes <= hash->mask; probes++) {
		struct sw_hash_slot *slot = &hash->slots[index];

		if (slot->state == SW_SLOT_EMPTY)
			return NULL;
		if (slot->state == SW_SLOT_LIVE &&
		    memcmp(slot->key, key, hash->key_len) == 0)
			return slot;
		index = (index + 1) & hash->mask;
	}
	return NULL;
}

/* Tombstones lengthen every probe of a miss; rebuild the slot array when
 * they outnumber a quarter of it. */
static void rebuild(struct sw_hash *hash)
{
	uint32_t slots = hash->mask + 1;
	struct sw_hash_slot *old = hash->slots;
	struct sw_hash_slot *fresh = calloc(slots, sizeof(*fresh));

	if (fresh == NULL)
		return; /* keep the old array: correct, only slower */
	hash->slots = fresh;
	hash->tombstones = 0;
	for (uint32_t i = 0; i < slots; i++) {
		uint32_t index;

		if (old[i].state != SW_SLOT_LIVE)
			continue;
		index = key_hash(hash, old[i].key) & hash->mask;
		while (fresh[index].state != SW_SLOT_EMPTY)
			index = (index + 1) & hash->mask;
		memcpy(fresh[index].key, old[i].key, hash->key_len);
		fresh[index].state = SW_SLOT_LIVE;
		fresh[index].value = old[i].value;
		sw_slot_hit(&fresh[index], sw_slot_last_hit(&old[i]));
	}
	free(old);
}

int sw_hash_put(struct sw_hash *hash, const uint8_t *key, uint64_t value,
		uint64_t now_ns)
{
	struct sw_hash_slot *slot = sw_hash_find(hash, key);
	uint32_t index;

	if (slot != NULL) {
		slot->value = value;
		return 0;
	}
	if (hash->count >= hash->capacity)
		return -ENOSPC;
	if (hash->tombstones > (hash->mask + 1) / 4)
		rebuild(hash);
	index = key_hash(hash, key) & hash->mask;
	while (hash->slots[index].state == SW_SLOT_LIVE)
		index = (index + 1) & hash->mask;
	slot = &hash->slots[index];
	if (slot->state == SW_SLOT_TOMBSTONE)
		hash->tombstones--;
	memset(slot->key, 0, sizeof(slot->key));
	memcpy(slot->key, key, hash->key_len);
	slot->value = value;
	sw_slot_hit(slot, now_ns);
	slot->state = SW_SLOT_LIVE;
	hash->count++;
	return 0;
}

int sw_hash_remove(struct sw_hash *hash, const uint8_t *key)
{
	struct sw_hash_slot *slot = sw_hash_find(hash, key);

	if (slot == NULL)
		return -ENOENT;
	slot->state = SW_SLOT_TOMBSTONE;
	hash->count--;
	hash->tombstones++;
	return 0;
}

void sw_hash_clear(struct sw_hash *hash)
{
	memset(hash->slots, 0, (size_t)(hash->mask + 1) * sizeof(*hash->slots));
	hash->count = 0;
	hash->tombstones = 0;
}

/* -- longest prefix match ------------------------------------------------ */

int sw_lpm_init(struct sw_lpm *lpm, uint32_t addr_bytes, uint32_t capacity,
		uint32_t seed)
{
	memset(lpm, 0, sizeof(*lpm));
	if (addr_bytes != 4 && addr_bytes != 16)
		return -EINVAL;
	lpm->addr_bytes = addr_bytes;
	return sw_hash_init(&lpm->by_prefix, addr_bytes + 1, capacity, seed);
}

void sw_lpm_free(struct sw_lpm *lpm)
{
	sw_hash_free(&lpm->by_prefix);
}

static void mask_address(uint8_t *out, const uint8_t *addr, uint32_t bytes,
			 uint32_t length)
{
	for (uint32_t i = 0; i < bytes; i++) {
		uint32_t bits = length > 8 * i ? length - 8 * i : 0;
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);

		out[i] = addr[i] & mask;
	}
}

static void lpm_key(const struct sw_lpm *lpm, uint8_t *key, const uint8_t *addr,
		    uint32_t length)
{
	memset(key, 0, SW_KEY_MAX);
	key[0] = (uint8_t)length;
	mask_address(key + 1, addr, lpm->addr_bytes, length);
}

static void refresh_lengths(struct sw_lpm *lpm)
{
	lpm->length_count = 0;
	for (int length = (int)lpm->addr_bytes * 8; length >= 0; length--)
		if (lpm->per_length[length])
			lpm->lengths[lpm->length_count++] = (uint8_t)length;
}

bool sw_lpm_lookup(const struct sw_lpm *lpm, const uint8_t *addr,
		   uint64_t *value)
{
	uint8_t key[SW_KEY_MAX];

	for (uint32_t i = 0; i < lpm->length_count; i++) {
		const struct sw_hash_slot *slot;

		lpm_key(lpm, key, addr, lpm->lengths[i]);
		slot = sw_hash_find(&lpm->by_prefix, key);
		if (slot != NULL) {
			*value = slot->value;
			return true;
		}
	}
	return false;
}

int sw_lpm_put(struct sw_lpm *lpm, const uint8_t *addr, uint32_t length,
	       uint64_t value)
{
	uint8_t key[SW_KEY_MAX];
	bool existed;
	int result;

	if (length > lpm->addr_bytes * 8)
		return -EINVAL;
	lpm_key(lpm, key, addr, length);
	if (memcmp(key + 1, addr, lpm->addr_bytes) != 0)
		return -EINVAL; /* host bits set */
	existed = sw_hash_find(&lpm->by_prefix, key) != NULL;
	result = sw_hash_put(&lpm->by_prefix, key, value, 0);
	if (result == 0 && !existed) {
		lpm->per_length[length]++;
		refresh_lengths(lpm);
	}
	return result;
}

int sw_lpm_remove(struct sw_lpm *lpm, const uint8_t *addr, uint32_t length)
{
	uint8_t key[SW_KEY_MAX];
	int result;

	if (length > lpm->addr_bytes * 8)
		return -EINVAL;
	lpm_key(lpm, key, addr, length);
	result = sw_hash_remove(&lpm->by_prefix, key);
	if (result == 0) {
		lpm->per_length[length]--;
		refresh_lengths(lpm);
	}
	return result;
}

void sw_lpm_clear(struct sw_lpm *lpm)
{
	sw_hash_clear(&lpm->by_prefix);
	memset(lpm->per_length, 0, sizeof(lpm->per_length));
	lpm->length_count = 0;
}

/* -- ternary and range ------------------------------------------------------
 */

int sw_ternary_init(struct sw_ternary *table, uint32_t capacity)
{
	memset(table, 0, sizeof(*table));
	table->rules = calloc(capacity ? capacity : 1, sizeof(*table->rules));
	if (table->rules == NULL)
		return -ENOMEM;
	table->capacity = capacity;
	return 0;
}

void sw_ternary_free(struct sw_ternary *table)
{
	free(table->rules);
	table->rules = NULL;
}

static int by_priority(const void *a, const void *b)
{
	const struct sw_service_rule *x = a, *y = b;

	return (x->priority < y->priority) - (x->priority > y->priority);
}

int sw_ternary_set(struct sw_ternary *table,
		   const struct sw_service_rule *rules, uint32_t count)
{
	if (count > table->capacity)
		return -ENOSPC;
	if (count > 0) /* memcpy from NULL is undefined even for 0 bytes */
		memcpy(table->rules, rules, (size_t)count * sizeof(*rules));
	table->count = count;
	qsort(table->rules, count, sizeof(*rules), by_priority);
	return 0;
}

const struct sw_service_rule *sw_ternary_lookup(const struct sw_ternary *table,
						uint8_t ip_version,
						const uint8_t addr[16],
						uint16_t port)
{
	for (uint32_t i = 0; i < table->count; i++) {
		const struct sw_service_rule *rule = &table->rules[i];
		bool match = rule->ip_version == ip_version &&
			     port >= rule->port_lo && port <= rule->port_hi;

		for (int b = 0; match && b < 16; b++)
			match = (addr[b] & rule->mask[b]) == rule->addr[b];
		if (match)
			return rule;
	}
	return NULL;
}
