/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A held run: the head mbuf of a chain that is already one packet (the
 * headers of its first segment, then the payload of every segment in it),
 * its header lengths in the mbuf's offload fields. Read by the join rules
 * (run.c) and by emission (emit.c); run.c's entry points, for merge.c, are
 * at the end.
 */
#ifndef JUMBOGATE_RUN_H
#define JUMBOGATE_RUN_H

#include <string.h>

#include "internal.h"

/* Header lengths of a held packet live in the mbuf's offload fields. */
static inline uint16_t held_header_length(const struct rte_mbuf *m)
{
	return (uint16_t)(m->l2_len + m->l3_len + m->l4_len);
}

static inline uint32_t run_payload(const struct rte_mbuf *head)
{
	return head->pkt_len - held_header_length(head);
}

static inline uint32_t run_end(const struct jg_engine *e, struct rte_mbuf *head)
{
	return jg_meta(e, head)->seq + run_payload(head);
}

static inline uint32_t run_capacity(const struct jg_engine *e,
				    const struct rte_mbuf *head)
{
	return e->config.internal_mtu - head->l3_len - head->l4_len;
}

static inline void held_parsed(const struct rte_mbuf *head, struct jg_parsed *p)
{
	const uint8_t *l3 =
		rte_pktmbuf_mtod_offset(head, const uint8_t *, head->l2_len);

	memset(p, 0, sizeof(*p));
	p->l2_len = head->l2_len;
	p->l3_len = head->l3_len;
	p->l4_len = head->l4_len;
	p->ip_version = l3[0] >> 4;
	p->l4_protocol = IPPROTO_TCP;
	p->payload_length = run_payload(head);
}

static inline struct rte_tcp_hdr *held_tcp(const struct rte_mbuf *head)
{
	return rte_pktmbuf_mtod_offset(head, struct rte_tcp_hdr *,
				       head->l2_len + head->l3_len);
}

/* An input segment on its way into a run. */
struct jg_segment {
	struct rte_mbuf *m;
	struct jg_parsed p;
	uint32_t seq;
	uint16_t payload_sum;
};

enum jg_insert_result {
	JG_INSERTED,
	JG_OVERLAPS, /* pass the segment through */
};

/* Every mbuf from m on continues an input segment that began earlier. */
static inline void jg_mark_not_segment_start(struct jg_engine *e,
					     struct rte_mbuf *m)
{
	for (; m != NULL; m = m->next)
		jg_meta(e, m)->segment_start = 0;
}

/* run.c: put a segment into its flow's runs, joining what it touches;
 * JG_OVERLAPS when it repeats held or released data and must pass. */
enum jg_insert_result jg_run_insert(struct jg_engine *e, struct jg_flow *f,
				    struct jg_segment *s);
/* Set the flow's deadline from its held runs (none: off the wheel). */
void jg_flow_schedule(struct jg_engine *e, struct jg_flow *f);

#endif /* JUMBOGATE_RUN_H */
