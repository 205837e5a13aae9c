/* SPDX-License-Identifier: Apache-2.0 */
/*
 * p4src/v1model/jumbogate.p4 and the controls of p4src/include/, in C.
 * Read side by side with the P4 source: every function says which parser,
 * control or table it is, and keeps its order of decisions.
 */
#include "pipeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_hash_crc.h>

/* Bytes a header of the given kind occupies; shorthand for the P4 names. */
#define ETH_BYTES P4_ETHERNET_BYTES
#define V4_BYTES  P4_IPV4_MIN_BYTES
#define V6_BYTES  P4_IPV6_BYTES
#define NONE	  (-1)
/* v1model's drop port: mark_to_drop() sets egress_spec to it. */
#define DROP_PORT 511

static uint16_t load16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void store16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void store32(uint8_t *p, uint32_t v)
{
	store16(p, (uint16_t)(v >> 16));
	store16(p + 2, (uint16_t)v);
}

/* -- headers_t and parser_metadata_t (headers.p4) -- */

/* Offsets of valid headers in the frame, NONE when invalid. */
struct headers {
	int ethernet, vlan;
	int ipv4, ipv4_bytes, ipv6;
	int tcp, tcp_bytes, udp, icmp;
	int geneve;
	int inner_ethernet;
	int inner_ipv4, inner_ipv4_bytes, inner_ipv6;
	int inner_tcp, inner_tcp_bytes, inner_udp;
};

enum parser_error { PARSER_OK, PARSER_PACKET_TOO_SHORT };

struct parser_metadata {
	uint32_t depth; /* also the parser's cursor: every byte is extracted */
	bool depth_exceeded;
	uint8_t malformed;
	bool in_geneve_options;
	uint32_t next;
};

struct parser {
	const uint8_t *frame;
	uint32_t length;
	uint32_t budget;
	struct parser_metadata *pm;
};

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
static enum parser_error jumbogate_parser(struct parser *p, struct headers *hdr)
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

/* -- local_metadata_t -- */

struct flow {
	uint8_t ip_version;
	uint8_t src_addr[16]; /* flow_addr_t: IPv4 zero-extended */
	uint8_t dst_addr[16];
	uint8_t protocol;
	uint16_t src_port, dst_port;
	uint16_t ip_len;
	bool dont_fragment;
	uint8_t tcp_flags;
	bool is_tcp;
	bool later_fragment;
	bool signal_allowed;
};

struct metadata {
	struct parser_metadata parsing;
	struct flow flow;
	uint8_t port_role;
	uint8_t drop_reason;
	bool is_geneve;
	bool forward_on_outer;
	bool fleet_jumbo;
	bool instance_known;
	uint16_t instance_mtu;
	uint16_t path_mtu;
	bool merge_eligible;
	uint8_t steer_reason;
	uint16_t nic_port;
	bool nic_port_set;
	bool is_path_probe;
	uint32_t next_hop_group;
	bool routed;
	uint32_t elephant_threshold;
	/* The resubmit field list (FIELD_LIST_ICMP_SIGNAL). */
	uint8_t signal_kind;
	uint16_t signal_reply_port;
	uint16_t signal_mtu;
	uint8_t signal_reply_to[16];
	uint8_t signal_reply_from[16];
};

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

static void flow_classifier(const uint8_t *frame, const struct headers *hdr,
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
static void parse_verdict(const uint8_t *frame, uint32_t frame_bytes,
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
static void depth_policy(const struct sw_tables *tables, struct metadata *meta)
{
	if (tables->depth_forward)
		meta->forward_on_outer = true;
	else
		meta->drop_reason = P4_DROP_PARSE_DEPTH_EXCEEDED;
}

/* control JumboPolicy (jumbo_policy.p4) */
static void jumbo_policy(const struct sw_tables *tables, struct metadata *meta)
{
	const struct flow *flow = &meta->flow;
	const uint8_t *instance;
	bool instance_jumbo = false;
	uint64_t value;

	meta->instance_known = false;
	meta->fleet_jumbo = tables->fleet_jumbo; /* table fleet_policy */
	meta->path_mtu = 0xffff;
	/* The instance is the destination of inbound traffic and the source
	 * of outbound traffic. Back from the SmartNIC a packet is inbound
	 * when its destination is an instance, else outbound. */
	instance = meta->port_role == P4_PORT_ROLE_EXTERNAL ||
				   meta->port_role == P4_PORT_ROLE_NIC
			   ? flow->dst_addr
			   : flow->src_addr;
	if (flow->ip_version == 4 || flow->ip_version == 6) {
		/* tables instances_v4 / instances_v6 */
		const struct sw_hash *table = flow->ip_version == 4
						      ? &tables->instances_v4
						      : &tables->instances_v6;
		const struct sw_hash_slot *slot = sw_hash_find(
			table,
			flow->ip_version == 4 ? instance + 12 : instance);
		if (slot != NULL) {
			meta->instance_known = true;
			instance_jumbo = slot->value != 0;
		}
	}
	meta->instance_mtu = meta->fleet_jumbo && instance_jumbo
				     ? tables->guest_jumbo_mtu
				     : tables->default_mtu;
	meta->merge_eligible =
		flow->is_tcp && meta->fleet_jumbo && instance_jumbo;
	if (meta->port_role != P4_PORT_ROLE_INTERNAL &&
	    !(meta->port_role == P4_PORT_ROLE_NIC && !meta->instance_known))
		return;
	/* tables path_mtu_v4 / path_mtu_v6 */
	if (flow->ip_version == 4)
		meta->path_mtu = sw_lpm_lookup(&tables->path_mtu_v4,
					       flow->dst_addr + 12, &value)
					 ? (uint16_t)value
					 : tables->path_mtu_default_v4;
	else if (flow->ip_version == 6)
		meta->path_mtu = sw_lpm_lookup(&tables->path_mtu_v6,
					       flow->dst_addr, &value)
					 ? (uint16_t)value
					 : tables->path_mtu_default_v6;
}

/* -- meters ------------------------------------------------------------------
 */

#define TOKEN_SCALE 1000000ull /* tokens are counted in 1e-6 packets */

void sw_meter_set(struct sw_meter *meter, uint64_t cir, uint64_t cburst,
		  uint64_t pir, uint64_t pburst, uint64_t now_ns)
{
	while (__atomic_test_and_set(&meter->lock, __ATOMIC_ACQUIRE))
		;
	meter->configured = cir || cburst || pir || pburst;
	meter->cir = cir;
	meter->cburst = cburst;
	meter->pir = pir;
	meter->pburst = pburst;
	/* Buckets start full, as BMv2's do. */
	meter->committed_tokens = cburst * TOKEN_SCALE;
	meter->peak_tokens = pburst * TOKEN_SCALE;
	meter->last_ns = now_ns;
	__atomic_clear(&meter->lock, __ATOMIC_RELEASE);
}

static uint64_t refill(uint64_t tokens, uint64_t rate, uint64_t burst,
		       uint64_t elapsed_ns)
{
	/* rate packets/s = rate * 1e6 tokens per 1e9 ns. */
	uint64_t added = elapsed_ns > 1000000000000ull
				 ? burst * TOKEN_SCALE
				 : rate * elapsed_ns / 1000;
	uint64_t full = burst * TOKEN_SCALE;

	return tokens + added > full ? full : tokens + added;
}

/* RFC 2698 two-rate three-color marking, colour-blind, one packet. */
enum sw_color sw_meter_execute(struct sw_meter *meter, uint64_t now_ns)
{
	enum sw_color color;
	uint64_t elapsed;

	if (!meter->configured)
		return SW_GREEN;
	while (__atomic_test_and_set(&meter->lock, __ATOMIC_ACQUIRE))
		;
	elapsed = now_ns > meter->last_ns ? now_ns - meter->last_ns : 0;
	meter->last_ns = now_ns > meter->last_ns ? now_ns : meter->last_ns;
	meter->committed_tokens = refill(meter->committed_tokens, meter->cir,
					 meter->cburst, elapsed);
	meter->peak_tokens =
		refill(meter->peak_tokens, meter->pir, meter->pburst, elapsed);
	if (meter->peak_tokens < TOKEN_SCALE) {
		color = SW_RED;
	} else if (meter->committed_tokens < TOKEN_SCALE) {
		meter->peak_tokens -= TOKEN_SCALE;
		color = SW_YELLOW;
	} else {
		meter->peak_tokens -= TOKEN_SCALE;
		meter->committed_tokens -= TOKEN_SCALE;
		color = SW_GREEN;
	}
	__atomic_clear(&meter->lock, __ATOMIC_RELEASE);
	return color;
}

/* control MtuEnforcement (icmp_signal.p4) */
static void mtu_enforcement(struct sw_pipeline *pipeline, uint16_t ingress_port,
			    struct metadata *meta, uint64_t now_ns)
{
	const struct flow *flow = &meta->flow;
	uint16_t limit = meta->instance_mtu;

	if (meta->port_role == P4_PORT_ROLE_INTERNAL &&
	    meta->path_mtu < limit && !(flow->is_tcp && meta->nic_port_set))
		limit = meta->path_mtu;
	/* Outbound back from the SmartNIC: nothing more will split it. */
	if (meta->port_role == P4_PORT_ROLE_NIC && !meta->instance_known)
		limit = meta->path_mtu;
	if (flow->ip_len <= limit)
		return;
	if (!flow->dont_fragment) {
		meta->drop_reason = P4_DROP_MTU_EXCEEDED_NO_DF;
		return;
	}
	if (meta->is_geneve || !flow->signal_allowed) {
		meta->drop_reason = P4_DROP_MTU_EXCEEDED_NO_SIGNAL;
		return;
	}
	/* icmp_source_meter, by the source's /24 or /48, then the port's. */
	uint8_t prefix[16];
	enum sw_color color;

	memcpy(prefix, flow->src_addr, 16);
	if (flow->ip_version == 4)
		prefix[15] = 0;
	else
		memset(prefix + 6, 0, 10);
	color = sw_meter_execute(
		&pipeline->icmp_source_meter[sw_crc16(prefix, 16) %
					     P4_ICMP_SOURCE_METER_SIZE],
		now_ns);
	if (color != SW_RED)
		color = sw_meter_execute(
			&pipeline->icmp_signal_meter[ingress_port %
						     P4_ICMP_METER_SIZE],
			now_ns);
	if (color == SW_RED) {
		meta->drop_reason = P4_DROP_ICMP_RATE_LIMITED;
		return;
	}
	meta->drop_reason = P4_DROP_MTU_EXCEEDED;
	meta->signal_kind = flow->ip_version == 4
				    ? P4_SIGNAL_IPV4_FRAG_NEEDED
				    : P4_SIGNAL_IPV6_PACKET_TOO_BIG;
	meta->signal_reply_port = ingress_port;
	meta->signal_mtu = limit;
	memcpy(meta->signal_reply_to, flow->src_addr, 16);
	memcpy(meta->signal_reply_from, flow->dst_addr, 16);
}

/* -- PathProbes (steering.p4) ------------------------------------------------
 */

static void path_probes(struct metadata *meta)
{
	const struct flow *flow = &meta->flow;
	bool probe_port = flow->protocol == P4_IP_PROTO_UDP &&
			  flow->dst_port == P4_PMTU_PROBE_PORT;

	meta->is_path_probe = false;
	if (!meta->nic_port_set)
		return;
	if (meta->port_role == P4_PORT_ROLE_EXTERNAL) {
		meta->is_path_probe = flow->later_fragment || probe_port;
		if (meta->is_path_probe)
			meta->steer_reason = P4_STEER_PATH_PROBE;
	} else if (meta->port_role == P4_PORT_ROLE_NIC) {
		meta->is_path_probe =
			probe_port && flow->src_port == P4_PMTU_PROBE_PORT;
	}
}

/* -- Steering (steering.p4) ---------------------------------------------------
 */

static void flow_key(const struct flow *flow, uint8_t key[SW_KEY_MAX])
{
	memset(key, 0, SW_KEY_MAX);
	key[0] = flow->ip_version;
	memcpy(key + 1, flow->src_addr, 16);
	memcpy(key + 17, flow->dst_addr, 16);
	key[33] = flow->protocol;
	store16(key + 34, flow->src_port);
	store16(key + 36, flow->dst_port);
}

/* control Steering */
static void steering(const struct sw_tables *tables, struct metadata *meta,
		     uint64_t now_ns)
{
	const struct flow *flow = &meta->flow;
	uint8_t key[SW_KEY_MAX];
	struct sw_hash_slot *slot;

	meta->steer_reason = P4_STEER_NONE;
	if (!meta->nic_port_set || !flow->is_tcp)
		return;
	if (meta->port_role == P4_PORT_ROLE_INTERNAL &&
	    flow->ip_len > meta->path_mtu) {
		meta->steer_reason = P4_STEER_OUTBOUND_SPLIT;
		return;
	}
	if (!meta->merge_eligible)
		return;
	/* table merge_flows; a hit refreshes the entry's idle timer. */
	flow_key(flow, key);
	slot = sw_hash_find(&tables->merge_flows, key);
	if (slot != NULL) {
		sw_slot_hit(slot, now_ns);
		meta->steer_reason = P4_STEER_MERGE_FLOW;
		return;
	}
	/* table merge_services, from outside only */
	if (meta->port_role == P4_PORT_ROLE_EXTERNAL &&
	    sw_ternary_lookup(&tables->merge_services, flow->ip_version,
			      flow->dst_addr, flow->dst_port) != NULL) {
		meta->steer_reason = P4_STEER_MERGE_SERVICE;
		return;
	}
	if (flow->tcp_flags & P4_TCP_FLAG_SYN)
		meta->steer_reason = P4_STEER_HANDSHAKE;
}

/* -- hashes -------------------------------------------------------------------
 */

/* BMv2's crc16 (CRC-16/ARC: reflected polynomial 0x8005, init 0) and
 * crc32 (the IEEE 802.3 CRC), a byte at a time from tables: the elephant
 * detector hashes every bypassed packet five times, and a bit-at-a-time
 * loop made that the pipeline's largest cost. */
static uint16_t crc16_table[256];
static uint32_t crc32_table[256];

static void init_crc_tables(void)
{
	for (uint32_t byte = 0; byte < 256; byte++) {
		uint16_t c16 = (uint16_t)byte;
		uint32_t c32 = byte;

		for (int bit = 0; bit < 8; bit++) {
			c16 = (c16 & 1) ? (uint16_t)((c16 >> 1) ^ 0xa001)
					: (uint16_t)(c16 >> 1);
			c32 = (c32 & 1) ? (c32 >> 1) ^ 0xedb88320 : c32 >> 1;
		}
		crc16_table[byte] = c16;
		crc32_table[byte] = c32;
	}
}

uint16_t sw_crc16(const uint8_t *data, uint32_t length)
{
	uint16_t crc = 0;

	for (uint32_t i = 0; i < length; i++)
		crc = (uint16_t)((crc >> 8) ^
				 crc16_table[(crc ^ data[i]) & 0xff]);
	return crc;
}

uint32_t sw_crc32(const uint8_t *data, uint32_t length)
{
	uint32_t crc = 0xffffffff;

	for (uint32_t i = 0; i < length; i++)
		crc = (crc >> 8) ^ crc32_table[(crc ^ data[i]) & 0xff];
	return ~crc;
}

/* FLOW_HASH_FIELDS(salt, flow) of flow_hash.p4, as an index below `size`. BMv2
 * runs CRC32 over the bit-packed field list; here the same fields, byte
 * aligned, go through the CPU's CRC32-C seeded with the salt (a few
 * instructions instead of a table walk per byte, and this runs five times
 * for every bypassed packet). The sketch's rows and the Bloom filter only
 * need independent hashes, so the cells differ from BMv2's and nothing
 * else does: no test or behaviour depends on which cell a flow lands in. */
static uint32_t flow_hash(const uint8_t fields[SW_KEY_MAX], uint8_t salt,
			  uint32_t size)
{
	return sw_crc32c(fields, SW_FLOW_KEY_LEN, salt * 0x9e3779b9u) % size;
}

/* -- ElephantDetector (elephant.p4) -------------------------------------------
 */

/* action count_flow (control FlowSketch, v1model/sketch.p4) */
static uint32_t count_flow(struct sw_sketch *sketch, uint32_t wire_bytes,
			   const uint8_t fields[SW_KEY_MAX], uint16_t epoch)
{
	static const uint8_t salts[3] = {P4_SALT_ROW0, P4_SALT_ROW1,
					 P4_SALT_ROW2};
	uint32_t estimate = UINT32_MAX;

	for (int row = 0; row < 3; row++) {
		uint32_t index =
			flow_hash(fields, salts[row], P4_SKETCH_COLUMNS);
		uint32_t count = __atomic_load_n(&sketch->row_bytes[row][index],
						 __ATOMIC_RELAXED);
		uint16_t stamp = __atomic_load_n(&sketch->row_epoch[row][index],
						 __ATOMIC_RELAXED);

		/* A counter stamped with an older epoch starts from zero. */
		count = (stamp == epoch ? count : 0) + wire_bytes;
		__atomic_store_n(&sketch->row_bytes[row][index], count,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&sketch->row_epoch[row][index], epoch,
				 __ATOMIC_RELAXED);
		estimate = count < estimate ? count : estimate;
	}
	return estimate;
}

/* action mark_reported (control ReportedFilter, v1model/sketch.p4) */
static bool mark_reported(struct sw_sketch *sketch,
			  const uint8_t fields[SW_KEY_MAX], uint16_t epoch)
{
	uint32_t bloom0 = flow_hash(fields, P4_SALT_BLOOM0, P4_BLOOM_BITS);
	uint32_t bloom1 = flow_hash(fields, P4_SALT_BLOOM1, P4_BLOOM_BITS);
	uint16_t seen0 = __atomic_exchange_n(&sketch->bloom_epoch[bloom0],
					     epoch, __ATOMIC_RELAXED);
	uint16_t seen1 = __atomic_exchange_n(&sketch->bloom_epoch[bloom1],
					     epoch, __ATOMIC_RELAXED);

	return seen0 != epoch || seen1 != epoch;
}

/* control ElephantDetector */
static void elephant_detector(struct sw_pipeline *pipeline, unsigned int worker,
			      struct metadata *meta, uint64_t now_ns,
			      uint32_t wire_bytes)
{
	const struct flow *flow = &meta->flow;
	uint64_t now_us = (now_ns - pipeline->start_ns) / 1000;
	struct sw_elephant_digest digest;
	uint8_t fields[SW_KEY_MAX];
	uint32_t estimate;
	uint16_t epoch;

	meta->elephant_threshold = pipeline->tables.elephant_threshold;
	if (meta->elephant_threshold == 0)
		return;
	/* The top bit is always set so that a never-written cell (stamp 0)
	 * never looks current. */
	epoch = (uint16_t)((now_us >> P4_ELEPHANT_EPOCH_LOG2_US) | 0x8000);
	flow_key(flow, fields);
	/* The frame as received, never the length the packet claims. */
	estimate = count_flow(&pipeline->sketch, wire_bytes, fields, epoch);
	if (estimate < meta->elephant_threshold ||
	    !mark_reported(&pipeline->sketch, fields, epoch))
		return;
	digest.ip_version = flow->ip_version;
	memcpy(digest.src_addr, flow->src_addr, 16);
	memcpy(digest.dst_addr, flow->dst_addr, 16);
	digest.protocol = flow->protocol;
	digest.src_port = flow->src_port;
	digest.dst_port = flow->dst_port;
	digest.estimated_bytes = estimate;
	if (pipeline->digest_sink == NULL ||
	    !pipeline->digest_sink(pipeline->digest_context, &digest))
		pipeline->internal[worker].digests_lost++;
}

/* -- Routing (routing.p4) ---------------------------------------------------
 */

/* The selector key of next_hops: meta.flow's src_addr, dst_addr,
 * protocol, src_port, dst_port (37 bytes, all byte-aligned). */
static uint16_t selector_hash(const struct flow *flow)
{
	uint8_t key[37];

	memcpy(key, flow->src_addr, 16);
	memcpy(key + 16, flow->dst_addr, 16);
	key[32] = flow->protocol;
	store16(key + 33, flow->src_port);
	store16(key + 35, flow->dst_port);
	return sw_crc16(key, sizeof(key));
}

/* action decrement_ipv4_ttl: RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'). */
static void decrement_ipv4_ttl(uint8_t *ip)
{
	uint16_t old_word = load16(ip + 8);
	uint16_t new_word;
	uint32_t sum;

	ip[8]--;
	new_word = load16(ip + 8);
	sum = (uint32_t)(uint16_t)~load16(ip + 10) + (uint16_t)~old_word +
	      new_word;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	store16(ip + 10, (uint16_t)~sum);
}

/* control Routing; returns the egress port. */
static int routing(const struct sw_tables *tables, uint8_t *frame,
		   const struct headers *hdr, struct metadata *meta)
{
	const struct sw_hop_set *hops;
	const struct sw_next_hop *hop;
	uint64_t group;

	meta->routed = false;
	if (hdr->ipv4 != NONE) {
		if (frame[hdr->ipv4 + 8] <= 1) {
			meta->drop_reason = P4_DROP_TTL_EXPIRED;
			return -1;
		}
		meta->routed = sw_lpm_lookup(&tables->routes_v4,
					     frame + hdr->ipv4 + 16, &group);
	} else if (hdr->ipv6 != NONE) {
		if (frame[hdr->ipv6 + 7] <= 1) {
			meta->drop_reason = P4_DROP_HOP_LIMIT_EXPIRED;
			return -1;
		}
		meta->routed = sw_lpm_lookup(&tables->routes_v6,
					     frame + hdr->ipv6 + 24, &group);
	}
	/* table next_hops with ecmp_selector; a group without an entry, or an
	 * empty group, is a miss. */
	hops = meta->routed ? tables->next_hops[group & 0xffff] : NULL;
	if (hops == NULL || hops->count == 0) {
		meta->drop_reason = P4_DROP_NO_ROUTE;
		return -1;
	}
	meta->next_hop_group = (uint32_t)group;
	hop = &hops->hops[hops->count == 1
				  ? 0
				  : selector_hash(&meta->flow) % hops->count];
	/* action set_next_hop */
	memcpy(frame + hdr->ethernet, hop->dst_mac, 6);
	memcpy(frame + hdr->ethernet + 6, hop->src_mac, 6);
	if (hdr->ipv4 != NONE)
		decrement_ipv4_ttl(frame + hdr->ipv4);
	else
		frame[hdr->ipv6 + 7]--;
	return hop->port;
}

/* -- counters (counters.p4)
 * ---------------------------------------------------- */

static void count(struct sw_packets_bytes *cell, uint32_t bytes)
{
	/* Only the owning worker writes; readers load without a lock. */
	__atomic_store_n(&cell->packets, cell->packets + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&cell->bytes, cell->bytes + bytes, __ATOMIC_RELAXED);
}

/* control IngressCounters (the first pass) */
static void ingress_counters(struct sw_counters *counters,
			     uint16_t ingress_port, const struct metadata *meta,
			     uint32_t bytes)
{
	count(&counters->port_rx[ingress_port % P4_PORT_COUNTER_SIZE], bytes);
	if (meta->drop_reason != P4_DROP_NONE)
		count(&counters->drop_reasons[meta->drop_reason], bytes);
	else if (meta->port_role == P4_PORT_ROLE_NIC)
		count(&counters->paths[P4_PATH_NIC_RETURN], bytes);
	else if (meta->forward_on_outer)
		count(&counters->paths[P4_PATH_DEPTH_FORWARDED], bytes);
	else if (meta->steer_reason != P4_STEER_NONE)
		count(&counters->paths[P4_PATH_MERGE], bytes);
	else
		count(&counters->paths[P4_PATH_BYPASS], bytes);
}

/* -- SignalBuilder (v1model/signal.p4) and the checksum stage
 * ------------------------ */

static uint32_t sum16(uint32_t sum, const uint8_t *data, uint32_t length)
{
	uint32_t i;

	for (i = 0; i + 1 < length; i += 2)
		sum += load16(data + i);
	if (i < length)
		sum += (uint32_t)data[i] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * The resubmitted pass of V1ModelIngress: BMv2 parses the original frame
 * again (parse_signal_ethernet: Ethernet, a VLAN tag, then the quote as one
 * header chosen by the EtherType), SignalBuilder writes the ICMP error in
 * front of the quote, and truncate() cuts the rest. Here the same happens
 * in place. Returns the new frame length, or 0 when the frame is shorter
 * than its quote (its IP header claimed more than arrived).
 */
static uint32_t signal_builder(const struct sw_tables *tables, uint8_t *frame,
			       uint32_t length, const struct metadata *meta)
{
	uint32_t l2 = ETH_BYTES;
	uint16_t ether_type = load16(frame + 12);
	uint8_t mac[6];
	uint8_t *ip, *icmp;
	uint32_t quote, ip_bytes;
	bool v4;

	if (ether_type == P4_ETHERTYPE_VLAN) {
		ether_type = load16(frame + 16);
		l2 += P4_VLAN_BYTES;
	}
	v4 = ether_type == P4_ETHERTYPE_IPV4;
	quote = v4 ? P4_ICMPV4_QUOTE_BYTES : P4_ICMPV6_QUOTE_BYTES;
	ip_bytes = v4 ? V4_BYTES : V6_BYTES;
	if (length < l2 + quote)
		return 0;
	memmove(frame + l2 + ip_bytes + P4_ICMP_BYTES, frame + l2, quote);
	memcpy(mac, frame, 6);
	memcpy(frame, frame + 6, 6);
	memcpy(frame + 6, mac, 6);
	ip = frame + l2;
	icmp = ip + ip_bytes;
	/* table signal_source */
	if (v4) {
		memset(ip, 0, V4_BYTES);
		ip[0] = 0x45;
		store16(ip + 2, (uint16_t)(V4_BYTES + P4_ICMP_BYTES + quote));
		ip[8] = P4_SIGNAL_TTL;
		ip[9] = P4_IP_PROTO_ICMP;
		if (tables->signal.configured)
			memcpy(ip + 12, tables->signal.ipv4, 4);
		else
			memcpy(ip + 12, meta->signal_reply_from + 12, 4);
		memcpy(ip + 16, meta->signal_reply_to + 12, 4);
		store16(ip + 10, fold(sum16(0, ip, V4_BYTES)));
		icmp[0] = P4_ICMPV4_TYPE_DEST_UNREACHABLE;
		icmp[1] = P4_ICMPV4_CODE_FRAGMENTATION_NEEDED;
	} else {
		memset(ip, 0, V6_BYTES);
		ip[0] = 0x60;
		store16(ip + 4, (uint16_t)(P4_ICMP_BYTES + quote));
		ip[6] = P4_IP_PROTO_ICMPV6;
		ip[7] = P4_SIGNAL_TTL;
		if (tables->signal.configured)
			memcpy(ip + 8, tables->signal.ipv6, 16);
		else
			memcpy(ip + 8, meta->signal_reply_from, 16);
		memcpy(ip + 24, meta->signal_reply_to, 16);
		icmp[0] = P4_ICMPV6_TYPE_PACKET_TOO_BIG;
		icmp[1] = 0;
	}
	store16(icmp + 2, 0);
	store32(icmp + 4, meta->signal_mtu);
	/* V1ModelComputeChecksum: ICMP over its header and the quote; ICMPv6
	 * with the IPv6 pseudo-header (RFC 8200 8.1). */
	uint32_t sum = sum16(0, icmp, P4_ICMP_BYTES + quote);
	if (!v4) {
		sum = sum16(sum, ip + 8, 32);
		sum += P4_ICMP_BYTES + quote;
		sum += P4_IP_PROTO_ICMPV6;
	}
	store16(icmp + 2, fold(sum));
	return l2 + ip_bytes + P4_ICMP_BYTES + quote;
}

/* -- V1ModelIngress and V1ModelEgress
 * ---------------------------------------------- */

int sw_pipeline_run(struct sw_pipeline *pipeline, unsigned int worker,
		    uint8_t *frame, uint32_t *length, uint16_t ingress_port,
		    uint64_t now_ns)
{
	const struct sw_tables *tables = &pipeline->tables;
	struct sw_counters *counters = &pipeline->counters[worker];
	struct headers hdr;
	struct metadata meta;
	struct parser parser = {frame, *length, pipeline->parse_depth_bytes,
				&meta.parsing};
	enum parser_error error;
	int egress = -1;

	memset(&meta, 0, sizeof(meta));
	memset(&hdr, 0xff, sizeof(hdr)); /* every header invalid (NONE) */
	error = jumbogate_parser(&parser, &hdr);
	meta.drop_reason = P4_DROP_NONE;
	meta.signal_kind = P4_SIGNAL_NONE;
	meta.steer_reason = P4_STEER_NONE;

	/* control PortRoles, table port_roles */
	meta.port_role = tables->port_role[ingress_port % SW_PORTS];
	if (meta.port_role == P4_PORT_ROLE_UNASSIGNED)
		meta.drop_reason = P4_DROP_PORT_ROLE_UNASSIGNED;
	else
		parse_verdict(frame, *length, &hdr, &meta, error);
	if (meta.drop_reason == P4_DROP_NONE) {
		flow_classifier(frame, &hdr, &meta);
		if (meta.parsing.depth_exceeded)
			depth_policy(tables, &meta);
	}
	/* Policy for fully parsed traffic from outside, from the rack and
	 * back from the SmartNIC (held to the same MTUs, so nothing leaves
	 * oversize without a signal); steering only for the first two:
	 * packets back from the SmartNIC (or the CPU) are never steered
	 * again. */
	if (meta.drop_reason == P4_DROP_NONE && !meta.forward_on_outer &&
	    (meta.port_role == P4_PORT_ROLE_EXTERNAL ||
	     meta.port_role == P4_PORT_ROLE_INTERNAL ||
	     meta.port_role == P4_PORT_ROLE_NIC)) {
		/* control NicPort, table nic_port */
		meta.nic_port_set = tables->nic_port >= 0;
		meta.nic_port =
			meta.nic_port_set ? (uint16_t)tables->nic_port : 0;
		path_probes(&meta);
		if (!meta.is_path_probe) {
			jumbo_policy(tables, &meta);
			mtu_enforcement(pipeline, ingress_port, &meta, now_ns);
		}
		if (meta.drop_reason == P4_DROP_NONE &&
		    meta.port_role != P4_PORT_ROLE_NIC && !meta.is_path_probe) {
			steering(tables, &meta, now_ns);
			if (meta.steer_reason == P4_STEER_NONE &&
			    meta.merge_eligible)
				elephant_detector(pipeline, worker, &meta,
						  now_ns, *length);
		}
	}
	if (meta.drop_reason == P4_DROP_NONE) {
		if (meta.steer_reason != P4_STEER_NONE)
			egress = meta.nic_port;
		else
			egress = routing(tables, frame, &hdr, &meta);
	}
	ingress_counters(counters, ingress_port, &meta, *length);

	if (meta.signal_kind != P4_SIGNAL_NONE) {
		/* The original is dropped; its resubmitted copy becomes the
		 * ICMP error, counted at its original length as BMv2 does. */
		uint32_t original = *length;
		uint32_t signal_length =
			signal_builder(tables, frame, *length, &meta);

		if (signal_length == 0)
			return -1;
		count(&counters->icmp_signals
			       [meta.signal_kind == P4_SIGNAL_IPV4_FRAG_NEEDED
					? P4_ICMP_COUNTER_IPV4_FRAG_NEEDED
					: P4_ICMP_COUNTER_IPV6_PACKET_TOO_BIG],
		      original);
		*length = signal_length;
		egress = meta.signal_reply_port;
	} else if (meta.drop_reason != P4_DROP_NONE || egress == DROP_PORT) {
		return -1;
	}
	/* control EgressCounters */
	count(&counters->port_tx[egress % P4_PORT_COUNTER_SIZE], *length);
	return egress;
}

/* -- set-up
 * ------------------------------------------------------------------------ */

static void free_hop_sets(struct sw_tables *tables)
{
	for (size_t i = 0; i < RTE_DIM(tables->next_hops); i++) {
		free(tables->next_hops[i]);
		tables->next_hops[i] = NULL;
	}
}

void sw_tables_reset(struct sw_pipeline *pipeline)
{
	struct sw_tables *tables = &pipeline->tables;

	memset(tables->port_role, P4_PORT_ROLE_UNASSIGNED,
	       sizeof(tables->port_role));
	tables->depth_forward = false;
	tables->fleet_jumbo = false;
	tables->guest_jumbo_mtu = P4_MTU_JUMBO;
	tables->default_mtu = P4_MTU_STANDARD;
	tables->nic_port = -1;
	tables->elephant_threshold = 0;
	memset(&tables->signal, 0, sizeof(tables->signal));
	sw_hash_clear(&tables->instances_v4);
	sw_hash_clear(&tables->instances_v6);
	sw_lpm_clear(&tables->path_mtu_v4);
	sw_lpm_clear(&tables->path_mtu_v6);
	tables->path_mtu_default_v4 = P4_MTU_STANDARD;
	tables->path_mtu_default_v6 = P4_MTU_IPV6_MINIMUM;
	sw_hash_clear(&tables->merge_flows);
	sw_ternary_set(&tables->merge_services, NULL, 0);
	sw_lpm_clear(&tables->routes_v4);
	sw_lpm_clear(&tables->routes_v6);
	free_hop_sets(tables);
	for (int i = 0; i < P4_ICMP_METER_SIZE; i++)
		sw_meter_set(&pipeline->icmp_signal_meter[i], 0, 0, 0, 0, 0);
	for (int i = 0; i < P4_ICMP_SOURCE_METER_SIZE; i++)
		sw_meter_set(&pipeline->icmp_source_meter[i], 0, 0, 0, 0, 0);
}

int sw_pipeline_init(struct sw_pipeline *pipeline, uint32_t parse_depth,
		     uint16_t cpu_port, uint64_t now_ns)
{
	struct sw_tables *tables = &pipeline->tables;
	uint32_t seed = sw_random_seed();
	int result = 0;

	init_crc_tables();
	memset(pipeline, 0, sizeof(*pipeline));
	pipeline->parse_depth_bytes = parse_depth;
	pipeline->cpu_port = cpu_port;
	pipeline->start_ns = now_ns;
	/* Table sizes are the P4 program's (size = ...). */
	result |= sw_hash_init(&tables->instances_v4, 4, 16384, seed);
	result |= sw_hash_init(&tables->instances_v6, 16, 16384, seed);
	result |= sw_lpm_init(&tables->path_mtu_v4, 4, 1024, seed);
	result |= sw_lpm_init(&tables->path_mtu_v6, 16, 1024, seed);
	result |= sw_hash_init(&tables->merge_flows, SW_FLOW_KEY_LEN, 16384,
			       seed);
	result |= sw_ternary_init(&tables->merge_services, 1024);
	result |= sw_lpm_init(&tables->routes_v4, 4, 4096, seed);
	result |= sw_lpm_init(&tables->routes_v6, 16, 4096, seed);
	if (result != 0) {
		sw_pipeline_free(pipeline);
		return -ENOMEM;
	}
	sw_tables_reset(pipeline);
	return 0;
}

void sw_pipeline_free(struct sw_pipeline *pipeline)
{
	struct sw_tables *tables = &pipeline->tables;

	sw_hash_free(&tables->instances_v4);
	sw_hash_free(&tables->instances_v6);
	sw_lpm_free(&tables->path_mtu_v4);
	sw_lpm_free(&tables->path_mtu_v6);
	sw_hash_free(&tables->merge_flows);
	sw_ternary_free(&tables->merge_services);
	sw_lpm_free(&tables->routes_v4);
	sw_lpm_free(&tables->routes_v6);
	free_hop_sets(tables);
}

/* -- counter access for the server
 * ---------------------------------------------------- */

static struct sw_packets_bytes *counter_cell(struct sw_counters *counters,
					     enum sw_counter_id counter,
					     uint32_t index)
{
	switch (counter) {
	case SW_COUNTER_PORT_RX:
		return &counters->port_rx[index];
	case SW_COUNTER_PORT_TX:
		return &counters->port_tx[index];
	case SW_COUNTER_DROP_REASONS:
		return &counters->drop_reasons[index];
	case SW_COUNTER_PATHS:
		return &counters->paths[index];
	case SW_COUNTER_ICMP_SIGNALS:
	default:
		return &counters->icmp_signals[index];
	}
}

uint32_t sw_counter_size(enum sw_counter_id counter)
{
	switch (counter) {
	case SW_COUNTER_PORT_RX:
	case SW_COUNTER_PORT_TX:
		return P4_PORT_COUNTER_SIZE;
	case SW_COUNTER_DROP_REASONS:
		return P4_DROP_REASON_COUNTER_SIZE;
	case SW_COUNTER_PATHS:
		return P4_PATH_COUNTER_SIZE;
	case SW_COUNTER_ICMP_SIGNALS:
		return P4_ICMP_COUNTER_SIZE;
	default:
		return 0;
	}
}

static struct sw_packets_bytes worker_sum(const struct sw_pipeline *pipeline,
					  unsigned int worker_count,
					  enum sw_counter_id counter,
					  uint32_t index)
{
	struct sw_packets_bytes sum = {0, 0};

	for (unsigned int w = 0; w < worker_count; w++) {
		struct sw_packets_bytes *cell = counter_cell(
			(struct sw_counters *)&pipeline->counters[w], counter,
			index);
		sum.packets +=
			__atomic_load_n(&cell->packets, __ATOMIC_RELAXED);
		sum.bytes += __atomic_load_n(&cell->bytes, __ATOMIC_RELAXED);
	}
	return sum;
}

struct sw_packets_bytes sw_counter_read(const struct sw_pipeline *pipeline,
					unsigned int worker_count,
					enum sw_counter_id counter,
					uint32_t index)
{
	struct sw_packets_bytes sum =
		worker_sum(pipeline, worker_count, counter, index);
	const struct sw_packets_bytes *base = counter_cell(
		(struct sw_counters *)&pipeline->counter_base, counter, index);

	sum.packets += base->packets;
	sum.bytes += base->bytes;
	return sum;
}

void sw_counter_write(struct sw_pipeline *pipeline, unsigned int worker_count,
		      enum sw_counter_id counter, uint32_t index,
		      struct sw_packets_bytes value)
{
	struct sw_packets_bytes sum =
		worker_sum(pipeline, worker_count, counter, index);
	struct sw_packets_bytes *base =
		counter_cell(&pipeline->counter_base, counter, index);

	/* Unsigned wrap-around makes base + sum equal the written value. */
	base->packets = value.packets - sum.packets;
	base->bytes = value.bytes - sum.bytes;
}
