/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Flow table: two-choice hashing into 8-way buckets of 32-bit signatures.
 * A lookup reads at most two 32-byte buckets and one flow entry, whatever
 * the load. The flow's slot is its bucket way, so the table needs no free
 * list and its memory is fixed at creation.
 *
 * When both candidate buckets are full, the least recently seen flow of
 * the sixteen is evicted (after releasing what it holds). Flows that an
 * operator pinned (onload/offload) or that carry learned MSS lose only
 * when nothing else is there. A flood of one-packet flows therefore
 * churns among itself: a busy flow is always more recently seen than the
 * mice around it, so it keeps its slot.
 *
 * The table hashes the 5-tuple in software instead of trusting the
 * port's RSS hash: the split path must find a flow from the other
 * direction (to record the MSS the rack side advertised), and an RSS
 * hash is neither symmetric nor available on that port. CRC32-C over at
 * most 40 bytes costs a few nanoseconds.
 */
#include <stddef.h>
#include <string.h>

#include <rte_hash_crc.h>
#if defined(RTE_ARCH_X86_64) && defined(__SSE4_2__)
#include <nmmintrin.h>
#endif
#include <rte_malloc.h>

#include "internal.h"

#define SEED_PRIMARY   0x9e3779b9u
#define SEED_SECONDARY 0x85ebca6bu

/* CRC32-C of one word. rte_hash_crc_8byte computes the same, but asks at
 * run time which instruction set to use; a build for SSE 4.2 knows. */
static inline uint32_t crc_word(uint64_t word, uint32_t crc)
{
#if defined(RTE_ARCH_X86_64) && defined(__SSE4_2__)
	return (uint32_t)_mm_crc32_u64(crc, word);
#else
	return rte_hash_crc_8byte(word, crc);
#endif
}

uint64_t jg_flow_fingerprint(uint8_t ip_version, uint8_t protocol,
			     const void *ports, const void *src,
			     const void *dst)
{
	uint64_t words[5];
	uint32_t primary = SEED_PRIMARY, secondary = SEED_SECONDARY;
	uint32_t port_pair, count;

	memcpy(&port_pair, ports, sizeof(port_pair));
	words[0] = (uint64_t)ip_version | (uint64_t)protocol << 8 |
		   (uint64_t)port_pair << 32;
	if (ip_version == 4) {
		uint32_t s, d;

		memcpy(&s, src, sizeof(s));
		memcpy(&d, dst, sizeof(d));
		words[1] = (uint64_t)s | (uint64_t)d << 32;
		count = 2;
	} else {
		memcpy(&words[1], src, 16);
		memcpy(&words[3], dst, 16);
		count = 5;
	}
	/* Two independent chains: the CPU overlaps them. */
	for (uint32_t i = 0; i < count; i++) {
		primary = crc_word(words[i], primary);
		secondary = crc_word(words[i], secondary);
	}
	return (uint64_t)primary << 32 | secondary;
}

_Static_assert(offsetof(struct jg_flow_key, dst_port) ==
		       offsetof(struct jg_flow_key, src_port) + 2,
	       "a key's ports lie as on the wire");

void jg_flow_key_hash(const struct jg_flow_key *key, uint64_t *fingerprint)
{
	*fingerprint =
		jg_flow_fingerprint(key->ip_version, key->protocol,
				    &key->src_port, &key->src, &key->dst);
}

static inline uint32_t signature_of(uint64_t fingerprint)
{
	return (uint32_t)(fingerprint ^ (fingerprint >> 29)) | 1u;
}

static inline void candidate_buckets(const struct jg_engine *e,
				     uint64_t fingerprint, uint32_t *first,
				     uint32_t *second)
{
	*first = (uint32_t)(fingerprint >> 32) & e->bucket_mask;
	*second = (uint32_t)fingerprint & e->bucket_mask;
	if (*second == *first)
		*second = *first ^ 1u;
}

int jg_flow_table_init(struct jg_engine *e)
{
	uint32_t capacity = rte_align32pow2(
		RTE_MAX(e->config.max_flows, 2u * JG_BUCKET_WAYS));
	uint32_t buckets = capacity / JG_BUCKET_WAYS;
	size_t flow_bytes = (size_t)capacity * sizeof(struct jg_flow);
	size_t bucket_bytes = (size_t)buckets * sizeof(struct jg_bucket);

	e->flows = rte_zmalloc_socket("jg_flows", flow_bytes,
				      RTE_CACHE_LINE_SIZE, e->config.socket_id);
	e->buckets =
		rte_zmalloc_socket("jg_buckets", bucket_bytes,
				   RTE_CACHE_LINE_SIZE, e->config.socket_id);
	if (e->flows == NULL || e->buckets == NULL)
		return -ENOMEM;
	e->flow_capacity = capacity;
	e->bucket_mask = buckets - 1;
	e->memory_bytes += flow_bytes + bucket_bytes;
	for (uint32_t i = 0; i < capacity; i++)
		e->flows[i].timer_list = JG_TIMER_NONE;
	return 0;
}

void jg_flow_table_free(struct jg_engine *e)
{
	rte_free(e->flows);
	rte_free(e->buckets);
	e->flows = NULL;
	e->buckets = NULL;
}

static struct jg_flow *find_in_bucket(struct jg_engine *e, uint32_t bucket,
				      uint32_t signature, uint64_t fingerprint)
{
	const struct jg_bucket *b = &e->buckets[bucket];

	for (uint32_t way = 0; way < JG_BUCKET_WAYS; way++) {
		if (b->signature[way] == signature) {
			struct jg_flow *f =
				&e->flows[bucket * JG_BUCKET_WAYS + way];

			if (f->fingerprint == fingerprint)
				return f;
		}
	}
	return NULL;
}

struct jg_flow *jg_flow_find(struct jg_engine *e, uint64_t fingerprint)
{
	uint32_t first, second, signature = signature_of(fingerprint);
	struct jg_flow *f;

	candidate_buckets(e, fingerprint, &first, &second);
	f = find_in_bucket(e, first, signature, fingerprint);
	if (f == NULL)
		f = find_in_bucket(e, second, signature, fingerprint);
	return f;
}

static int free_way(const struct jg_bucket *b)
{
	for (int way = 0; way < (int)JG_BUCKET_WAYS; way++)
		if (b->signature[way] == 0)
			return way;
	return -1;
}

/* Higher is a better victim: old, idle, unpinned. */
static int64_t eviction_score(const struct jg_engine *e,
			      const struct jg_flow *f)
{
	uint16_t now = (uint16_t)(e->now_ns >> 16);
	int64_t score = (uint16_t)(now - f->last_seen_coarse);

	if (f->flags & (JG_FLOW_ONLOADED | JG_FLOW_OFFLOADED))
		score -= 1 << 20;
	if (f->internal_mss != 0)
		score -= 1 << 18;
	if (f->runs != NULL)
		score -= 1 << 16;
	return score;
}

static void evict(struct jg_engine *e, uint32_t slot)
{
	struct jg_flow *f = &e->flows[slot];

	if (f->runs != NULL) {
		e->stats.merge.evictions_flushing++;
		jg_flow_release_all(e, f);
	}
	jg_timer_unlink(e, f);
	e->buckets[slot / JG_BUCKET_WAYS].signature[slot % JG_BUCKET_WAYS] = 0;
	e->flows_now--;
	e->stats.merge.flows_evicted++;
}

struct jg_flow *jg_flow_find_or_create(struct jg_engine *e,
				       uint64_t fingerprint)
{
	uint32_t first, second, signature = signature_of(fingerprint);
	uint32_t slot = JG_INDEX_NONE;
	struct jg_flow *f;
	int way;

	candidate_buckets(e, fingerprint, &first, &second);
	f = find_in_bucket(e, first, signature, fingerprint);
	if (f == NULL)
		f = find_in_bucket(e, second, signature, fingerprint);
	if (f != NULL)
		return f;

	way = free_way(&e->buckets[first]);
	if (way >= 0) {
		slot = first * JG_BUCKET_WAYS + (uint32_t)way;
	} else if ((way = free_way(&e->buckets[second])) >= 0) {
		slot = second * JG_BUCKET_WAYS + (uint32_t)way;
	} else {
		int64_t best = INT64_MIN;
		const uint32_t buckets[2] = {first, second};

		for (int b = 0; b < 2; b++) {
			for (uint32_t w = 0; w < JG_BUCKET_WAYS; w++) {
				uint32_t s = buckets[b] * JG_BUCKET_WAYS + w;
				int64_t score = eviction_score(e, &e->flows[s]);

				if (score > best) {
					best = score;
					slot = s;
				}
			}
		}
		if (best < -(1 << 19))
			return NULL; /* everything here is pinned */
		evict(e, slot);
	}

	f = &e->flows[slot];
	memset(f, 0, sizeof(*f));
	f->fingerprint = fingerprint;
	f->timer_list = JG_TIMER_NONE;
	f->timer_prev = f->timer_next = JG_INDEX_NONE;
	e->buckets[slot / JG_BUCKET_WAYS].signature[slot % JG_BUCKET_WAYS] =
		signature;
	e->flows_now++;
	e->stats.merge.flows_created++;
	return f;
}
