/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery: the prober (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <rte_ip.h>
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
		.kind = NIC_PMTU_METHOD_SIZES,
	};
	uint16_t count = 0;
	uint64_t bytes = 0;

	memcpy(message.nonce, d->nonce, sizeof(message.nonce));
	/* IPv4: one probe of the next hop's MTU that routers may fragment
	 * (a refinement knows the fragments' answer already, a hello asks
	 * only whether anyone answers). */
	if (d->version == 4 && !d->refining && !d->hello && count < cap) {
		message.kind = NIC_PMTU_METHOD_FRAGMENTS;
		message.probe_size = rte_cpu_to_be_16(pm->config.probe_mtu);
		probes[count] = pmtu_build(pm, d->l2, d->l2_len, 4, d->src,
					   d->addr, pm->config.probe_mtu, false,
					   &message, NULL, 0);
		if (probes[count]) {
			bytes += pm->config.probe_mtu;
			count++;
		}
		message.kind = NIC_PMTU_METHOD_SIZES;
	}
	for (unsigned int i = 0; i < d->round_size_count && count < cap; i++) {
		message.probe_size = rte_cpu_to_be_16(d->round_sizes[i]);
		probes[count] = pmtu_build(pm, d->l2, d->l2_len, d->version,
					   d->src, d->addr, d->round_sizes[i],
					   true, &message, NULL, 0);
		if (probes[count]) {
			bytes += d->round_sizes[i];
			count++;
		}
	}
	/* A hello goes once: one that is lost is tried again later
	 * (HELLO_RETRY_NS), so it never costs more than what caused it. */
	d->copies_sent = d->hello ? 2 : d->copies_sent + 1;
	COUNT_N(pm, probes_sent, count);
	COUNT_N(pm, probe_bytes, bytes);
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

/* Under the lock: d's round is the usual set of probes from now on, or
 * (hello) the one small probe that asks whether a responder is there. */
static void set_round_probes(struct nic_pathmtu *pm, struct dest *d, bool hello,
			     uint64_t now_ns)
{
	d->hello = hello;
	d->copies_sent = 0;
	d->round_ns = now_ns;
	if (hello) {
		d->round_sizes[0] = (uint16_t)pmtu_hello_size(d->version);
		d->round_size_count = 1;
	} else {
		memcpy(d->round_sizes, pm->sizes, sizeof(d->round_sizes));
		d->round_size_count = (uint8_t)pm->size_count;
	}
	d->round_arrived = 0;
}

/* Under the lock: whether the budgets allow d a round now. Traffic and
 * ICMP errors spend the destination prefix's budget too; the operator's
 * requests do not. */
static bool round_allowed(struct nic_pathmtu *pm, struct dest *d,
			  bool by_operator, uint64_t now_ns)
{
	uint64_t retry_ns = SUPPRESSED_RETRY_NS;
	bool allowed = false;

	if (pm->active_count == MAX_ACTIVE_ROUNDS)
		COUNT(pm, rounds_suppressed);
	else if (!by_operator &&
		 !pmtu_take_token(pmtu_prefix_cell(pm, pm->prefix_rounds,
						   d->version, d->addr),
				  now_ns)) {
		COUNT(pm, rounds_prefix_limited);
		/* The prefix earns its next round this much later. */
		retry_ns =
			60 * PMTU_NS_PER_S / pm->config.prefix_rounds_per_min;
	} else if (!pmtu_take_token(&pm->round_budget, now_ns))
		COUNT(pm, rounds_suppressed);
	else
		allowed = true;
	if (!allowed)
		atomic_store_explicit(&d->next_round_ns, now_ns + retry_ns,
				      memory_order_relaxed);
	return allowed;
}

/* Under the lock. A destination no responder has answered gets a hello
 * first, unless the operator asked. */
static uint16_t start_round(struct nic_pathmtu *pm, struct dest *d,
			    bool by_operator, uint64_t now_ns,
			    struct rte_mbuf **probes, uint16_t cap)
{
	if (!round_allowed(pm, d, by_operator, now_ns))
		return 0;
	pmtu_secure_random(d->nonce, sizeof(d->nonce));
	d->state = DEST_PROBING;
	d->round_mtu = 0;
	d->round_method = NIC_PMTU_METHOD_NONE;
	d->rtt_ns = 0;
	d->replied = false;
	d->refining = false;
	d->refine_rounds = 0;
	d->exact = false;
	set_round_probes(pm, d, !d->confirmed && !by_operator, now_ns);
	pm->active[pm->active_count++] = (uint32_t)(d - pm->slots);
	atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
	atomic_store_explicit(&d->next_round_ns,
			      now_ns + pm->config.reprobe_s * PMTU_NS_PER_S,
			      memory_order_relaxed);
	COUNT(pm, rounds_started);
	if (d->hello)
		COUNT(pm, hello_rounds);
	return send_round(pm, d, probes, cap);
}

/* What note_outbound reads of an outbound TCP segment. */
struct segment {
	uint32_t ports; /* as on the wire */
	uint32_t seq_end;
	uint8_t flags;
	uint32_t payload;
};

#define TCP_SYN 0x02
#define TCP_ACK 0x10

static bool read_segment(const struct rte_mbuf *m, const struct parsed *p,
			 struct segment *segment)
{
	uint8_t tcp[14];
	uint32_t header, seq;

	/* A jumbo segment may come in a chain: its headers are in the first
	 * buffer. */
	if (p->fragment || p->protocol != IPPROTO_TCP ||
	    p->l4_len < sizeof(tcp) ||
	    rte_pktmbuf_data_len(m) < p->l4_offset + sizeof(tcp))
		return false;
	memcpy(tcp, rte_pktmbuf_mtod_offset(m, void *, p->l4_offset),
	       sizeof(tcp));
	header = (uint32_t)(tcp[12] >> 4) * 4;
	if (header < 20 || header > p->l4_len)
		return false;
	memcpy(&segment->ports, tcp, 4);
	memcpy(&seq, tcp + 4, 4);
	segment->flags = tcp[13];
	segment->payload = p->l4_len - header;
	segment->seq_end = rte_be_to_cpu_32(seq) + segment->payload;
	return true;
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
	struct segment segment;
	bool rack_caused;
	struct parsed p;
	uint16_t sent = 0;

	if (port_index >= 32 || !pmtu_parse(m, &p, false) ||
	    !read_segment(m, &p, &segment))
		return 0;
	/* Only what the rack sends of its own accord may start a round: a
	 * connection it opens, or data. An outsider's SYN makes an instance
	 * answer with a SYN-ACK (a spoofed one, towards a victim), which
	 * must not make the border probe anyone. */
	rack_caused = ((segment.flags & (TCP_SYN | TCP_ACK)) == TCP_SYN) ||
		      segment.payload > 0;
	if (d != NULL) {
		if (now_ns - atomic_load_explicit(&d->used_ns,
						  memory_order_relaxed) >
		    USE_GRANULARITY_NS)
			atomic_store_explicit(&d->used_ns, now_ns,
					      memory_order_relaxed);
		if (segment.payload > 0)
			atomic_store_explicit(&d->last_sent,
					      (uint64_t)segment.ports << 32 |
						      segment.seq_end,
					      memory_order_relaxed);
		if (!rack_caused ||
		    now_ns < atomic_load_explicit(&d->next_round_ns,
						  memory_order_relaxed))
			return 0;
	} else if (!rack_caused) {
		if ((segment.flags & (TCP_SYN | TCP_ACK)) ==
		    (TCP_SYN | TCP_ACK))
			COUNT(pm, outbound_ignored);
		return 0;
	}
	rte_spinlock_lock(&pm->lock);
	d = pmtu_find(pm, packet->key.ip_version, dst, NULL);
	if (d == NULL)
		d = pmtu_insert(pm, packet->key.ip_version, dst, now_ns);
	if (now_ns >= atomic_load_explicit(&d->next_round_ns,
					   memory_order_relaxed) &&
	    d->state != DEST_PROBING) {
		remember_sender(d, m, &p, port_index);
		sent = start_round(pm, d, false, now_ns, probes, cap);
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
	if (d->hello) {
		/* Nobody answered the hello (an answer turns the round into
		 * the usual one at once): ask again later, then less often. */
		uint64_t retry = HELLO_RETRY_NS
				 << RTE_MIN(d->hello_failures, 16);

		d->hello = false;
		d->hello_failures++;
		COUNT(pm, rounds_unanswered);
		atomic_store_explicit(
			&d->next_round_ns,
			now_ns + RTE_MIN(retry,
					 pm->config.reprobe_s * PMTU_NS_PER_S),
			memory_order_relaxed);
		return;
	}
	/* A round without any reply: the responder may have gone, and the
	 * next round begins with a hello again. */
	if (!d->replied)
		d->confirmed = false;
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
			count += start_round(pm, d, d->operator_round, now_ns,
					     probes + count,
					     (uint16_t)(cap - count));
		d->operator_round = false;
		pm->requested[i] = pm->requested[--pm->requested_count];
	}
	for (unsigned int i = 0; rounds && i < pm->active_count;) {
		struct dest *d = &pm->slots[pm->active[i]];

		if (d->port_index != port_index) {
			i++;
			continue;
		}
		/* A hello was answered: the usual set follows at once, with
		 * the same nonce. */
		if (d->hello && d->confirmed &&
		    cap - count >= nic_pathmtu_round_size(pm)) {
			set_round_probes(pm, d, false, now_ns);
			count += send_round(pm, d, probes + count,
					    (uint16_t)(cap - count));
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

/* Under the lock: whether a round to d waits for its port's poll. */
static bool round_requested(const struct nic_pathmtu *pm, const struct dest *d)
{
	for (unsigned int i = 0; i < pm->requested_count; i++)
		if (pm->requested[i] == (uint32_t)(d - pm->slots))
			return true;
	return false;
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
	} else if (round_requested(pm, d)) {
		/* One round is enough; it is the operator's now. */
		d->exact_wanted |= exact;
		d->operator_round = true;
	} else if (pm->requested_count == MAX_REQUESTS)
		result = -EBUSY;
	else {
		d->exact_wanted = exact;
		d->operator_round = true;
		pm->requested[pm->requested_count++] =
			(uint32_t)(d - pm->slots);
		/* Wakes the poll of its port. */
		atomic_fetch_or(&pm->active_ports, 1u << d->port_index);
	}
	rte_spinlock_unlock(&pm->lock);
	return result;
}

/* Fragment sizes as a router makes them: every fragment but the last
 * equal, its data a multiple of 8, the last no larger, and the data of
 * all of them adding up to the probe's (each fragment has a 20-byte
 * header: the prober's probes carry no options). One planted size must
 * not become the path MTU. The path MTU they show: the first's. */
static uint16_t fragment_answer(const uint16_t *sizes, uint8_t count,
				uint16_t probe_size)
{
	const uint32_t header = sizeof(struct rte_ipv4_hdr);
	uint32_t data = 0;

	for (uint8_t i = 0; i < count; i++) {
		if (sizes[i] <= header ||
		    (i + 1 < count && sizes[i] != sizes[0]) ||
		    sizes[i] > sizes[0])
			return 0;
		data += sizes[i] - header;
	}
	if ((sizes[0] - header) % 8 != 0 && count > 1)
		return 0;
	return data + header == probe_size ? sizes[0] : 0;
}

/* Under the lock: whether d's round sent a probe of this kind and size
 * (a reply naming any other was not asked for). */
static bool round_sent(const struct nic_pathmtu *pm, const struct dest *d,
		       uint8_t kind, uint16_t probe_size)
{
	if (kind == NIC_PMTU_METHOD_FRAGMENTS)
		return d->version == 4 && !d->hello &&
		       probe_size == pm->config.probe_mtu;
	for (unsigned int i = 0; i < d->round_size_count; i++)
		if (d->round_sizes[i] == probe_size)
			return true;
	return false;
}

/* A reply to one of our probes (message read, lock not held). */
void pmtu_take_reply(struct nic_pathmtu *pm, const struct rte_mbuf *m,
		     const struct parsed *p, const struct pmtu_message *message,
		     uint16_t udp_len, uint64_t now_ns)
{
	uint16_t sizes[NIC_PMTU_MAX_FRAGMENTS];
	uint16_t probe_size = rte_be_to_cpu_16(message->probe_size);
	bool hello = message->kind == NIC_PMTU_METHOD_SIZES &&
		     probe_size == pmtu_hello_size(p->version);
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
	}
	if (message->kind == NIC_PMTU_METHOD_SIZES) {
		/* A hello's answer says a responder is there, nothing about
		 * the path. */
		candidate = hello ? 0 : probe_size;
	} else {
		candidate = fragment_answer(sizes, message->count, probe_size);
		if (candidate == 0) {
			COUNT(pm, replies_malformed);
			return;
		}
		/* A DF-clear probe that arrived whole proves nothing: a box
		 * that reassembles on the way (a firewall, a NAT, even the
		 * responder's own capture socket) hides the fragmentation
		 * that happened before it. Only real fragments count; the
		 * sized probes decide the rest. */
		if (message->count == 1)
			candidate = 0;
	}
	/* Below the least MTU IP allows, a claim is broken or hostile. */
	if (candidate != 0 && candidate < (p->version == 4 ? 576 : 1280)) {
		COUNT(pm, replies_malformed);
		return;
	}
	rte_spinlock_lock(&pm->lock);
	d = pmtu_find(pm, p->version, p->src, NULL);
	if (d == NULL || d->round_ns == 0 ||
	    memcmp(d->nonce, message->nonce, sizeof(d->nonce)) != 0) {
		rte_spinlock_unlock(&pm->lock);
		COUNT(pm, replies_forged);
		return;
	}
	/* The round is over: what it decided stands until the next. */
	if (d->state != DEST_PROBING) {
		rte_spinlock_unlock(&pm->lock);
		COUNT(pm, replies_late);
		return;
	}
	if (!round_sent(pm, d, message->kind, probe_size) ||
	    hello != d->hello) {
		rte_spinlock_unlock(&pm->lock);
		COUNT(pm, replies_forged);
		return;
	}
	COUNT(pm, replies_accepted);
	/* A responder is there: the next round needs no hello. */
	d->replied = true;
	d->confirmed = true;
	if (d->rtt_ns == 0)
		d->rtt_ns = now_ns - d->round_ns;
	if (hello) {
		/* The next poll of its port sends the usual set. */
		d->hello_failures = 0;
		COUNT(pm, hellos_answered);
	}
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

static uint32_t quoted_min(uint8_t version)
{
	return version == 4 ? sizeof(struct rte_ipv4_hdr)
			    : sizeof(struct rte_ipv6_hdr);
}

/* Under the lock: whether an ICMP error's quote is a packet the border
 * sent to d: one of its probes (its nonce; routers quote up to 576 bytes
 * of IPv4, 1280 of IPv6), or a TCP segment on the ports of the last one
 * with data sent to d, at most ICMP_SEQ_WINDOW behind its end. Anyone
 * can forge an error; only someone on the path can forge one of these. */
static bool quote_matches(const struct nic_pathmtu *pm, const struct dest *d,
			  const struct rte_mbuf *m, const struct parsed *p,
			  const uint8_t *quoted)
{
	uint32_t header = p->version == 4 ? (quoted[0] & 0xfu) * 4u : 40u;
	uint8_t protocol = p->version == 4 ? quoted[9] : quoted[6];
	uint32_t at = p->l4_offset + 8 + header;
	uint32_t left = p->l4_len >= 8 + header ? p->l4_len - 8 - header : 0;

	if (header < quoted_min(p->version))
		return false;

	if (protocol == IPPROTO_TCP && left >= 8) {
		uint64_t last = atomic_load_explicit(&d->last_sent,
						     memory_order_relaxed);
		uint32_t ports, seq;

		memcpy(&ports, rte_pktmbuf_mtod_offset(m, void *, at), 4);
		memcpy(&seq, rte_pktmbuf_mtod_offset(m, void *, at + 4), 4);
		return last != 0 && (uint32_t)(last >> 32) == ports &&
		       (uint32_t)last - rte_be_to_cpu_32(seq) - 1u <
			       ICMP_SEQ_WINDOW;
	}
	if (protocol == IPPROTO_UDP &&
	    left >= sizeof(struct rte_udp_hdr) + MESSAGE_LEN) {
		struct rte_udp_hdr udp;
		struct pmtu_message message;

		memcpy(&udp, rte_pktmbuf_mtod_offset(m, void *, at),
		       sizeof(udp));
		memcpy(&message,
		       rte_pktmbuf_mtod_offset(m, void *, at + sizeof(udp)),
		       MESSAGE_LEN);
		return udp.src_port == pm->port_be &&
		       udp.dst_port == pm->port_be &&
		       message.magic == RTE_BE32(PMTU_MAGIC) &&
		       message.type == TYPE_PROBE &&
		       memcmp(message.nonce, d->nonce, sizeof(d->nonce)) == 0;
	}
	return false;
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
		if (!quote_matches(pm, d, m, p, quoted)) {
			COUNT(pm, icmp_unmatched);
		} else if (d->state == DEST_PROBING || round_requested(pm, d) ||
			   (d->round_ns != 0 &&
			    now_ns - d->round_ns <
				    pm->config.icmp_gap_s * PMTU_NS_PER_S)) {
			/* A round under way, asked for or just over
			 * answers it. */
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
