/* SPDX-License-Identifier: Apache-2.0 */
/*
 * p4src/include/classifier.p4: FlowClassifier, ParseVerdict, DepthPolicy
 * (PortRoles, one lookup, is in pipeline.c).
 */
#include "pipeline_internal.h"

#include <string.h>

/* -- FlowClassifier (classifier.p4) -- */

static void from_ipv4(struct flow *flow, const uint8_t *ip)
{
	flow->ip_version = 4;
	memset(flow->src_addr, 0, 12);
	memset(flow->dst_addr, 0, 12);
	memcpy(flow->src_addr + 12, ip + 12, 4);
	memcpy(flow->dst_addr + 12, ip + 16, 4);
	flow->protocol = ip[9];
	flow->ip_len = load16(ip + 2);
	flow->dont_fragment = (ip[6] & 0x40) != 0;
	/* 0.0.0.0, 224.0.0.0/4 and above (multicast, reserved, broadcast). */
	flow->signal_allowed =
		(ip[12] | ip[13] | ip[14] | ip[15]) != 0 && (ip[12] >> 4) < 0xe;
}

static void from_ipv6(struct flow *flow, const uint8_t *ip)
{
	flow->ip_version = 6;
	memcpy(flow->src_addr, ip + 8, 16);
	memcpy(flow->dst_addr, ip + 24, 16);
	flow->protocol = ip[6];
	flow->ip_len = (uint16_t)(load16(ip + 4) + V6_BYTES);
	flow->dont_fragment = true; /* IPv6 routers never fragment */
	/* :: and ff00::/8 (multicast). */
	static const uint8_t unspecified[16];
	flow->signal_allowed =
		memcmp(ip + 8, unspecified, 16) != 0 && ip[8] != 0xff;
}

static void from_ports(struct flow *flow, const uint8_t *l4)
{
	flow->src_port = load16(l4);
	flow->dst_port = load16(l4 + 2);
}

void sw_flow_classifier(const uint8_t *frame, const struct headers *hdr,
			struct metadata *meta)
{
	struct flow *flow = &meta->flow;
	bool inner_ip = hdr->inner_ipv4 != NONE || hdr->inner_ipv6 != NONE;

	flow->is_tcp = false;
	flow->later_fragment = false;
	flow->signal_allowed = false;
	meta->is_geneve = hdr->geneve != NONE;
	if (hdr->inner_ipv4 != NONE)
		from_ipv4(flow, frame + hdr->inner_ipv4);
	else if (hdr->inner_ipv6 != NONE)
		from_ipv6(flow, frame + hdr->inner_ipv6);
	else if (hdr->ipv4 != NONE)
		from_ipv4(flow, frame + hdr->ipv4);
	else if (hdr->ipv6 != NONE)
		from_ipv6(flow, frame + hdr->ipv6);
	int tcp = inner_ip ? hdr->inner_tcp : hdr->tcp;
	int udp = inner_ip ? hdr->inner_udp : hdr->udp;
	if (tcp != NONE) {
		from_ports(flow, frame + tcp);
		flow->tcp_flags = frame[tcp + 13];
		flow->is_tcp = true;
	} else if (udp != NONE) {
		from_ports(flow, frame + udp);
	} else if (hdr->ipv4 != NONE) {
		/* frag_offset != 0 */
		flow->later_fragment =
			(load16(frame + hdr->ipv4 + 6) & 0x1fff) != 0;
	}
	/* ICMP errors: IPv4 types 3, 4, 5, 11, 12; ICMPv6 types below 128. */
	if (hdr->icmp != NONE) {
		uint8_t type = frame[hdr->icmp];

		if (hdr->ipv4 != NONE ? type == 3 || type == 4 || type == 5 ||
						type == 11 || type == 12
				      : type < 128)
			flow->signal_allowed = false;
	}
}

/* control ParseVerdict */
void sw_parse_verdict(const uint8_t *frame, uint32_t frame_bytes,
		      const struct headers *hdr, struct metadata *meta,
		      enum parser_error error)
{
	uint32_t l2_bytes = hdr->vlan != NONE ? 18 : 14;

	if (error == PARSER_PACKET_TOO_SHORT)
		meta->drop_reason = meta->parsing.in_geneve_options
					    ? P4_DROP_GENEVE_OPTIONS_PAST_PACKET
					    : P4_DROP_TRUNCATED;
	else if (meta->parsing.malformed != P4_DROP_NONE)
		meta->drop_reason = meta->parsing.malformed;
	else if (hdr->ipv4 != NONE &&
		 l2_bytes + load16(frame + hdr->ipv4 + 2) > frame_bytes)
		meta->drop_reason = P4_DROP_IP_LENGTH_PAST_FRAME;
	else if (hdr->ipv6 != NONE &&
		 l2_bytes + V6_BYTES + load16(frame + hdr->ipv6 + 4) >
			 frame_bytes)
		meta->drop_reason = P4_DROP_IP_LENGTH_PAST_FRAME;
	else if (hdr->ipv4 == NONE && hdr->ipv6 == NONE &&
		 !meta->parsing.depth_exceeded)
		meta->drop_reason = P4_DROP_NOT_IP;
}

/* control DepthPolicy, table depth_policy */
void sw_depth_policy(const struct sw_tables *tables, struct metadata *meta)
{
	if (tables->depth_forward)
		meta->forward_on_outer = true;
	else
		meta->drop_reason = P4_DROP_PARSE_DEPTH_EXCEEDED;
}
