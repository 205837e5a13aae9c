/* SPDX-License-Identifier: Apache-2.0 */
/* Zero-copy surgery on mbuf chains: payload bytes are shared through
 * indirect mbufs, only headers are ever copied. */
#include <string.h>

#include "internal.h"

/* An indirect mbuf that shows bytes [off, off + len) of segment seg. */
static struct rte_mbuf *reference_segment(struct rte_mbuf *seg, uint16_t off,
					  uint16_t len,
					  struct rte_mempool *pool)
{
	struct rte_mbuf *ref = rte_pktmbuf_alloc(pool);

	if (ref == NULL)
		return NULL;
	rte_pktmbuf_attach(ref, seg);
	ref->data_off = (uint16_t)(seg->data_off + off);
	ref->data_len = len;
	ref->pkt_len = len;
	return ref;
}

struct rte_mbuf *jg_mbuf_cut_tail(struct rte_mbuf *pkt, uint32_t offset,
				  struct rte_mempool *pool)
{
	struct rte_mbuf *seg = pkt, *previous = NULL, *tail;
	uint32_t position = 0, tail_length = pkt->pkt_len - offset;
	uint16_t kept_segments = 0;

	if (offset == 0 || offset >= pkt->pkt_len)
		return NULL;
	while (position + seg->data_len <= offset) {
		position += seg->data_len;
		previous = seg;
		seg = seg->next;
		kept_segments++;
	}
	if (offset == position) {
		/* The cut falls between two mbufs: just unlink. */
		previous->next = NULL;
		tail = seg;
		tail->nb_segs = (uint16_t)(pkt->nb_segs - kept_segments);
	} else {
		uint16_t inside = (uint16_t)(offset - position);

		tail = reference_segment(
			seg, inside, (uint16_t)(seg->data_len - inside), pool);
		if (tail == NULL)
			return NULL;
		tail->next = seg->next;
		seg->next = NULL;
		seg->data_len = inside;
		kept_segments++;
		tail->nb_segs = (uint16_t)(pkt->nb_segs - kept_segments + 1);
	}
	tail->pkt_len = tail_length;
	pkt->nb_segs = kept_segments;
	pkt->pkt_len = offset;
	return tail;
}

struct rte_mbuf *jg_mbuf_reference_range(struct rte_mbuf *pkt, uint32_t off,
					 uint32_t len, struct rte_mempool *pool)
{
	struct rte_mbuf *seg = pkt, *head = NULL, *last = NULL;
	uint16_t count = 0;
	uint32_t remaining = len;

	while (seg != NULL && off >= seg->data_len) {
		off -= seg->data_len;
		seg = seg->next;
	}
	while (seg != NULL && remaining > 0) {
		uint16_t take = (uint16_t)RTE_MIN(
			remaining, (uint32_t)seg->data_len - off);
		struct rte_mbuf *ref =
			reference_segment(seg, (uint16_t)off, take, pool);

		if (ref == NULL) {
			rte_pktmbuf_free(head);
			return NULL;
		}
		if (last == NULL)
			head = ref;
		else
			last->next = ref;
		last = ref;
		count++;
		remaining -= take;
		off = 0;
		seg = seg->next;
	}
	if (head == NULL || remaining != 0) {
		rte_pktmbuf_free(head);
		return NULL;
	}
	head->nb_segs = count;
	head->pkt_len = len;
	return head;
}

struct rte_mbuf *jg_mbuf_append_chain(struct rte_mbuf *head,
				      struct rte_mbuf *head_last,
				      struct rte_mbuf *tail)
{
	struct rte_mbuf *tail_last = rte_pktmbuf_lastseg(tail);

	head_last->next = tail;
	head->nb_segs = (uint16_t)(head->nb_segs + tail->nb_segs);
	head->pkt_len += tail->pkt_len;
	/* Only the head of a packet carries these. */
	tail->nb_segs = 1;
	tail->pkt_len = tail->data_len;
	return tail_last;
}

struct rte_mbuf *jg_mbuf_strip_front(struct rte_mbuf *m, uint16_t len)
{
	struct rte_mbuf *rest;

	if (m->data_len > len || m->next == NULL) {
		rte_pktmbuf_adj(m, len);
		return m;
	}
	/* The first mbuf holds only headers (a copied header, or a port
	 * that splits headers from payload). */
	rest = m->next;
	rest->nb_segs = (uint16_t)(m->nb_segs - 1);
	rest->pkt_len = m->pkt_len - m->data_len;
	m->next = NULL;
	m->nb_segs = 1;
	rte_pktmbuf_free_seg(m);
	return rest;
}

struct rte_mbuf *jg_mbuf_copy_headers(const struct rte_mbuf *m,
				      uint16_t header_length,
				      struct rte_mempool *pool)
{
	struct rte_mbuf *copy;
	char *data;

	if (rte_pktmbuf_data_len(m) < header_length)
		return NULL;
	copy = rte_pktmbuf_alloc(pool);
	if (copy == NULL)
		return NULL;
	data = rte_pktmbuf_append(copy, header_length);
	if (data == NULL) {
		rte_pktmbuf_free(copy);
		return NULL;
	}
	memcpy(data, rte_pktmbuf_mtod(m, const void *), header_length);
	copy->port = m->port;
	copy->vlan_tci = m->vlan_tci;
	copy->packet_type = m->packet_type;
	return copy;
}
