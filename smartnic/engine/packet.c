/* SPDX-License-Identifier: Apache-2.0 */
/* Header parsing. Everything the engine decides rests on this, so it
 * trusts nothing: every length is checked against the bytes present. */
#include <stddef.h>
#include <string.h>

#include <rte_ether.h>

#include "internal.h"

#define IPV6_EXT_HOP_BY_HOP  0
#define IPV6_EXT_ROUTING     43
#define IPV6_EXT_FRAGMENT    44
#define IPV6_EXT_DESTINATION 60
#define IPV6_MAX_EXTENSIONS  4

static bool parse_l2(const uint8_t *data, uint32_t available,
		     struct jg_parsed *p, uint16_t *ethertype)
{
	uint16_t offset = sizeof(struct rte_ether_hdr);
	uint16_t type;
	int tags = 0;

	if (available < offset)
		return false;
	type = rte_be_to_cpu_16(
		((const struct rte_ether_hdr *)data)->ether_type);
	while (type == RTE_ETHER_TYPE_VLAN || type == RTE_ETHER_TYPE_QINQ) {
		if (++tags > 2 || available < offset + 4u)
			return false;
		type = rte_be_to_cpu_16(*(const uint16_t *)(data + offset + 2));
		offset += 4;
	}
	p->l2_len = offset;
	*ethertype = type;
	return true;
}

static bool parse_ipv4(const uint8_t *l3, uint32_t available,
		       struct jg_parsed *p)
{
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)l3;
	uint16_t header_length, fragment;

	if (available < sizeof(*ip) || (ip->version_ihl >> 4) != 4)
		return false;
	header_length = (ip->version_ihl & 0xf) * 4;
	if (header_length < sizeof(*ip) || available < header_length)
		return false;
	p->ip_version = 4;
	p->l3_len = header_length;
	p->ip_length = rte_be_to_cpu_16(ip->total_length);
	if (p->ip_length < header_length)
		return false;
	p->ipv4_has_options = header_length != sizeof(*ip);
	fragment = rte_be_to_cpu_16(ip->fragment_offset);
	p->is_fragment = (fragment & (RTE_IPV4_HDR_MF_FLAG |
				      RTE_IPV4_HDR_OFFSET_MASK)) != 0;
	p->fragment_shows_ports =
		p->is_fragment && (fragment & RTE_IPV4_HDR_OFFSET_MASK) == 0;
	p->l4_protocol = ip->next_proto_id;
	return true;
}

bool jg_ipv6_walk(const uint8_t *l3, uint32_t available,
		  struct jg_ipv6_chain *chain)
{
	uint32_t offset = sizeof(struct rte_ipv6_hdr);
	int extensions = 0;
	uint8_t next;

	memset(chain, 0, sizeof(*chain));
	if (available < offset || (l3[0] >> 4) != 6)
		return false;
	next = ((const struct rte_ipv6_hdr *)l3)->proto;
	for (;;) {
		uint32_t length;

		if (next != IPV6_EXT_HOP_BY_HOP && next != IPV6_EXT_ROUTING &&
		    next != IPV6_EXT_DESTINATION && next != IPV6_EXT_FRAGMENT)
			break;
		if (++extensions > IPV6_MAX_EXTENSIONS ||
		    available < offset + 8)
			return false;
		if (next == IPV6_EXT_FRAGMENT) {
			/* Offset in the upper 13 bits of bytes 2-3. */
			uint16_t fragment = (uint16_t)(l3[offset + 2] << 8 |
						       l3[offset + 3]);

			chain->fragment = true;
			chain->first_fragment = (fragment & 0xfff8) == 0;
			length = 8;
		} else {
			if (next == IPV6_EXT_ROUTING)
				chain->routing = true;
			length = (l3[offset + 1] + 1u) * 8;
		}
		next = l3[offset];
		offset += length;
		if (offset > available)
			return false;
	}
	/* The engine's header buffers and l3_len hold at most 511 bytes. */
	if (offset > 511)
		return false;
	chain->protocol = next;
	chain->length = (uint16_t)offset;
	return true;
}

static bool parse_ipv6(const uint8_t *l3, uint32_t available,
		       struct jg_parsed *p)
{
	const struct rte_ipv6_hdr *ip = (const struct rte_ipv6_hdr *)l3;
	struct jg_ipv6_chain chain;

	if (!jg_ipv6_walk(l3, available, &chain))
		return false;
	p->ip_version = 6;
	p->ip_length = sizeof(*ip) + rte_be_to_cpu_16(ip->payload_len);
	if (chain.length > p->ip_length)
		return false;
	p->is_fragment = chain.fragment;
	p->fragment_shows_ports = chain.fragment && chain.first_fragment;
	p->ipv6_routing = chain.routing;
	p->l3_len = chain.length;
	p->l4_protocol = chain.protocol;
	return true;
}

static void parse_l4(const uint8_t *l4, uint32_t available, struct jg_parsed *p)
{
	uint32_t l4_bytes = p->ip_length - p->l3_len;

	p->l4_complete = false;
	p->l4_len = 0;
	p->payload_length = l4_bytes;
	if (p->is_fragment) {
		p->fragment_shows_ports &= available >= 4 && l4_bytes >= 4;
		return;
	}
	if (p->l4_protocol == IPPROTO_TCP) {
		const struct rte_tcp_hdr *th = (const struct rte_tcp_hdr *)l4;
		uint16_t header_length;

		if (available < sizeof(*th) || l4_bytes < sizeof(*th))
			return;
		header_length = (th->data_off >> 4) * 4;
		if (header_length < sizeof(*th) || header_length > available ||
		    header_length > l4_bytes)
			return;
		p->l4_len = header_length;
		p->tcp_flags = th->tcp_flags;
	} else if (p->l4_protocol == IPPROTO_UDP) {
		const struct rte_udp_hdr *uh = (const struct rte_udp_hdr *)l4;

		if (available < sizeof(*uh) || l4_bytes < sizeof(*uh) ||
		    rte_be_to_cpu_16(uh->dgram_len) != l4_bytes)
			return;
		p->l4_len = sizeof(*uh);
	} else {
		return;
	}
	p->payload_length = l4_bytes - p->l4_len;
	p->l4_complete = true;
}

bool jg_parse_general(const struct rte_mbuf *m, struct jg_parsed *p)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t available = rte_pktmbuf_data_len(m);
	uint16_t ethertype;
	bool ok;

	memset(p, 0, sizeof(*p));
	if (!parse_l2(data, available, p, &ethertype))
		return false;
	if (ethertype == RTE_ETHER_TYPE_IPV4)
		ok = parse_ipv4(data + p->l2_len, available - p->l2_len, p);
	else if (ethertype == RTE_ETHER_TYPE_IPV6)
		ok = parse_ipv6(data + p->l2_len, available - p->l2_len, p);
	else
		ok = false;
	/* The IP length may be shorter than the frame (Ethernet padding)
	 * but never longer. */
	if (!ok || p->l2_len + p->ip_length > rte_pktmbuf_pkt_len(m))
		return false;
	parse_l4(data + p->l2_len + p->l3_len,
		 available - p->l2_len - p->l3_len, p);
	return true;
}

#define IPV4_WITHOUT_OPTIONS 0x45 /* version 4, 5 words of header */

/* The TCP header behind a plain IP header of l3_len bytes that says the
 * IP packet is ip_length bytes: p filled, or false. Always inlined, so
 * that each caller's lengths are constants. */
static __rte_always_inline bool
plain_tcp_behind(const struct rte_mbuf *m, struct jg_parsed *p, uint32_t l3_len,
		 uint32_t ip_length, uint8_t ip_version)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_tcp_hdr *th =
		(const void *)(data + JG_PLAIN_L2_LEN + l3_len);
	uint32_t available = rte_pktmbuf_data_len(m);
	uint32_t tcp_length, l4_bytes;

	if (available < JG_PLAIN_L2_LEN + l3_len + JG_PLAIN_TCP_LEN ||
	    ip_length < l3_len + JG_PLAIN_TCP_LEN ||
	    JG_PLAIN_L2_LEN + ip_length > rte_pktmbuf_pkt_len(m))
		return false;
	tcp_length = (th->data_off >> 4) * 4u;
	l4_bytes = ip_length - l3_len;
	if (tcp_length < JG_PLAIN_TCP_LEN ||
	    tcp_length > available - JG_PLAIN_L2_LEN - l3_len ||
	    tcp_length > l4_bytes)
		return false;
	*p = (struct jg_parsed){
		.l2_len = JG_PLAIN_L2_LEN,
		.l3_len = (uint16_t)l3_len,
		.l4_len = (uint16_t)tcp_length,
		.ip_version = ip_version,
		.l4_protocol = IPPROTO_TCP,
		.tcp_flags = th->tcp_flags,
		.l4_complete = true,
		.ip_length = ip_length,
		.payload_length = l4_bytes - tcp_length,
	};
	return true;
}

/*
 * The frame nearly every packet of a TCP transfer is: untagged Ethernet,
 * IPv4 without options and not a fragment, or IPv6 without extension
 * headers, then TCP whose header is all in the first mbuf. Its fields are
 * read straight into p, without the general parse's walk. False for
 * anything else, or anything a check of the general parse would refuse or
 * treat otherwise: that packet takes the general parse, which decides. So
 * both always give the same answer (test_packet_summary compares them on
 * mutated frames).
 */
static bool parse_plain_tcp(const struct rte_mbuf *m, struct jg_parsed *p)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint8_t *l3 = data + JG_PLAIN_L2_LEN;
	uint16_t ethertype;

	if (rte_pktmbuf_data_len(m) < JG_PLAIN_L2_LEN + JG_PLAIN_IPV6_LEN)
		return false;
	ethertype = ((const struct rte_ether_hdr *)data)->ether_type;
	if (ethertype == RTE_BE16(RTE_ETHER_TYPE_IPV4)) {
		const struct rte_ipv4_hdr *ip = (const void *)l3;

		return ip->version_ihl == IPV4_WITHOUT_OPTIONS &&
		       ip->next_proto_id == IPPROTO_TCP &&
		       (ip->fragment_offset &
			RTE_BE16(RTE_IPV4_HDR_MF_FLAG |
				 RTE_IPV4_HDR_OFFSET_MASK)) == 0 &&
		       plain_tcp_behind(m, p, JG_PLAIN_IPV4_LEN,
					rte_be_to_cpu_16(ip->total_length), 4);
	}
	if (ethertype == RTE_BE16(RTE_ETHER_TYPE_IPV6)) {
		const struct rte_ipv6_hdr *ip = (const void *)l3;

		return (l3[0] >> 4) == 6 && ip->proto == IPPROTO_TCP &&
		       plain_tcp_behind(
			       m, p, JG_PLAIN_IPV6_LEN,
			       JG_PLAIN_IPV6_LEN +
				       rte_be_to_cpu_16(ip->payload_len),
			       6);
	}
	return false;
}

bool jg_parse(const struct rte_mbuf *m, struct jg_parsed *p)
{
	return parse_plain_tcp(m, p) || jg_parse_general(m, p);
}

bool jg_packet_summarize(const struct rte_mbuf *m,
			 struct jg_packet_summary *summary)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t l4_offset, l4_present;
	struct jg_flow_key *key = &summary->key;
	struct jg_parsed p;

	memset(summary, 0, sizeof(*summary));
	if (!jg_parse(m, &p))
		return false;
	key->ip_version = p.ip_version;
	if (p.ip_version == 4) {
		const struct rte_ipv4_hdr *ip = (const void *)(data + p.l2_len);

		key->src.v4 = ip->src_addr;
		key->dst.v4 = ip->dst_addr;
	} else {
		const struct rte_ipv6_hdr *ip = (const void *)(data + p.l2_len);

		memcpy(key->src.v6, ip->src_addr, 16);
		memcpy(key->dst.v6, ip->dst_addr, 16);
	}
	/* A later fragment's first bytes are payload, not an L4 header. */
	if (p.is_fragment && !p.fragment_shows_ports)
		return true;
	key->protocol = p.l4_protocol;
	if (p.l4_protocol != IPPROTO_TCP && p.l4_protocol != IPPROTO_UDP)
		return true;
	/* The ports, even where the rest of the L4 header is not there (a
	 * first fragment, a bad TCP data offset): the flow is still known,
	 * and the engine decides what to do with the packet. */
	l4_offset = p.l2_len + p.l3_len;
	l4_present = rte_pktmbuf_data_len(m) - l4_offset;
	if (l4_present < 4 || p.ip_length - p.l3_len < 4)
		return true;
	memcpy(&key->src_port, data + l4_offset, 2);
	memcpy(&key->dst_port, data + l4_offset + 2, 2);
	summary->has_ports = true;
	return true;
}

void jg_flow_key_from_packet(const struct rte_mbuf *m,
			     const struct jg_parsed *p, struct jg_flow_key *key)
{
	const uint8_t *l3 = jg_l3(m, p);
	const uint16_t *ports = jg_l4(m, p);

	memset(key, 0, sizeof(*key));
	key->ip_version = p->ip_version;
	key->protocol = p->l4_protocol;
	key->src_port = ports[0];
	key->dst_port = ports[1];
	if (p->ip_version == 4) {
		const struct rte_ipv4_hdr *ip = (const void *)l3;

		key->src.v4 = ip->src_addr;
		key->dst.v4 = ip->dst_addr;
	} else {
		const struct rte_ipv6_hdr *ip = (const void *)l3;

		memcpy(key->src.v6, ip->src_addr, 16);
		memcpy(key->dst.v6, ip->dst_addr, 16);
	}
}

void jg_flow_key_reverse(const struct jg_flow_key *key,
			 struct jg_flow_key *reversed)
{
	*reversed = *key;
	reversed->src_port = key->dst_port;
	reversed->dst_port = key->src_port;
	reversed->src = key->dst;
	reversed->dst = key->src;
}

uint16_t jg_tcp_mss_option_offset(const struct rte_tcp_hdr *th, uint16_t l4_len)
{
	const uint8_t *start = (const uint8_t *)th;
	const uint8_t *option = (const uint8_t *)(th + 1);
	const uint8_t *end = start + l4_len;

	while (option < end) {
		uint8_t kind = option[0];

		if (kind == 0) /* end of options */
			break;
		if (kind == 1) { /* no-operation */
			option++;
			continue;
		}
		if (option + 2 > end || option[1] < 2 ||
		    option + option[1] > end)
			break;
		if (kind == 2 && option[1] == 4)
			return (uint16_t)(option + 2 - start);
		option += option[1];
	}
	return 0;
}

uint16_t jg_tcp_mss_option(const struct rte_tcp_hdr *th, uint16_t l4_len)
{
	uint16_t offset = jg_tcp_mss_option_offset(th, l4_len);
	const uint8_t *value = (const uint8_t *)th + offset;

	return offset == 0 ? 0 : (uint16_t)(value[0] << 8 | value[1]);
}

void jg_set_ip_length(uint8_t *l3, const struct jg_parsed *p,
		      uint32_t payload_length)
{
	uint32_t l4_length = p->l4_len + payload_length;

	if (p->ip_version == 4) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)l3;

		ip->total_length =
			rte_cpu_to_be_16((uint16_t)(p->l3_len + l4_length));
	} else {
		struct rte_ipv6_hdr *ip = (struct rte_ipv6_hdr *)l3;

		ip->payload_len = rte_cpu_to_be_16(
			(uint16_t)(p->l3_len - sizeof(*ip) + l4_length));
	}
}
