/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control Routing (p4src/include/routing.p4).
 */
#include "pipeline_internal.h"

#include <string.h>

/* -- Routing (routing.p4) ---------------------------------------------------
 */

/* The selector input of next_hops, at the compile's offsets
 * (p4_tables.h): meta.flow's src_addr, dst_addr, protocol, src_port and
 * dst_port. BMv2 hashes the fields bit-packed; they are all whole bytes,
 * so the packing is the same. */
#define SELECTOR(field) P4_SELECTOR_ECMP_SELECTOR_FLOW_##field
_Static_assert(SELECTOR(SRC_ADDR_BITS) ==
			       8 * sizeof(((struct flow *)0)->src_addr) &&
		       SELECTOR(DST_ADDR_BITS) ==
			       8 * sizeof(((struct flow *)0)->dst_addr) &&
		       SELECTOR(PROTOCOL_BITS) == 8 &&
		       SELECTOR(SRC_PORT_BITS) == 16 &&
		       SELECTOR(DST_PORT_BITS) == 16,
	       "ecmp_selector's input no longer has the widths hashed here");

static uint16_t selector_hash(const struct flow *flow)
{
	uint8_t key[P4_SELECTOR_ECMP_SELECTOR_BYTES];

	memcpy(key + SELECTOR(SRC_ADDR_OFFSET), flow->src_addr,
	       SELECTOR(SRC_ADDR_BYTES));
	memcpy(key + SELECTOR(DST_ADDR_OFFSET), flow->dst_addr,
	       SELECTOR(DST_ADDR_BYTES));
	key[SELECTOR(PROTOCOL_OFFSET)] = flow->protocol;
	store16(key + SELECTOR(SRC_PORT_OFFSET), flow->src_port);
	store16(key + SELECTOR(DST_PORT_OFFSET), flow->dst_port);
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
