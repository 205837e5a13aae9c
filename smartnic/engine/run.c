/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runs: how a segment joins the runs its flow holds (merge.c describes
 * runs and decides which segments come here), and when the flow's runs
 * must leave.
 *
 * The rules that keep the stream intact follow Linux GRO
 * (net/ipv4/tcp_offload.c, net/ipv4/af_inet.c, net/ipv6/ip6_offload.c)
 * and are at least as strict:
 *  - a segment joins a run only if every header field but length, IP ID,
 *    checksum, sequence number and the PSH/FIN flags is identical
 *    (L2 header, addresses, ports, TOS/traffic class, ECN, TTL/hop limit,
 *    DF, flow label, IPv6 extension headers, ACK number, window, TCP
 *    options including timestamps, remaining flags);
 *  - the IPv4 ID must increase by one per segment, or stay fixed, DF set
 *    or not (decided by the second segment, as Linux 6.18 does);
 *  - a CWR segment stays alone, as on Linux 6.18 (checked against the
 *    running kernel by test_linux_gro_reference.py); PSH, FIN or a
 *    segment shorter than the run's
 *    MSS ends the run; a segment longer than the run's MSS does not join
 *    it;
 *  - SYN, RST, URG, zero payload, IPv4 options, fragments, IPv6 routing
 *    headers, bad or unknown checksums and overlapping data are passed
 *    through, after releasing what their flow holds so order is kept.
 */
#include <string.h>

#include "internal.h"
#include "run.h"

/* ------------------------------------------------------------------ */
/* Runs (held runs in run.h, their emission in emit.c)                 */

/* How long the oldest segment of a run has been held. A run's head
 * arrived first unless the run was joined with a later one; joins happen
 * only under reordering, so only then are its segments walked. */
static uint32_t run_oldest_age(struct jg_engine *e, struct rte_mbuf *run,
			       uint32_t now)
{
	const struct jg_run_meta *meta = jg_meta(e, run);
	uint32_t oldest = now - meta->arrival_ns;

	if (!(meta->flags & JG_RUN_JOINED))
		return oldest;
	for (struct rte_mbuf *m = run->next; m != NULL; m = m->next) {
		const struct jg_run_meta *segment = jg_meta(e, m);

		if (segment->segment_start)
			oldest = RTE_MAX(oldest, now - segment->arrival_ns);
	}
	return oldest;
}

/*
 * Deadline: the runs' start plus what the model lets the flow wait, but
 * never later than the oldest held segment's arrival plus the global
 * bound. The two differ after a join: a run headed by a late segment
 * holds older data behind it, and the model's wait counts from the run's
 * start while the bound counts from that data.
 */
void jg_flow_schedule(struct jg_engine *e, struct jg_flow *f)
{
	uint32_t now = (uint32_t)e->now_ns, start_age = 0, oldest_age = 0;
	uint32_t budget, wait, bound_left;
	struct rte_mbuf *first = f->runs;

	if (first == NULL) {
		jg_timer_unlink(e, f);
		return;
	}
	for (struct rte_mbuf *r = first; r != NULL;
	     r = jg_meta(e, r)->next_run) {
		start_age = RTE_MAX(start_age, now - jg_meta(e, r)->arrival_ns);
		oldest_age = RTE_MAX(oldest_age, run_oldest_age(e, r, now));
	}
	budget = (jg_meta(e, first)->flags & JG_RUN_NO_WAIT)
			 ? 0
			 : jg_flow_wait_budget(e, f, run_payload(first),
					       run_capacity(e, first),
					       jg_meta(e, first)->segments);
	/* A new flow is on the burst list until its run may wait. */
	if (budget > 0 &&
	    (f->timer_list == JG_TIMER_NONE || f->timer_list == JG_TIMER_BURST))
		e->stats.merge.delayed_flows++;
	wait = budget > start_age ? budget - start_age : 0;
	bound_left =
		e->max_delay_ns > oldest_age ? e->max_delay_ns - oldest_age : 0;
	jg_timer_schedule(e, f, e->now_ns + RTE_MIN(wait, bound_left));
}

/* ------------------------------------------------------------------ */
/* Join rules                                                         */

/* Header bytes as laid out in a frame, for comparisons. */
struct header_view {
	const uint8_t *frame;
	uint16_t l2_len, l3_len, l4_len;
	uint8_t ip_version;
};

static void view_of_held(const struct rte_mbuf *head, struct header_view *v)
{
	v->frame = rte_pktmbuf_mtod(head, const uint8_t *);
	v->l2_len = head->l2_len;
	v->l3_len = head->l3_len;
	v->l4_len = head->l4_len;
	v->ip_version = v->frame[v->l2_len] >> 4;
}

/* Bits that differ between len bytes at a and b (0: equal). Headers are
 * compared on every segment, so this reads words (the last one
 * overlapping) instead of calling memcmp for a dozen bytes. */
static inline uint64_t bytes_diff(const uint8_t *a, const uint8_t *b,
				  uint32_t len)
{
	uint64_t diff = 0;
	uint32_t i;

	/* An Ethernet header, TCP timestamps: two words, no loop. */
	if (len >= sizeof(uint64_t) && len <= 2 * sizeof(uint64_t))
		return (jg_load64(a) ^ jg_load64(b)) |
		       (jg_load64(a + len - sizeof(uint64_t)) ^
			jg_load64(b + len - sizeof(uint64_t)));
	if (len < sizeof(uint64_t)) {
		for (i = 0; i < len; i++)
			diff |= (uint64_t)(a[i] ^ b[i]);
		return diff;
	}
	for (i = 0; i + sizeof(uint64_t) < len; i += sizeof(uint64_t))
		diff |= jg_load64(a + i) ^ jg_load64(b + i);
	return diff | (jg_load64(a + len - sizeof(uint64_t)) ^
		       jg_load64(b + len - sizeof(uint64_t)));
}

/*
 * The comparison of may_follow for two frames whose headers have the same
 * lengths and IP version. Always inlined: called with constant lengths,
 * every bytes_diff becomes a fixed few word loads.
 */
static __rte_always_inline int
compare_headers(const uint8_t *a, const uint8_t *b, uint16_t l2_len,
		uint16_t l3_len, uint16_t l4_len, uint8_t ip_version,
		uint8_t run_flags, uint16_t segments)
{
	const uint8_t *a3 = a + l2_len, *b3 = b + l2_len;
	const uint8_t *a4 = a3 + l3_len, *b4 = b3 + l3_len;
	uint64_t diff;
	int id_mode = 0;

	diff = bytes_diff(a, b, l2_len);
	if (ip_version == 4) {
		const struct rte_ipv4_hdr *ip_a = (const void *)a3;
		const struct rte_ipv4_hdr *ip_b = (const void *)b3;
		uint16_t a_id = rte_be_to_cpu_16(ip_a->packet_id);
		uint16_t b_id = rte_be_to_cpu_16(ip_b->packet_id);

		/* Version and TOS; fragment field, TTL and protocol;
		 * addresses. Length, ID and checksum may differ. */
		diff |= (uint64_t)(jg_load16(a3) ^ jg_load16(b3)) |
			(jg_load32(a3 + 6) ^ jg_load32(b3 + 6)) |
			(jg_load64(a3 + 12) ^ jg_load64(b3 + 12));
		/* Fixed or counting up by one, decided by the second segment;
		 * DF must match (the fragment field is compared above) but a
		 * fixed ID no longer needs it: Linux 6.18's inet_gro_flush
		 * (include/net/gro.h) takes ip_fixedid whenever the second ID
		 * equals the first. */
		if (b_id == a_id)
			id_mode = JG_RUN_ID_FIXED;
		else if (b_id == (uint16_t)(a_id + segments))
			id_mode = JG_RUN_ID_INCR;
		else
			return -1;
		if ((run_flags & (JG_RUN_ID_FIXED | JG_RUN_ID_INCR)) != 0 &&
		    !(run_flags & id_mode))
			return -1;
	} else {
		/* Version, traffic class (ECN included) and flow label;
		 * next header and hop limit; addresses and extension
		 * headers. Only the payload length may differ. */
		diff |= (uint64_t)(jg_load32(a3) ^ jg_load32(b3)) |
			(jg_load16(a3 + 6) ^ jg_load16(b3 + 6)) |
			bytes_diff(a3 + 8, b3 + 8, l3_len - 8u);
	}
	/* Ports; ACK number; data offset; window; options. Sequence number
	 * and checksum may differ, and the flags PSH and FIN; every other
	 * flag must match. A segment that sets CWR joins nothing: Linux
	 * 6.18's tcp_gro_receive (net/ipv4/tcp_offload.c) flushes on a CWR
	 * in the arriving segment as well as on any flag difference but FIN
	 * and PSH, so a CWR segment stays alone even after another (the
	 * running kernel does so, test_linux_gro_reference.py). The first
	 * segment's CWR needs no test of its own: a later one either lacks
	 * it (a difference) or has it (refused here). */
	diff |= (uint64_t)(b4[13] & JG_TCP_FLAG_CWR) |
		(uint64_t)(jg_load32(a4) ^ jg_load32(b4)) |
		(jg_load32(a4 + 8) ^ jg_load32(b4 + 8)) |
		(uint64_t)(a4[12] ^ b4[12]) |
		(uint64_t)((a4[13] ^ b4[13]) &
			   (uint8_t) ~(JG_TCP_FLAG_PSH | JG_TCP_FLAG_FIN)) |
		(jg_load16(a4 + 14) ^ jg_load16(b4 + 14)) |
		bytes_diff(a4 + sizeof(struct rte_tcp_hdr),
			   b4 + sizeof(struct rte_tcp_hdr),
			   l4_len - (uint32_t)sizeof(struct rte_tcp_hdr));
	return diff == 0 ? id_mode : -1;
}

/* compare_headers for untagged Ethernet and a plain IP header of l3_len
 * bytes: constant lengths for the two common TCP header lengths, the
 * given one otherwise. */
static __rte_always_inline int compare_plain(const uint8_t *a, const uint8_t *b,
					     uint16_t l3_len,
					     uint8_t ip_version,
					     uint16_t l4_len, uint8_t run_flags,
					     uint16_t segments)
{
	if (l4_len == JG_TCP_TIMESTAMPS_LEN)
		return compare_headers(a, b, JG_PLAIN_L2_LEN, l3_len,
				       JG_TCP_TIMESTAMPS_LEN, ip_version,
				       run_flags, segments);
	if (l4_len == JG_PLAIN_TCP_LEN)
		return compare_headers(a, b, JG_PLAIN_L2_LEN, l3_len,
				       JG_PLAIN_TCP_LEN, ip_version, run_flags,
				       segments);
	return compare_headers(a, b, JG_PLAIN_L2_LEN, l3_len, l4_len,
			       ip_version, run_flags, segments);
}

/*
 * May a packet whose headers are `later` follow a run whose first headers
 * are `first` and that carries `segments` inputs? Returns the IPv4 ID mode
 * the run then has (JG_RUN_ID_*; 0 for IPv6), or -1.
 *
 * Fields are compared as raw words of the wire bytes, all differences
 * OR-ed together, so a segment that may follow costs no branch per field.
 * The shapes nearly all TCP has get comparisons of their own, made with
 * constant lengths (about 20 fewer instructions a segment); any other
 * takes the same comparison with its own.
 */
static __rte_always_inline int may_follow(const struct header_view *first,
					  uint8_t run_flags, uint16_t segments,
					  const struct header_view *later)
{
	const uint8_t *a = first->frame, *b = later->frame;

	if (first->l2_len != later->l2_len || first->l3_len != later->l3_len ||
	    first->l4_len != later->l4_len ||
	    first->ip_version != later->ip_version)
		return -1;
	/* The plain shapes (internal.h), each with its own comparison. */
	if (first->l2_len == JG_PLAIN_L2_LEN && first->ip_version == 4 &&
	    first->l3_len == JG_PLAIN_IPV4_LEN)
		return compare_plain(a, b, JG_PLAIN_IPV4_LEN, 4, first->l4_len,
				     run_flags, segments);
	if (first->l2_len == JG_PLAIN_L2_LEN && first->ip_version == 6 &&
	    first->l3_len == JG_PLAIN_IPV6_LEN)
		return compare_plain(a, b, JG_PLAIN_IPV6_LEN, 6, first->l4_len,
				     run_flags, segments);
	return compare_headers(a, b, first->l2_len, first->l3_len,
			       first->l4_len, first->ip_version, run_flags,
			       segments);
}

/* ------------------------------------------------------------------ */
/* Building runs                                                      */

/* Remove the headers from the front of a run or segment so its payload
 * can follow another run. A head left empty is freed, and the mark that
 * an input segment starts here moves to the next mbuf. */
static struct rte_mbuf *strip_headers(struct jg_engine *e, struct rte_mbuf *m,
				      uint16_t header_length)
{
	const struct jg_run_meta *meta = jg_meta(e, m);
	uint8_t segment_start = meta->segment_start;
	uint32_t arrival = meta->arrival_ns;
	struct rte_mbuf *rest = jg_mbuf_strip_front(m, header_length);

	/* If the head mbuf went away, its mark moves to the new head. */
	if (rest != m) {
		jg_meta(e, rest)->segment_start = segment_start;
		jg_meta(e, rest)->arrival_ns = arrival;
	}
	return rest;
}

static void add_payload_sum(struct jg_run_meta *run, uint32_t run_payload_now,
			    uint16_t sum)
{
	run->payload_sum =
		jg_csum_add(run->payload_sum,
			    (run_payload_now & 1) ? jg_csum_swap(sum) : sum);
}

/* PSH and FIN end a run; CWR too, since nothing may join a CWR segment
 * (may_follow), so its run leaves at once instead of waiting for nothing. */
static bool ends_run(uint8_t tcp_flags)
{
	return (tcp_flags &
		(JG_TCP_FLAG_PSH | JG_TCP_FLAG_FIN | JG_TCP_FLAG_CWR)) != 0;
}

static void or_end_flags(struct rte_mbuf *head, uint8_t flags)
{
	if (ends_run(flags))
		held_tcp(head)->tcp_flags |=
			flags & (JG_TCP_FLAG_PSH | JG_TCP_FLAG_FIN);
}

static void init_run(struct jg_engine *e, struct rte_mbuf *head,
		     const struct jg_parsed *p, uint32_t seq, uint16_t sum,
		     uint16_t mss, uint8_t flags)
{
	struct jg_run_meta *meta = jg_meta(e, head);

	head->l2_len = p->l2_len;
	head->l3_len = p->l3_len;
	head->l4_len = p->l4_len;
	meta->next_run = NULL;
	meta->last = rte_pktmbuf_lastseg(head);
	meta->seq = seq;
	meta->payload_sum = sum;
	meta->segments = 1;
	meta->mss = mss;
	meta->flags = flags;
	/* The head's headers are those of the segment p describes. A
	 * segment that already fills the internal MTU, or exceeds it (a
	 * 1500-byte IPv6 segment under a 1280-byte internal MTU), takes
	 * nothing more: there is no room to fill to the byte. */
	if (ends_run(p->tcp_flags) ||
	    head->nb_segs >= e->config.max_chain_segments ||
	    run_payload(head) >= run_capacity(e, head))
		meta->flags |= JG_RUN_CLOSED;
}

static void link_run_after(struct jg_engine *e, struct jg_flow *f,
			   struct rte_mbuf *previous, struct rte_mbuf *run)
{
	if (previous == NULL) {
		jg_meta(e, run)->next_run = f->runs;
		f->runs = run;
	} else {
		jg_meta(e, run)->next_run = jg_meta(e, previous)->next_run;
		jg_meta(e, previous)->next_run = run;
	}
	f->run_count++;
}

/*
 * Append a segment to a run. If it does not fit, its first bytes fill the
 * run and the rest becomes a new run linked after it, which is returned;
 * otherwise the run itself is returned.
 */
static struct rte_mbuf *append_segment(struct jg_engine *e, struct jg_flow *f,
				       struct rte_mbuf *run, int id_mode,
				       struct jg_segment *s)
{
	struct jg_run_meta *meta = jg_meta(e, run);
	uint32_t have = run_payload(run), capacity = run_capacity(e, run);
	uint32_t payload = s->p.payload_length;
	uint16_t header_length = jg_header_length(&s->p);
	uint8_t flags = s->p.tcp_flags;

	meta->flags |= (uint8_t)(id_mode | JG_RUN_MODIFIED);
	if (have + payload <= capacity) {
		struct rte_mbuf *payload_chain =
			strip_headers(e, s->m, header_length);

		add_payload_sum(meta, have, s->payload_sum);
		meta->last =
			jg_mbuf_append_chain(run, meta->last, payload_chain);
		meta->segments++;
		or_end_flags(run, flags);
		if (ends_run(flags) || payload < meta->mss ||
		    have + payload == capacity ||
		    run->nb_segs >= e->config.max_chain_segments)
			meta->flags |= JG_RUN_CLOSED;
		return run;
	}

	/* Fill the run to the byte, carry the rest in a new run. */
	uint32_t room = capacity - have;
	struct rte_mbuf *header = jg_mbuf_copy_headers(s->m, header_length,
						       e->config.header_pool);
	struct rte_mbuf *rest = NULL;

	if (header != NULL)
		rest = jg_mbuf_cut_tail(s->m, header_length + room,
					e->config.header_pool);
	if (rest == NULL) {
		/* No mbuf for the split: close the run, start a new one. */
		rte_pktmbuf_free(header);
		meta->flags |= JG_RUN_CLOSED;
		init_run(e, s->m, &s->p, s->seq, s->payload_sum, meta->mss, 0);
		link_run_after(e, f, run, s->m);
		return s->m;
	}

	uint16_t first_sum = 0, rest_sum = 0;

	if (e->config.checksum_mode == JG_CHECKSUM_SOFTWARE) {
		first_sum = jg_csum_mbuf_range(s->m, header_length, room);
		rest_sum = jg_csum_sub(s->payload_sum, first_sum);
		if (room & 1)
			rest_sum = jg_csum_swap(rest_sum);
	}
	/* The first part completes the run; the segment ends elsewhere. */
	jg_meta(e, s->m)->segment_start = 0;
	struct rte_mbuf *first_part = strip_headers(e, s->m, header_length);

	add_payload_sum(meta, have, first_sum);
	meta->last = jg_mbuf_append_chain(run, meta->last, first_part);
	meta->flags |= JG_RUN_CLOSED;

	/* The rest: copied headers, sequence advanced, same flags. */
	struct jg_run_meta *header_meta = jg_meta(e, header);
	struct rte_tcp_hdr *th = rte_pktmbuf_mtod_offset(
		header, struct rte_tcp_hdr *, s->p.l2_len + s->p.l3_len);
	struct jg_parsed rest_parsed = s->p;

	jg_mark_not_segment_start(e, rest);
	jg_mbuf_append_chain(header, header, rest);
	th->sent_seq = rte_cpu_to_be_32(s->seq + room);
	header_meta->segment_start = 1;
	header_meta->arrival_ns = (uint32_t)e->now_ns;
	rest_parsed.payload_length = payload - room;
	init_run(e, header, &rest_parsed, s->seq + room, rest_sum, meta->mss,
		 JG_RUN_MODIFIED);
	/* A short segment still ends the stream of full ones. */
	if (payload < meta->mss)
		jg_meta(e, header)->flags |= JG_RUN_CLOSED;
	link_run_after(e, f, run, header);
	return header;
}

/* Join run `next` onto run `run` when they touch and may merge. */
static void try_join_next(struct jg_engine *e, struct jg_flow *f,
			  struct rte_mbuf *run)
{
	struct jg_run_meta *meta = jg_meta(e, run);
	struct rte_mbuf *next = meta->next_run;
	struct jg_run_meta *next_meta;
	struct header_view first, later;
	uint32_t have;
	int id_mode;

	if (next == NULL || (meta->flags & JG_RUN_CLOSED))
		return;
	next_meta = jg_meta(e, next);
	have = run_payload(run);
	if (run_end(e, run) != next_meta->seq || next_meta->mss > meta->mss ||
	    have + run_payload(next) > run_capacity(e, run) ||
	    run->nb_segs + next->nb_segs > e->config.max_chain_segments)
		return;
	view_of_held(run, &first);
	view_of_held(next, &later);
	id_mode = may_follow(&first, meta->flags, meta->segments, &later);
	if (id_mode < 0)
		return;
	if (next_meta->segments > 1 &&
	    (next_meta->flags & (JG_RUN_ID_FIXED | JG_RUN_ID_INCR)) !=
		    (uint8_t)id_mode)
		return;

	uint8_t next_flags = held_tcp(next)->tcp_flags;
	uint8_t next_run_flags = next_meta->flags;
	uint16_t next_segments = next_meta->segments;
	uint16_t next_sum = next_meta->payload_sum;
	struct rte_mbuf *after = next_meta->next_run;
	struct rte_mbuf *payload_chain =
		strip_headers(e, next, held_header_length(next));

	add_payload_sum(meta, have, next_sum);
	meta->last = jg_mbuf_append_chain(run, meta->last, payload_chain);
	meta->segments = (uint16_t)(meta->segments + next_segments);
	meta->flags |= (uint8_t)(id_mode | JG_RUN_MODIFIED | JG_RUN_JOINED |
				 (next_run_flags & JG_RUN_CLOSED));
	if (have + run_payload(next) == run_capacity(e, run))
		meta->flags |= JG_RUN_CLOSED;
	or_end_flags(run, next_flags);
	meta->next_run = after;
	f->run_count--;
}

/* Whether data ending at `end` reaches the end of what the flow has seen:
 * the end of its last held run, or of what it released. */
static bool reaches_stream_end(struct jg_engine *e, const struct jg_flow *f,
			       uint32_t end)
{
	struct rte_mbuf *last = f->runs;

	if (last == NULL)
		return (f->flags & JG_FLOW_RELEASED_VALID) &&
		       !jg_seq_before(end, f->released_end);
	while (jg_meta(e, last)->next_run != NULL)
		last = jg_meta(e, last)->next_run;
	return !jg_seq_before(end, run_end(e, last));
}

enum jg_insert_result jg_run_insert(struct jg_engine *e, struct jg_flow *f,
				    struct jg_segment *s)
{
	struct rte_mbuf *previous = NULL, *next = f->runs, *run;
	uint32_t end = s->seq + s->p.payload_length, previous_end = 0;
	uint8_t new_run_flags = 0;
	int id_mode = -1;

	/* Most segments continue the flow's only run: no search then, and
	 * only what was released to check against (a run started in a hole
	 * after too many others left may lie before it). */
	if (f->run_count == 1 && s->seq == run_end(e, next) &&
	    !((f->flags & JG_FLOW_RELEASED_VALID) &&
	      jg_seq_before(s->seq, f->released_end))) {
		previous = next;
		previous_end = s->seq;
		next = NULL;
		goto neighbours_known;
	}
	while (next != NULL && !jg_seq_before(s->seq, jg_meta(e, next)->seq)) {
		previous = next;
		next = jg_meta(e, next)->next_run;
	}
	if (previous != NULL)
		previous_end = run_end(e, previous);
	/* Data before what already left is a retransmission (or arrived
	 * after its hole was given up), and data overlapping a held run
	 * repeats bytes: neither joins what is held. */
	if (((f->flags & JG_FLOW_RELEASED_VALID) &&
	     jg_seq_before(s->seq, f->released_end)) ||
	    (previous != NULL && jg_seq_before(s->seq, previous_end)) ||
	    (next != NULL && jg_seq_before(jg_meta(e, next)->seq, end))) {
		/* One that reaches the end of the stream (a spurious
		 * retransmission of the newest segment, or new data that
		 * begins with old bytes) is where the next segment will
		 * follow on. Linux 6.18 flushes what it holds for such a
		 * segment and holds the segment itself (tcp_gro_receive:
		 * the sequence check fails, the flow is flushed, the
		 * segment becomes the new head), so the next one merges
		 * onto it. Passed alone, it cost an extra packet. So: what
		 * the flow holds leaves first (order kept), then the
		 * segment starts a run. Older data still passes alone. */
		if (!reaches_stream_end(e, f, end))
			return JG_OVERLAPS;
		jg_flow_release_all(e, f);
		e->stats.merge.overlap_restarts++;
		previous = next = NULL;
		new_run_flags = JG_RUN_NO_WAIT;
	}

neighbours_known:
	if (previous != NULL && previous_end == s->seq) {
		struct jg_run_meta *meta = jg_meta(e, previous);
		struct header_view first, later;

		view_of_held(previous, &first);
		later.frame = rte_pktmbuf_mtod(s->m, const uint8_t *);
		later.l2_len = s->p.l2_len;
		later.l3_len = s->p.l3_len;
		later.l4_len = s->p.l4_len;
		later.ip_version = s->p.ip_version;
		if (!(meta->flags & JG_RUN_CLOSED) &&
		    s->p.payload_length <= meta->mss &&
		    previous->nb_segs + s->m->nb_segs <=
			    e->config.max_chain_segments)
			id_mode = may_follow(&first, meta->flags,
					     meta->segments, &later);
		if (id_mode < 0)
			meta->flags |= JG_RUN_CLOSED; /* as Linux flushes */
	}

	if (id_mode >= 0) {
		run = append_segment(e, f, previous, id_mode, s);
	} else {
		if (f->run_count >= JG_MAX_RUNS_PER_FLOW) {
			/* Too many holes: give up on them, keep order. */
			jg_flow_release_all(e, f);
			previous = NULL;
		}
		init_run(e, s->m, &s->p, s->seq, s->payload_sum,
			 (uint16_t)s->p.payload_length, new_run_flags);
		link_run_after(e, f, previous, s->m);
		run = s->m;
	}
	try_join_next(e, f, run);
	f->held_segments++;
	e->held_segments++;
	return JG_INSERTED;
}
