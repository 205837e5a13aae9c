/* SPDX-License-Identifier: Apache-2.0 */
#include "classify.h"

#include "prefix.h"

static bool in_set(const struct nic_prefix_set *set, uint8_t version,
		   const uint8_t *address)
{
	for (unsigned int i = 0; i < set->count; i++)
		if (nic_prefix_contains(&set->prefixes[i], version, address))
			return true;
	return false;
}

enum nic_direction nic_classify(const struct nic_prefix_set *internal,
				const struct jg_packet_summary *packet)
{
	const struct jg_flow_key *key = &packet->key;

	if (in_set(internal, key->ip_version, (const uint8_t *)&key->dst))
		return NIC_INBOUND;
	if (in_set(internal, key->ip_version, (const uint8_t *)&key->src))
		return NIC_OUTBOUND;
	return NIC_BYPASS;
}
