/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery: the responder (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <netinet/in.h>
#include <string.h>

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

/* ------------------------------------------------------------------ */
/* The responder                                                        */

static void swap_l2(uint8_t *l2)
{
	uint8_t mac[RTE_ETHER_ADDR_LEN];

	memcpy(mac, l2, RTE_ETHER_ADDR_LEN);
	memcpy(l2, l2 + RTE_ETHER_ADDR_LEN, RTE_ETHER_ADDR_LEN);
	memcpy(l2 + RTE_ETHER_ADDR_LEN, mac, RTE_ETHER_ADDR_LEN);
}

/* Under the lock: a reply listing sizes, if the budget and the
 * amplification rule (never more bytes than the probe) allow it. */
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
	if (!pmtu_take_token(&pm->reply_budget, now_ns)) {
		COUNT(pm, replies_rate_limited);
		return NULL;
	}
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

static struct fragment_group *
find_group(struct nic_pathmtu *pm, const struct parsed *p, uint64_t now_ns)
{
	struct fragment_group *oldest = NULL, *unused = NULL;
	uint32_t src, dst;

	memcpy(&src, p->src, 4);
	memcpy(&dst, p->dst, 4);
	for (unsigned int g = 0; g < FRAGMENT_GROUPS; g++) {
		struct fragment_group *group = &pm->groups[g];

		if (!group->used) {
			if (unused == NULL)
				unused = group;
			continue;
		}
		if (group->id == p->ip_id && group->src == src &&
		    group->dst == dst)
			return group;
		if (oldest == NULL || group->first_ns < oldest->first_ns)
			oldest = group;
	}
	if (unused == NULL) {
		COUNT(pm, fragment_groups_evicted);
		unused = oldest;
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

/* A fragment (lock not held). Returns true when consumed. */
bool pmtu_take_fragment(struct nic_pathmtu *pm, struct rte_mbuf *m,
			const struct parsed *p, uint64_t now_ns,
			struct rte_mbuf **replies, uint16_t *reply_count)
{
	struct pmtu_message message;
	uint16_t udp_len = 0;
	bool ours_first = false, consumed = false;
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
	rte_spinlock_lock(&pm->lock);
	group = find_group(pm, p, now_ns);
	for (uint8_t i = 0; i < group->count; i++)
		if (group->offsets[i] == p->fragment_offset)
			goto done; /* a duplicate adds nothing */
	if (group->count == NIC_PMTU_MAX_FRAGMENTS) {
		group->used = false;
		goto done;
	}
	group->offsets[group->count] = (uint16_t)p->fragment_offset;
	group->sizes[group->count] = (uint16_t)p->ip_len;
	group->count++;
	group->covered += p->l4_len;
	group->probe_bytes += p->ip_len;
	if (!p->more_fragments)
		group->end = (int32_t)(p->fragment_offset + p->l4_len);
	if (ours_first) {
		group->first_seen = true;
		group->is_probe = true;
		group->message = message;
		group->l2_len = (uint8_t)RTE_MIN(p->l2_len, MAX_L2_LEN);
		memcpy(group->l2, rte_pktmbuf_mtod(m, const uint8_t *),
		       group->l2_len);
	}
done:
	if (group->used && group->is_probe) {
		consumed = true;
		if (group->end >= 0 && group->covered == (uint32_t)group->end) {
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
	rte_spinlock_unlock(&pm->lock);
	if (consumed)
		rte_pktmbuf_free(m);
	else
		COUNT(pm, fragments_passed);
	return consumed;
}

/* Under the lock: fragment groups whose probe never completed. */
void pmtu_expire_groups(struct nic_pathmtu *pm, uint64_t now_ns)
{
	for (unsigned int g = 0; g < FRAGMENT_GROUPS; g++) {
		struct fragment_group *group = &pm->groups[g];

		if (group->used &&
		    now_ns - group->first_ns > FRAGMENT_TIMEOUT_NS) {
			group->used = false;
			COUNT(pm, fragment_groups_expired);
		}
	}
}
