/* SPDX-License-Identifier: Apache-2.0 */
/* Path MTU discovery: packets on the wire (pathmtu_internal.h). */
#include "pathmtu_internal.h"

#include <string.h>

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_random.h>
#include <rte_udp.h>

/* ------------------------------------------------------------------ */
/* Packets                                                              */

bool pmtu_parse(const struct rte_mbuf *m, struct parsed *p, bool whole)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t present = rte_pktmbuf_data_len(m);
	/* Where the whole packet must be: the first segment, or (headers
	 * only wanted) anywhere in the chain. */
	uint32_t held = whole ? present : rte_pktmbuf_pkt_len(m);
	uint16_t ether_type;
	uint32_t offset = RTE_ETHER_HDR_LEN;

	memset(p, 0, sizeof(*p));
	if (present < RTE_ETHER_HDR_LEN)
		return false;
	memcpy(&ether_type, data + 12, 2);
	for (int tags = 0;
	     tags < 2 && (ether_type == RTE_BE16(RTE_ETHER_TYPE_VLAN) ||
			  ether_type == RTE_BE16(RTE_ETHER_TYPE_QINQ));
	     tags++) {
		if (present < offset + RTE_VLAN_HLEN)
			return false;
		memcpy(&ether_type, data + offset + 2, 2);
		offset += RTE_VLAN_HLEN;
	}
	p->l2_len = (uint16_t)offset;
	if (ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV4)) {
		const struct rte_ipv4_hdr *ip;
		uint16_t fragment;

		if (present < offset + sizeof(*ip))
			return false;
		ip = (const struct rte_ipv4_hdr *)(data + offset);
		p->version = 4;
		p->l3_len = (uint16_t)((ip->version_ihl & 0xf) * 4);
		p->ip_len = rte_be_to_cpu_16(ip->total_length);
		if ((ip->version_ihl >> 4) != 4 || p->l3_len < sizeof(*ip) ||
		    p->ip_len < p->l3_len || held < offset + p->ip_len)
			return false;
		fragment = rte_be_to_cpu_16(ip->fragment_offset);
		p->more_fragments = (fragment & RTE_IPV4_HDR_MF_FLAG) != 0;
		p->fragment_offset =
			(uint32_t)(fragment & RTE_IPV4_HDR_OFFSET_MASK) * 8;
		p->fragment = p->more_fragments || p->fragment_offset != 0;
		p->ip_id = rte_be_to_cpu_16(ip->packet_id);
		p->protocol = ip->next_proto_id;
		memcpy(p->src, &ip->src_addr, 4);
		memcpy(p->dst, &ip->dst_addr, 4);
	} else if (ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV6)) {
		const struct rte_ipv6_hdr *ip;

		if (present < offset + sizeof(*ip))
			return false;
		ip = (const struct rte_ipv6_hdr *)(data + offset);
		p->version = 6;
		p->l3_len = sizeof(*ip);
		p->ip_len = sizeof(*ip) + rte_be_to_cpu_16(ip->payload_len);
		/* Probes and replies carry no extension headers. */
		p->protocol = ip->proto;
		if (held < offset + p->ip_len)
			return false;
		memcpy(p->src, ip->src_addr, 16);
		memcpy(p->dst, ip->dst_addr, 16);
	} else {
		return false;
	}
	p->l4_offset = offset + p->l3_len;
	p->l4_len = p->ip_len - p->l3_len;
	return true;
}

/* The message of a whole datagram or a first fragment between two of our
 * ports: NOT_OURS when it is someone else's UDP, OURS_MALFORMED when it
 * carries our magic but is too short to hold the header. */
enum message_read pmtu_read_message(const struct nic_pathmtu *pm,
				    const struct rte_mbuf *m,
				    const struct parsed *p,
				    struct pmtu_message *message,
				    uint16_t *udp_len)
{
	struct rte_udp_hdr udp;
	rte_be32_t magic;

	if (p->protocol != IPPROTO_UDP ||
	    p->l4_len < sizeof(udp) + sizeof(magic))
		return NOT_OURS;
	memcpy(&udp, rte_pktmbuf_mtod_offset(m, void *, p->l4_offset),
	       sizeof(udp));
	memcpy(&magic,
	       rte_pktmbuf_mtod_offset(m, void *, p->l4_offset + sizeof(udp)),
	       sizeof(magic));
	if (udp.dst_port != pm->port_be || udp.src_port != pm->port_be ||
	    magic != RTE_BE32(PMTU_MAGIC))
		return NOT_OURS;
	if (p->l4_len < sizeof(udp) + MESSAGE_LEN)
		return OURS_MALFORMED;
	memcpy(message,
	       rte_pktmbuf_mtod_offset(m, void *, p->l4_offset + sizeof(udp)),
	       MESSAGE_LEN);
	*udp_len = rte_be_to_cpu_16(udp.dgram_len);
	return OURS;
}

/* A packet of ip_len bytes with l2 in front, from src to dst, carrying
 * message and then sizes (or zeros up to ip_len). */
struct rte_mbuf *pmtu_build(struct nic_pathmtu *pm, const uint8_t *l2,
			    uint8_t l2_len, uint8_t version, const uint8_t *src,
			    const uint8_t *dst, uint32_t ip_len,
			    bool dont_fragment,
			    const struct pmtu_message *message,
			    const uint16_t *sizes, uint8_t count)
{
	uint32_t l3_len = version == 4 ? sizeof(struct rte_ipv4_hdr)
				       : sizeof(struct rte_ipv6_hdr);
	struct rte_mbuf *m = rte_pktmbuf_alloc(pm->pool);
	struct rte_udp_hdr *udp;
	uint8_t *data, *payload;

	if (m == NULL) {
		COUNT(pm, buffers_exhausted);
		return NULL;
	}
	data = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(l2_len + ip_len));
	if (data == NULL) {
		rte_pktmbuf_free(m);
		COUNT(pm, buffers_exhausted);
		return NULL;
	}
	memset(data, 0, l2_len + ip_len);
	memcpy(data, l2, l2_len);
	udp = (struct rte_udp_hdr *)(data + l2_len + l3_len);
	udp->src_port = pm->port_be;
	udp->dst_port = pm->port_be;
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(ip_len - l3_len));
	payload = (uint8_t *)(udp + 1);
	memcpy(payload, message, MESSAGE_LEN);
	for (uint8_t i = 0; i < count; i++) {
		rte_be16_t size = rte_cpu_to_be_16(sizes[i]);

		memcpy(payload + MESSAGE_LEN + 2 * i, &size, 2);
	}
	if (version == 4) {
		struct rte_ipv4_hdr *ip =
			(struct rte_ipv4_hdr *)(data + l2_len);

		ip->version_ihl = RTE_IPV4_VHL_DEF;
		ip->total_length = rte_cpu_to_be_16((uint16_t)ip_len);
		ip->packet_id = rte_cpu_to_be_16((uint16_t)rte_rand());
		ip->fragment_offset =
			dont_fragment ? RTE_BE16(RTE_IPV4_HDR_DF_FLAG) : 0;
		ip->time_to_live = 64;
		ip->next_proto_id = IPPROTO_UDP;
		memcpy(&ip->src_addr, src, 4);
		memcpy(&ip->dst_addr, dst, 4);
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	} else {
		struct rte_ipv6_hdr *ip =
			(struct rte_ipv6_hdr *)(data + l2_len);

		ip->vtc_flow = RTE_BE32(6u << 28);
		ip->payload_len = rte_cpu_to_be_16((uint16_t)(ip_len - l3_len));
		ip->proto = IPPROTO_UDP;
		ip->hop_limits = 64;
		memcpy(ip->src_addr, src, 16);
		memcpy(ip->dst_addr, dst, 16);
		udp->dgram_cksum = rte_ipv6_udptcp_cksum(ip, udp);
	}
	return m;
}

unsigned int pmtu_hello_size(uint8_t version)
{
	return version == 4 ? HELLO_SIZE_V4 : HELLO_SIZE_V6;
}
