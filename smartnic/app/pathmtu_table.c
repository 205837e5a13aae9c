/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery: the destination table (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <netinet/in.h>
#include <string.h>

#include <rte_hash_crc.h>
#include <rte_pause.h>

/* ------------------------------------------------------------------ */
/* The destination table: seqlock readers, one writer at a time         */

static uint32_t hash_address(const struct nic_pathmtu *pm, uint8_t version,
			     const uint8_t *addr, uint32_t salt)
{
	/* rte_hash_crc reads 4 and 8 bytes at a time: addresses come from
	 * anywhere in a packet, so they are hashed from an aligned copy. */
	uint64_t aligned[2] = {0, 0};

	memcpy(aligned, addr, pmtu_address_len(version));
	return rte_hash_crc(aligned, pmtu_address_len(version),
			    pm->seed ^ salt ^ version);
}

static void bloom_indices(const struct nic_pathmtu *pm, uint8_t version,
			  const uint8_t *addr, uint32_t out[2])
{
	out[0] = hash_address(pm, version, addr, 0x9e3779b9u) & pm->bloom_mask;
	out[1] = hash_address(pm, version, addr, 0x7f4a7c15u) & pm->bloom_mask;
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
	uint32_t start = hash_address(pm, version, addr, 0);

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
	uint32_t start = hash_address(pm, version, addr, 0);
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
