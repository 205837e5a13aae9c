/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control MtuEnforcement (p4src/include/icmp_signal.p4) and the meters it
 * uses (icmp_signal_meter, icmp_source_meter).
 */
#include "pipeline_internal.h"

#include "const_tables.h"

#include <string.h>

/* -- meters ------------------------------------------------------------------
 */

#define TOKEN_SCALE 1000000ull /* tokens are counted in 1e-6 packets */

/* A bucket of `packets` in tokens. P4Runtime takes any int64 burst, and a
 * burst past UINT64_MAX / TOKEN_SCALE (1.8e13 packets) wrapped around to
 * a bucket smaller than one packet, which made every packet red; a bucket
 * that large is as good as unbounded, so it saturates. */
static uint64_t tokens_of(uint64_t packets)
{
	return packets > UINT64_MAX / TOKEN_SCALE ? UINT64_MAX
						  : packets * TOKEN_SCALE;
}

void sw_meter_set(struct sw_meter *meter, uint64_t cir, uint64_t cburst,
		  uint64_t pir, uint64_t pburst, uint64_t now_ns)
{
	while (__atomic_test_and_set(&meter->lock, __ATOMIC_ACQUIRE))
		;
	meter->configured = cir || cburst || pir || pburst;
	meter->cir = cir;
	meter->cburst = cburst;
	meter->pir = pir;
	meter->pburst = pburst;
	/* Buckets start full, as BMv2's do. */
	meter->committed_tokens = tokens_of(cburst);
	meter->peak_tokens = tokens_of(pburst);
	meter->last_ns = now_ns;
	__atomic_clear(&meter->lock, __ATOMIC_RELEASE);
}

static uint64_t refill(uint64_t tokens, uint64_t rate, uint64_t burst,
		       uint64_t elapsed_ns)
{
	uint64_t full = tokens_of(burst);
	/* rate packets/s = rate * 1e6 tokens per 1e9 ns. A rate up to
	 * INT64_MAX times the 1e12 ns that are still counted overflows 64
	 * bits (and wrapped to a near-empty bucket): 128 hold it. */
	unsigned __int128 added =
		elapsed_ns > 1000000000000ull
			? full
			: (unsigned __int128)rate * elapsed_ns / 1000;

	return tokens >= full || added >= full - tokens
		       ? full
		       : tokens + (uint64_t)added;
}

/* RFC 2698 two-rate three-color marking, colour-blind, one packet. */
enum sw_color sw_meter_execute(struct sw_meter *meter, uint64_t now_ns)
{
	enum sw_color color;
	uint64_t elapsed;

	if (!meter->configured)
		return SW_GREEN;
	while (__atomic_test_and_set(&meter->lock, __ATOMIC_ACQUIRE))
		;
	elapsed = now_ns > meter->last_ns ? now_ns - meter->last_ns : 0;
	meter->last_ns = now_ns > meter->last_ns ? now_ns : meter->last_ns;
	meter->committed_tokens = refill(meter->committed_tokens, meter->cir,
					 meter->cburst, elapsed);
	meter->peak_tokens =
		refill(meter->peak_tokens, meter->pir, meter->pburst, elapsed);
	if (meter->peak_tokens < TOKEN_SCALE) {
		color = SW_RED;
	} else if (meter->committed_tokens < TOKEN_SCALE) {
		meter->peak_tokens -= TOKEN_SCALE;
		color = SW_YELLOW;
	} else {
		meter->peak_tokens -= TOKEN_SCALE;
		meter->committed_tokens -= TOKEN_SCALE;
		color = SW_GREEN;
	}
	__atomic_clear(&meter->lock, __ATOMIC_RELEASE);
	return color;
}

/* -- MtuEnforcement (icmp_signal.p4) --
 * Its source_prefix_length table runs from the compile's entries
 * (const_tables.h). */

/* action source_prefix_v4: the source's /24 (flow_addr_t holds IPv4 in
 * its low 32 bits) */
static void source_prefix_v4(const struct flow *flow, uint8_t prefix[16])
{
	memcpy(prefix, flow->src_addr, 16);
	memset(prefix, 0, 12);
	prefix[15] = 0;
}

/* action source_prefix_v6: the source's /48 */
static void source_prefix_v6(const struct flow *flow, uint8_t prefix[16])
{
	memcpy(prefix, flow->src_addr, 6);
	memset(prefix + 6, 0, 10);
}

/* table source_prefix_length: the source prefix a sender's budget covers */
static void source_prefix_length(const struct flow *flow, uint8_t prefix[16])
{
	const struct p4_const_key_field
		key[P4_KEYS_MTU_ENFORCEMENT_SOURCE_PREFIX_LENGTH] = {
			[P4_KEY_MTU_ENFORCEMENT_SOURCE_PREFIX_LENGTH_IP_VERSION] =
				sw_key(flow->ip_version),
		};

	switch (p4_apply_mtu_enforcement_source_prefix_length(key)->action) {
	case P4_CONST_ACTION_SOURCE_PREFIX_V4:
		source_prefix_v4(flow, prefix);
		break;
	case P4_CONST_ACTION_SOURCE_PREFIX_V6:
	default:
		source_prefix_v6(flow, prefix);
		break;
	}
}

/* control MtuEnforcement: enforce is the top level's held_to_mtu. The P4
 * works the source meter's cell out for every packet (on Tofino it costs
 * no stage on the decision's path); here only a packet that meets the
 * meter does. */
void sw_mtu_enforcement(struct sw_pipeline *pipeline, uint16_t ingress_port,
			struct metadata *meta, bool enforce, uint64_t now_ns)
{
	const struct flow *flow = &meta->flow;

	/* The MTU an ICMP signal announces: the smaller one that holds. */
	if (meta->port_role == P4_PORT_ROLE_INTERNAL &&
	    !(flow->is_tcp && meta->nic_port_set))
		meta->signal_mtu = meta->instance_mtu < meta->path_mtu
					   ? meta->instance_mtu
					   : meta->path_mtu;
	else if (meta->port_role == P4_PORT_ROLE_NIC && !meta->instance_known)
		meta->signal_mtu = meta->path_mtu;
	else
		meta->signal_mtu = meta->instance_mtu;
	if (!enforce || meta->over_limit == 0)
		return; /* not held to an MTU, or fits it */
	if (!flow->dont_fragment) {
		meta->drop_reason = P4_DROP_MTU_EXCEEDED_NO_DF;
		return;
	}
	if (meta->is_geneve || !flow->signal_allowed) {
		meta->drop_reason = P4_DROP_MTU_EXCEEDED_NO_SIGNAL;
		return;
	}
	/* icmp_source_meter, by the source's prefix, then the port's. */
	uint8_t prefix[16];
	enum sw_color color;

	source_prefix_length(flow, prefix);
	color = sw_meter_execute(
		&pipeline->icmp_source_meter[sw_crc16(prefix, 16) %
					     P4_ICMP_SOURCE_METER_SIZE],
		now_ns);
	if (color != SW_RED)
		color = sw_meter_execute(
			&pipeline->icmp_signal_meter[ingress_port %
						     P4_ICMP_METER_SIZE],
			now_ns);
	if (color == SW_RED) {
		meta->drop_reason = P4_DROP_ICMP_RATE_LIMITED;
		return;
	}
	meta->drop_reason = P4_DROP_MTU_EXCEEDED;
	meta->signal_kind = flow->ip_version == 4
				    ? P4_SIGNAL_IPV4_FRAG_NEEDED
				    : P4_SIGNAL_IPV6_PACKET_TOO_BIG;
	meta->signal_reply_port = ingress_port;
	memcpy(meta->signal_reply_to, flow->src_addr, 16);
	memcpy(meta->signal_reply_from, flow->dst_addr, 16);
}
