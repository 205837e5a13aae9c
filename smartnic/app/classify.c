/* SPDX-License-Identifier: Apache-2.0 */
#include "classify.h"

#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "prefix.h"

bool nic_packet_parse(const struct rte_mbuf *m, struct nic_packet_info *info)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t length = rte_pktmbuf_data_len(m);
	uint32_t offset = sizeof(struct rte_ether_hdr);
	uint16_t ether_type;
	uint32_t l4_offset;

	if (length < offset)
		return false;
	ether_type = rte_be_to_cpu_16(
		((const struct rte_ether_hdr *)data)->ether_type);
	/* Up to two VLAN tags (802.1ad outer, 802.1Q inner). */
	for (int tags = 0; tags < 2 && (ether_type == RTE_ETHER_TYPE_VLAN ||
					ether_type == RTE_ETHER_TYPE_QINQ);
	     tags++) {
		if (length < offset + sizeof(struct rte_vlan_hdr))
			return false;
		ether_type = rte_be_to_cpu_16(
			((const struct rte_vlan_hdr *)(data + offset))
				->eth_proto);
		offset += sizeof(struct rte_vlan_hdr);
	}
	if (ether_type == RTE_ETHER_TYPE_IPV4) {
		const struct rte_ipv4_hdr *ip = (const void *)(data + offset);

		if (length < offset + sizeof(*ip) ||
		    (ip->version_ihl >> 4) != 4)
			return false;
		info->ip_version = 4;
		info->protocol = ip->next_proto_id;
		info->src = (const uint8_t *)&ip->src_addr;
		info->dst = (const uint8_t *)&ip->dst_addr;
		l4_offset = offset + (ip->version_ihl & 0x0f) * 4u;
		/* Non-first fragments carry no ports. */
		if (rte_be_to_cpu_16(ip->fragment_offset) &
		    RTE_IPV4_HDR_OFFSET_MASK)
			info->protocol = 0;
	} else if (ether_type == RTE_ETHER_TYPE_IPV6) {
		const struct rte_ipv6_hdr *ip = (const void *)(data + offset);
		struct jg_ipv6_chain chain;

		if (length < offset + sizeof(*ip) || (data[offset] >> 4) != 6)
			return false;
		info->ip_version = 6;
		info->src = ip->src_addr;
		info->dst = ip->dst_addr;
		/* Through the extension headers as the engine walks them, so
		 * that TCP behind a destination-options header is split, not
		 * passed on oversize. A chain the engine would not follow,
		 * or a later fragment, carries no ports. */
		if (jg_ipv6_walk(data + offset, length - offset, &chain) &&
		    (!chain.fragment || chain.first_fragment)) {
			info->protocol = chain.protocol;
			l4_offset = offset + chain.length;
		} else {
			info->protocol = 0;
			l4_offset = offset + sizeof(*ip);
		}
	} else {
		return false;
	}
	info->src_port = 0;
	info->dst_port = 0;
	if ((info->protocol == IPPROTO_TCP || info->protocol == IPPROTO_UDP) &&
	    length >= l4_offset + 4) {
		memcpy(&info->src_port, data + l4_offset, 2);
		memcpy(&info->dst_port, data + l4_offset + 2, 2);
	}
	return true;
}

static bool in_set(const struct nic_prefix_set *set, uint8_t version,
		   const uint8_t *address)
{
	for (unsigned int i = 0; i < set->count; i++)
		if (nic_prefix_contains(&set->prefixes[i], version, address))
			return true;
	return false;
}

enum nic_direction nic_classify(const struct nic_prefix_set *internal,
				const struct nic_packet_info *info)
{
	if (in_set(internal, info->ip_version, info->dst))
		return NIC_INBOUND;
	if (in_set(internal, info->ip_version, info->src))
		return NIC_OUTBOUND;
	return NIC_BYPASS;
}

void nic_flow_key_from_info(const struct nic_packet_info *info,
			    struct jg_flow_key *key)
{
	size_t length = info->ip_version == 4 ? 4 : 16;

	memset(key, 0, sizeof(*key));
	key->ip_version = info->ip_version;
	key->protocol = info->protocol;
	key->src_port = info->src_port;
	key->dst_port = info->dst_port;
	memcpy(&key->src, info->src, length);
	memcpy(&key->dst, info->dst, length);
}
