/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which way a packet goes. Both directions arrive from the switch on the
 * same port, so the program tells them apart by address: a packet to an
 * internal prefix is inbound (merged, UDP optionally packed), a packet
 * from an internal prefix to anywhere else is outbound (split, caravans
 * unpacked), anything else passes untouched.
 */
#ifndef JUMBOGATE_NIC_CLASSIFY_H
#define JUMBOGATE_NIC_CLASSIFY_H

#include <stdbool.h>
#include <stdint.h>

#include <jumbogate/engine.h>

struct rte_mbuf;

enum nic_direction {
	NIC_BYPASS = 0,
	NIC_INBOUND,
	NIC_OUTBOUND,
};

/* Where a packet's addresses and ports are; valid when parse succeeded. */
struct nic_packet_info {
	uint8_t ip_version; /* 4 or 6 */
	uint8_t protocol;   /* L4 protocol; ports are set for TCP/UDP only */
	const uint8_t *src; /* 4 or 16 bytes, network order */
	const uint8_t *dst;
	uint16_t src_port; /* network order */
	uint16_t dst_port;
};

struct nic_prefix_set {
	unsigned int count;
	const struct jg_prefix *prefixes;
};

/* Parse the first segment up to the L4 ports. False when not IP. */
bool nic_packet_parse(const struct rte_mbuf *m, struct nic_packet_info *info);

enum nic_direction nic_classify(const struct nic_prefix_set *internal,
				const struct nic_packet_info *info);

/* The engine's flow key of an inbound TCP/UDP packet. */
void nic_flow_key_from_info(const struct nic_packet_info *info,
			    struct jg_flow_key *key);

#endif /* JUMBOGATE_NIC_CLASSIFY_H */
