/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery: the destination table (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <netinet/in.h>
#include <string.h>

#include <rte_pause.h>

#include <jumbogate/keyed_hash.h>

/* ------------------------------------------------------------------ */
/* The destination table: seqlock readers, one writer at a time         */

/* An outsider names the addresses, so where they land is decided by a
 * keyed hash (jumbogate/keyed_hash.h): CRC32-C with a secret seed, used
 * before, is linear, so addresses that evict a victim could be computed
 * from the public CRC whatever the seed. */
uint64_t pmtu_hash_address(const struct nic_pathmtu *pm, enum pmtu_hash which,
			   uint8_t version, const uint8_t *addr)
{
	uint32_t words[HASH_KEY_WORDS] = {version};
	uint32_t count = version == 4 ? 2 : HASH_KEY_WORDS;

	memcpy(&words[1], addr, pmtu_address_len(version));
	return jg_keyed_hash(words, pm->hash_key[which], count);
}

struct token_bucket *pmtu_prefix_cell(const struct nic_pathmtu *pm,
				      struct token_bucket *cells,
				      uint8_t version, const uint8_t *addr)
{
	uint8_t prefix[16] = {0};

	/* /24 and /48: what one site or customer usually holds. */
	memcpy(prefix, addr, version == 4 ? 3 : 6);
	return &cells[pmtu_hash_address(pm, HASH_PREFIX, version, prefix) %
		      PREFIX_CELLS];
}

static uint32_t slot_of(const struct nic_pathmtu *pm, uint8_t version,
			const uint8_t *addr)
{
	return (uint32_t)(pmtu_hash_address(pm, HASH_SLOT, version, addr) >>
			  32);
}

static void bloom_indices(const struct nic_pathmtu *pm, uint8_t version,
			  const uint8_t *addr, uint32_t out[2])
{
	out[0] = (uint32_t)pmtu_hash_address(pm, HASH_BLOOM_A, version, addr) &
		 pm->bloom_mask;
	out[1] = (uint32_t)pmtu_hash_address(pm, HASH_BLOOM_B, version, addr) &
		 pm->bloom_mask;
}

static bool bloom_may_hold(const struct nic_pathmtu *pm, uint8_t version,
			   const uint8_t *addr)
{
	uint32_t index[2];

	bloom_indices(pm, version, addr, index);
	return atomic_load_explicit(&pm->bloom[index[0]],
				    memory_order_relaxed) != 0 &&
	       atomic_load_explicit(&pm->bloom[index[1]],
				    memory_order_relaxed) != 0;
}

/* Counters stuck at the top stay there: decrementing one could drop
 * another destination's membership. */
static void bloom_change(struct nic_pathmtu *pm, const uint32_t index[2],
			 int delta)
{
	for (int i = 0; i < 2; i++) {
		uint8_t value = atomic_load_explicit(&pm->bloom[index[i]],
						     memory_order_relaxed);

		if (value == UINT8_MAX || (delta < 0 && value == 0))
			continue;
		atomic_store_explicit(&pm->bloom[index[i]],
				      (uint8_t)(value + delta),
				      memory_order_relaxed);
	}
}

static void write_begin(struct dest *d)
{
	unsigned int seq = atomic_load_explicit(&d->seq, memory_order_relaxed);

	atomic_store_explicit(&d->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void write_end(struct dest *d)
{
	unsigned int seq = atomic_load_explicit(&d->seq, memory_order_relaxed);

	atomic_store_explicit(&d->seq, seq + 1, memory_order_release);
}

struct dest_read {
	bool match;
	uint16_t mtu;
};

/* What a slot says about (version, addr), read without the lock. */
static struct dest_read read_slot(struct dest *d, uint8_t version,
				  const uint8_t *addr)
{
	struct dest_read result;
	unsigned int before, after;

	do {
		before = atomic_load_explicit(&d->seq, memory_order_acquire);
		while (before & 1) {
			rte_pause();
			before = atomic_load_explicit(&d->seq,
						      memory_order_acquire);
		}
		result.match =
			d->used && d->version == version &&
			memcmp(d->addr, addr, pmtu_address_len(version)) == 0;
		result.mtu = d->mtu;
		atomic_thread_fence(memory_order_acquire);
		after = atomic_load_explicit(&d->seq, memory_order_relaxed);
	} while (before != after);
	return result;
}

struct dest *pmtu_find(struct nic_pathmtu *pm, uint8_t version,
		       const uint8_t *addr, uint16_t *mtu)
{
	uint32_t start = slot_of(pm, version, addr);

	for (uint32_t i = 0; i < WINDOW; i++) {
		struct dest *d = &pm->slots[(start + i) & pm->mask];
		struct dest_read read = read_slot(d, version, addr);

		if (read.match) {
			if (mtu)
				*mtu = read.mtu;
			return d;
		}
	}
	return NULL;
}

uint16_t nic_pathmtu_learned(const void *context, uint8_t ip_version,
			     const uint8_t *dst)
{
	struct nic_pathmtu *pm = (struct nic_pathmtu *)context;
	uint16_t mtu = 0;

	if (!bloom_may_hold(pm, ip_version, dst))
		return 0;
	return pmtu_find(pm, ip_version, dst, &mtu) ? mtu : 0;
}

/* Under the lock: a learned MTU for d, or none (0). */
void pmtu_set_mtu(struct nic_pathmtu *pm, struct dest *d, uint16_t mtu,
		  uint8_t method, uint64_t now_ns)
{
	if ((d->mtu == 0) != (mtu == 0)) {
		bloom_change(pm, d->bloom, mtu ? 1 : -1);
		if (mtu)
			pm->learned_now++;
		else
			pm->learned_now--;
	}
	write_begin(d);
	d->mtu = mtu;
	write_end(d);
	d->method = mtu ? method : NIC_PMTU_METHOD_NONE;
	d->learned_ns = now_ns;
}

static void remove_active(struct nic_pathmtu *pm, uint32_t slot)
{
	for (unsigned int i = 0; i < pm->active_count; i++)
		if (pm->active[i] == slot) {
			pm->active[i] = pm->active[--pm->active_count];
			return;
		}
}

/* Under the lock. */
void pmtu_release(struct nic_pathmtu *pm, struct dest *d)
{
	pmtu_set_mtu(pm, d, 0, NIC_PMTU_METHOD_NONE, 0);
	if (d->state == DEST_PROBING)
		remove_active(pm, (uint32_t)(d - pm->slots));
	write_begin(d);
	d->used = false;
	write_end(d);
	d->state = DEST_IDLE;
	pm->destinations_now--;
}

uint64_t pmtu_expiry_ns(const struct nic_pathmtu *pm)
{
	return 2ull * pm->config.reprobe_s * PMTU_NS_PER_S;
}

/* Under the lock: a slot for a new destination, evicting the least
 * recently used of its window when all are taken. */
struct dest *pmtu_insert(struct nic_pathmtu *pm, uint8_t version,
			 const uint8_t *addr, uint64_t now_ns)
{
	uint32_t start = slot_of(pm, version, addr);
	struct dest *victim = NULL;

	for (uint32_t i = 0; i < WINDOW; i++) {
		struct dest *d = &pm->slots[(start + i) & pm->mask];

		if (!d->used) {
			victim = d;
			break;
		}
		if (victim == NULL || d->used_ns < victim->used_ns)
			victim = d;
	}
	if (victim->used) {
		COUNT(pm, destinations_evicted);
		pmtu_release(pm, victim);
	}
	memset(victim->addr, 0, sizeof(victim->addr));
	memcpy(victim->addr, addr, pmtu_address_len(version));
	victim->version = version;
	victim->state = DEST_IDLE;
	victim->method = NIC_PMTU_METHOD_NONE;
	victim->learned_ns = 0;
	victim->round_ns = 0;
	victim->rtt_ns = 0;
	victim->exact = false;
	victim->exact_wanted = false;
	victim->refining = false;
	victim->confirmed = false;
	victim->hello = false;
	victim->operator_round = false;
	victim->hello_failures = 0;
	atomic_store_explicit(&victim->last_sent, 0, memory_order_relaxed);
	bloom_indices(pm, version, addr, victim->bloom);
	atomic_store_explicit(&victim->used_ns, now_ns, memory_order_relaxed);
	atomic_store_explicit(&victim->next_round_ns, 0, memory_order_relaxed);
	write_begin(victim);
	victim->used = true;
	victim->mtu = 0;
	write_end(victim);
	pm->destinations_now++;
	return victim;
}
