/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Split: software TCP segmentation toward the Internet. Hosts in the rack
 * send segments sized for jumbo frames; each is cut into segments that fit
 * the path MTU of its destination, as TSO would: the first segment keeps
 * CWR, the last keeps PSH and FIN, IPv4 IDs count up from the original.
 * Each segment is a copied header mbuf followed by indirect mbufs that
 * reference the original payload, so payload is not copied.
 *
 * The split path also watches SYNs leaving the rack: the MSS they carry is
 * what the rack-side endpoint agreed to receive, which tells the merge path
 * whether the flow may be merged at all. The other way round, a flow's
 * segments are cut no larger than the MSS its Internet-side endpoint
 * announced, where that is below the path MTU (the merge path raised it on
 * the way in, so the rack host never saw it).
 */
#include <string.h>

#include "internal.h"

/* RFC 9293: an endpoint that sends no MSS option accepts 536 bytes. */
#define DEFAULT_TCP_MSS 536u

/* Flows are keyed by their inbound direction, which the merge path sees:
 * the key of the flow an outbound packet belongs to. */
static void inbound_key_of(const struct rte_mbuf *m, const struct jg_parsed *p,
			   struct jg_flow_key *inbound)
{
	struct jg_flow_key outbound;

	jg_flow_key_from_packet(m, p, &outbound);
	jg_flow_key_reverse(&outbound, inbound);
}

static void learn_internal_mss(struct jg_engine *e, const struct rte_mbuf *m,
			       const struct jg_parsed *p)
{
	struct jg_flow_key inbound;
	struct jg_flow *f;
	uint16_t mss = jg_tcp_mss_option(jg_l4(m, p), p->l4_len);

	inbound_key_of(m, p, &inbound);
	f = jg_flow_find_or_create(e, &inbound);
	if (f == NULL)
		return;
	f->internal_mss = mss != 0 ? mss : DEFAULT_TCP_MSS;
	e->stats.split.mss_learned++;
}

/*
 * The largest IP packet the flow's Internet-side endpoint agreed to
 * receive: the MSS it announced (kept by the merge path when the raise
 * rewrote it) plus the fixed headers, as RFC 6691 counts; 0 where unknown.
 * Never below what an endpoint that announces nothing accepts (536, RFC
 * 9293): a forged SYN announcing a tiny MSS must not make split cut a jumbo
 * packet into hundreds of segments.
 */
static uint16_t peer_limit_of(struct jg_engine *e, const struct rte_mbuf *m,
			      const struct jg_parsed *p)
{
	struct jg_flow_key inbound;
	const struct jg_flow *f;
	uint16_t headers = p->ip_version == 4 ? 40 : 60;

	inbound_key_of(m, p, &inbound);
	f = jg_flow_find(e, &inbound);
	if (f == NULL || f->external_mss == 0)
		return 0;
	return (uint16_t)(RTE_MAX(f->external_mss, DEFAULT_TCP_MSS) + headers);
}

static uint16_t path_mtu_of(const struct jg_engine *e, const struct rte_mbuf *m,
			    const struct jg_parsed *p)
{
	const uint8_t *l3 = jg_l3(m, p);

	if (p->ip_version == 4)
		return jg_pmtu_lookup_v4(
			e, ((const struct rte_ipv4_hdr *)l3)->dst_addr);
	return jg_pmtu_lookup_v6(e,
				 ((const struct rte_ipv6_hdr *)l3)->dst_addr);
}

/* Build one segment carrying payload bytes [offset, offset + length). */
static struct rte_mbuf *build_segment(struct jg_engine *e, struct rte_mbuf *m,
				      const struct jg_parsed *p,
				      uint32_t offset, uint32_t length,
				      uint16_t index, bool last)
{
	uint16_t header_length = jg_header_length(p);
	struct rte_mbuf *segment =
		jg_mbuf_copy_headers(m, header_length, e->config.header_pool);
	struct rte_mbuf *payload;
	struct jg_parsed sp = *p;
	uint8_t *l3;
	struct rte_tcp_hdr *th;
	uint16_t pseudo;

	if (segment == NULL)
		return NULL;
	payload = jg_mbuf_reference_range(m, header_length + offset, length,
					  e->config.header_pool);
	if (payload == NULL) {
		rte_pktmbuf_free(segment);
		return NULL;
	}
	jg_mbuf_append_chain(segment, segment, payload);

	sp.payload_length = length;
	l3 = jg_l3(segment, &sp);
	th = jg_l4(segment, &sp);
	th->sent_seq =
		rte_cpu_to_be_32(rte_be_to_cpu_32(th->sent_seq) + offset);
	if (index > 0)
		th->tcp_flags &= (uint8_t)~JG_TCP_FLAG_CWR;
	if (!last)
		th->tcp_flags &= (uint8_t) ~(JG_TCP_FLAG_PSH | JG_TCP_FLAG_FIN);
	jg_set_ip_length(l3, &sp, length);
	segment->l2_len = sp.l2_len;
	segment->l3_len = sp.l3_len;
	segment->l4_len = sp.l4_len;
	segment->ol_flags = 0;
	if (sp.ip_version == 4) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)l3;

		ip->packet_id = rte_cpu_to_be_16(
			(uint16_t)(rte_be_to_cpu_16(ip->packet_id) + index));
		jg_finish_ipv4_header(segment, &sp, e->config.checksum_mode);
	} else if (e->config.checksum_mode == JG_CHECKSUM_OFFLOAD) {
		segment->ol_flags |= RTE_MBUF_F_TX_IPV6;
	}
	pseudo = jg_csum_pseudo(l3, &sp, sp.l4_len + length);
	if (e->config.checksum_mode == JG_CHECKSUM_OFFLOAD) {
		th->cksum = pseudo;
		segment->ol_flags |= RTE_MBUF_F_TX_TCP_CKSUM;
	} else {
		th->cksum = 0;
		th->cksum = jg_csum_finish(
			pseudo, rte_raw_cksum(th, sp.l4_len),
			jg_csum_mbuf_range(m, header_length + offset, length));
	}
	return segment;
}

static bool splittable(const struct jg_parsed *p)
{
	return p->l4_protocol == IPPROTO_TCP && p->l4_complete &&
	       !p->is_fragment && !p->ipv6_routing && p->payload_length > 0 &&
	       !(p->tcp_flags & (JG_TCP_FLAG_SYN | JG_TCP_FLAG_RST));
}

uint16_t jg_split_burst(struct jg_engine *e, struct rte_mbuf **pkts,
			uint16_t nb_pkts, struct rte_mbuf **out,
			uint16_t out_cap, uint16_t *consumed)
{
	struct jg_split_stats *stats = &e->stats.split;
	uint16_t produced = 0, i;

	for (i = 0; i < nb_pkts; i++) {
		struct rte_mbuf *m = pkts[i];
		struct jg_parsed p;
		uint32_t mss, count;
		bool parsed = jg_parse(m, &p);
		uint16_t mtu = parsed ? path_mtu_of(e, m, &p) : 0;
		bool peer_limited = false;

		if (produced == out_cap)
			break;
		if (parsed && p.l4_protocol == IPPROTO_TCP && p.l4_complete &&
		    (p.tcp_flags & JG_TCP_FLAG_SYN))
			learn_internal_mss(e, m, &p);
		/* Only a packet above the least limit can be over one. */
		if (parsed && splittable(&p) &&
		    p.ip_length > DEFAULT_TCP_MSS + 40u) {
			uint16_t limit = peer_limit_of(e, m, &p);

			if (limit != 0 && limit < mtu) {
				mtu = limit;
				peer_limited = true;
			}
		}
		if (!parsed || p.ip_length <= mtu) {
			stats->packets_in++;
			stats->passed_through++;
			out[produced++] = m;
			continue;
		}
		if (!splittable(&p) || mtu <= p.l3_len + p.l4_len) {
			stats->packets_in++;
			stats->oversize_non_tcp++;
			out[produced++] = m;
			continue;
		}
		mss = mtu - p.l3_len - p.l4_len;
		count = (p.payload_length + mss - 1) / mss;
		if (produced + count > out_cap)
			break;
		stats->packets_in++;
		for (uint32_t k = 0; k < count; k++) {
			uint32_t offset = k * mss;
			struct rte_mbuf *segment = build_segment(
				e, m, &p, offset,
				RTE_MIN(mss, p.payload_length - offset),
				(uint16_t)k, k + 1 == count);

			if (segment == NULL) {
				rte_pktmbuf_free_bulk(&out[produced], k);
				count = 0;
				break;
			}
			out[produced + k] = segment;
		}
		if (count == 0) {
			stats->dropped++;
			e->stats.drops[JG_DROP_NO_MBUF]++;
		} else {
			produced = (uint16_t)(produced + count);
			stats->packets_segmented++;
			stats->segments_out += count;
			stats->peer_mss_limited += peer_limited;
		}
		/* The segments hold references to the payload. */
		rte_pktmbuf_free(m);
	}
	*consumed = i;
	return produced;
}
