/* SPDX-License-Identifier: Apache-2.0 */
#include "tables.h"

#include "p4_tables.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <rte_byteorder.h>
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

/* The hash and the compare are inline with the key's length a constant
 * wherever the caller's is one: the lookups of the pipeline are a few
 * words of CRC and compare, and generic loops over a variable length cost
 * them more than the work (docs/switch.md, "Speed"). */
static inline __attribute__((always_inline)) uint32_t
crc32c_inline(const uint8_t *bytes, uint32_t length, uint32_t seed)
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

uint32_t sw_crc32c(const uint8_t *bytes, uint32_t length, uint32_t seed)
{
	return crc32c_inline(bytes, length, seed);
}

static uint32_t key_hash(const struct sw_hash *hash, const uint8_t *key)
{
	return sw_crc32c(key, hash->key_len, hash->seed);
}

/* memcmp(a, b, length) == 0, in whole words where it can. */
static inline __attribute__((always_inline)) bool
same_key(const uint8_t *a, const uint8_t *b, uint32_t length)
{
	uint64_t differ = 0;
	uint32_t i = 0;

	for (; i + 8 <= length; i += 8) {
		uint64_t x, y;

		memcpy(&x, a + i, sizeof(x));
		memcpy(&y, b + i, sizeof(y));
		differ |= x ^ y;
	}
	if (i + 4 <= length) {
		uint32_t x, y;

		memcpy(&x, a + i, sizeof(x));
		memcpy(&y, b + i, sizeof(y));
		differ |= x ^ y;
		i += 4;
	}
	for (; i < length; i++)
		differ |= (uint64_t)(a[i] ^ b[i]);
	return differ == 0;
}

static inline __attribute__((always_inline)) struct sw_hash_slot *
find_inline(const struct sw_hash *hash, const uint8_t *key, uint32_t length)
{
	uint32_t index = crc32c_inline(key, length, hash->seed) & hash->mask;

	for (uint32_t probes = 0; probes <= hash->mask; probes++) {
		struct sw_hash_slot *slot = &hash->slots[index];

		if (slot->state == SW_SLOT_EMPTY)
			return NULL;
		if (slot->state == SW_SLOT_LIVE &&
		    same_key(slot->key, key, length))
			return slot;
		index = (index + 1) & hash->mask;
	}
	return NULL;
}

/* The key lengths of the program's tables, each with a lookup of its own
 * (a tail call from sw_hash_find): an address (instances_v4/v6), an
 * address behind its prefix length (sw_lpm's keys: routes_v4/v6,
 * path_mtu_v4/v6) and merge_flows' flow. */
#define LPM_V4_KEY_BYTES (1 + 4)
#define LPM_V6_KEY_BYTES (1 + 16)
#define FIND_OF_LENGTH(name, length)                                           \
	static __attribute__((noinline)) struct sw_hash_slot *name(            \
		const struct sw_hash *hash, const uint8_t *key)                \
	{                                                                      \
		return find_inline(hash, key, (length));                       \
	}
FIND_OF_LENGTH(find_v4_address, P4_TABLE_INSTANCES_V4_KEY_BYTES)
FIND_OF_LENGTH(find_v6_address, P4_TABLE_INSTANCES_V6_KEY_BYTES)
FIND_OF_LENGTH(find_v4_prefix, LPM_V4_KEY_BYTES)
FIND_OF_LENGTH(find_v6_prefix, LPM_V6_KEY_BYTES)
FIND_OF_LENGTH(find_flow, P4_TABLE_MERGE_FLOWS_KEY_BYTES)
FIND_OF_LENGTH(find_any_length, hash->key_len)
#undef FIND_OF_LENGTH

struct sw_hash_slot *sw_hash_find(const struct sw_hash *hash,
				  const uint8_t *key)
{
	/* Compares, not a switch: a switch's jump table is one indirect
	 * branch that mispredicts whenever the previous lookup had another
	 * length (a packet looks up three). Another length is as correct,
	 * only slower. */
	uint32_t length = hash->key_len;

	if (length == P4_TABLE_MERGE_FLOWS_KEY_BYTES)
		return find_flow(hash, key);
	if (length == LPM_V4_KEY_BYTES)
		return find_v4_prefix(hash, key);
	if (length == P4_TABLE_INSTANCES_V4_KEY_BYTES)
		return find_v4_address(hash, key);
	if (length == LPM_V6_KEY_BYTES)
		return find_v6_prefix(hash, key);
	if (length == P4_TABLE_INSTANCES_V6_KEY_BYTES)
		return find_v6_address(hash, key);
	return find_any_length(hash, key);
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

/* lpm_key's key for each length with entries, longest first, with the
 * address masked in whole words. */
static uint32_t mask32(uint32_t length) /* the top `length` bits */
{
	return length == 0 ? 0 : UINT32_MAX << (32 - length);
}

static uint64_t mask64(uint32_t length) /* the top `length` bits, <= 64 */
{
	return length == 0 ? 0 : UINT64_MAX << (64 - length);
}

bool sw_lpm_lookup_v4(const struct sw_lpm *lpm, const uint8_t *addr,
		      uint64_t *value)
{
	uint8_t key[LPM_V4_KEY_BYTES];
	uint32_t word;

	memcpy(&word, addr, sizeof(word));
	word = rte_be_to_cpu_32(word);
	for (uint32_t i = 0; i < lpm->length_count; i++) {
		const struct sw_hash_slot *slot;
		uint32_t length = lpm->lengths[i];
		uint32_t masked = rte_cpu_to_be_32(word & mask32(length));

		key[0] = (uint8_t)length;
		memcpy(key + 1, &masked, sizeof(masked));
		slot = find_v4_prefix(&lpm->by_prefix, key);
		if (slot != NULL) {
			*value = slot->value;
			return true;
		}
	}
	return false;
}

bool sw_lpm_lookup_v6(const struct sw_lpm *lpm, const uint8_t *addr,
		      uint64_t *value)
{
	uint8_t key[LPM_V6_KEY_BYTES];
	uint64_t high, low;

	memcpy(&high, addr, sizeof(high));
	memcpy(&low, addr + 8, sizeof(low));
	high = rte_be_to_cpu_64(high);
	low = rte_be_to_cpu_64(low);
	for (uint32_t i = 0; i < lpm->length_count; i++) {
		const struct sw_hash_slot *slot;
		uint32_t length = lpm->lengths[i];
		uint64_t masked_high = rte_cpu_to_be_64(
			length >= 64 ? high : high & mask64(length));
		uint64_t masked_low = rte_cpu_to_be_64(
			length <= 64 ? 0 : low & mask64(length - 64));

		key[0] = (uint8_t)length;
		memcpy(key + 1, &masked_high, sizeof(masked_high));
		memcpy(key + 9, &masked_low, sizeof(masked_low));
		slot = find_v6_prefix(&lpm->by_prefix, key);
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
