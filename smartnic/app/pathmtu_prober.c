/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery: the prober (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <rte_mbuf.h>
#include <rte_udp.h>

/* ------------------------------------------------------------------ */
/* The prober                                                           */

static uint16_t send_round(struct nic_pathmtu *pm, struct dest *d,
			   struct rte_mbuf **probes, uint16_t cap)
{
	struct pmtu_message message = {
		.magic = RTE_BE32(PMTU_MAGIC),
		.version = PMTU_VERSION,
		.type = TYPE_PROBE,
	};
	uint16_t count = 0;

	memcpy(message.nonce, d->nonce, sizeof(message.nonce));
	/* IPv4: one probe of the next hop's MTU that routers may fragment
	 * (a refinement knows the fragments' answer already). */
	if (d->version == 4 && !d->refining && count < cap) {
		message.kind = NIC_PMTU_METHOD_FRAGMENTS;
		message.probe_size = rte_cpu_to_be_16(pm->config.probe_mtu);
		probes[count] = pmtu_build(pm, d->l2, d->l2_len, 4, d->src,
					   d->addr, pm->config.probe_mtu, false,
					   &message, NULL, 0);
		if (probes[count])
			count++;
	}
	message.kind = NIC_PMTU_METHOD_SIZES;
	for (unsigned int i = 0; i < d->round_size_count && count < cap; i++) {
		message.probe_size = rte_cpu_to_be_16(d->round_sizes[i]);
		probes[count] = pmtu_build(pm, d->l2, d->l2_len, d->version,
					   d->src, d->addr, d->round_sizes[i],
					   true, &message, NULL, 0);
		if (probes[count])
			count++;
	}
	d->copies_sent++;
	__atomic_add_fetch(&pm->stats.probes_sent, count, __ATOMIC_RELAXED);
	return count;
}

/* Under the lock: how probes to d are addressed, from an outbound packet
 * to it (its Ethernet header and source, the port it came in on). */
static void remember_sender(struct dest *d, const struct rte_mbuf *m,
			    const struct parsed *p, unsigned int port_index)
{
	d->l2_len = (uint8_t)RTE_MIN(p->l2_len, MAX_L2_LEN);
	memcpy(d->l2, rte_pktmbuf_mtod(m, const uint8_t *), d->l2_len);
	memcpy(d->src, p->src, sizeof(d->src));
	d->port_index = (uint8_t)port_index;
}

static uint16_t start_round(struct nic_pathmtu *pm, struct dest *d,
			    uint64_t now_ns, struct rte_mbuf **probes,
			    uint16_t cap)
{
	if (pm->active_count == MAX_ACTIVE_ROUNDS ||
	    !pmtu_take_token(&pm->round_budget, now_ns)) {
		COUNT(pm, rounds_suppressed);
		atomic_store_explicit(&d->next_round_ns,
				      now_ns + SUPPRESSED_RETRY_NS,
				      memory_order_relaxed);
		return 0;
	}
	pmtu_secure_random(d->nonce, sizeof(d->nonce));
	d->state = DEST_PROBING;
	d->copies_sent = 0;
	d->round_mtu = 0;
	d->round_method = NIC_PMTU_METHOD_NONE;
	d->round_ns = now_ns;
	d->rtt_ns = 0;
	memcpy(d->round_sizes, pm->sizes, sizeof(d->round_sizes));
	d->round_size_count = (uint8_t)pm->size_count;
	d->round_arrived = 0;
	d->refining = false;
	d->refine_rounds = 0;
	d->exact = false;
	pm->active[pm->active_count++] = (uint32_t)(d - pm->slots);
	atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
	atomic_store_explicit(&d->next_round_ns,
			      now_ns + pm->config.reprobe_s * PMTU_NS_PER_S,
			      memory_order_relaxed);
	COUNT(pm, rounds_started);
	return send_round(pm, d, probes, cap);
}

uint16_t nic_pathmtu_note_outbound(struct nic_pathmtu *pm,
				   const struct rte_mbuf *m,
				   const struct jg_packet_summary *packet,
				   unsigned int port_index, uint64_t now_ns,
				   struct rte_mbuf **probes, uint16_t cap)
{
	const uint8_t *dst = packet->key.ip_version == 4
				     ? (const uint8_t *)&packet->key.dst.v4
				     : packet->key.dst.v6;
	struct dest *d = pmtu_find(pm, packet->key.ip_version, dst, NULL);
	struct parsed p;
	uint16_t sent = 0;

	if (d != NULL) {
		if (now_ns - atomic_load_explicit(&d->used_ns,
						  memory_order_relaxed) >
		    USE_GRANULARITY_NS)
			atomic_store_explicit(&d->used_ns, now_ns,
					      memory_order_relaxed);
		if (now_ns < atomic_load_explicit(&d->next_round_ns,
						  memory_order_relaxed))
			return 0;
	}
	if (port_index >= 32 || !pmtu_parse(m, &p))
		return 0;
	rte_spinlock_lock(&pm->lock);
	d = pmtu_find(pm, packet->key.ip_version, dst, NULL);
	if (d == NULL)
		d = pmtu_insert(pm, packet->key.ip_version, dst, now_ns);
	if (now_ns >= atomic_load_explicit(&d->next_round_ns,
					   memory_order_relaxed) &&
	    d->state != DEST_PROBING) {
		remember_sender(d, m, &p, port_index);
		sent = start_round(pm, d, now_ns, probes, cap);
	}
	rte_spinlock_unlock(&pm->lock);
	return sent;
}

/* The least size this round sent above round_mtu that did not come
 * back; 0 when none did not. A fragment answer also bounds it: fragment
 * data comes in multiples of 8, so the path carries less than 8 more. */
static uint16_t least_failed_size(const struct dest *d)
{
	uint16_t failed = 0;

	for (unsigned int i = 0; i < d->round_size_count; i++)
		if (!(d->round_arrived & (1u << i)) &&
		    d->round_sizes[i] > d->round_mtu &&
		    (failed == 0 || d->round_sizes[i] < failed))
			failed = d->round_sizes[i];
	if (d->round_method == NIC_PMTU_METHOD_FRAGMENTS &&
	    (failed == 0 || d->round_mtu + 8 < failed))
		failed = (uint16_t)(d->round_mtu + 8);
	if (d->refining && d->refine_hi != 0 &&
	    (failed == 0 || d->refine_hi < failed))
		failed = d->refine_hi;
	return failed;
}

/* Under the lock, as a round ends: when the operator asked for the exact
 * value and the round left a gap (what passed, what did not), the next
 * round probes eight sizes evenly inside it; true when one was begun. */
static bool refine(struct nic_pathmtu *pm, struct dest *d, uint64_t now_ns)
{
	uint16_t low = d->round_mtu, high = least_failed_size(d);
	unsigned int count;

	if (!d->exact_wanted || low == 0)
		return false;
	if (high == 0 || high - low <= 1) {
		d->exact = true;
		return false;
	}
	if (d->refine_rounds == NIC_PMTU_MAX_REFINE_ROUNDS)
		return false;
	count = RTE_MIN((unsigned int)(high - low - 1),
			(unsigned int)NIC_PMTU_MAX_PROBE_SIZES);
	for (unsigned int i = 0; i < count; i++)
		d->round_sizes[i] =
			(uint16_t)(low + (uint32_t)(high - low) * (i + 1) /
						 (count + 1));
	d->round_size_count = (uint8_t)count;
	d->round_arrived = 0;
	d->refine_hi = high;
	d->refining = true;
	d->refine_rounds++;
	d->copies_sent = 0;
	d->round_ns = now_ns;
	/* The new round keeps the nonce, the value learned so far (replies
	 * only raise it) and the first round's round trip. */
	COUNT(pm, refine_rounds);
	return true;
}

/* How long a round waits for answers. Once a reply has shown the round
 * trip, a round that the operator waits on (exact) ends a few round trips
 * after its second copy; others wait out the timeout, which costs nothing. */
static uint64_t round_wait_ns(const struct nic_pathmtu *pm,
			      const struct dest *d)
{
	const uint64_t timeout = pm->config.timeout_ms * PMTU_NS_PER_MS;
	uint64_t wait;

	if (!d->exact_wanted || d->rtt_ns == 0)
		return timeout;
	wait = pm->config.second_probe_ms * PMTU_NS_PER_MS +
	       REFINE_WAIT_RTTS * d->rtt_ns + REFINE_SLACK_NS;
	return RTE_MIN(wait, timeout);
}

static void end_round(struct nic_pathmtu *pm, struct dest *d, uint64_t now_ns)
{
	d->state = DEST_IDLE;
	d->refining = false;
	d->exact_wanted = false;
	if (d->round_mtu != 0) {
		COUNT(pm, rounds_answered);
	} else {
		/* Nothing came back: what an earlier round learned may no
		 * longer hold, so the configured value applies again. */
		COUNT(pm, rounds_unanswered);
		if (d->mtu != 0)
			pmtu_set_mtu(pm, d, 0, NIC_PMTU_METHOD_NONE, now_ns);
	}
}

static void sweep(struct nic_pathmtu *pm, uint64_t now_ns)
{
	for (unsigned int i = 0; i < SWEEP_SLOTS; i++) {
		struct dest *d = &pm->slots[pm->sweep_cursor];

		pm->sweep_cursor = (pm->sweep_cursor + 1) & pm->mask;
		if (d->used && d->state != DEST_PROBING &&
		    now_ns - atomic_load_explicit(&d->used_ns,
						  memory_order_relaxed) >
			    pmtu_expiry_ns(pm)) {
			COUNT(pm, destinations_expired);
			pmtu_release(pm, d);
		}
	}
	pmtu_expire_groups(pm, now_ns);
}

uint16_t nic_pathmtu_poll(struct nic_pathmtu *pm, unsigned int port_index,
			  uint64_t now_ns, struct rte_mbuf **probes,
			  uint16_t cap)
{
	bool rounds =
		port_index < 32 &&
		(atomic_load_explicit(&pm->active_ports, memory_order_relaxed) &
		 (1u << port_index));
	bool sweeping = port_index == 0 && now_ns >= pm->next_sweep_ns;
	const uint64_t gap = pm->config.second_probe_ms * PMTU_NS_PER_MS;
	unsigned int still_active = 0;
	uint16_t count = 0;

	if (!rounds && !sweeping)
		return 0;
	rte_spinlock_lock(&pm->lock);
	if (sweeping) {
		pm->next_sweep_ns = now_ns + SWEEP_INTERVAL_NS;
		sweep(pm, now_ns);
	}
	for (unsigned int i = 0; i < pm->requested_count;) {
		struct dest *d = &pm->slots[pm->requested[i]];

		if (d->port_index != port_index ||
		    cap - count < nic_pathmtu_round_size(pm)) {
			i++;
			continue;
		}
		if (d->used && d->state != DEST_PROBING)
			count += start_round(pm, d, now_ns, probes + count,
					     (uint16_t)(cap - count));
		pm->requested[i] = pm->requested[--pm->requested_count];
	}
	for (unsigned int i = 0; rounds && i < pm->active_count;) {
		struct dest *d = &pm->slots[pm->active[i]];

		if (d->port_index != port_index) {
			i++;
			continue;
		}
		if (d->copies_sent < 2 && now_ns - d->round_ns >= gap &&
		    cap - count >= nic_pathmtu_round_size(pm))
			count += send_round(pm, d, probes + count,
					    (uint16_t)(cap - count));
		if (now_ns - d->round_ns >= round_wait_ns(pm, d)) {
			/* No room for a refinement's probes: the next poll. */
			bool refine_later =
				d->exact_wanted &&
				cap - count < nic_pathmtu_round_size(pm);

			if (refine_later || refine(pm, d, now_ns)) {
				if (!refine_later)
					count += send_round(
						pm, d, probes + count,
						(uint16_t)(cap - count));
				still_active++;
				i++;
				continue;
			}
			end_round(pm, d, now_ns);
			pm->active[i] = pm->active[--pm->active_count];
			continue;
		}
		still_active++;
		i++;
	}
	for (unsigned int i = 0; i < pm->requested_count; i++)
		still_active +=
			pm->slots[pm->requested[i]].port_index == port_index;
	if (rounds && still_active == 0)
		atomic_fetch_and(&pm->active_ports, ~(1u << port_index));
	rte_spinlock_unlock(&pm->lock);
	return count;
}

int nic_pathmtu_request_round(struct nic_pathmtu *pm, uint8_t ip_version,
			      const uint8_t *addr, bool exact)
{
	struct dest *d;
	int result = 0;

	rte_spinlock_lock(&pm->lock);
	d = pmtu_find(pm, ip_version, addr, NULL);
	if (d == NULL)
		result = -ENOENT;
	else if (d->state == DEST_PROBING) {
		/* Its answer is the answer; made exact if asked. */
		d->exact_wanted |= exact;
		result = -EALREADY;
	} else if (pm->requested_count == MAX_REQUESTS)
		result = -EBUSY;
	else {
		d->exact_wanted = exact;
		pm->requested[pm->requested_count++] =
			(uint32_t)(d - pm->slots);
		/* Wakes the poll of its port. */
		atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
	}
	rte_spinlock_unlock(&pm->lock);
	return result;
}

/* A reply to one of our probes (message read, lock not held). */
void pmtu_take_reply(struct nic_pathmtu *pm, const struct rte_mbuf *m,
		     const struct parsed *p, const struct pmtu_message *message,
		     uint16_t udp_len, uint64_t now_ns)
{
	uint16_t sizes[NIC_PMTU_MAX_FRAGMENTS];
	uint16_t probe_size = rte_be_to_cpu_16(message->probe_size);
	uint16_t candidate = 0;
	struct dest *d;

	if (message->count == 0 || message->count > NIC_PMTU_MAX_FRAGMENTS ||
	    udp_len > p->l4_len ||
	    udp_len < sizeof(struct rte_udp_hdr) + MESSAGE_LEN +
			      2u * message->count ||
	    (message->kind != NIC_PMTU_METHOD_FRAGMENTS &&
	     message->kind != NIC_PMTU_METHOD_SIZES) ||
	    probe_size < MIN_REPORTED_SIZE || probe_size > MAX_PROBE_SIZE ||
	    (message->kind == NIC_PMTU_METHOD_SIZES && message->count != 1)) {
		COUNT(pm, replies_malformed);
		return;
	}
	for (uint8_t i = 0; i < message->count; i++) {
		rte_be16_t size;

		memcpy(&size,
		       rte_pktmbuf_mtod_offset(
			       m, void *,
			       p->l4_offset + sizeof(struct rte_udp_hdr) +
				       MESSAGE_LEN + 2u * i),
		       2);
		sizes[i] = rte_be_to_cpu_16(size);
		/* A path cannot deliver more than was sent, nor a sized
		 * probe in another size than its own. */
		if (sizes[i] < MIN_REPORTED_SIZE || sizes[i] > probe_size ||
		    (message->kind == NIC_PMTU_METHOD_SIZES &&
		     sizes[i] != probe_size)) {
			COUNT(pm, replies_malformed);
			return;
		}
		candidate = RTE_MAX(candidate, sizes[i]);
	}
	/* A DF-clear probe that arrived whole proves nothing: a box that
	 * reassembles on the way (a firewall, a NAT, even the responder's
	 * own capture socket) hides the fragmentation that happened before
	 * it. Only real fragments count; the sized probes decide the rest. */
	if (message->kind == NIC_PMTU_METHOD_FRAGMENTS && message->count == 1)
		candidate = 0;
	/* Below the least MTU IP allows, a claim is broken or hostile. */
	if (candidate != 0 && candidate < (p->version == 4 ? 576 : 1280)) {
		COUNT(pm, replies_malformed);
		return;
	}
	rte_spinlock_lock(&pm->lock);
	d = pmtu_find(pm, p->version, p->src, NULL);
	if (d == NULL || d->round_ns == 0 ||
	    memcmp(d->nonce, message->nonce, sizeof(d->nonce)) != 0 ||
	    probe_size > pm->config.probe_mtu) {
		rte_spinlock_unlock(&pm->lock);
		COUNT(pm, replies_forged);
		return;
	}
	COUNT(pm, replies_accepted);
	if (d->rtt_ns == 0)
		d->rtt_ns = now_ns - d->round_ns;
	if (message->kind == NIC_PMTU_METHOD_SIZES)
		for (unsigned int i = 0; i < d->round_size_count; i++)
			if (d->round_sizes[i] == probe_size)
				d->round_arrived |= (uint8_t)(1u << i);
	if (candidate > d->round_mtu) {
		/* The first answer of a round replaces what an earlier round
		 * learned (the path may have shrunk); later ones only raise. */
		d->round_mtu = candidate;
		d->round_method = message->kind;
		pmtu_set_mtu(pm, d, candidate, message->kind, now_ns);
	}
	rte_spinlock_unlock(&pm->lock);
}

/* An ICMP "fragmentation needed" (IPv4) or "packet too big" (IPv6): the
 * path to the destination of the packet it quotes changed. */
void pmtu_take_icmp_error(struct nic_pathmtu *pm, const struct rte_mbuf *m,
			  const struct parsed *p, uint64_t now_ns)
{
	uint8_t header[2], quoted[40];
	uint32_t quoted_dst, quoted_len = p->version == 4 ? 20 : 40;
	struct dest *d;

	if (p->l4_len < 8 + quoted_len)
		return;
	memcpy(header, rte_pktmbuf_mtod_offset(m, void *, p->l4_offset), 2);
	if (p->version == 4 ? !(header[0] == 3 && header[1] == 4)
			    : header[0] != 2)
		return;
	memcpy(quoted, rte_pktmbuf_mtod_offset(m, void *, p->l4_offset + 8),
	       quoted_len);
	if ((quoted[0] >> 4) != p->version)
		return;
	quoted_dst = p->version == 4 ? 16 : 24;
	rte_spinlock_lock(&pm->lock);
	d = pmtu_find(pm, p->version, quoted + quoted_dst, NULL);
	if (d != NULL) {
		/* A round under way or just over already answers it. */
		if (d->state == DEST_PROBING ||
		    (d->round_ns != 0 &&
		     now_ns - d->round_ns <
			     pm->config.icmp_gap_s * PMTU_NS_PER_S)) {
			COUNT(pm, icmp_ignored);
		} else if (pm->requested_count < MAX_REQUESTS) {
			pm->requested[pm->requested_count++] =
				(uint32_t)(d - pm->slots);
			atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
			COUNT(pm, icmp_reprobes);
		}
	}
	rte_spinlock_unlock(&pm->lock);
}
