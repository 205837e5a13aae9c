/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery: the responder (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <netinet/in.h>
#include <string.h>

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <jumbogate/keyed_hash.h>

/* ------------------------------------------------------------------ */
/* The responder                                                        */

static void swap_l2(uint8_t *l2)
{
	uint8_t mac[RTE_ETHER_ADDR_LEN];

	memcpy(mac, l2, RTE_ETHER_ADDR_LEN);
	memcpy(l2, l2 + RTE_ETHER_ADDR_LEN, RTE_ETHER_ADDR_LEN);
	memcpy(l2 + RTE_ETHER_ADDR_LEN, mac, RTE_ETHER_ADDR_LEN);
}

/* Whether the budgets allow a reply to a probe from src: its source
 * prefix's (so that a flood of probes, spoofed or not, from one network
 * cannot starve the borders of others), then the global one. */
static bool reply_allowed(struct nic_pathmtu *pm, uint8_t version,
			  const uint8_t *src, uint64_t now_ns)
{
	struct token_bucket *cell =
		pmtu_prefix_cell(pm, pm->prefix_replies, version, src);
	bool allowed = false;

	rte_spinlock_lock(&pm->reply_lock);
	if (!pmtu_take_token(cell, now_ns)) {
		COUNT(pm, replies_rate_limited);
	} else if (!pmtu_take_token(&pm->reply_budget, now_ns)) {
		cell->tokens += 1.0; /* not spent: nothing was sent */
		COUNT(pm, replies_global_limited);
	} else {
		allowed = true;
	}
	rte_spinlock_unlock(&pm->reply_lock);
	return allowed;
}

/* A reply listing sizes, if the budgets and the amplification rule
 * (never more bytes than the probe) allow it. */
struct rte_mbuf *pmtu_answer(struct nic_pathmtu *pm, const uint8_t *probe_l2,
			     uint8_t l2_len, const struct parsed *p,
			     const struct pmtu_message *probe,
			     const uint16_t *sizes, uint8_t count,
			     uint32_t probe_bytes, uint64_t now_ns)
{
	uint32_t l3_len = p->version == 4 ? sizeof(struct rte_ipv4_hdr)
					  : sizeof(struct rte_ipv6_hdr);
	uint32_t reply_len =
		l3_len + sizeof(struct rte_udp_hdr) + MESSAGE_LEN + 2u * count;
	struct pmtu_message message = *probe;
	uint8_t l2[MAX_L2_LEN];
	struct rte_mbuf *reply;

	if (reply_len > probe_bytes) {
		COUNT(pm, probes_malformed);
		return NULL;
	}
	if (!reply_allowed(pm, p->version, p->src, now_ns))
		return NULL;
	memcpy(l2, probe_l2, l2_len);
	swap_l2(l2);
	message.type = TYPE_REPLY;
	message.count = count;
	reply = pmtu_build(pm, l2, l2_len, p->version, p->dst, p->src,
			   reply_len, false, &message, sizes, count);
	if (reply)
		COUNT(pm, probes_answered);
	return reply;
}

bool pmtu_probe_is_valid(const struct pmtu_message *message,
			 const struct parsed *p, uint16_t udp_len, bool whole)
{
	uint16_t probe_size = rte_be_to_cpu_16(message->probe_size);

	if (message->version != PMTU_VERSION || message->count != 0 ||
	    probe_size < MIN_REPORTED_SIZE || probe_size > MAX_PROBE_SIZE ||
	    udp_len < sizeof(struct rte_udp_hdr) + MESSAGE_LEN)
		return false;
	if (message->kind == NIC_PMTU_METHOD_SIZES)
		/* Sized probes travel whole, in the size they name. */
		return whole && p->ip_len == probe_size && udp_len == p->l4_len;
	if (message->kind != NIC_PMTU_METHOD_FRAGMENTS)
		return false;
	/* The datagram must fill the probe it names. */
	return (uint32_t)udp_len + p->l3_len == probe_size &&
	       (!whole || udp_len == p->l4_len);
}

static struct fragment_bucket *bucket_of(struct nic_pathmtu *pm,
					 const struct parsed *p)
{
	uint32_t words[4] = {0, 0, p->ip_id, p->protocol};

	memcpy(&words[0], p->src, 4);
	memcpy(&words[1], p->dst, 4);
	return &pm->groups[jg_keyed_hash(words, pm->hash_key[HASH_FRAGMENT],
					 RTE_DIM(words)) %
			   FRAGMENT_BUCKETS];
}

/* Under the bucket's lock: whether group a gives way before group b
 * when a bucket is full. Groups a probe's first fragment began last
 * longest; among equals the older goes first. */
static bool sooner_evicted(const struct fragment_group *a,
			   const struct fragment_group *b)
{
	if (a->is_probe != b->is_probe)
		return !a->is_probe;
	return a->first_ns < b->first_ns;
}

/* Under the bucket's lock: the fragment's group, or a new one. A group
 * that a probe's first fragment began is never given up for a fragment
 * that may be anyone's (a later fragment, which shows no port): stray
 * fragments cannot evict pending probes. NULL when no way is left. */
static struct fragment_group *find_group(struct nic_pathmtu *pm,
					 struct fragment_bucket *bucket,
					 const struct parsed *p,
					 bool probe_first, uint64_t now_ns)
{
	struct fragment_group *unused = NULL, *victim = NULL;
	uint32_t src, dst;

	memcpy(&src, p->src, 4);
	memcpy(&dst, p->dst, 4);
	for (unsigned int w = 0; w < FRAGMENT_WAYS; w++) {
		struct fragment_group *group = &bucket->ways[w];

		if (!group->used) {
			if (unused == NULL)
				unused = group;
			continue;
		}
		if (group->id == p->ip_id && group->src == src &&
		    group->dst == dst)
			return group;
		if ((probe_first || !group->is_probe) &&
		    (victim == NULL || sooner_evicted(group, victim)))
			victim = group;
	}
	if (unused == NULL) {
		if (victim == NULL) {
			COUNT(pm, fragments_unplaced);
			return NULL;
		}
		COUNT(pm, fragment_groups_evicted);
		unused = victim;
	}
	memset(unused, 0, sizeof(*unused));
	unused->used = true;
	unused->id = p->ip_id;
	unused->src = src;
	unused->dst = dst;
	unused->first_ns = now_ns;
	unused->end = -1;
	return unused;
}

/* The group's fragment sizes in the order of their offsets. */
static void sizes_in_order(const struct fragment_group *group, uint16_t *sizes)
{
	uint16_t offsets[NIC_PMTU_MAX_FRAGMENTS];

	for (uint8_t i = 0; i < group->count; i++) {
		uint8_t j = i;

		while (j > 0 && offsets[j - 1] > group->offsets[i]) {
			offsets[j] = offsets[j - 1];
			sizes[j] = sizes[j - 1];
			j--;
		}
		offsets[j] = group->offsets[i];
		sizes[j] = group->sizes[i];
	}
}

enum fragment_fit { FRAGMENT_ADDED, FRAGMENT_DUPLICATE, FRAGMENT_CONFLICT };

/* Under the bucket's lock: the fragment's place in its group. Reported
 * sizes become a path MTU at the prober, so the group must be exactly
 * the datagram a router cut: no overlap (the same bytes twice in other
 * cuts), data of every fragment but the last a multiple of 8, one end,
 * nothing past it, and (once the first fragment told) that end equal to
 * the UDP length. Anything else is a forger's, and the group is given
 * up: FRAGMENT_CONFLICT. A copy of a fragment already there adds
 * nothing. */
static enum fragment_fit place_fragment(struct fragment_group *group,
					const struct parsed *p)
{
	uint32_t start = p->fragment_offset, stop = start + p->l4_len;

	if (p->more_fragments && (p->l4_len == 0 || p->l4_len % 8 != 0))
		return FRAGMENT_CONFLICT;
	for (uint8_t i = 0; i < group->count; i++) {
		uint32_t other = group->offsets[i];
		uint32_t other_stop = other + group->lengths[i];

		if (other == start && other_stop == stop)
			return FRAGMENT_DUPLICATE;
		if (start < other_stop && other < stop)
			return FRAGMENT_CONFLICT;
		if (!p->more_fragments && other_stop > start)
			return FRAGMENT_CONFLICT; /* data past the end */
	}
	if (group->end >= 0 &&
	    (!p->more_fragments || stop >= (uint32_t)group->end))
		return FRAGMENT_CONFLICT; /* a second end, or past it */
	if (group->count == NIC_PMTU_MAX_FRAGMENTS || stop > UINT16_MAX)
		return FRAGMENT_CONFLICT;
	group->offsets[group->count] = (uint16_t)start;
	group->lengths[group->count] = (uint16_t)p->l4_len;
	group->sizes[group->count] = (uint16_t)p->ip_len;
	group->count++;
	group->covered += p->l4_len;
	group->probe_bytes += p->ip_len;
	if (!p->more_fragments)
		group->end = (int32_t)stop;
	return FRAGMENT_ADDED;
}

/* Under the bucket's lock: the probe's reply once every byte of it came,
 * each exactly once (fragments never overlap, so covering 0..end is
 * adding up to end). */
static bool probe_complete(const struct fragment_group *group)
{
	return group->is_probe && group->end >= 0 &&
	       group->covered == (uint32_t)group->end;
}

/* A fragment (no lock held). Returns true when consumed. */
bool pmtu_take_fragment(struct nic_pathmtu *pm, struct rte_mbuf *m,
			const struct parsed *p, uint64_t now_ns,
			struct rte_mbuf **replies, uint16_t *reply_count)
{
	struct pmtu_message message;
	uint16_t udp_len = 0;
	bool ours_first = false, consumed = false;
	struct fragment_bucket *bucket;
	struct fragment_group *group;

	COUNT(pm, fragments_seen);
	if (p->fragment_offset == 0) {
		enum message_read read =
			pmtu_read_message(pm, m, p, &message, &udp_len);

		if (read == NOT_OURS) {
			COUNT(pm, fragments_passed);
			return false; /* someone else's datagram */
		}
		if (read == OURS_MALFORMED || message.type != TYPE_PROBE ||
		    !pmtu_probe_is_valid(&message, p, udp_len, false)) {
			COUNT(pm, probes_malformed);
			rte_pktmbuf_free(m);
			return true;
		}
		ours_first = true;
	}
	bucket = bucket_of(pm, p);
	rte_spinlock_lock(&bucket->lock);
	group = find_group(pm, bucket, p, ours_first, now_ns);
	if (group == NULL) {
		rte_spinlock_unlock(&bucket->lock);
		COUNT(pm, fragments_passed);
		return false;
	}
	switch (place_fragment(group, p)) {
	case FRAGMENT_ADDED:
		if (ours_first) {
			group->is_probe = true;
			group->message = message;
			group->udp_len = udp_len;
			group->l2_len = (uint8_t)RTE_MIN(p->l2_len, MAX_L2_LEN);
			memcpy(group->l2, rte_pktmbuf_mtod(m, const uint8_t *),
			       group->l2_len);
		}
		if (group->is_probe && group->end >= 0 &&
		    (uint32_t)group->end != group->udp_len) {
			COUNT(pm, fragment_groups_conflicting);
			group->used = false;
			consumed = true;
		}
		break;
	case FRAGMENT_DUPLICATE:
		break;
	case FRAGMENT_CONFLICT:
		COUNT(pm, fragment_groups_conflicting);
		consumed = group->is_probe || ours_first;
		group->used = false;
		break;
	}
	if (group->used && group->is_probe) {
		consumed = true;
		if (probe_complete(group)) {
			uint16_t sizes[NIC_PMTU_MAX_FRAGMENTS];
			struct parsed first = *p;
			uint32_t dst = group->dst, src = group->src;

			sizes_in_order(group, sizes);
			memcpy(first.src, &src, 4);
			memcpy(first.dst, &dst, 4);
			replies[*reply_count] = pmtu_answer(
				pm, group->l2, group->l2_len, &first,
				&group->message, sizes, group->count,
				group->probe_bytes, now_ns);
			if (replies[*reply_count])
				(*reply_count)++;
			group->used = false;
		}
	}
	rte_spinlock_unlock(&bucket->lock);
	if (consumed)
		rte_pktmbuf_free(m);
	else
		COUNT(pm, fragments_passed);
	return consumed;
}

/* Fragment groups whose probe never completed. */
void pmtu_expire_groups(struct nic_pathmtu *pm, uint64_t now_ns)
{
	for (unsigned int b = 0; b < FRAGMENT_BUCKETS; b++) {
		struct fragment_bucket *bucket = &pm->groups[b];

		rte_spinlock_lock(&bucket->lock);
		for (unsigned int w = 0; w < FRAGMENT_WAYS; w++) {
			struct fragment_group *group = &bucket->ways[w];

			if (group->used &&
			    now_ns - group->first_ns > FRAGMENT_TIMEOUT_NS) {
				group->used = false;
				COUNT(pm, fragment_groups_expired);
			}
		}
		rte_spinlock_unlock(&bucket->lock);
	}
}
