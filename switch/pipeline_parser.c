/* SPDX-License-Identifier: Apache-2.0 */
/*
 * parser JumbogateParser and its sub-parsers (p4src/include/parser.p4),
 * within the header-depth budget.
 */
#include "pipeline_internal.h"

#include <string.h>

/* ENDS_PAST_BUDGET(pm, bytes) */
static bool ends_past_budget(const struct parser *p, uint32_t bytes)
{
	return p->pm->depth + bytes > p->budget;
}

/* packet.extract / lookahead: the bytes must be in the packet. */
static bool available(const struct parser *p, uint32_t bytes)
{
	return p->pm->depth + bytes <= p->length;
}

/* parser EthernetParser */
static enum parser_error ethernet_parser(struct parser *p, int *ethernet)
{
	struct parser_metadata *pm = p->pm;

	pm->next = P4_NEXT_NONE;
	if (ends_past_budget(p, ETH_BYTES)) {
		pm->depth_exceeded = true;
		return PARSER_OK;
	}
	if (!available(p, ETH_BYTES))
		return PARSER_PACKET_TOO_SHORT;
	*ethernet = (int)pm->depth;
	pm->depth += ETH_BYTES;
	pm->next = load16(p->frame + *ethernet + 12);
	return PARSER_OK;
}

/* parser Ipv4Parser */
static enum parser_error ipv4_parser(struct parser *p, int *ipv4,
				     int *header_bytes)
{
	struct parser_metadata *pm = p->pm;
	uint8_t version_ihl;
	uint32_t bytes;

	pm->next = P4_NEXT_NONE;
	if (ends_past_budget(p, V4_BYTES)) {
		pm->depth_exceeded = true;
		return PARSER_OK;
	}
	if (!available(p, 1))
		return PARSER_PACKET_TOO_SHORT;
	version_ihl = p->frame[pm->depth];
	bytes = (uint32_t)(version_ihl & 0x0f) << 2;
	if ((version_ihl & 0xfc) == 0x40 || version_ihl == 0x44) {
		pm->malformed = P4_DROP_IPV4_IHL_INVALID;
		return PARSER_OK;
	}
	if ((version_ihl & 0xf0) != 0x40) {
		pm->malformed = P4_DROP_IP_VERSION_MISMATCH;
		return PARSER_OK;
	}
	if (ends_past_budget(p, bytes)) {
		pm->depth_exceeded = true;
		return PARSER_OK;
	}
	if (!available(p, V4_BYTES))
		return PARSER_PACKET_TOO_SHORT;
	*ipv4 = (int)pm->depth;
	*header_bytes = (int)bytes;
	pm->next = p->frame[*ipv4 + 9];
	/* state later_fragment: past offset 0 no L4 header follows. */
	if ((load16(p->frame + *ipv4 + 6) & 0x1fff) != 0)
		pm->next = P4_NEXT_NONE;
	/* extract_options: the varbit must be in the packet too. */
	if (!available(p, bytes))
		return PARSER_PACKET_TOO_SHORT;
	pm->depth += bytes;
	return PARSER_OK;
}

/* parser Ipv6Parser */
static enum parser_error ipv6_parser(struct parser *p, int *ipv6)
{
	struct parser_metadata *pm = p->pm;

	pm->next = P4_NEXT_NONE;
	if (ends_past_budget(p, V6_BYTES)) {
		pm->depth_exceeded = true;
		return PARSER_OK;
	}
	if (!available(p, 1))
		return PARSER_PACKET_TOO_SHORT;
	if (p->frame[pm->depth] >> 4 != 6) {
		pm->malformed = P4_DROP_IP_VERSION_MISMATCH;
		return PARSER_OK;
	}
	if (!available(p, V6_BYTES))
		return PARSER_PACKET_TOO_SHORT;
	*ipv6 = (int)pm->depth;
	pm->depth += V6_BYTES;
	pm->next = p->frame[*ipv6 + 6];
	return PARSER_OK;
}

/* parser TcpParser */
static enum parser_error tcp_parser(struct parser *p, int *tcp,
				    int *header_bytes)
{
	struct parser_metadata *pm = p->pm;
	uint32_t data_offset;

	pm->next = P4_NEXT_NONE;
	if (ends_past_budget(p, P4_TCP_MIN_BYTES)) {
		pm->depth_exceeded = true;
		return PARSER_OK;
	}
	/* check_data_offset looks ahead 104 bits. */
	if (!available(p, 13))
		return PARSER_PACKET_TOO_SHORT;
	data_offset = p->frame[pm->depth + 12] >> 4;
	if (data_offset <= 4) {
		pm->malformed = P4_DROP_TCP_DATA_OFFSET_INVALID;
		return PARSER_OK;
	}
	if (ends_past_budget(p, data_offset << 2)) {
		pm->depth_exceeded = true;
		return PARSER_OK;
	}
	if (!available(p, data_offset << 2))
		return PARSER_PACKET_TOO_SHORT;
	*tcp = (int)pm->depth;
	*header_bytes = (int)(data_offset << 2);
	pm->depth += data_offset << 2;
	return PARSER_OK;
}

/* parser UdpParser and parser IcmpParser: fixed 8-byte headers. */
static enum parser_error eight_byte_parser(struct parser *p, int *header,
					   bool is_udp)
{
	struct parser_metadata *pm = p->pm;

	pm->next = P4_NEXT_NONE;
	if (ends_past_budget(p, 8)) {
		pm->depth_exceeded = true;
		return PARSER_OK;
	}
	if (!available(p, 8))
		return PARSER_PACKET_TOO_SHORT;
	*header = (int)pm->depth;
	pm->depth += 8;
	if (is_udp)
		pm->next = load16(p->frame + *header + 2);
	return PARSER_OK;
}

/* The state too_deep of JumbogateParser. */
static enum parser_error too_deep(struct parser *p)
{
	p->pm->in_geneve_options = false;
	p->pm->depth_exceeded = true;
	return PARSER_OK;
}

#define TRY(call)                                                              \
	do {                                                                   \
		enum parser_error error_ = (call);                             \
		if (error_ != PARSER_OK)                                       \
			return error_;                                         \
	} while (0)

/* Inner headers of a Geneve frame: parse_inner_ethernet onwards. */
static enum parser_error parse_inner(struct parser *p, struct headers *hdr)
{
	struct parser_metadata *pm = p->pm;

	TRY(ethernet_parser(p, &hdr->inner_ethernet));
	if (pm->next == P4_ETHERTYPE_IPV4)
		TRY(ipv4_parser(p, &hdr->inner_ipv4, &hdr->inner_ipv4_bytes));
	else if (pm->next == P4_ETHERTYPE_IPV6)
		TRY(ipv6_parser(p, &hdr->inner_ipv6));
	else
		return PARSER_OK;
	if (pm->next == P4_IP_PROTO_TCP)
		return tcp_parser(p, &hdr->inner_tcp, &hdr->inner_tcp_bytes);
	if (pm->next == P4_IP_PROTO_UDP)
		return eight_byte_parser(p, &hdr->inner_udp, true);
	return PARSER_OK;
}

/* States parse_geneve .. geneve_options_done of JumbogateParser. */
static enum parser_error parse_geneve(struct parser *p, struct headers *hdr)
{
	struct parser_metadata *pm = p->pm;
	uint32_t words_left;

	if (ends_past_budget(p, P4_GENEVE_BYTES))
		return too_deep(p);
	if (!available(p, P4_GENEVE_BYTES))
		return PARSER_PACKET_TOO_SHORT;
	hdr->geneve = (int)pm->depth;
	pm->depth += P4_GENEVE_BYTES;
	words_left = p->frame[hdr->geneve] & 0x3f;
	pm->in_geneve_options = true;
	while (words_left > 0) {
		if (ends_past_budget(p, P4_GENEVE_WORD_BYTES))
			return too_deep(p);
		if (!available(p, P4_GENEVE_WORD_BYTES))
			return PARSER_PACKET_TOO_SHORT;
		pm->depth += P4_GENEVE_WORD_BYTES;
		words_left--;
	}
	pm->in_geneve_options = false;
	if (load16(p->frame + hdr->geneve + 2) ==
	    P4_ETHERTYPE_TRANSPARENT_BRIDGING)
		return parse_inner(p, hdr);
	return PARSER_OK;
}

/* parser JumbogateParser */
enum parser_error sw_jumbogate_parser(struct parser *p, struct headers *hdr)
{
	struct parser_metadata *pm = p->pm;
	uint32_t ether_type;

	pm->depth = 0;
	pm->depth_exceeded = false;
	pm->malformed = P4_DROP_NONE;
	pm->in_geneve_options = false;
	TRY(ethernet_parser(p, &hdr->ethernet));
	ether_type = pm->next;
	if (ether_type == P4_ETHERTYPE_VLAN) {
		if (ends_past_budget(p, P4_VLAN_BYTES))
			return too_deep(p);
		if (!available(p, P4_VLAN_BYTES))
			return PARSER_PACKET_TOO_SHORT;
		hdr->vlan = (int)pm->depth;
		pm->depth += P4_VLAN_BYTES;
		ether_type = load16(p->frame + hdr->vlan + 2);
	}
	if (ether_type == P4_ETHERTYPE_IPV4) {
		TRY(ipv4_parser(p, &hdr->ipv4, &hdr->ipv4_bytes));
		if (pm->next == P4_IP_PROTO_ICMP)
			return eight_byte_parser(p, &hdr->icmp, false);
	} else if (ether_type == P4_ETHERTYPE_IPV6) {
		TRY(ipv6_parser(p, &hdr->ipv6));
		if (pm->next == P4_IP_PROTO_ICMPV6)
			return eight_byte_parser(p, &hdr->icmp, false);
	} else {
		return PARSER_OK;
	}
	if (pm->next == P4_IP_PROTO_TCP)
		return tcp_parser(p, &hdr->tcp, &hdr->tcp_bytes);
	if (pm->next == P4_IP_PROTO_UDP) {
		TRY(eight_byte_parser(p, &hdr->udp, true));
		if (pm->next == P4_UDP_PORT_GENEVE)
			return parse_geneve(p, hdr);
	}
	return PARSER_OK;
}
