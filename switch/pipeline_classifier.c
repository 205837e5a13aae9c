/* SPDX-License-Identifier: Apache-2.0 */
/*
 * p4src/include/classifier.p4: PortRoles, ParseVerdict, FlowClassifier,
 * DepthPolicy.
 */
#include "pipeline_internal.h"

#include "const_tables.h"

#include <string.h>

/* control PortRoles, table port_roles (actions set_port_role,
 * port_role_unassigned) */
void sw_port_roles(const struct sw_tables *tables, uint16_t ingress_port,
		   struct metadata *meta)
{
	meta->port_role = tables->port_role[ingress_port % SW_PORTS];
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

/* -- FlowClassifier (classifier.p4) --
 * Its three constant tables (network_header, signal_policy,
 * transport_header) run from the compile's entries (const_tables.h); the
 * functions below are their actions. The P4 makes the from_* actions from
 * one macro per header kind; here each calls the helper of its kind with
 * its own header. */

static void flow_from_ipv4(struct flow *flow, const uint8_t *ip)
{
	flow->ip_version = 4;
	memset(flow->src_addr, 0, 12);
	memset(flow->dst_addr, 0, 12);
	memcpy(flow->src_addr + 12, ip + 12, 4);
	memcpy(flow->dst_addr + 12, ip + 16, 4);
	flow->protocol = ip[9];
	flow->ip_len = load16(ip + 2);
	flow->dont_fragment = (ip[6] & 0x40) != 0;
}

static void flow_from_ipv6(struct flow *flow, const uint8_t *ip)
{
	flow->ip_version = 6;
	memcpy(flow->src_addr, ip + 8, 16);
	memcpy(flow->dst_addr, ip + 24, 16);
	flow->protocol = ip[6];
	flow->ip_len = (uint16_t)(load16(ip + 4) + V6_BYTES);
	flow->dont_fragment = true; /* IPv6 routers never fragment */
}

static void flow_from_tcp(struct flow *flow, const uint8_t *tcp)
{
	flow->src_port = load16(tcp);
	flow->dst_port = load16(tcp + 2);
	flow->tcp_flags = tcp[13];
	flow->is_tcp = true;
}

static void flow_from_udp(struct flow *flow, const uint8_t *udp)
{
	flow->src_port = load16(udp);
	flow->dst_port = load16(udp + 2);
	flow->is_udp = true;
}

/* action from_ipv4 */
static void from_ipv4(const uint8_t *frame, const struct headers *hdr,
		      struct flow *flow)
{
	flow_from_ipv4(flow, frame + hdr->ipv4);
}

/* action from_inner_ipv4 */
static void from_inner_ipv4(const uint8_t *frame, const struct headers *hdr,
			    struct flow *flow)
{
	flow_from_ipv4(flow, frame + hdr->inner_ipv4);
}

/* action from_ipv6 */
static void from_ipv6(const uint8_t *frame, const struct headers *hdr,
		      struct flow *flow)
{
	flow_from_ipv6(flow, frame + hdr->ipv6);
}

/* action from_inner_ipv6 */
static void from_inner_ipv6(const uint8_t *frame, const struct headers *hdr,
			    struct flow *flow)
{
	flow_from_ipv6(flow, frame + hdr->inner_ipv6);
}

/* action from_tcp */
static void from_tcp(const uint8_t *frame, const struct headers *hdr,
		     struct flow *flow)
{
	flow_from_tcp(flow, frame + hdr->tcp);
}

/* action from_inner_tcp */
static void from_inner_tcp(const uint8_t *frame, const struct headers *hdr,
			   struct flow *flow)
{
	flow_from_tcp(flow, frame + hdr->inner_tcp);
}

/* action from_udp */
static void from_udp(const uint8_t *frame, const struct headers *hdr,
		     struct flow *flow)
{
	flow_from_udp(flow, frame + hdr->udp);
}

/* action from_inner_udp */
static void from_inner_udp(const uint8_t *frame, const struct headers *hdr,
			   struct flow *flow)
{
	flow_from_udp(flow, frame + hdr->inner_udp);
}

/* action allow_signal */
static void allow_signal(struct flow *flow)
{
	flow->signal_allowed = true;
}

/* action refuse_signal */
static void refuse_signal(struct flow *flow)
{
	flow->signal_allowed = false;
}

#define VALID(offset) sw_key((offset) != NONE)

/* table network_header: which IP header the flow is read from */
static void network_header(const uint8_t *frame, const struct headers *hdr,
			   struct flow *flow)
{
	const struct p4_const_key_field
		key[P4_KEYS_FLOW_CLASSIFIER_NETWORK_HEADER] = {
			[P4_KEY_FLOW_CLASSIFIER_NETWORK_HEADER_INNER_IPV4_VALID] =
				VALID(hdr->inner_ipv4),
			[P4_KEY_FLOW_CLASSIFIER_NETWORK_HEADER_INNER_IPV6_VALID] =
				VALID(hdr->inner_ipv6),
			[P4_KEY_FLOW_CLASSIFIER_NETWORK_HEADER_IPV4_VALID] =
				VALID(hdr->ipv4),
			[P4_KEY_FLOW_CLASSIFIER_NETWORK_HEADER_IPV6_VALID] =
				VALID(hdr->ipv6),
		};

	switch (p4_apply_flow_classifier_network_header(key)->action) {
	case P4_CONST_ACTION_FROM_INNER_IPV4:
		from_inner_ipv4(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_FROM_INNER_IPV6:
		from_inner_ipv6(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_FROM_IPV4:
		from_ipv4(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_FROM_IPV6:
		from_ipv6(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_NO_ACTION:
	default:
		break;
	}
}

/* table signal_policy: whether an ICMP error may be sent about the packet
 * (RFC 1812 4.3.2.7) */
static void signal_policy(const uint8_t *frame, const struct headers *hdr,
			  struct flow *flow)
{
	/* An invalid header's field reads as 0, as in BMv2; no entry looks
	 * at icmp_type without icmp_valid. */
	const struct p4_const_key_field
		key[P4_KEYS_FLOW_CLASSIFIER_SIGNAL_POLICY] = {
			[P4_KEY_FLOW_CLASSIFIER_SIGNAL_POLICY_ICMP_VALID] =
				VALID(hdr->icmp),
			[P4_KEY_FLOW_CLASSIFIER_SIGNAL_POLICY_IPV4_VALID] =
				VALID(hdr->ipv4),
			[P4_KEY_FLOW_CLASSIFIER_SIGNAL_POLICY_ICMP_TYPE] =
				sw_key(hdr->icmp != NONE ? frame[hdr->icmp]
							 : 0),
			[P4_KEY_FLOW_CLASSIFIER_SIGNAL_POLICY_IP_VERSION] =
				sw_key(flow->ip_version),
			[P4_KEY_FLOW_CLASSIFIER_SIGNAL_POLICY_SRC_ADDR] =
				sw_key128(flow->src_addr),
		};

	switch (p4_apply_flow_classifier_signal_policy(key)->action) {
	case P4_CONST_ACTION_ALLOW_SIGNAL:
		allow_signal(flow);
		break;
	case P4_CONST_ACTION_REFUSE_SIGNAL:
	default:
		refuse_signal(flow);
		break;
	}
}

/* table transport_header: which TCP or UDP header the ports come from */
static void transport_header(const uint8_t *frame, const struct headers *hdr,
			     struct flow *flow)
{
	const struct p4_const_key_field
		key[P4_KEYS_FLOW_CLASSIFIER_TRANSPORT_HEADER] = {
			[P4_KEY_FLOW_CLASSIFIER_TRANSPORT_HEADER_INNER_IPV4_VALID] =
				VALID(hdr->inner_ipv4),
			[P4_KEY_FLOW_CLASSIFIER_TRANSPORT_HEADER_INNER_IPV6_VALID] =
				VALID(hdr->inner_ipv6),
			[P4_KEY_FLOW_CLASSIFIER_TRANSPORT_HEADER_INNER_TCP_VALID] =
				VALID(hdr->inner_tcp),
			[P4_KEY_FLOW_CLASSIFIER_TRANSPORT_HEADER_INNER_UDP_VALID] =
				VALID(hdr->inner_udp),
			[P4_KEY_FLOW_CLASSIFIER_TRANSPORT_HEADER_TCP_VALID] =
				VALID(hdr->tcp),
			[P4_KEY_FLOW_CLASSIFIER_TRANSPORT_HEADER_UDP_VALID] =
				VALID(hdr->udp),
		};

	switch (p4_apply_flow_classifier_transport_header(key)->action) {
	case P4_CONST_ACTION_FROM_INNER_TCP:
		from_inner_tcp(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_FROM_INNER_UDP:
		from_inner_udp(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_FROM_TCP:
		from_tcp(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_FROM_UDP:
		from_udp(frame, hdr, flow);
		break;
	case P4_CONST_ACTION_NO_ACTION:
	default:
		break;
	}
}

/* control FlowClassifier */
void sw_flow_classifier(const uint8_t *frame, const struct headers *hdr,
			struct metadata *meta)
{
	struct flow *flow = &meta->flow;

	flow->is_tcp = false;
	flow->is_udp = false;
	flow->later_fragment = false;
	flow->dont_fragment = false;
	meta->is_geneve = hdr->geneve != NONE;
	network_header(frame, hdr, flow);
	signal_policy(frame, hdr, flow);
	transport_header(frame, hdr, flow);
	/* frag_offset != 0 */
	if (hdr->inner_ipv4 == NONE && hdr->inner_ipv6 == NONE &&
	    hdr->tcp == NONE && hdr->udp == NONE && hdr->ipv4 != NONE &&
	    (load16(frame + hdr->ipv4 + 6) & 0x1fff) != 0)
		flow->later_fragment = true;
}

/* control DepthPolicy, table depth_policy */
void sw_depth_policy(const struct sw_tables *tables, struct metadata *meta)
{
	if (tables->depth_forward)
		meta->forward_on_outer = true;
	else
		meta->drop_reason = P4_DROP_PARSE_DEPTH_EXCEEDED;
}
