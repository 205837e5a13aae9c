/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Merge: TCP segments of one flow become packets of up to the internal MTU.
 *
 * A flow holds up to JG_MAX_RUNS_PER_FLOW "runs", each a contiguous piece
 * of the byte stream that is already one valid packet: the headers of its
 * first segment followed by the payload of every segment in it, as an mbuf
 * chain. Keeping several runs lets a late segment join the runs on both
 * of its sides, so arrival A, C, B still yields one packet A+B+C.
 *
 * Runs are filled to the byte: when a segment does not fit, its first
 * bytes complete the run and the rest starts the next run behind a copied
 * header (the payload is shared through an indirect mbuf, not copied).
 * That is what lets 1448-byte segments fill 8500-byte packets exactly.
 *
 * The rules a segment must meet to join a run, and the building of runs,
 * are in run.c; this file sorts what may merge from what passes through,
 * and is the merge API.
 */
#include <string.h>

#include "internal.h"
#include "run.h"

/* ------------------------------------------------------------------ */
/* Classification                                                      */

static bool flow_may_merge(const struct jg_engine *e, const struct jg_flow *f)
{
	if (f->flags & JG_FLOW_OFFLOADED)
		return false;
	if (!(f->flags & JG_FLOW_ONLOADED) && !e->config.merge_unknown_flows)
		return false;
	return true;
}

static bool ipv4_header_good(const struct rte_mbuf *m,
			     const struct jg_parsed *p)
{
	uint64_t status = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;

	if (p->ip_version != 4 || status == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
		return true;
	if (status == RTE_MBUF_F_RX_IP_CKSUM_BAD)
		return false;
	return rte_raw_cksum(jg_l3(m, p), p->l3_len) == 0xffff;
}

/* Whether the TCP checksum is known good; fills the payload sum the
 * merged checksum will need. */
static bool tcp_checksum_good(const struct jg_engine *e,
			      const struct rte_mbuf *m,
			      const struct jg_parsed *p, uint16_t *payload_sum)
{
	uint64_t status = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;

	*payload_sum = 0;
	if (status == RTE_MBUF_F_RX_L4_CKSUM_GOOD) {
		if (e->config.checksum_mode == JG_CHECKSUM_SOFTWARE)
			*payload_sum = jg_payload_sum_from_header(m, p);
		return true;
	}
	if (status == RTE_MBUF_F_RX_L4_CKSUM_BAD ||
	    !e->config.verify_unknown_checksums)
		return false;
	return jg_l4_checksum_verify(m, p, payload_sum);
}

static bool mergeable_shape(const struct jg_parsed *p)
{
	return p->payload_length > 0 && !p->ipv4_has_options &&
	       !p->is_fragment && !p->ipv6_routing &&
	       !(p->tcp_flags &
		 (JG_TCP_FLAG_SYN | JG_TCP_FLAG_RST | JG_TCP_FLAG_URG));
}

/* The MTU of the Internet's links: the path an Internet host's MSS is for. */
#define ETHERNET_MTU 1500u

/*
 * An Internet host advertises the MSS of its own 1500-byte path. Left
 * alone, the jumbo host in the rack would send it 1448-byte segments and
 * the border would have nothing to split. Raised to what the internal MTU
 * carries, the jumbo host sends large segments and the split path cuts
 * them to the path MTU of the destination on the way out, so both the
 * host and the rack links see one packet per 8500 bytes. Only MSS values
 * a 1500-byte path would give are raised (or the family's default path
 * MTU, where an operator set one larger); a peer that announced more
 * knows its path. The IPv6 default of 1280 is a cautious guess of the
 * path, not a sign that a peer announcing 1440 knows better: that peer
 * is raised too, and split still cuts to the path. The checksum is
 * updated incrementally (RFC 1624), which keeps it final and keeps a
 * corrupted segment corrupted.
 *
 * The raise hides from the rack host what the Internet host announced, so
 * the flow keeps it (external_mss): split never cuts the flow's segments
 * larger than that, even where the path carries more (a peer behind an MSS
 * clamp, a VPN, PPPoE). Without a flow entry to keep it in, the SYN is
 * left alone. f is the flow if found already; returns it (or the one
 * made).
 */
static struct jg_flow *raise_syn_mss(struct jg_engine *e, struct rte_mbuf *m,
				     const struct jg_parsed *p,
				     const struct jg_flow_key *key,
				     struct jg_flow *f)
{
	struct rte_tcp_hdr *th = jg_l4(m, p);
	uint16_t offset = jg_tcp_mss_option_offset(th, p->l4_len);
	uint16_t header_overhead = p->ip_version == 4 ? 40 : 60;
	uint16_t default_path_mtu = p->ip_version == 4
					    ? e->config.default_path_mtu_v4
					    : e->config.default_path_mtu_v6;
	uint16_t largest_raised =
		(uint16_t)(RTE_MAX(default_path_mtu, ETHERNET_MTU) -
			   header_overhead);
	uint16_t old_mss, new_mss, old_word, new_word;
	uint8_t *value;

	if (offset == 0)
		return f;
	value = (uint8_t *)th + offset;
	old_mss = (uint16_t)(value[0] << 8 | value[1]);
	new_mss = (uint16_t)(e->config.internal_mtu - header_overhead);
	if (old_mss > largest_raised || old_mss >= new_mss)
		return f;
	if (f == NULL)
		f = jg_flow_find_or_create(e, key);
	if (f == NULL)
		return NULL;
	f->external_mss = old_mss;
	value[0] = (uint8_t)(new_mss >> 8);
	value[1] = (uint8_t)new_mss;
	/* The checksum sums 16-bit words from the header's start: a value
	 * at an odd offset straddles two words, so it counts byte-swapped. */
	old_word = rte_cpu_to_be_16(old_mss);
	new_word = rte_cpu_to_be_16(new_mss);
	if (offset & 1) {
		old_word = jg_csum_swap(old_word);
		new_word = jg_csum_swap(new_word);
	}
	th->cksum = (uint16_t)~jg_csum_add(
		jg_csum_sub((uint16_t)~th->cksum, old_word), new_word);
	e->stats.merge.mss_raised++;
	return f;
}

static void release_flow_then_pass(struct jg_engine *e, struct jg_flow *f,
				   struct rte_mbuf *m)
{
	if (f != NULL && f->runs != NULL)
		jg_flow_release_all(e, f);
	jg_pass_through(e, m);
}

/*
 * A SYN, FIN or RST ends the connection the flow's sequence state belongs
 * to, as an idle spell may have: what it holds leaves, and the end of what
 * was released is forgotten. Kept, it made a new connection on the same
 * 5-tuple whose initial sequence number lies below the old one's end look
 * like a retransmission, never to be merged again. Linux GRO keeps no
 * sequence state past a flush, so it never had the problem.
 */
static void end_connection(struct jg_engine *e, struct jg_flow *f)
{
	if (f->runs != NULL)
		jg_flow_release_all(e, f);
	if (f->flags & JG_FLOW_RELEASED_VALID) {
		f->flags &= (uint8_t)~JG_FLOW_RELEASED_VALID;
		e->stats.merge.connection_resets++;
	}
}

#define CONNECTION_FLAGS (JG_TCP_FLAG_SYN | JG_TCP_FLAG_FIN | JG_TCP_FLAG_RST)
/* A flow silent this long may be a new connection: 5 s in coarse units. */
#define CONNECTION_IDLE_COARSE ((uint32_t)(5000000000ull >> JG_COARSE_SHIFT))

static void merge_one(struct jg_engine *e, struct rte_mbuf *m)
{
	struct jg_merge_stats *stats = &e->stats.merge;
	struct jg_segment s;
	struct jg_flow_key key;
	struct jg_flow *f;

	stats->packets_in++;
	stats->bytes_in += m->pkt_len;
	if (!jg_parse(m, &s.p) || s.p.l4_protocol != IPPROTO_TCP) {
		jg_pass_through(e, m);
		return;
	}
	if (!s.p.l4_complete) {
		f = NULL;
		if (s.p.fragment_shows_ports) {
			jg_flow_key_from_packet(m, &s.p, &key);
			f = jg_flow_find(e, &key);
		}
		release_flow_then_pass(e, f, m);
		return;
	}
	stats->tcp_payload_in += s.p.payload_length;
	jg_flow_key_from_packet(m, &s.p, &key);

	if (!mergeable_shape(&s.p)) {
		f = jg_flow_find(e, &key);
		if (f != NULL && (s.p.tcp_flags & JG_TCP_FLAG_SYN))
			f->external_mss =
				jg_tcp_mss_option(jg_l4(m, &s.p), s.p.l4_len);
		if ((s.p.tcp_flags & (JG_TCP_FLAG_SYN | JG_TCP_FLAG_RST)) ==
			    JG_TCP_FLAG_SYN &&
		    e->config.raise_syn_mss)
			f = raise_syn_mss(e, m, &s.p, &key, f);
		if (f != NULL && (s.p.tcp_flags & CONNECTION_FLAGS))
			end_connection(e, f);
		release_flow_then_pass(e, f, m);
		return;
	}
	if (!ipv4_header_good(m, &s.p) ||
	    !tcp_checksum_good(e, m, &s.p, &s.payload_sum)) {
		stats->bad_checksum_passes++;
		release_flow_then_pass(e, jg_flow_find(e, &key), m);
		return;
	}
	f = jg_flow_find_or_create(e, &key);
	if (f == NULL) {
		jg_pass_through(e, m);
		return;
	}
	uint32_t now_coarse = (uint32_t)(e->now_ns >> JG_COARSE_SHIFT);

	if (now_coarse - f->last_seen_coarse > CONNECTION_IDLE_COARSE)
		end_connection(e, f);
	f->last_seen_coarse = now_coarse;
	if (!flow_may_merge(e, f)) {
		release_flow_then_pass(e, f, m);
		return;
	}
	if (f->internal_mss != 0 && f->internal_mss <= JG_LEGACY_MSS) {
		stats->legacy_mss_passes++;
		release_flow_then_pass(e, f, m);
		return;
	}
	/* Drop Ethernet padding so the payload ends where IP says. */
	uint32_t frame = s.p.l2_len + s.p.ip_length;

	/* Every held segment keeps a receive buffer: at the budget, new
	 * segments pass unmerged rather than starve reception. */
	if (e->held_segments >= e->config.max_held_segments) {
		stats->held_full_passes++;
		release_flow_then_pass(e, f, m);
		return;
	}
	if (m->pkt_len > frame &&
	    rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - frame)) != 0) {
		release_flow_then_pass(e, f, m);
		return;
	}
	jg_flow_observe_arrival(f, s.p.payload_length, e->now_ns);

	struct jg_run_meta *meta = jg_meta(e, m);

	s.m = m;
	s.seq = rte_be_to_cpu_32(
		((const struct rte_tcp_hdr *)jg_l4(m, &s.p))->sent_seq);
	jg_mark_not_segment_start(e, m->next);
	meta->segment_start = 1;
	meta->arrival_ns = (uint32_t)e->now_ns;

	if (jg_run_insert(e, f, &s) == JG_OVERLAPS) {
		stats->overlap_passes++;
		release_flow_then_pass(e, f, m);
		return;
	}
	if (s.p.tcp_flags & JG_TCP_FLAG_FIN) {
		end_connection(e, f);
		return;
	}
	/* A flow keeps its deadline until its oldest run leaves. A new
	 * flow's run set to leave with this call is looked at again as it
	 * grows: a second segment may let it wait (jg_flow_wait_budget). */
	if (jg_flow_emit_closed_front(e, f) || f->timer_list == JG_TIMER_NONE ||
	    (f->timer_list == JG_TIMER_BURST &&
	     !(f->flags & JG_FLOW_RATE_VALID)))
		jg_flow_schedule(e, f);
}

/* ------------------------------------------------------------------ */
/* API                                                                 */

/*
 * Received mbufs are cold: the NIC (or the benchmark) wrote them long
 * before. A segment's work reads both cache lines of its mbuf (the second
 * holds the chain link and the run metadata) and the first two cache
 * lines of its frame (headers with TCP options end past byte 64), so
 * each is asked for a few packets ahead; the data address is known only
 * once the mbuf's first line is in.
 */
#define PREFETCH_MBUF_AHEAD 4
#define PREFETCH_DATA_AHEAD 2

static inline void prefetch_mbuf(const struct rte_mbuf *m)
{
	rte_prefetch0(m);
	rte_prefetch0(&m->cacheline1);
}

static inline void prefetch_headers(const struct rte_mbuf *m)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);

	rte_prefetch0(data);
	rte_prefetch0(data + RTE_CACHE_LINE_SIZE);
}

uint16_t jg_merge_burst(struct jg_engine *e, struct rte_mbuf **pkts,
			uint16_t nb_pkts, uint64_t now_ns,
			struct rte_mbuf **out, uint16_t out_cap)
{
	e->now_ns = now_ns;
	jg_observe_poll(e, now_ns, nb_pkts > 0);
	for (uint16_t i = 0; i < nb_pkts && i < PREFETCH_MBUF_AHEAD; i++)
		prefetch_mbuf(pkts[i]);
	for (uint16_t i = 0; i < nb_pkts && i < PREFETCH_DATA_AHEAD; i++)
		prefetch_headers(pkts[i]);
	for (uint16_t i = 0; i < nb_pkts; i++) {
		if (i + PREFETCH_MBUF_AHEAD < nb_pkts)
			prefetch_mbuf(pkts[i + PREFETCH_MBUF_AHEAD]);
		if (i + PREFETCH_DATA_AHEAD < nb_pkts)
			prefetch_headers(pkts[i + PREFETCH_DATA_AHEAD]);
		merge_one(e, pkts[i]);
	}
	jg_timer_expire(e, now_ns);
	jg_timer_release_burst_list(e);
	return jg_ready_drain(e, out, out_cap);
}

void jg_merge_note_poll(struct jg_engine *e, uint64_t now_ns)
{
	jg_observe_poll(e, now_ns, false);
}

uint16_t jg_merge_timer(struct jg_engine *e, uint64_t now_ns,
			struct rte_mbuf **out, uint16_t out_cap)
{
	e->now_ns = now_ns;
	jg_timer_expire(e, now_ns);
	jg_timer_release_burst_list(e);
	return jg_ready_drain(e, out, out_cap);
}

uint64_t jg_merge_next_deadline(const struct jg_engine *e)
{
	if (e->burst_list != JG_INDEX_NONE)
		return e->now_ns;
	/* Idle programs ask after every empty poll: answer at once when
	 * nothing waits instead of scanning the wheel. */
	if (e->next_slot == UINT64_MAX || e->wheel_flows == 0)
		return UINT64_MAX;
	uint64_t slot = jg_wheel_next_occupied(
		e, e->next_slot, e->next_slot + JG_WHEEL_SLOTS - 1);

	if (slot != UINT64_MAX) {
		uint64_t slot_start = slot << JG_WHEEL_SLOT_SHIFT, earliest;
		uint32_t index = e->wheel[slot % JG_WHEEL_SLOTS];

		/* The slot's start may lie before every deadline in it; a
		 * caller that waits only until then would wake for nothing,
		 * so give the exact earliest deadline of the slot. */
		earliest = UINT64_MAX;
		for (; index != JG_INDEX_NONE;
		     index = e->flows[index].timer_next) {
			uint32_t offset = e->flows[index].deadline_ns -
					  (uint32_t)slot_start;

			earliest = RTE_MIN(earliest, slot_start + offset);
		}
		return RTE_MAX(earliest, e->now_ns);
	}
	return UINT64_MAX;
}

uint16_t jg_merge_flush_all(struct jg_engine *e, struct rte_mbuf **out,
			    uint16_t out_cap)
{
	/* Every flow that holds runs is on a timer list. */
	for (uint32_t slot = 0; slot < JG_WHEEL_SLOTS; slot++)
		while (e->wheel[slot] != JG_INDEX_NONE)
			jg_flow_release_all(e, &e->flows[e->wheel[slot]]);
	jg_timer_release_burst_list(e);
	return jg_ready_drain(e, out, out_cap);
}

int jg_flow_onload(struct jg_engine *e, const struct jg_flow_key *key)
{
	struct jg_onload_undo undo;

	return jg_flow_onload_undoable(e, key, &undo);
}

int jg_flow_onload_undoable(struct jg_engine *e, const struct jg_flow_key *key,
			    struct jg_onload_undo *undo)
{
	struct jg_flow *f = jg_flow_find(e, key);
	uint32_t now_coarse = (uint32_t)(e->now_ns >> JG_COARSE_SHIFT);

	memset(undo, 0, sizeof(*undo));
	if (f != NULL) {
		undo->offloaded = (f->flags & JG_FLOW_OFFLOADED) != 0;
		undo->seen_before = f->last_seen_coarse;
	}
	if (f != NULL && (f->flags & JG_FLOW_ONLOADED)) {
		f->last_seen_coarse = now_coarse;
		undo->seen_by_onload = now_coarse;
		undo->changed = true;
		return 0;
	}
	if (!jg_flow_pin_budget_left(e)) {
		e->stats.merge.onloads_refused++;
		return -ENOSPC;
	}
	if (f == NULL) {
		f = jg_flow_find_or_create(e, key);
		undo->created = true;
	}
	if (f == NULL) {
		e->stats.merge.onloads_refused++;
		memset(undo, 0, sizeof(*undo));
		return -ENOSPC;
	}
	f->flags =
		(uint8_t)((f->flags & ~JG_FLOW_OFFLOADED) | JG_FLOW_ONLOADED);
	f->last_seen_coarse = now_coarse;
	e->pinned_flows++;
	undo->seen_by_onload = now_coarse;
	undo->pinned = true;
	undo->changed = true;
	return 0;
}

void jg_flow_onload_undo(struct jg_engine *e, const struct jg_flow_key *key,
			 const struct jg_onload_undo *undo)
{
	struct jg_flow *f = undo->changed ? jg_flow_find(e, key) : NULL;

	if (f == NULL)
		return;
	if (undo->created && f->runs == NULL && f->internal_mss == 0) {
		jg_flow_remove(e, f);
		return;
	}
	if (undo->pinned)
		jg_flow_unpin(e, f);
	if (undo->offloaded)
		f->flags |= JG_FLOW_OFFLOADED;
	/* A packet since dated the flow anew; otherwise it is as idle as it
	 * was. */
	if (!undo->created && f->last_seen_coarse == undo->seen_by_onload)
		f->last_seen_coarse = undo->seen_before;
}

int jg_flow_offload(struct jg_engine *e, const struct jg_flow_key *key,
		    struct rte_mbuf **out, uint16_t out_cap)
{
	/* An unknown flow gets no entry: offload must not be a way to fill
	 * the table. */
	struct jg_flow *f = jg_flow_find(e, key);
	struct rte_mbuf *pending[2 * JG_MAX_RUNS_PER_FLOW];
	uint16_t count;

	if (f == NULL)
		return 0;
	if (f->run_count > out_cap)
		return -ENOSPC;
	jg_flow_unpin(e, f);
	f->flags |= JG_FLOW_OFFLOADED;
	/* Packets of other flows already queued stay queued; only this
	 * flow's runs go to out. */
	uint32_t queued_before = e->ready_tail;

	jg_flow_release_all(e, f);
	count = (uint16_t)(e->ready_tail - queued_before);
	for (uint16_t i = 0; i < count; i++)
		pending[i] = e->ready[(queued_before + i) & e->ready_mask];
	e->ready_tail = queued_before;
	memcpy(out, pending, count * sizeof(*out));
	return count;
}

uint16_t jg_flow_internal_mss(struct jg_engine *e,
			      const struct jg_flow_key *key)
{
	struct jg_flow *f = jg_flow_find(e, key);

	return f == NULL ? 0 : f->internal_mss;
}
