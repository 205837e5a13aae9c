/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Emission: a flow's runs leave the engine as packets, through the ready
 * queue that the API calls drain.
 *
 * A run is emitted when it is closed and nothing is missing before it
 * (jg_flow_emit_closed_front, from the join rules), when its flow's
 * deadline passes (jg_timer_expire, jg_timer_release_burst_list), when its
 * flow leaves the table or must keep its order behind a packet that is
 * passed through (jg_flow_release_all), and at a flush. A run that is no
 * longer one untouched input segment gets its lengths and checksums
 * rewritten on the way out.
 *
 * The engine's files call each other in one direction only, each calling
 * only files below it:
 *
 *   engine.c (create, configure, destroy)
 *     -> merge.c (what may merge, the merge API), split.c
 *       -> run.c (the join rules, building runs, a flow's deadline)
 *         -> flow_table.c (flows by key; evicting one emits what it holds)
 *           -> emit.c (runs become packets; expired deadlines)
 *             -> delay.c (the delay model and the timer wheel)
 *
 * with checksum.c, packet.c, mbuf_util.c and pmtu.c as leaves that any of
 * them may call.
 *
 * Emission is below the flow table and above the timer wheel because
 * both callers above need it: the table emits what an evicted flow holds,
 * and the join rules emit closed runs. It needs nothing from either, only
 * the wheel (to unlink a flow it empties) and the checksum and header
 * helpers that every file uses. delay.c decides when a run may leave and
 * keeps the wheel, but releasing the flows whose time has come is
 * emission's: were it in delay.c, the wheel would call up into emission,
 * which calls down into the wheel.
 */
#include <string.h>

#include "internal.h"
#include "run.h"

void jg_ready_push(struct jg_engine *e, struct rte_mbuf *m)
{
	if (e->ready_tail - e->ready_head > e->ready_mask) {
		e->stats.drops[JG_DROP_READY_QUEUE_FULL]++;
		rte_pktmbuf_free(m);
		return;
	}
	e->ready[e->ready_tail++ & e->ready_mask] = m;
}

uint16_t jg_ready_drain(struct jg_engine *e, struct rte_mbuf **out,
			uint16_t out_cap)
{
	uint16_t count = 0;

	while (count < out_cap && e->ready_head != e->ready_tail)
		out[count++] = e->ready[e->ready_head++ & e->ready_mask];
	return count;
}

static bool ready_queue_full(const struct jg_engine *e)
{
	return e->ready_tail - e->ready_head > e->ready_mask;
}

/* Hand a packet that carries `segments` inputs to the ready queue. */
static void release_packet(struct jg_engine *e, struct rte_mbuf *m,
			   uint16_t segments)
{
	struct jg_merge_stats *s = &e->stats.merge;

	if (ready_queue_full(e)) {
		s->dropped += segments;
		e->stats.drops[JG_DROP_READY_QUEUE_FULL]++;
		rte_pktmbuf_free(m);
		return;
	}
	s->segments_out += segments;
	s->packets_out++;
	s->bytes_out += m->pkt_len;
	jg_ready_push(e, m);
}

void jg_pass_through(struct jg_engine *e, struct rte_mbuf *m)
{
	e->stats.merge.passed_through++;
	jg_record_delay(e, 0);
	release_packet(e, m, 1);
}

/* Rewrite lengths and checksums of a run that is no longer one untouched
 * input segment. */
static void finish_headers(struct jg_engine *e, struct rte_mbuf *head)
{
	struct jg_run_meta *meta = jg_meta(e, head);
	struct jg_parsed p;
	uint8_t *l3;
	struct rte_tcp_hdr *th = held_tcp(head);
	uint32_t l4_length;
	uint16_t pseudo;

	held_parsed(head, &p);
	l3 = jg_l3(head, &p);
	l4_length = p.l4_len + p.payload_length;
	jg_set_ip_length(l3, &p, p.payload_length);
	head->ol_flags = 0;
	if (p.ip_version == 4)
		jg_finish_ipv4_header(head, &p, e->config.checksum_mode);
	else if (e->config.checksum_mode == JG_CHECKSUM_OFFLOAD)
		head->ol_flags |= RTE_MBUF_F_TX_IPV6;
	pseudo = jg_csum_pseudo(l3, &p, l4_length);
	if (e->config.checksum_mode == JG_CHECKSUM_OFFLOAD) {
		th->cksum = pseudo;
		head->ol_flags |= RTE_MBUF_F_TX_TCP_CKSUM;
	} else {
		th->cksum = 0;
		th->cksum = jg_csum_finish(pseudo, rte_raw_cksum(th, p.l4_len),
					   meta->payload_sum);
	}
}

static void record_segment_delays(struct jg_engine *e, struct rte_mbuf *head)
{
	uint32_t now = (uint32_t)e->now_ns;

	for (struct rte_mbuf *m = head; m != NULL; m = m->next) {
		const struct jg_run_meta *meta = jg_meta(e, m);

		if (meta->segment_start)
			jg_record_delay(e, (uint32_t)(now - meta->arrival_ns));
	}
}

/* Take the first run of a flow and make it a packet. */
static void emit_first_run(struct jg_engine *e, struct jg_flow *f)
{
	struct rte_mbuf *head = f->runs;
	struct jg_run_meta *meta = jg_meta(e, head);
	uint32_t payload = run_payload(head);
	uint32_t ip_length = head->l3_len + head->l4_len + payload;
	bool full = ip_length >= e->full_packet_ip_length;

	f->runs = meta->next_run;
	f->run_count--;
	if (!(f->flags & JG_FLOW_RELEASED_VALID) ||
	    jg_seq_before(f->released_end, meta->seq + payload)) {
		f->released_end = meta->seq + payload;
		f->flags |= JG_FLOW_RELEASED_VALID;
	}
	f->held_segments = (uint16_t)(f->held_segments - meta->segments);
	e->held_segments -= meta->segments;

	if (meta->flags & JG_RUN_MODIFIED) {
		finish_headers(e, head);
		e->stats.merge.merged_packets++;
	} else {
		e->stats.merge.passed_through++;
	}
	if (full)
		e->stats.merge.tcp_payload_full += payload;
	/* Smoothed share of full packets; a flow that already merges well
	 * has no reason to wait. */
	f->yield_permille =
		(uint16_t)((7u * f->yield_permille + (full ? 1000u : 0u)) / 8u);
	record_segment_delays(e, head);
	release_packet(e, head, meta->segments);
}

void jg_flow_release_all(struct jg_engine *e, struct jg_flow *f)
{
	while (f->runs != NULL)
		emit_first_run(e, f);
	jg_timer_unlink(e, f);
}

/* Release closed runs from the front; runs behind a hole wait for it. */
bool jg_flow_emit_closed_runs(struct jg_engine *e, struct jg_flow *f)
{
	bool emitted = false;

	while (f->runs != NULL &&
	       (jg_meta(e, f->runs)->flags & JG_RUN_CLOSED)) {
		emit_first_run(e, f);
		emitted = true;
	}
	return emitted;
}

/* Deadlines: the flows of a wheel slot, or the burst list, released. */
static void release_flow_list(struct jg_engine *e, uint16_t list,
			      uint32_t now_ns, bool check_deadline)
{
	uint32_t index = *jg_timer_list(e, list);

	while (index != JG_INDEX_NONE) {
		struct jg_flow *f = &e->flows[index];
		uint32_t next = f->timer_next;

		if (!check_deadline ||
		    (int32_t)(f->deadline_ns - now_ns) <= 0) {
			jg_timer_unlink(e, f);
			if (check_deadline)
				e->stats.merge.deadline_flushes++;
			jg_flow_release_all(e, f);
		}
		index = next;
	}
}

void jg_timer_expire(struct jg_engine *e, uint64_t now_ns)
{
	uint64_t now_slot = now_ns >> JG_WHEEL_SLOT_SHIFT;
	uint64_t slot;

	if (e->next_slot == UINT64_MAX || now_slot < e->next_slot) {
		if (e->next_slot == UINT64_MAX)
			e->next_slot = now_slot;
		return;
	}
	/* After a long pause every position is visited once. */
	slot = now_slot - e->next_slot >= JG_WHEEL_SLOTS
		       ? now_slot - JG_WHEEL_SLOTS + 1
		       : e->next_slot;
	for (; (slot = jg_wheel_next_occupied(e, slot, now_slot)) != UINT64_MAX;
	     slot++)
		release_flow_list(e, (uint16_t)(slot % JG_WHEEL_SLOTS),
				  (uint32_t)now_ns, true);
	/* The current slot may hold deadlines later in this slot. */
	e->next_slot = now_slot;
}

void jg_timer_release_burst_list(struct jg_engine *e)
{
	release_flow_list(e, JG_TIMER_BURST, 0, false);
}
