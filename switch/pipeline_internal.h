/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the C pipeline share: the P4 program's headers_t and
 * local_metadata_t as C structs, byte helpers, and one function per
 * parser, control or table, each in the file named after the P4 file that
 * holds it (p4src/include/<name>.p4 is pipeline_<name>.c;
 * p4src/v1model/signal.p4 is pipeline_signal.c). pipeline.c is
 * V1ModelIngress, which calls them, with the set-up.
 */
#ifndef JUMBOGATE_SWITCH_PIPELINE_INTERNAL_H
#define JUMBOGATE_SWITCH_PIPELINE_INTERNAL_H

#include "pipeline.h"

#include <stdbool.h>
#include <stdint.h>

/* Bytes a header of the given kind occupies; shorthand for the P4 names. */
#define ETH_BYTES P4_ETHERNET_BYTES
#define V4_BYTES  P4_IPV4_MIN_BYTES
#define V6_BYTES  P4_IPV6_BYTES
#define NONE	  (-1)
/* v1model's drop port: mark_to_drop() sets egress_spec to it. */
#define DROP_PORT 511

static inline uint16_t load16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void store16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void store32(uint8_t *p, uint32_t v)
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
	bool is_udp;
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
	/* comparisons_t: the packet's excess over the limit JumboPolicy's
	 * limits table chose and over the path MTU (0: fits), read by
	 * Steering and MtuEnforcement. */
	uint16_t over_limit;
	uint16_t over_path;
	bool merge_eligible;
	uint8_t steer_reason;
	bool elephant_candidate;
	uint16_t nic_port;
	bool nic_port_set;
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

/* parser JumbogateParser (parser.p4): pipeline_parser.c */
enum parser_error sw_jumbogate_parser(struct parser *p, struct headers *hdr);

/* classifier.p4: pipeline_classifier.c */
void sw_port_roles(const struct sw_tables *tables, uint16_t ingress_port,
		   struct metadata *meta);
void sw_flow_classifier(const uint8_t *frame, const struct headers *hdr,
			struct metadata *meta);
void sw_parse_verdict(const uint8_t *frame, uint32_t frame_bytes,
		      const struct headers *hdr, struct metadata *meta,
		      enum parser_error error);
void sw_depth_policy(const struct sw_tables *tables, struct metadata *meta);

/* control JumboPolicy (jumbo_policy.p4): pipeline_jumbo_policy.c */
void sw_jumbo_policy(const struct sw_tables *tables, struct metadata *meta);

/* control MtuEnforcement and its meters (icmp_signal.p4):
 * pipeline_icmp_signal.c */
void sw_mtu_enforcement(struct sw_pipeline *pipeline, uint16_t ingress_port,
			struct metadata *meta, bool enforce, uint64_t now_ns);

/* steering.p4: pipeline_steering.c */
void sw_nic_port(const struct sw_tables *tables, struct metadata *meta);
void sw_path_probes(struct metadata *meta, bool *held_to_mtu);
/* flow_key is sw_flow_key's of meta->flow. */
void sw_steering(const struct sw_tables *tables, struct metadata *meta,
		 const uint8_t flow_key[SW_KEY_MAX], bool held_to_mtu,
		 uint64_t now_ns);
/* merge_flows' key: the flow's fields as the table matches them. */
void sw_flow_key(const struct flow *flow, uint8_t key[SW_KEY_MAX]);

/* The hashes of flow_hash.p4: pipeline_flow_hash.c */
void sw_init_crc_tables(void);
/* Where a flow counts in the elephant sketch and its Bloom filter. */
#define SW_SKETCH_COLUMN_BITS 12
#define SW_BLOOM_INDEX_BITS   13
struct sw_sketch_cells {
	uint32_t row[3];   /* a column of each of the sketch's rows */
	uint32_t bloom[2]; /* the Bloom filter's two cells */
};
void sw_sketch_cells(const uint8_t fields[SW_KEY_MAX],
		     struct sw_sketch_cells *cells);

/* control ElephantDetector (elephant.p4): pipeline_elephant.c */
void sw_elephant_detector(struct sw_pipeline *pipeline, unsigned int worker,
			  struct metadata *meta,
			  const uint8_t flow_key[SW_KEY_MAX], uint64_t now_ns,
			  uint32_t wire_bytes);

/* control Routing (routing.p4): pipeline_routing.c */
int sw_routing(const struct sw_tables *tables, uint8_t *frame,
	       const struct headers *hdr, struct metadata *meta);

/* counters.p4: pipeline_counters.c */
void sw_count(struct sw_packets_bytes *cell, uint32_t bytes);
void sw_ingress_counters(struct sw_counters *counters, uint16_t ingress_port,
			 const struct metadata *meta, uint32_t bytes);

/* control SignalBuilder (v1model/signal.p4): pipeline_signal.c */
uint32_t sw_signal_builder(const struct sw_tables *tables, uint8_t *frame,
			   uint32_t length, const struct metadata *meta);

#endif /* JUMBOGATE_SWITCH_PIPELINE_INTERNAL_H */
