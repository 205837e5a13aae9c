/* SPDX-License-Identifier: Apache-2.0 */
/*
 * p4src/include/steering.p4: PathProbes and Steering (NicPort, one
 * lookup, is in pipeline.c).
 */
#include "pipeline_internal.h"

#include <string.h>

/* -- PathProbes (steering.p4) ------------------------------------------------
 */

void sw_path_probes(struct metadata *meta)
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

/* The layout is the compile's (p4_tables.h), which the P4Runtime server
 * packs entries by: the two meet in the hash table. */
#define FLOW_KEY(field) (key + P4_TABLE_MERGE_FLOWS_KEY_##field##_OFFSET)
_Static_assert(P4_TABLE_MERGE_FLOWS_KEY_IP_VERSION_BYTES == 1 &&
		       P4_TABLE_MERGE_FLOWS_KEY_PROTOCOL_BYTES == 1 &&
		       P4_TABLE_MERGE_FLOWS_KEY_SRC_PORT_BYTES == 2 &&
		       P4_TABLE_MERGE_FLOWS_KEY_DST_PORT_BYTES == 2 &&
		       SW_FLOW_KEY_LEN <= SW_KEY_MAX,
	       "merge_flows' key no longer has the widths stored here");

void sw_flow_key(const struct flow *flow, uint8_t key[SW_KEY_MAX])
{
	memset(key, 0, SW_KEY_MAX);
	*FLOW_KEY(IP_VERSION) = flow->ip_version;
	memcpy(FLOW_KEY(SRC_ADDR), flow->src_addr,
	       P4_TABLE_MERGE_FLOWS_KEY_SRC_ADDR_BYTES);
	memcpy(FLOW_KEY(DST_ADDR), flow->dst_addr,
	       P4_TABLE_MERGE_FLOWS_KEY_DST_ADDR_BYTES);
	*FLOW_KEY(PROTOCOL) = flow->protocol;
	store16(FLOW_KEY(SRC_PORT), flow->src_port);
	store16(FLOW_KEY(DST_PORT), flow->dst_port);
}

/* control Steering */
void sw_steering(const struct sw_tables *tables, struct metadata *meta,
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
	sw_flow_key(flow, key);
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
