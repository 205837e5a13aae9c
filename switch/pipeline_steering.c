/* SPDX-License-Identifier: Apache-2.0 */
/*
 * p4src/include/steering.p4: NicPort, PathProbes and Steering.
 */
#include "pipeline_internal.h"

#include "const_tables.h"

#include <string.h>

/* control NicPort, table nic_port (actions set_nic_port, no_nic_port) */
void sw_nic_port(const struct sw_tables *tables, struct metadata *meta)
{
	meta->nic_port_set = tables->nic_port >= 0;
	if (meta->nic_port_set)
		meta->nic_port = (uint16_t)tables->nic_port;
}

/* -- PathProbes (steering.p4) ------------------------------------------------
 */

void sw_path_probes(struct metadata *meta, bool *held_to_mtu)
{
	const struct flow *flow = &meta->flow;
	bool probe_port = flow->protocol == P4_IP_PROTO_UDP &&
			  flow->dst_port == P4_PMTU_PROBE_PORT;

	if (meta->nic_port_set && meta->port_role == P4_PORT_ROLE_EXTERNAL &&
	    (flow->later_fragment || probe_port)) {
		meta->steer_reason = P4_STEER_PATH_PROBE;
	} else if (meta->nic_port_set && meta->port_role == P4_PORT_ROLE_NIC &&
		   probe_port && flow->src_port == P4_PMTU_PROBE_PORT) {
		/* The SmartNIC's own probe or reply: routed as it is. */
	} else {
		*held_to_mtu = true;
	}
}

/* -- Steering (steering.p4) ---------------------------------------------------
 * Its decision table runs from the compile's entries (const_tables.h); the
 * functions named after its actions do what the P4 actions do.
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

/* action steer */
static void steer(struct metadata *meta, uint8_t reason)
{
	meta->steer_reason = reason;
	meta->elephant_candidate = false;
}

/* action leave_on_bypass */
static void leave_on_bypass(struct metadata *meta)
{
	meta->elephant_candidate = true;
}

/* action route */
static void route(struct metadata *meta)
{
	meta->elephant_candidate = false;
}

/* table decision: to the SmartNIC (and why), or routed */
static void decision(struct metadata *meta, bool held_to_mtu, bool listed_flow,
		     bool listed_service)
{
	const struct flow *flow = &meta->flow;
	const struct p4_const_key_field key[P4_KEYS_STEERING_DECISION] = {
		[P4_KEY_STEERING_DECISION_HELD_TO_MTU] = sw_key(held_to_mtu),
		[P4_KEY_STEERING_DECISION_OVER_LIMIT] =
			sw_key(meta->over_limit),
		[P4_KEY_STEERING_DECISION_PORT_ROLE] = sw_key(meta->port_role),
		[P4_KEY_STEERING_DECISION_NIC_PORT_SET] =
			sw_key(meta->nic_port_set),
		[P4_KEY_STEERING_DECISION_IS_TCP] = sw_key(flow->is_tcp),
		[P4_KEY_STEERING_DECISION_OVER_PATH] = sw_key(meta->over_path),
		[P4_KEY_STEERING_DECISION_MERGE_ELIGIBLE] =
			sw_key(meta->merge_eligible),
		[P4_KEY_STEERING_DECISION_LISTED_FLOW] = sw_key(listed_flow),
		[P4_KEY_STEERING_DECISION_LISTED_SERVICE] =
			sw_key(listed_service),
		[P4_KEY_STEERING_DECISION_TCP_FLAGS] = sw_key(flow->tcp_flags),
	};
	const struct p4_action_call *call = p4_apply_steering_decision(key);

	switch (call->action) {
	case P4_CONST_ACTION_STEER:
		steer(meta, (uint8_t)call->data[0]);
		break;
	case P4_CONST_ACTION_LEAVE_ON_BYPASS:
		leave_on_bypass(meta);
		break;
	case P4_CONST_ACTION_ROUTE:
	default:
		route(meta);
		break;
	}
}

/* control Steering */
void sw_steering(const struct sw_tables *tables, struct metadata *meta,
		 const uint8_t flow_key[SW_KEY_MAX], bool held_to_mtu,
		 uint64_t now_ns)
{
	const struct flow *flow = &meta->flow;
	bool listed_flow = false, listed_service = false;

	if (flow->is_tcp || (flow->is_udp && !meta->is_geneve)) {
		/* table merge_flows (action steer_merge_flow); a hit
		 * refreshes the entry's idle timer, as in BMv2. */
		struct sw_hash_slot *slot =
			sw_hash_find(&tables->merge_flows, flow_key);

		if (slot != NULL) {
			sw_slot_hit(slot, now_ns);
			listed_flow = true;
		}
	}
	/* table merge_services (action steer_merge_service) */
	if (flow->is_tcp && meta->port_role == P4_PORT_ROLE_EXTERNAL)
		listed_service =
			sw_ternary_lookup(&tables->merge_services,
					  flow->ip_version, flow->dst_addr,
					  flow->dst_port) != NULL;
	decision(meta, held_to_mtu, listed_flow, listed_service);
}
