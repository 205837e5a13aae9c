/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control JumboPolicy (p4src/include/jumbo_policy.p4). Its constant tables
 * (instance_side, limits) run from the compile's entries (const_tables.h);
 * the functions named after their actions do what the P4 actions do.
 */
#include "pipeline_internal.h"

#include "const_tables.h"

/* The control's local variables. */
struct jumbo_policy {
	const uint8_t *instance; /* instance_v4 (low 4 bytes) / instance_v6 */
	bool instance_jumbo;
	uint16_t jumbo_mtu, standard_mtu;
	uint16_t over_jumbo, over_standard;
};

/* P4's saturating subtraction, a |-| b. */
static uint16_t saturating_sub(uint16_t a, uint16_t b)
{
	return a > b ? (uint16_t)(a - b) : 0;
}

/* action instance_is_destination */
static void instance_is_destination(struct metadata *meta,
				    struct jumbo_policy *local)
{
	local->instance = meta->flow.dst_addr;
}

/* action instance_is_source */
static void instance_is_source(struct metadata *meta,
			       struct jumbo_policy *local)
{
	local->instance = meta->flow.src_addr;
}

/* table instance_side: the instance is the destination of inbound traffic
 * and the source of outbound traffic */
static void instance_side(struct metadata *meta, struct jumbo_policy *local)
{
	const struct p4_const_key_field
		key[P4_KEYS_JUMBO_POLICY_INSTANCE_SIDE] = {
			[P4_KEY_JUMBO_POLICY_INSTANCE_SIDE_PORT_ROLE] =
				sw_key(meta->port_role),
		};

	switch (p4_apply_jumbo_policy_instance_side(key)->action) {
	case P4_CONST_ACTION_INSTANCE_IS_DESTINATION:
		instance_is_destination(meta, local);
		break;
	case P4_CONST_ACTION_INSTANCE_IS_SOURCE:
	default:
		instance_is_source(meta, local);
		break;
	}
}

/* Tables instances_v4 / instances_v6: actions set_instance_jumbo and
 * instance_unknown. */
static void instances(const struct sw_hash *table, const uint8_t *addr,
		      struct metadata *meta, struct jumbo_policy *local)
{
	const struct sw_hash_slot *slot = sw_hash_find(table, addr);

	meta->instance_known = slot != NULL;
	local->instance_jumbo = slot != NULL && slot->value != 0;
}

/* Tables path_mtu_v4 / path_mtu_v6: action set_path_mtu, its default the
 * table's (the controller may change it). */
static void path_mtu(const struct sw_lpm *table, const uint8_t *addr,
		     uint16_t default_mtu, struct metadata *meta)
{
	uint64_t value;

	meta->path_mtu = sw_lpm_lookup(table, addr, &value) ? (uint16_t)value
							    : default_mtu;
}

/* The four actions of the limits table for each of the instance's two
 * MTUs, as the P4's LIMIT_ACTIONS makes them: held_to_both_<mtu>,
 * held_to_instance_keep_path_<mtu>, held_to_path_<mtu> and
 * held_to_instance_<mtu> (jumbo_policy.p4 says when each holds). */
#define LIMIT_ACTIONS(mtu, over, eligible)                                     \
	static void held_to_both_##mtu(struct metadata *meta,                  \
				       const struct jumbo_policy *local)       \
	{                                                                      \
		meta->instance_mtu = local->mtu;                               \
		meta->merge_eligible = (eligible);                             \
		meta->over_limit = local->over | meta->over_path;              \
	}                                                                      \
	static void held_to_instance_keep_path_##mtu(                          \
		struct metadata *meta, const struct jumbo_policy *local)       \
	{                                                                      \
		meta->instance_mtu = local->mtu;                               \
		meta->merge_eligible = (eligible);                             \
		meta->over_limit = local->over;                                \
	}                                                                      \
	static void held_to_path_##mtu(struct metadata *meta,                  \
				       const struct jumbo_policy *local)       \
	{                                                                      \
		meta->instance_mtu = local->mtu;                               \
		meta->merge_eligible = (eligible);                             \
		meta->over_limit = meta->over_path;                            \
	}                                                                      \
	static void held_to_instance_##mtu(struct metadata *meta,              \
					   const struct jumbo_policy *local)   \
	{                                                                      \
		meta->instance_mtu = local->mtu;                               \
		meta->merge_eligible = (eligible);                             \
		meta->over_limit = local->over;                                \
		meta->path_mtu = 0xffff;                                       \
		meta->over_path = 0;                                           \
	}
LIMIT_ACTIONS(jumbo_mtu, over_jumbo, meta->flow.is_tcp || meta->flow.is_udp)
LIMIT_ACTIONS(standard_mtu, over_standard, false)
#undef LIMIT_ACTIONS

/* table limits: the instance's MTU and the packet's excess over the MTUs
 * that hold for it */
static void limits(struct metadata *meta, const struct jumbo_policy *local)
{
	const struct p4_const_key_field key[P4_KEYS_JUMBO_POLICY_LIMITS] = {
		[P4_KEY_JUMBO_POLICY_LIMITS_FLEET_JUMBO] =
			sw_key(meta->fleet_jumbo),
		[P4_KEY_JUMBO_POLICY_LIMITS_INSTANCE_JUMBO] =
			sw_key(local->instance_jumbo),
		[P4_KEY_JUMBO_POLICY_LIMITS_PORT_ROLE] =
			sw_key(meta->port_role),
		[P4_KEY_JUMBO_POLICY_LIMITS_IS_TCP] = sw_key(meta->flow.is_tcp),
		[P4_KEY_JUMBO_POLICY_LIMITS_NIC_PORT_SET] =
			sw_key(meta->nic_port_set),
		[P4_KEY_JUMBO_POLICY_LIMITS_INSTANCE_KNOWN] =
			sw_key(meta->instance_known),
	};

	switch (p4_apply_jumbo_policy_limits(key)->action) {
	case P4_CONST_ACTION_HELD_TO_BOTH_JUMBO_MTU:
		held_to_both_jumbo_mtu(meta, local);
		break;
	case P4_CONST_ACTION_HELD_TO_INSTANCE_KEEP_PATH_JUMBO_MTU:
		held_to_instance_keep_path_jumbo_mtu(meta, local);
		break;
	case P4_CONST_ACTION_HELD_TO_PATH_JUMBO_MTU:
		held_to_path_jumbo_mtu(meta, local);
		break;
	case P4_CONST_ACTION_HELD_TO_INSTANCE_JUMBO_MTU:
		held_to_instance_jumbo_mtu(meta, local);
		break;
	case P4_CONST_ACTION_HELD_TO_BOTH_STANDARD_MTU:
		held_to_both_standard_mtu(meta, local);
		break;
	case P4_CONST_ACTION_HELD_TO_INSTANCE_KEEP_PATH_STANDARD_MTU:
		held_to_instance_keep_path_standard_mtu(meta, local);
		break;
	case P4_CONST_ACTION_HELD_TO_PATH_STANDARD_MTU:
		held_to_path_standard_mtu(meta, local);
		break;
	case P4_CONST_ACTION_HELD_TO_INSTANCE_STANDARD_MTU:
	default:
		held_to_instance_standard_mtu(meta, local);
		break;
	}
}

/* control JumboPolicy */
void sw_jumbo_policy(const struct sw_tables *tables, struct metadata *meta)
{
	const struct flow *flow = &meta->flow;
	struct jumbo_policy local = {0};

	/* table fleet_policy, action set_fleet_jumbo */
	meta->fleet_jumbo = tables->fleet_jumbo;
	local.jumbo_mtu = tables->guest_jumbo_mtu;
	local.standard_mtu = tables->default_mtu;
	instance_side(meta, &local);
	if (flow->ip_version == 4) {
		instances(&tables->instances_v4, local.instance + 12, meta,
			  &local);
		path_mtu(&tables->path_mtu_v4, flow->dst_addr + 12,
			 tables->path_mtu_default_v4, meta);
	} else if (flow->ip_version == 6) {
		instances(&tables->instances_v6, local.instance, meta, &local);
		path_mtu(&tables->path_mtu_v6, flow->dst_addr,
			 tables->path_mtu_default_v6, meta);
	} else {
		meta->instance_known = false;
		local.instance_jumbo = false;
		meta->path_mtu = 0xffff;
	}
	/* measure_against_found_mtus */
	local.over_jumbo = saturating_sub(flow->ip_len, local.jumbo_mtu);
	local.over_standard = saturating_sub(flow->ip_len, local.standard_mtu);
	meta->over_path = saturating_sub(flow->ip_len, meta->path_mtu);
	limits(meta, &local);
}
