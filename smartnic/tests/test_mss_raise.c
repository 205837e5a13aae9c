/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MSS raise: SYNs entering the rack announce what the internal MTU
 * carries, so jumbo hosts send large segments for the border to split.
 * Each output is checked with the packet builder's own parser and
 * checksum code, and the MSS read back from the bytes.
 */
#include <string.h>

#include <rte_mbuf.h>

#include "fixture.h"

static uint8_t frame[PB_MAX_FRAME];
static uint8_t before[PB_MAX_FRAME];

/* A SYN (or SYN-ACK) from the Internet; the MSS option starts after
 * `nops` no-operation options, so its value can sit at an odd offset. */
static void syn_spec(struct pb_spec *spec, uint8_t ip_version, uint8_t flags,
		     int mss, unsigned int nops)
{
	uint8_t *o = spec->tcp_options;
	unsigned int n = 0;

	pb_defaults(spec, ip_version);
	spec->tcp_flags = flags;
	for (unsigned int i = 0; i < nops; i++)
		o[n++] = 1;
	if (mss >= 0) {
		o[n++] = 2;
		o[n++] = 4;
		o[n++] = (uint8_t)(mss >> 8);
		o[n++] = (uint8_t)mss;
	}
	/* Window scale, as real SYNs carry, then pad to 4 bytes. */
	o[n++] = 3;
	o[n++] = 3;
	o[n++] = 7;
	while (n % 4 != 0)
		o[n++] = 0;
	spec->tcp_options_length = (uint8_t)n;
}

/* Send one packet through merge; returns the checker's view of the one
 * packet that must come out (NULL when it is broken). */
static const struct pb_view *through_merge(struct fixture *fx,
					   const struct pb_spec *spec,
					   uint32_t *length_before)
{
	static struct pb_view view;
	const char *problem;

	*length_before = pb_frame(spec, before);
	fixture_merge_one(fx, pb_build(fixture_pool, spec));
	fixture_flush(fx);
	CHECK_EQ(fx->out_count, 1);
	if (fx->out_count != 1)
		return NULL;
	problem = pb_check(fx->out[0], frame, sizeof(frame), &view);
	if (problem != NULL)
		fprintf(stderr, "  %s\n", problem);
	CHECK(problem == NULL);
	return problem == NULL ? &view : NULL;
}

static uint16_t mss_in(const struct pb_view *v, unsigned int nops)
{
	const uint8_t *value =
		v->frame + v->l2_length + v->l3_length + 20 + nops + 2;

	return (uint16_t)(value[0] << 8 | value[1]);
}

static uint64_t mss_raised(struct fixture *fx)
{
	struct jg_stats stats;

	jg_engine_get_stats(fx->engine, &stats);
	return stats.merge.mss_raised;
}

static void expect_raise(uint8_t ip_version, uint8_t flags, int mss,
			 unsigned int nops, enum jg_checksum_mode mode,
			 uint16_t expected)
{
	struct fixture fx;
	struct pb_spec spec;
	const struct pb_view *v;
	uint32_t length;

	fixture_config(&fx);
	fx.config.checksum_mode = mode;
	fixture_start(&fx);
	syn_spec(&spec, ip_version, flags, mss, nops);
	v = through_merge(&fx, &spec, &length);
	if (v != NULL) {
		CHECK_EQ(mss_in(v, nops), expected);
		CHECK_EQ(v->frame_length, length);
		CHECK_EQ(v->tcp_flags, flags);
	}
	CHECK_EQ(mss_raised(&fx), expected != mss ? 1 : 0);
	fixture_finish(&fx);
}

static void raise_ipv4_syn(void)
{
	for (int mode = 0; mode < 2; mode++)
		expect_raise(4, PB_TCP_SYN, 1460, 0,
			     (enum jg_checksum_mode)mode, 8500 - 40);
}

static void raise_ipv6_syn_ack(void)
{
	for (int mode = 0; mode < 2; mode++)
		expect_raise(6, PB_TCP_SYN | PB_TCP_ACK, 1440, 0,
			     (enum jg_checksum_mode)mode, 8500 - 60);
}

/* The value at an odd offset straddles two checksum words. */
static void raise_at_odd_offset(void)
{
	expect_raise(4, PB_TCP_SYN, 1400, 1, JG_CHECKSUM_SOFTWARE, 8460);
	expect_raise(6, PB_TCP_SYN | PB_TCP_ACK, 536, 3, JG_CHECKSUM_SOFTWARE,
		     8440);
}

/* A peer that announces more than a 1500-byte path carries knows its
 * path; it is left alone. */
static void larger_mss_untouched(void)
{
	expect_raise(4, PB_TCP_SYN, 1461, 0, JG_CHECKSUM_SOFTWARE, 1461);
	expect_raise(6, PB_TCP_SYN, 1441, 0, JG_CHECKSUM_SOFTWARE, 1441);
	expect_raise(4, PB_TCP_SYN, 9000, 0, JG_CHECKSUM_SOFTWARE, 9000);
}

static void expect_unchanged(const struct pb_spec *spec, bool raise)
{
	struct fixture fx;
	const struct pb_view *v;
	uint32_t length;

	fixture_config(&fx);
	fx.config.raise_syn_mss = raise;
	fixture_start(&fx);
	v = through_merge(&fx, spec, &length);
	if (v != NULL) {
		CHECK_EQ(v->frame_length, length);
		CHECK(memcmp(v->frame, before, length) == 0);
	}
	CHECK_EQ(mss_raised(&fx), 0);
	fixture_finish(&fx);
}

static void syn_without_mss_untouched(void)
{
	struct pb_spec spec;

	syn_spec(&spec, 4, PB_TCP_SYN, -1, 0);
	expect_unchanged(&spec, true);
	syn_spec(&spec, 6, PB_TCP_SYN | PB_TCP_ACK, -1, 2);
	expect_unchanged(&spec, true);
}

/* Only SYNs announce an MSS: the option in any other segment is not
 * ours to touch, nor is a SYN with RST. */
static void non_syn_untouched(void)
{
	struct pb_spec spec;

	syn_spec(&spec, 4, PB_TCP_ACK, 1460, 0);
	expect_unchanged(&spec, true);
	syn_spec(&spec, 6, PB_TCP_ACK | PB_TCP_FIN, 1440, 0);
	expect_unchanged(&spec, true);
	syn_spec(&spec, 4, PB_TCP_SYN | PB_TCP_RST, 1460, 0);
	expect_unchanged(&spec, true);
}

static void disabled_by_config(void)
{
	struct pb_spec spec;

	syn_spec(&spec, 4, PB_TCP_SYN, 1460, 0);
	expect_unchanged(&spec, false);
}

/* Raising what the Internet side announced does not change the rule for
 * the rack side: an internal host that answers with a legacy MSS still
 * gets its flow unmerged. */
static void learned_mss_rule_kept(void)
{
	struct fixture fx;
	struct pb_spec syn, reply, data;
	struct rte_mbuf *pkts[4], *out[4];
	uint16_t consumed, count;
	struct jg_stats stats;

	fixture_config(&fx);
	fixture_start(&fx);
	syn_spec(&syn, 4, PB_TCP_SYN, 1460, 0);
	fixture_merge_one(&fx, pb_build(fixture_pool, &syn));
	CHECK_EQ(mss_raised(&fx), 1);

	syn_spec(&reply, 4, PB_TCP_SYN | PB_TCP_ACK, 1460, 0);
	reply.src_v4 = syn.dst_v4;
	reply.dst_v4 = syn.src_v4;
	reply.src_port = syn.dst_port;
	reply.dst_port = syn.src_port;
	pkts[0] = pb_build(fixture_pool, &reply);
	count = jg_split_burst(fx.engine, pkts, 1, out, RTE_DIM(out),
			       &consumed);
	CHECK_EQ(count, 1);
	rte_pktmbuf_free_bulk(out, count);

	pb_defaults(&data, 4);
	for (unsigned int i = 0; i < 4; i++) {
		data.ip_id = (uint16_t)(100 + i);
		pkts[i] = fixture_segment(&data, i * 1000, 1000);
	}
	fixture_merge(&fx, pkts, 4);
	fixture_flush(&fx);
	/* SYN + four unmerged segments. */
	CHECK_EQ(fx.out_count, 5);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.merge.legacy_mss_passes, 4);
	fixture_finish(&fx);
}

/* A flow's outbound packet of `payload` bytes (the rack host's side of
 * the SYN syn), split; returns the largest segment payload and the count
 * of segments, each checked. */
static unsigned int split_outbound(struct fixture *fx,
				   const struct pb_spec *syn, uint32_t payload,
				   uint32_t *largest)
{
	static uint8_t bytes[16384];
	struct rte_mbuf *out[64];
	struct pb_spec data = *syn;
	uint16_t count;

	data.tcp_flags = PB_TCP_ACK;
	data.tcp_options_length = 0;
	data.src_v4 = syn->dst_v4;
	data.dst_v4 = syn->src_v4;
	memcpy(data.src_v6, syn->dst_v6, 16);
	memcpy(data.dst_v6, syn->src_v6, 16);
	data.src_port = syn->dst_port;
	data.dst_port = syn->src_port;
	data.payload = bytes;
	data.payload_length = payload;
	count = fixture_split_one(fx, &data, out, RTE_DIM(out));
	*largest = 0;
	for (uint16_t i = 0; i < count; i++) {
		struct pb_view v;
		const char *problem =
			pb_check(out[i], frame, sizeof(frame), &v);

		CHECK(problem == NULL);
		if (problem == NULL && v.payload_length > *largest)
			*largest = v.payload_length;
	}
	rte_pktmbuf_free_bulk(out, count);
	return count;
}

/* The raise hides the Internet host's MSS from the rack host, so split
 * keeps to it: a peer behind an MSS clamp announcing 1200 gets segments of
 * 1200 although the path carries 1500 (a 1400-byte packet that fits the
 * path is cut too), one announcing 1460 gets what the path gives (over
 * IPv6 by default 1280: a peer announcing 1440 is still raised, and cut to
 * 1220), and a forged tiny MSS cannot make split cut below 536 bytes, what
 * a host that announces nothing accepts. */
static void split_keeps_to_the_mss_the_internet_host_announced(void)
{
	static const struct {
		uint8_t version;
		int mss;
		uint32_t payload, largest, segments;
		uint64_t limited;
	} cases[] = {
		{4, 1200, 4000, 1200, 4, 1}, {4, 1200, 1400, 1200, 2, 1},
		{4, 1460, 4000, 1460, 3, 0}, {4, 1, 4000, 536, 8, 1},
		{6, 1100, 4000, 1100, 4, 1}, {6, 1440, 4000, 1220, 4, 0},
		{6, 1, 4000, 536, 8, 1},
	};

	for (unsigned int c = 0; c < RTE_DIM(cases); c++) {
		struct fixture fx;
		struct pb_spec syn;
		struct jg_stats stats;
		uint32_t largest;
		unsigned int segments;

		fixture_config(&fx);
		fixture_start(&fx);
		syn_spec(&syn, cases[c].version, PB_TCP_SYN, cases[c].mss, 0);
		fixture_merge_one(&fx, pb_build(fixture_pool, &syn));
		CHECK_EQ(mss_raised(&fx), 1);
		fixture_drop_outputs(&fx);
		segments =
			split_outbound(&fx, &syn, cases[c].payload, &largest);
		CHECK_EQ(segments, cases[c].segments);
		CHECK_EQ(largest, cases[c].largest);
		jg_engine_get_stats(fx.engine, &stats);
		CHECK_EQ(stats.split.peer_mss_limited, cases[c].limited);
		fixture_finish(&fx);
	}
}

HARNESS_MAIN("jg_test_mss_raise", HARNESS_CASE(raise_ipv4_syn),
	     HARNESS_CASE(raise_ipv6_syn_ack),
	     HARNESS_CASE(raise_at_odd_offset),
	     HARNESS_CASE(larger_mss_untouched),
	     HARNESS_CASE(syn_without_mss_untouched),
	     HARNESS_CASE(non_syn_untouched), HARNESS_CASE(disabled_by_config),
	     HARNESS_CASE(learned_mss_rule_kept),
	     HARNESS_CASE(split_keeps_to_the_mss_the_internet_host_announced))
