/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Merge rules, case by case. The cases follow the Linux GRO selftest
 * (tools/testing/selftests/net/gro.c): what Linux refuses to coalesce,
 * the engine must refuse too; what Linux coalesces, the engine does.
 * Every packet that comes out is re-parsed and its checksums recomputed
 * independently, and its payload compared with the stream it came from.
 */
#include <string.h>

#include <rte_mbuf.h>

#include "fixture.h"

#define PAYLOAD 1000u
#define BURST	8u

typedef void (*tweak_fn)(struct pb_spec *spec, unsigned int index);

/* Send `count` segments of PAYLOAD bytes in one burst, segment i built
 * from the base spec after tweak(spec, i); then release everything. */
static void send_burst(struct fixture *fx, uint8_t ip_version,
		       unsigned int count, tweak_fn tweak, uint32_t *base_seq)
{
	struct rte_mbuf *pkts[64];
	struct pb_spec base;

	pb_defaults(&base, ip_version);
	*base_seq = base.seq;
	for (unsigned int i = 0; i < count; i++) {
		struct pb_spec spec = base;

		spec.ip_id = (uint16_t)(base.ip_id + i);
		if (tweak != NULL)
			tweak(&spec, i);
		pkts[i] = fixture_segment(
			&spec, i * PAYLOAD,
			spec.payload_length ? spec.payload_length : PAYLOAD);
	}
	fixture_merge(fx, pkts, (uint16_t)count);
	fixture_flush(fx);
}

/* Run a case for IPv4 and IPv6 and both checksum modes. */
#define IPV4_ONLY     1u
#define IPV6_ONLY     2u
#define BOTH_VERSIONS 3u

static void expect_case(unsigned int count, tweak_fn tweak,
			const uint32_t *lengths, unsigned int outputs,
			unsigned int versions)
{
	for (int mode = 0; mode < 2; mode++) {
		for (uint8_t version = 4; version <= 6; version += 2) {
			struct fixture fx;
			uint32_t base_seq;

			if (!(versions &
			      (version == 4 ? IPV4_ONLY : IPV6_ONLY)))
				continue;
			fixture_config(&fx);
			fx.config.checksum_mode = mode == 0
							  ? JG_CHECKSUM_SOFTWARE
							  : JG_CHECKSUM_OFFLOAD;
			fixture_start(&fx);
			send_burst(&fx, version, count, tweak, &base_seq);
			fixture_expect_lengths(&fx, base_seq, lengths, outputs);
			fixture_finish(&fx);
		}
	}
}

static void data_same(void)
{
	const uint32_t lengths[] = {4 * PAYLOAD};

	expect_case(4, NULL, lengths, 1, BOTH_VERSIONS);
}

static void small_last(struct pb_spec *spec, unsigned int i)
{
	if (i == 3)
		spec->payload_length = 300;
}

static void data_large_then_small(void)
{
	const uint32_t lengths[] = {3 * PAYLOAD + 300};

	expect_case(4, small_last, lengths, 1, BOTH_VERSIONS);
}

/* A short segment ends the run; what follows starts a new packet. */
static void data_small_then_large(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[3];

	fixture_begin(&fx, &base, 4);
	pkts[0] = fixture_segment(&base, 0, 300);
	base.ip_id++;
	pkts[1] = fixture_segment(&base, 300, PAYLOAD);
	base.ip_id++;
	pkts[2] = fixture_segment(&base, 300 + PAYLOAD, PAYLOAD);
	FIXTURE_MERGE_EXPECT(&fx, pkts, 3, base.seq, 300, 2 * PAYLOAD);
}

/* Pure ACKs (zero payload) pass untouched and keep their place. */
static void pure_ack_in_middle(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[5];

	fixture_begin(&fx, &base, 4);
	const uint32_t offsets[] = {0, PAYLOAD, 2 * PAYLOAD, 2 * PAYLOAD,
				    3 * PAYLOAD};
	const uint32_t sizes[] = {PAYLOAD, PAYLOAD, 0, PAYLOAD, PAYLOAD};

	for (unsigned int i = 0; i < 5; i++) {
		base.ip_id = (uint16_t)(100 + i);
		pkts[i] = fixture_segment(&base, offsets[i], sizes[i]);
	}
	fixture_merge(&fx, pkts, 5);
	fixture_flush(&fx);
	CHECK_EQ(fx.out_count, 3);
	fixture_expect_packet(&fx, 0, base.seq, 2 * PAYLOAD);
	fixture_expect_packet(&fx, 1, base.seq, 0);
	fixture_expect_packet(&fx, 2, base.seq, 2 * PAYLOAD);
	fixture_finish(&fx);
}

static void psh_on_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2)
		spec->tcp_flags |= PB_TCP_PSH;
}

/* PSH is carried on the last merged segment and ends the packet. */
static void flag_psh(void)
{
	const uint32_t lengths[] = {3 * PAYLOAD, 2 * PAYLOAD};
	struct fixture fx;
	uint32_t base_seq;
	struct pb_view view;
	static uint8_t buffer[PB_MAX_FRAME];

	expect_case(5, psh_on_third, lengths, 2, BOTH_VERSIONS);
	fixture_config(&fx);
	fixture_start(&fx);
	send_burst(&fx, 4, 5, psh_on_third, &base_seq);
	CHECK(fx.out_count == 2 &&
	      pb_check(fx.out[0], buffer, sizeof(buffer), &view) == NULL &&
	      (view.tcp_flags & PB_TCP_PSH));
	CHECK(fx.out_count == 2 &&
	      pb_check(fx.out[1], buffer, sizeof(buffer), &view) == NULL &&
	      !(view.tcp_flags & PB_TCP_PSH));
	fixture_finish(&fx);
}

static void fin_on_last(struct pb_spec *spec, unsigned int i)
{
	if (i == 3)
		spec->tcp_flags |= PB_TCP_FIN;
}

static void flag_fin(void)
{
	const uint32_t lengths[] = {4 * PAYLOAD};

	expect_case(4, fin_on_last, lengths, 1, BOTH_VERSIONS);
}

static void syn_on_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2)
		spec->tcp_flags |= PB_TCP_SYN;
}

static void rst_on_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2)
		spec->tcp_flags |= PB_TCP_RST;
}

static void urg_on_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2) {
		spec->tcp_flags |= PB_TCP_URG;
		spec->urgent_pointer = 10;
	}
}

/* SYN, RST, URG: the segment passes alone, its neighbours stay apart. */
static void flags_syn_rst_urg(void)
{
	const uint32_t lengths[] = {2 * PAYLOAD, PAYLOAD, 2 * PAYLOAD};

	expect_case(5, syn_on_third, lengths, 3, BOTH_VERSIONS);
	expect_case(5, rst_on_third, lengths, 3, BOTH_VERSIONS);
	expect_case(5, urg_on_third, lengths, 3, BOTH_VERSIONS);
}

static void cwr_on_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2)
		spec->tcp_flags |= PB_TCP_CWR;
}

static void cwr_on_third_and_fourth(struct pb_spec *spec, unsigned int i)
{
	if (i == 2 || i == 3)
		spec->tcp_flags |= PB_TCP_CWR;
}

/* Linux 6.18, tcp_gro_receive (net/ipv4/tcp_offload.c): a CWR in the
 * arriving segment flushes, and flags must otherwise match but for FIN and
 * PSH. A CWR segment joins neither the run before it nor the segment after
 * it, and CWR segments in a row stay alone too (the running kernel does
 * so: test_linux_gro_reference.py). */
static void flag_cwr(void)
{
	const uint32_t alone[] = {2 * PAYLOAD, PAYLOAD, 2 * PAYLOAD};
	const uint32_t in_a_row[] = {2 * PAYLOAD, PAYLOAD, PAYLOAD, PAYLOAD};

	expect_case(5, cwr_on_third, alone, 3, BOTH_VERSIONS);
	expect_case(5, cwr_on_third_and_fourth, in_a_row, 4, BOTH_VERSIONS);
}

static void bad_checksum_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2)
		spec->corrupt_l4_checksum = true;
}

/* A bad checksum is never merged; it passes (and stays bad). */
static void tcp_bad_checksum(void)
{
	struct fixture fx;
	uint32_t base_seq;
	struct pb_view view;
	static uint8_t buffer[PB_MAX_FRAME];

	fixture_config(&fx);
	fixture_start(&fx);
	send_burst(&fx, 4, 5, bad_checksum_third, &base_seq);
	CHECK_EQ(fx.out_count, 3);
	fixture_expect_packet(&fx, 0, base_seq, 2 * PAYLOAD);
	CHECK(fx.out_count == 3 &&
	      pb_check(fx.out[1], buffer, sizeof(buffer), &view) != NULL);
	fixture_expect_packet(&fx, 2, base_seq, 2 * PAYLOAD);
	fixture_finish(&fx);
}

/* A port that flagged a checksum bad is believed, even if it is right. */
static void port_flags_bad_checksum(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[3];

	fixture_begin(&fx, &base, 4);
	for (unsigned int i = 0; i < 3; i++) {
		base.ip_id = (uint16_t)(100 + i);
		pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
		pkts[i]->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_GOOD |
				    RTE_MBUF_F_RX_IP_CKSUM_GOOD;
	}
	pkts[1]->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_BAD;
	FIXTURE_MERGE_EXPECT(&fx, pkts, 3, base.seq, PAYLOAD, PAYLOAD, PAYLOAD);
}

/* With checksums marked good by the port, the merged checksum is built
 * from header arithmetic alone; it must still verify. */
static void port_verified_checksums(void)
{
	for (int mode = 0; mode < 2; mode++) {
		struct fixture fx;
		struct pb_spec base;
		struct rte_mbuf *pkts[9];

		fixture_config(&fx);
		fx.config.checksum_mode = mode;
		fixture_start(&fx);
		pb_defaults(&base, 4);
		for (unsigned int i = 0; i < 9; i++) {
			base.ip_id = (uint16_t)(100 + i);
			/* Odd sizes exercise the byte-swapped sums. */
			pkts[i] = fixture_segment(&base, i * 999, 999);
			pkts[i]->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_GOOD |
					    RTE_MBUF_F_RX_IP_CKSUM_GOOD;
		}
		fixture_merge(&fx, pkts, 9);
		fixture_flush(&fx);
		/* 8500 - 20 - 20 = 8460 bytes fill the first packet. */
		const uint32_t lengths[] = {8460, 9 * 999 - 8460};

		fixture_expect_lengths(&fx, base.seq, lengths, 2);
		fixture_finish(&fx);
	}
}

static void gap_after_second(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->seq += 1;
}

static void tcp_sequence_gap(void)
{
	struct fixture fx;
	uint32_t base_seq;

	fixture_config(&fx);
	fixture_start(&fx);
	send_burst(&fx, 4, 4, gap_after_second, &base_seq);
	CHECK_EQ(fx.out_count, 2);
	fixture_expect_packet(&fx, 0, base_seq, 2 * PAYLOAD);
	fixture_finish(&fx);
}

static void ack_changes(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->ack += 1000;
}

static void window_changes(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->window += 1;
}

static void timestamp_option(struct pb_spec *spec, unsigned int i)
{
	static const uint8_t ts[12] = {1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2};

	memcpy(spec->tcp_options, ts, sizeof(ts));
	spec->tcp_options_length = sizeof(ts);
	if (i >= 2)
		spec->tcp_options[7] = 2; /* TSval moves on */
}

static void option_kind_changes(struct pb_spec *spec, unsigned int i)
{
	/* NOP NOP NOP NOP vs window scale */
	static const uint8_t nops[4] = {1, 1, 1, 1};
	static const uint8_t wscale[4] = {1, 3, 3, 7};

	memcpy(spec->tcp_options, i >= 2 ? wscale : nops, 4);
	spec->tcp_options_length = 4;
}

static void ece_changes(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->tcp_flags |= PB_TCP_ECE;
}

/* Any change of ACK, window, options, ECE splits the packet there. */
static void tcp_header_changes(void)
{
	const uint32_t lengths[] = {2 * PAYLOAD, 2 * PAYLOAD};

	expect_case(4, ack_changes, lengths, 2, BOTH_VERSIONS);
	expect_case(4, window_changes, lengths, 2, BOTH_VERSIONS);
	expect_case(4, timestamp_option, lengths, 2, BOTH_VERSIONS);
	expect_case(4, option_kind_changes, lengths, 2, BOTH_VERSIONS);
	expect_case(4, ece_changes, lengths, 2, BOTH_VERSIONS);
}

static void same_timestamps(struct pb_spec *spec, unsigned int i)
{
	timestamp_option(spec, 0);
	(void)i;
}

static void tcp_same_options_merge(void)
{
	const uint32_t lengths[] = {4 * PAYLOAD};

	expect_case(4, same_timestamps, lengths, 1, BOTH_VERSIONS);
}

static void ecn_changes(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->tos |= 0x3; /* CE */
}

static void tos_changes(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->tos = 0x20;
}

static void ttl_changes(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->ttl = 63;
}

static void flow_label_changes(struct pb_spec *spec, unsigned int i)
{
	if (i >= 2)
		spec->flow_label = 0x12345;
}

static void ip_header_changes(void)
{
	const uint32_t lengths[] = {2 * PAYLOAD, 2 * PAYLOAD};

	expect_case(4, ecn_changes, lengths, 2, BOTH_VERSIONS);
	expect_case(4, tos_changes, lengths, 2, BOTH_VERSIONS);
	expect_case(4, ttl_changes, lengths, 2, BOTH_VERSIONS);
	expect_case(4, flow_label_changes, lengths, 2, IPV6_ONLY);
}

static void ip_options_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2) {
		/* NOP x3 + end of list */
		spec->ip_options[0] = 1;
		spec->ip_options[1] = 1;
		spec->ip_options[2] = 1;
		spec->ip_options[3] = 0;
		spec->ip_options_length = 4;
	}
}

static void fragment_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2) {
		spec->dont_fragment = false;
		spec->more_fragments = true;
	}
}

static void ipv6_fragment_third(struct pb_spec *spec, unsigned int i)
{
	if (i == 2) {
		spec->ipv6_fragment_header = true;
		spec->more_fragments = true;
	}
}

/* IPv4 options and fragments are never merged; they pass alone. */
static void ip_options_and_fragments(void)
{
	const uint32_t lengths[] = {2 * PAYLOAD, PAYLOAD, 2 * PAYLOAD};
	struct fixture fx;
	uint32_t base_seq;

	expect_case(5, ip_options_third, lengths, 3, IPV4_ONLY);
	/* A fragment's payload is not TCP payload; only count packets. */
	fixture_config(&fx);
	fixture_start(&fx);
	send_burst(&fx, 4, 5, fragment_third, &base_seq);
	CHECK_EQ(fx.out_count, 3);
	fixture_expect_packet(&fx, 0, base_seq, 2 * PAYLOAD);
	fixture_expect_packet(&fx, 2, base_seq, 2 * PAYLOAD);
	fixture_finish(&fx);

	fixture_config(&fx);
	fixture_start(&fx);
	send_burst(&fx, 6, 5, ipv6_fragment_third, &base_seq);
	CHECK_EQ(fx.out_count, 3);
	fixture_expect_packet(&fx, 0, base_seq, 2 * PAYLOAD);
	fixture_expect_packet(&fx, 2, base_seq, 2 * PAYLOAD);
	fixture_finish(&fx);
}

static void same_extension(struct pb_spec *spec, unsigned int i)
{
	spec->ipv6_destination_options_length = 16;
	spec->ipv6_destination_options_fill = 0;
	(void)i;
}

static void different_extension(struct pb_spec *spec, unsigned int i)
{
	spec->ipv6_destination_options_length = 16;
	if (i >= 2)
		spec->ipv6_destination_options_length = 24;
}

/* Identical extension headers merge; different ones do not. */
static void ipv6_extension_headers(void)
{
	struct fixture fx;
	uint32_t base_seq;
	const uint32_t merged[] = {4 * PAYLOAD};
	const uint32_t apart[] = {2 * PAYLOAD, 2 * PAYLOAD};

	fixture_config(&fx);
	fixture_start(&fx);
	send_burst(&fx, 6, 4, same_extension, &base_seq);
	fixture_expect_lengths(&fx, base_seq, merged, 1);
	fixture_finish(&fx);

	fixture_config(&fx);
	fixture_start(&fx);
	send_burst(&fx, 6, 4, different_extension, &base_seq);
	fixture_expect_lengths(&fx, base_seq, apart, 2);
	fixture_finish(&fx);
}

static bool id_df;
static int id_pattern; /* 0 incrementing, 1 fixed, 2 inc then fixed,
			  3 neither (+2 per segment) */

static void id_tweak(struct pb_spec *spec, unsigned int i)
{
	spec->dont_fragment = id_df;
	if (id_pattern == 1)
		spec->ip_id = 100;
	else if (id_pattern == 2)
		spec->ip_id = (uint16_t)(i < 2 ? 100 + i : 101);
	else if (id_pattern == 3)
		spec->ip_id = (uint16_t)(100 + 2 * i);
	else
		spec->ip_id = (uint16_t)(100 + i);
}

/* IP ID: incrementing or fixed merges, DF set or not (Linux 6.18's
 * inet_gro_flush: a fixed ID no longer needs DF); a switch from
 * incrementing to fixed splits. */
static void ip_id_rules(void)
{
	const uint32_t merged[] = {4 * PAYLOAD};
	const uint32_t none[] = {PAYLOAD, PAYLOAD, PAYLOAD, PAYLOAD};
	const uint32_t switched[] = {2 * PAYLOAD, 2 * PAYLOAD};

	id_df = true;
	id_pattern = 0;
	expect_case(4, id_tweak, merged, 1, IPV4_ONLY);
	id_pattern = 1;
	expect_case(4, id_tweak, merged, 1, IPV4_ONLY);
	id_df = false;
	id_pattern = 0;
	expect_case(4, id_tweak, merged, 1, IPV4_ONLY);
	id_pattern = 1;
	expect_case(4, id_tweak, merged, 1, IPV4_ONLY);
	id_pattern = 3;
	expect_case(4, id_tweak, none, 4, IPV4_ONLY);
	id_df = true;
	id_pattern = 2;
	expect_case(4, id_tweak, switched, 2, IPV4_ONLY);
}

static void id_wraps(struct pb_spec *spec, unsigned int i)
{
	spec->ip_id = (uint16_t)(65534 + i);
}

static void ip_id_wraparound(void)
{
	const uint32_t merged[] = {4 * PAYLOAD};

	expect_case(4, id_wraps, merged, 1, IPV4_ONLY);
}

/*
 * Segments larger than the internal MTU (IPv6 under a 1280-byte internal
 * MTU, 10 or 220 bytes over) cannot be made smaller by merging: each
 * leaves whole and untouched, and none takes the next one's bytes.
 * Checked in both checksum modes and with smaller segments after the
 * large ones.
 */
static void segment_above_internal_mtu(void)
{
	for (int run = 0; run < 4; run++) {
		const uint32_t big = run < 2 ? 1230 : 1440;
		const uint32_t lengths[] = {big, big, big, 200, 200};
		struct fixture fx;
		struct pb_spec base;
		struct rte_mbuf *pkts[RTE_DIM(lengths)];
		uint32_t sent = 0;

		fixture_config(&fx);
		fx.config.internal_mtu = 1280;
		fx.config.checksum_mode =
			run % 2 ? JG_CHECKSUM_OFFLOAD : JG_CHECKSUM_SOFTWARE;
		fixture_start(&fx);
		pb_defaults(&base, 6);
		for (unsigned int i = 0; i < RTE_DIM(lengths); i++) {
			base.ip_id = (uint16_t)(100 + i);
			pkts[i] = fixture_segment(&base, sent, lengths[i]);
			sent += lengths[i];
		}
		fixture_merge(&fx, pkts, RTE_DIM(pkts));
		fixture_flush(&fx);
		/* The two small ones merge with each other only. */
		const uint32_t expected[] = {big, big, big, 400};

		fixture_expect_lengths(&fx, base.seq, expected,
				       RTE_DIM(expected));
		fixture_finish(&fx);
	}
}

/* The internal MTU is a hard cap, met exactly: 8460 payload bytes fill
 * an 8500-byte IPv4 packet; one more byte spills into a second packet. */
static void internal_mtu_cap_exact(void)
{
	for (uint8_t version = 4; version <= 6; version += 2) {
		uint32_t capacity = 8500 - (version == 4 ? 20 : 40) - 20;

		for (int extra = 0; extra <= 1; extra++) {
			struct fixture fx;
			struct pb_spec base;
			struct rte_mbuf *pkts[16];
			uint32_t total = capacity + (uint32_t)extra, sent = 0;
			unsigned int n = 0;

			fixture_begin(&fx, &base, version);
			while (sent < total) {
				uint32_t length = RTE_MIN(1410u, total - sent);

				base.ip_id = (uint16_t)(100 + n);
				pkts[n++] =
					fixture_segment(&base, sent, length);
				sent += length;
			}
			fixture_merge(&fx, pkts, (uint16_t)n);
			fixture_flush(&fx);
			if (extra == 0) {
				const uint32_t lengths[] = {capacity};

				fixture_expect_lengths(&fx, base.seq, lengths,
						       1);
			} else {
				const uint32_t lengths[] = {capacity, 1};

				fixture_expect_lengths(&fx, base.seq, lengths,
						       2);
			}
			fixture_finish(&fx);
		}
	}
}

/* Other protocols and non-IP frames pass untouched. */
static void non_tcp_passes(void)
{
	struct fixture fx;
	struct pb_spec spec;
	uint8_t payload[100] = {0};
	uint8_t arp[60] = {0};
	struct rte_mbuf *pkts[3];

	fixture_config(&fx);
	fixture_start(&fx);
	pb_defaults(&spec, 4);
	spec.l4_protocol = 17;
	spec.payload = payload;
	spec.payload_length = sizeof(payload);
	pkts[0] = pb_build(fixture_pool, &spec);
	pkts[1] = pb_build(fixture_pool, &spec);
	arp[12] = 0x08;
	arp[13] = 0x06;
	pkts[2] = pb_from_bytes(fixture_pool, arp, sizeof(arp), 0);
	fixture_merge(&fx, pkts, 3);
	CHECK_EQ(fx.out_count, 3);
	CHECK(fx.out_count == 3 && fx.out[0] == pkts[0] &&
	      fx.out[1] == pkts[1] && fx.out[2] == pkts[2]);
	fixture_finish(&fx);
}

/* Ethernet padding on a small segment is not payload. */
static void ethernet_padding_ignored(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[2];

	fixture_begin(&fx, &base, 4);
	pkts[0] = fixture_segment(&base, 0, PAYLOAD);
	base.ip_id++;
	base.ethernet_padding = 6;
	pkts[1] = fixture_segment(&base, PAYLOAD, 4);
	FIXTURE_MERGE_EXPECT(&fx, pkts, 2, base.seq, PAYLOAD + 4);
}

/* Chained input (multi-segment mbufs) merges like flat input. */
static void chained_input(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[4];

	fixture_begin(&fx, &base, 4);
	base.segment_size = 300;
	for (unsigned int i = 0; i < 4; i++) {
		base.ip_id = (uint16_t)(100 + i);
		pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 4);
	fixture_flush(&fx);
	/* 4 inputs of 4 mbufs exceed 16 mbufs per chain only at the 5th. */
	const uint32_t lengths[] = {4 * PAYLOAD};

	fixture_expect_lengths(&fx, base.seq, lengths, 1);
	fixture_finish(&fx);
}

/* A run reaching the chain limit is released. */
static void chain_segment_limit(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[8];

	fixture_config(&fx);
	fx.config.max_chain_segments = 3;
	fixture_start(&fx);
	pb_defaults(&base, 4);
	for (unsigned int i = 0; i < 8; i++) {
		base.ip_id = (uint16_t)(100 + i);
		pkts[i] = fixture_segment(&base, i * 200, 200);
	}
	fixture_merge(&fx, pkts, 8);
	fixture_flush(&fx);
	const uint32_t lengths[] = {600, 600, 400};

	fixture_expect_lengths(&fx, base.seq, lengths, 3);
	for (unsigned int i = 0; i < fx.out_count; i++)
		CHECK(fx.out[i]->nb_segs <= 3);
	fixture_finish(&fx);
}

/* Merged packets are chains of the received buffers: no payload copy. */
static void zero_copy(void)
{
	struct fixture fx;
	struct pb_spec base;
	struct rte_mbuf *pkts[4];

	fixture_begin(&fx, &base, 4);
	for (unsigned int i = 0; i < 4; i++) {
		base.ip_id = (uint16_t)(100 + i);
		pkts[i] = fixture_segment(&base, i * PAYLOAD, PAYLOAD);
	}
	fixture_merge(&fx, pkts, 4);
	fixture_flush(&fx);
	CHECK_EQ(fx.out_count, 1);
	if (fx.out_count == 1) {
		struct rte_mbuf *m = fx.out[0];

		for (unsigned int i = 0; i < 4 && m != NULL; i++, m = m->next)
			CHECK(m == pkts[i]);
	}
	fixture_finish(&fx);
}

HARNESS_MAIN(
	"jg_test_merge_rules", HARNESS_CASE(data_same),
	HARNESS_CASE(data_large_then_small),
	HARNESS_CASE(data_small_then_large), HARNESS_CASE(pure_ack_in_middle),
	HARNESS_CASE(flag_psh), HARNESS_CASE(flag_fin),
	HARNESS_CASE(flags_syn_rst_urg), HARNESS_CASE(flag_cwr),
	HARNESS_CASE(tcp_bad_checksum), HARNESS_CASE(port_flags_bad_checksum),
	HARNESS_CASE(port_verified_checksums), HARNESS_CASE(tcp_sequence_gap),
	HARNESS_CASE(tcp_header_changes), HARNESS_CASE(tcp_same_options_merge),
	HARNESS_CASE(ip_header_changes), HARNESS_CASE(ip_options_and_fragments),
	HARNESS_CASE(ipv6_extension_headers), HARNESS_CASE(ip_id_rules),
	HARNESS_CASE(ip_id_wraparound), HARNESS_CASE(internal_mtu_cap_exact),
	HARNESS_CASE(segment_above_internal_mtu), HARNESS_CASE(non_tcp_passes),
	HARNESS_CASE(ethernet_padding_ignored), HARNESS_CASE(chained_input),
	HARNESS_CASE(chain_segment_limit), HARNESS_CASE(zero_copy))
