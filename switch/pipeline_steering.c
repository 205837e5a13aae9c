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

void sw_flow_key(const struct flow *flow, uint8_t key[SW_KEY_MAX])
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
