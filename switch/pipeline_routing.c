/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control Routing (p4src/include/routing.p4).
 */
#include "pipeline_internal.h"

#include <string.h>

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
int sw_routing(const struct sw_tables *tables, uint8_t *frame,
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
