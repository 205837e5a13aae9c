/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control SignalBuilder (p4src/v1model/signal.p4) and the checksum stage.
 */
#include "pipeline_internal.h"

#include <string.h>

/* -- SignalBuilder (v1model/signal.p4) and the checksum stage
 * ------------------------ */

static uint32_t sum16(uint32_t sum, const uint8_t *data, uint32_t length)
{
	uint32_t i;

	for (i = 0; i + 1 < length; i += 2)
		sum += load16(data + i);
	if (i < length)
		sum += (uint32_t)data[i] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * The resubmitted pass of V1ModelIngress: BMv2 parses the original frame
 * again (parse_signal_ethernet: Ethernet, a VLAN tag, then the quote as one
 * header chosen by the EtherType), SignalBuilder writes the ICMP error in
 * front of the quote, and truncate() cuts the rest. Here the same happens
 * in place. Returns the new frame length, or 0 when the frame is shorter
 * than its quote (its IP header claimed more than arrived).
 */
uint32_t sw_signal_builder(const struct sw_tables *tables, uint8_t *frame,
			   uint32_t length, const struct metadata *meta)
{
	uint32_t l2 = ETH_BYTES;
	uint16_t ether_type = load16(frame + 12);
	uint8_t mac[6];
	uint8_t *ip, *icmp;
	uint32_t quote, ip_bytes;
	bool v4;

	if (ether_type == P4_ETHERTYPE_VLAN) {
		ether_type = load16(frame + 16);
		l2 += P4_VLAN_BYTES;
	}
	v4 = ether_type == P4_ETHERTYPE_IPV4;
	quote = v4 ? P4_ICMPV4_QUOTE_BYTES : P4_ICMPV6_QUOTE_BYTES;
	ip_bytes = v4 ? V4_BYTES : V6_BYTES;
	if (length < l2 + quote)
		return 0;
	memmove(frame + l2 + ip_bytes + P4_ICMP_BYTES, frame + l2, quote);
	memcpy(mac, frame, 6);
	memcpy(frame, frame + 6, 6);
	memcpy(frame + 6, mac, 6);
	ip = frame + l2;
	icmp = ip + ip_bytes;
	/* table signal_source */
	if (v4) {
		memset(ip, 0, V4_BYTES);
		ip[0] = 0x45;
		store16(ip + 2, (uint16_t)(V4_BYTES + P4_ICMP_BYTES + quote));
		ip[8] = P4_SIGNAL_TTL;
		ip[9] = P4_IP_PROTO_ICMP;
		if (tables->signal.configured)
			memcpy(ip + 12, tables->signal.ipv4, 4);
		else
			memcpy(ip + 12, meta->signal_reply_from + 12, 4);
		memcpy(ip + 16, meta->signal_reply_to + 12, 4);
		store16(ip + 10, fold(sum16(0, ip, V4_BYTES)));
		icmp[0] = P4_ICMPV4_TYPE_DEST_UNREACHABLE;
		icmp[1] = P4_ICMPV4_CODE_FRAGMENTATION_NEEDED;
	} else {
		memset(ip, 0, V6_BYTES);
		ip[0] = 0x60;
		store16(ip + 4, (uint16_t)(P4_ICMP_BYTES + quote));
		ip[6] = P4_IP_PROTO_ICMPV6;
		ip[7] = P4_SIGNAL_TTL;
		if (tables->signal.configured)
			memcpy(ip + 8, tables->signal.ipv6, 16);
		else
			memcpy(ip + 8, meta->signal_reply_from, 16);
		memcpy(ip + 24, meta->signal_reply_to, 16);
		icmp[0] = P4_ICMPV6_TYPE_PACKET_TOO_BIG;
		icmp[1] = 0;
	}
	store16(icmp + 2, 0);
	store32(icmp + 4, meta->signal_mtu);
	/* V1ModelComputeChecksum: ICMP over its header and the quote; ICMPv6
	 * with the IPv6 pseudo-header (RFC 8200 8.1). */
	uint32_t sum = sum16(0, icmp, P4_ICMP_BYTES + quote);
	if (!v4) {
		sum = sum16(sum, ip + 8, 32);
		sum += P4_ICMP_BYTES + quote;
		sum += P4_IP_PROTO_ICMPV6;
	}
	store16(icmp + 2, fold(sum));
	return l2 + ip_bytes + P4_ICMP_BYTES + quote;
}
