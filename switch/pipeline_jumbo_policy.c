/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control JumboPolicy (p4src/include/jumbo_policy.p4).
 */
#include "pipeline_internal.h"

#include <string.h>

/* control JumboPolicy (jumbo_policy.p4) */
void sw_jumbo_policy(const struct sw_tables *tables, struct metadata *meta)
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
	if (meta->port_role == P4_PORT_ROLE_INTERNAL ||
	    (meta->port_role == P4_PORT_ROLE_NIC && !meta->instance_known)) {
		/* tables path_mtu_v4 / path_mtu_v6 */
		if (flow->ip_version == 4)
			meta->path_mtu =
				sw_lpm_lookup(&tables->path_mtu_v4,
					      flow->dst_addr + 12, &value)
					? (uint16_t)value
					: tables->path_mtu_default_v4;
		else if (flow->ip_version == 6)
			meta->path_mtu = sw_lpm_lookup(&tables->path_mtu_v6,
						       flow->dst_addr, &value)
						 ? (uint16_t)value
						 : tables->path_mtu_default_v6;
	}
	/* The limit the packet is held to and whether it is over it (table
	 * limits): MtuEnforcement drops what is over, Steering steers only
	 * what is not. Outbound from the rack the path MTU holds unless the
	 * SmartNIC can split the packet (TCP); outbound back from the
	 * SmartNIC nothing more will split it. */
	meta->mtu_limit = meta->instance_mtu;
	if (meta->port_role == P4_PORT_ROLE_INTERNAL &&
	    meta->path_mtu < meta->mtu_limit &&
	    !(flow->is_tcp && meta->nic_port_set))
		meta->mtu_limit = meta->path_mtu;
	if (meta->port_role == P4_PORT_ROLE_NIC && !meta->instance_known)
		meta->mtu_limit = meta->path_mtu;
	meta->over_limit = flow->ip_len > meta->mtu_limit;
}
