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

enum nic_direction {
	NIC_BYPASS = 0,
	NIC_INBOUND,
	NIC_OUTBOUND,
};

struct nic_prefix_set {
	unsigned int count;
	const struct jg_prefix *prefixes;
};

/* The direction of a packet the engine's parser read
 * (jg_packet_summarize): the program has no parser of its own, so it and
 * the engine always agree on what a packet is. */
enum nic_direction nic_classify(const struct nic_prefix_set *internal,
				const struct jg_packet_summary *packet);

#endif /* JUMBOGATE_NIC_CLASSIFY_H */
