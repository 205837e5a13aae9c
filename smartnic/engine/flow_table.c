/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Flow table: two-choice hashing into 8-way buckets of 32-bit signatures;
 * a new flow takes the emptier of its two. A lookup reads at most two
 * 32-byte buckets, then the full key of a slot whose signature matches:
 * the signature is only a filter, so two 5-tuples never share an entry,
 * whatever their hashes.
 *
 * When both candidate buckets are full, the least recently seen flow of
 * the sixteen is evicted (after releasing what it holds). Flows that an
 * operator onloaded, or that carry learned MSS, lose only when nothing
 * else is there. A flood of one-packet flows therefore churns among
 * itself: a busy flow is always more recently seen than the mice around
 * it, so it keeps its slot.
 *
 * The border faces the Internet, so an outsider chooses the 5-tuples:
 * - The hash is keyed with a secret drawn at creation. CRC32-C, used
 *   before, is linear: colliding tuples for a chosen victim could be
 *   solved offline in 32 equations, whatever the seed. The keyed hash is
 *   NH (jumbogate/keyed_hash.h, shared with the SmartNIC's tables), so
 *   without the key a collision costs about 2^32 guesses.
 * - The two candidate buckets come from two NH sums under independent
 *   keys, so tuples that share one bucket do not therefore share both.
 * - Onloaded ("pinned") flows are bounded (max_onloaded_flows) and lose
 *   their pin when not seen for onload_idle_s, so no client can fill the
 *   table with entries eviction never reaches. An offloaded flow is not
 *   protected at all.
 *
 * The table hashes the 5-tuple in software instead of trusting the
 * port's RSS hash: the split path must find a flow from the other
 * direction (to record the MSS the rack side advertised), and an RSS
 * hash is neither symmetric nor available on that port.
 */
#include <stddef.h>
#include <string.h>

#include <rte_malloc.h>

#include <jumbogate/keyed_hash.h>

#include "internal.h"

/* A key as 32-bit words: version and protocol, the port pair as on the
 * wire, the addresses. 4 words for IPv4, 10 for IPv6. */
static uint32_t key_words(const struct jg_flow_key *key, uint32_t *words)
{
	words[0] = (uint32_t)key->ip_version | (uint32_t)key->protocol << 8;
	memcpy(&words[1], &key->src_port, 4);
	if (key->ip_version == 4) {
		words[2] = key->src.v4;
		words[3] = key->dst.v4;
		return 4;
	}
	memcpy(&words[2], key->src.v6, 16);
	memcpy(&words[6], key->dst.v6, 16);
	return 10;
}

_Static_assert(offsetof(struct jg_flow_key, dst_port) ==
		       offsetof(struct jg_flow_key, src_port) + 2,
	       "a key's ports lie as on the wire");

/*
 * A lookup's hashes, the second taken only when needed: a flow sits in
 * its first bucket unless that was the fuller one when it came, so most
 * lookups find it, or learn it is absent from a bucket pair, after one
 * keyed sum instead of two.
 */
struct lookup {
	uint32_t words[10];
	uint32_t count;
	uint32_t signature;
	uint32_t first;
	uint64_t primary;
};

static void lookup_start(const struct jg_engine *e,
			 const struct jg_flow_key *key, struct lookup *l)
{
	l->count = key_words(key, l->words);
	l->primary = jg_keyed_hash(l->words, e->hash_key[0], l->count);
	l->signature = (uint32_t)l->primary | 1u;
	l->first = (uint32_t)(l->primary >> 32) & e->bucket_mask;
}

void jg_flow_hash(const struct jg_engine *e, const struct jg_flow_key *key,
		  struct jg_flow_hash *hash)
{
	struct lookup l;

	lookup_start(e, key, &l);
	hash->primary = l.primary;
	hash->secondary = jg_keyed_hash(l.words, e->hash_key[1], l.count);
}

/* The second candidate bucket, never the first (jg_flow_hash's pair). */
static uint32_t lookup_second(const struct jg_engine *e, const struct lookup *l)
{
	uint64_t secondary = jg_keyed_hash(l->words, e->hash_key[1], l->count);
	uint32_t second = (uint32_t)(secondary >> 32) & e->bucket_mask;

	return second == l->first ? l->first ^ 1u : second;
}

bool jg_flow_key_equal(const struct jg_flow_key *a, const struct jg_flow_key *b)
{
	if (a->ip_version != b->ip_version || a->protocol != b->protocol ||
	    a->src_port != b->src_port || a->dst_port != b->dst_port)
		return false;
	if (a->ip_version == 4)
		return a->src.v4 == b->src.v4 && a->dst.v4 == b->dst.v4;
	return memcmp(a->src.v6, b->src.v6, 16) == 0 &&
	       memcmp(a->dst.v6, b->dst.v6, 16) == 0;
}

static uint32_t table_capacity(const struct jg_engine_config *config)
{
	return rte_align32pow2(RTE_MAX(config->max_flows, 2u * JG_BUCKET_WAYS));
}

uint32_t jg_engine_pin_budget(const struct jg_engine_config *config)
{
	uint32_t capacity = table_capacity(config);

	return config->max_onloaded_flows != 0
		       ? RTE_MIN(config->max_onloaded_flows, capacity)
		       : capacity / 4;
}

int jg_flow_table_init(struct jg_engine *e)
{
	uint32_t capacity = table_capacity(&e->config);
	uint32_t buckets = capacity / JG_BUCKET_WAYS;
	size_t flow_bytes = (size_t)capacity * sizeof(struct jg_flow);
	size_t key_bytes = (size_t)capacity * sizeof(struct jg_flow_key);
	size_t bucket_bytes = (size_t)buckets * sizeof(struct jg_bucket);

	if (jg_keyed_hash_key((uint32_t *)e->hash_key,
			      sizeof(e->hash_key) / sizeof(uint32_t),
			      e->config.hash_seed) != 0)
		return -EIO;
	e->flows = rte_zmalloc_socket("jg_flows", flow_bytes,
				      RTE_CACHE_LINE_SIZE, e->config.socket_id);
	e->keys = rte_zmalloc_socket("jg_flow_keys", key_bytes,
				     RTE_CACHE_LINE_SIZE, e->config.socket_id);
	e->buckets =
		rte_zmalloc_socket("jg_buckets", bucket_bytes,
				   RTE_CACHE_LINE_SIZE, e->config.socket_id);
	if (e->flows == NULL || e->keys == NULL || e->buckets == NULL)
		return -ENOMEM;
	e->flow_capacity = capacity;
	e->bucket_mask = buckets - 1;
	e->max_pinned = jg_engine_pin_budget(&e->config);
	e->pin_idle_coarse = (uint32_t)(((uint64_t)e->config.onload_idle_s *
					 1000000000ull) >>
					JG_COARSE_SHIFT);
	e->memory_bytes += flow_bytes + key_bytes + bucket_bytes;
	for (uint32_t i = 0; i < capacity; i++)
		e->flows[i].timer_list = JG_TIMER_NONE;
	return 0;
}

void jg_flow_table_free(struct jg_engine *e)
{
	rte_free(e->flows);
	rte_free(e->keys);
	rte_free(e->buckets);
	e->flows = NULL;
	e->keys = NULL;
	e->buckets = NULL;
}

/*
 * Real TCP arrives in bursts of one flow's congestion window: in captures
 * of 100 Linux flows, 94% of segments belong to the flow of the segment
 * before them. The slot the last lookup returned is therefore tried first,
 * before any hashing. It is still that flow's only while its signature is
 * set and its key equal, the same test a bucket lookup makes, so an
 * eviction or reuse of the slot in between cannot mislead it.
 */
static inline struct jg_flow *find_recent(struct jg_engine *e,
					  const struct jg_flow_key *key)
{
	uint32_t slot = e->recent_slot;

	if (e->buckets[slot / JG_BUCKET_WAYS]
			    .signature[slot % JG_BUCKET_WAYS] != 0 &&
	    jg_flow_key_equal(&e->keys[slot], key))
		return &e->flows[slot];
	return NULL;
}

static inline void note_recent(struct jg_engine *e, const struct jg_flow *f)
{
	e->recent_slot = (uint32_t)(f - e->flows);
}

static struct jg_flow *find_in_bucket(struct jg_engine *e, uint32_t bucket,
				      uint32_t signature,
				      const struct jg_flow_key *key)
{
	const struct jg_bucket *b = &e->buckets[bucket];

	for (uint32_t way = 0; way < JG_BUCKET_WAYS; way++) {
		uint32_t slot = bucket * JG_BUCKET_WAYS + way;

		if (b->signature[way] == signature &&
		    jg_flow_key_equal(&e->keys[slot], key))
			return &e->flows[slot];
	}
	return NULL;
}

struct jg_flow *jg_flow_find(struct jg_engine *e, const struct jg_flow_key *key)
{
	struct lookup l;
	struct jg_flow *f = find_recent(e, key);

	if (f != NULL)
		return f;
	lookup_start(e, key, &l);
	f = find_in_bucket(e, l.first, l.signature, key);
	if (f == NULL)
		f = find_in_bucket(e, lookup_second(e, &l), l.signature, key);
	if (f != NULL)
		note_recent(e, f);
	return f;
}

static int free_way(const struct jg_bucket *b)
{
	for (int way = 0; way < (int)JG_BUCKET_WAYS; way++)
		if (b->signature[way] == 0)
			return way;
	return -1;
}

static unsigned int free_ways(const struct jg_bucket *b)
{
	unsigned int count = 0;

	for (unsigned int way = 0; way < JG_BUCKET_WAYS; way++)
		count += b->signature[way] == 0;
	return count;
}

static inline uint32_t idle_coarse(const struct jg_engine *e,
				   const struct jg_flow *f)
{
	return (uint32_t)(e->now_ns >> JG_COARSE_SHIFT) - f->last_seen_coarse;
}

void jg_flow_unpin(struct jg_engine *e, struct jg_flow *f)
{
	if (f->flags & JG_FLOW_ONLOADED) {
		f->flags &= (uint8_t)~JG_FLOW_ONLOADED;
		e->pinned_flows--;
	}
}

/* An onloaded flow keeps its pin while it is seen; one idle for longer
 * than onload_idle_s is an ordinary flow again. */
static bool pin_holds(struct jg_engine *e, struct jg_flow *f)
{
	if (!(f->flags & JG_FLOW_ONLOADED))
		return false;
	if (idle_coarse(e, f) <= e->pin_idle_coarse)
		return true;
	jg_flow_unpin(e, f);
	e->stats.merge.pins_expired++;
	return false;
}

bool jg_flow_is_onloaded(struct jg_engine *e, const struct jg_flow_key *key)
{
	struct jg_flow *f = jg_flow_find(e, key);

	return f != NULL && pin_holds(e, f);
}

void jg_engine_advance_clock(struct jg_engine *e, uint64_t now_ns)
{
	/* Timers keep their own position (next_slot), which only
	 * jg_timer_expire moves: a later now_ns only makes a deadline
	 * scheduled behind it due at once, as in a burst. */
	if (now_ns > e->now_ns)
		e->now_ns = now_ns;
}

/* Higher is a better victim: old, idle, unpinned. */
static int64_t eviction_score(struct jg_engine *e, struct jg_flow *f)
{
	int64_t score = RTE_MIN(idle_coarse(e, f), 1u << 15);

	if (pin_holds(e, f))
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
	jg_flow_unpin(e, f);
	jg_timer_unlink(e, f);
	e->buckets[slot / JG_BUCKET_WAYS].signature[slot % JG_BUCKET_WAYS] = 0;
	e->flows_now--;
	e->stats.merge.flows_evicted++;
}

void jg_flow_remove(struct jg_engine *e, struct jg_flow *f)
{
	uint32_t slot = jg_flow_index(e, f);

	jg_flow_unpin(e, f);
	jg_timer_unlink(e, f);
	e->buckets[slot / JG_BUCKET_WAYS].signature[slot % JG_BUCKET_WAYS] = 0;
	e->flows_now--;
}

struct jg_flow *jg_flow_find_or_create(struct jg_engine *e,
				       const struct jg_flow_key *key)
{
	struct lookup l;
	uint32_t first, second;
	uint32_t slot = JG_INDEX_NONE;
	struct jg_flow *f = find_recent(e, key);
	unsigned int free_first, free_second;
	int way;

	if (f != NULL)
		return f;
	lookup_start(e, key, &l);
	first = l.first;
	f = find_in_bucket(e, first, l.signature, key);
	if (f != NULL) {
		note_recent(e, f);
		return f;
	}
	second = lookup_second(e, &l);
	f = find_in_bucket(e, second, l.signature, key);
	if (f != NULL) {
		note_recent(e, f);
		return f;
	}

	/* The emptier bucket of the two: filling the first until it is full
	 * leaves pairs full while the table is half empty (about one flow in
	 * a thousand evicted at half load); balancing keeps them apart. */
	free_first = free_ways(&e->buckets[first]);
	free_second = free_ways(&e->buckets[second]);
	if (free_first + free_second > 0) {
		uint32_t bucket = free_first >= free_second ? first : second;

		way = free_way(&e->buckets[bucket]);
		slot = bucket * JG_BUCKET_WAYS + (uint32_t)way;
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
	f->fingerprint = l.primary;
	f->timer_list = JG_TIMER_NONE;
	f->timer_prev = f->timer_next = JG_INDEX_NONE;
	f->last_seen_coarse = (uint32_t)(e->now_ns >> JG_COARSE_SHIFT);
	e->keys[slot] = *key;
	e->buckets[slot / JG_BUCKET_WAYS].signature[slot % JG_BUCKET_WAYS] =
		l.signature;
	e->flows_now++;
	e->stats.merge.flows_created++;
	note_recent(e, f);
	return f;
}

/* Pins idle past onload_idle_s are dropped lazily, when eviction looks at
 * them; when the pin budget is spent, look for such pins actively, a
 * bounded stretch of the table per call, resuming where the last stopped,
 * so that refusing an onload stays cheap. */
#define PIN_SCAN_SLOTS 1024u

bool jg_flow_pin_budget_left(struct jg_engine *e)
{
	if (e->pinned_flows < e->max_pinned)
		return true;
	for (uint32_t i = 0; i < RTE_MIN(PIN_SCAN_SLOTS, e->flow_capacity);
	     i++) {
		uint32_t slot = e->pin_scan_cursor++ & (e->flow_capacity - 1);

		if (e->buckets[slot / JG_BUCKET_WAYS]
			    .signature[slot % JG_BUCKET_WAYS] != 0)
			(void)pin_holds(e, &e->flows[slot]);
	}
	return e->pinned_flows < e->max_pinned;
}
