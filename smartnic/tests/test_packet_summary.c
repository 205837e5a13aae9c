/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jg_packet_summarize: what jumbogate-nic classifies packets by. It is the
 * engine's own parser, so the cases here are about what a classifier
 * needs: addresses and ports behind VLAN tags, IPv4 options and IPv6
 * extension headers, no ports from later fragments, and no answer at all
 * for what the engine would refuse to touch. The last case holds the
 * parser's own path for plain TCP to its general parse.
 */
#include <string.h>

#include <rte_common.h>
#include <rte_mbuf.h>

#include <jumbogate/engine.h>

#include "../engine/internal.h"
#include "fixture.h"
#include "harness.h"
#include "packet_builder.h"

static struct rte_mbuf *built(const struct pb_spec *spec)
{
	fixture_pools();
	return pb_build(fixture_pool, spec);
}

static void check_addresses(const struct jg_packet_summary *s,
			    const struct pb_spec *spec)
{
	CHECK_EQ(s->key.ip_version, spec->ip_version);
	if (spec->ip_version == 4) {
		CHECK_EQ(rte_be_to_cpu_32(s->key.src.v4), spec->src_v4);
		CHECK_EQ(rte_be_to_cpu_32(s->key.dst.v4), spec->dst_v4);
	} else {
		CHECK(memcmp(s->key.src.v6, spec->src_v6, 16) == 0);
		CHECK(memcmp(s->key.dst.v6, spec->dst_v6, 16) == 0);
	}
}

static void check_summary(const struct pb_spec *spec, uint8_t protocol,
			  bool has_ports)
{
	struct rte_mbuf *m = built(spec);
	struct jg_packet_summary s;

	CHECK(m != NULL);
	CHECK(jg_packet_summarize(m, &s));
	check_addresses(&s, spec);
	CHECK_EQ(s.key.protocol, protocol);
	CHECK_EQ(s.has_ports, has_ports);
	CHECK_EQ(rte_be_to_cpu_16(s.key.src_port),
		 has_ports ? spec->src_port : 0);
	CHECK_EQ(rte_be_to_cpu_16(s.key.dst_port),
		 has_ports ? spec->dst_port : 0);
	rte_pktmbuf_free(m);
}

static void tcp_behind_vlan_and_ipv4_options(void)
{
	struct pb_spec spec;

	pb_defaults(&spec, 4);
	spec.vlan = true;
	spec.vlan_tci = 42;
	spec.ip_options_length = 8;
	memset(spec.ip_options, 1, 8); /* no-operations */
	spec.src_port = 40001;
	spec.dst_port = 443;
	check_summary(&spec, 6, true);
}

static void tcp_behind_ipv6_destination_options(void)
{
	struct pb_spec spec;

	pb_defaults(&spec, 6);
	spec.ipv6_destination_options_length = 16;
	spec.src_port = 40002;
	spec.dst_port = 80;
	check_summary(&spec, 6, true);
}

static void udp_ports(void)
{
	static const uint8_t data[32];
	struct pb_spec spec;

	pb_defaults(&spec, 6);
	spec.l4_protocol = 17;
	spec.src_port = 5353;
	spec.dst_port = 4789;
	spec.payload = data;
	spec.payload_length = sizeof(data);
	check_summary(&spec, 17, true);
}

/* A first fragment shows its ports; a later one starts with payload
 * bytes, which must not be read as ports (spoofable flow identity). */
static void fragments(void)
{
	static const uint8_t data[64];
	struct pb_spec spec;

	for (uint8_t version = 4; version <= 6; version += 2) {
		pb_defaults(&spec, version);
		spec.dont_fragment = false;
		spec.ipv6_fragment_header = version == 6;
		spec.payload = data;
		spec.payload_length = sizeof(data);
		spec.more_fragments = true;
		spec.fragment_offset = 0;
		check_summary(&spec, 6, true);
		spec.fragment_offset = 185;
		check_summary(&spec, 0, false);
		spec.more_fragments = false;
		check_summary(&spec, 0, false);
	}
}

/* The engine refuses what lies about its length or is not IP; the
 * program then passes it on untouched without asking the engine. */
static void refused(void)
{
	static uint8_t frame[PB_MAX_FRAME];
	struct jg_packet_summary s;
	struct pb_spec spec;
	struct rte_mbuf *m;
	uint32_t length;

	fixture_pools();
	pb_defaults(&spec, 4);
	length = pb_frame(&spec, frame);
	/* IPv4 total length claims 8500 bytes in a 54-byte frame. */
	frame[14 + 2] = 8500 >> 8;
	frame[14 + 3] = 8500 & 0xff;
	m = pb_from_bytes(fixture_pool, frame, length, 0);
	CHECK(!jg_packet_summarize(m, &s));
	CHECK_EQ(s.key.ip_version, 0);
	rte_pktmbuf_free(m);

	/* ARP. */
	length = pb_frame(&spec, frame);
	frame[12] = 0x08;
	frame[13] = 0x06;
	m = pb_from_bytes(fixture_pool, frame, length, 0);
	CHECK(!jg_packet_summarize(m, &s));
	rte_pktmbuf_free(m);

	/* An IPv6 chain of five extension headers, past what the engine
	 * follows. */
	pb_defaults(&spec, 6);
	length = pb_frame(&spec, frame);
	{
		uint8_t rebuilt[PB_MAX_FRAME];
		uint32_t at = 14 + 40;

		memcpy(rebuilt, frame, at);
		rebuilt[14 + 6] = 60; /* destination options */
		for (int i = 0; i < 5; i++, at += 8) {
			memset(rebuilt + at, 0, 8);
			rebuilt[at] = i == 4 ? 6 : 60;
		}
		memcpy(rebuilt + at, frame + 14 + 40, length - 14 - 40);
		length += 5 * 8;
		rebuilt[14 + 4] = (uint8_t)((length - 14 - 40) >> 8);
		rebuilt[14 + 5] = (uint8_t)((length - 14 - 40) & 0xff);
		m = pb_from_bytes(fixture_pool, rebuilt, length, 0);
		CHECK(!jg_packet_summarize(m, &s));
		rte_pktmbuf_free(m);
	}
}

static bool same_parse(const struct jg_parsed *a, const struct jg_parsed *b)
{
	return a->l2_len == b->l2_len && a->l3_len == b->l3_len &&
	       a->l4_len == b->l4_len && a->ip_version == b->ip_version &&
	       a->l4_protocol == b->l4_protocol &&
	       a->tcp_flags == b->tcp_flags &&
	       a->ipv4_has_options == b->ipv4_has_options &&
	       a->is_fragment == b->is_fragment &&
	       a->fragment_shows_ports == b->fragment_shows_ports &&
	       a->ipv6_routing == b->ipv6_routing &&
	       a->l4_complete == b->l4_complete &&
	       a->ip_length == b->ip_length &&
	       a->payload_length == b->payload_length;
}

/* The bytes every check of the plain TCP parse reads: Ethernet type; IPv4
 * version and header length, total length, fragment field and protocol,
 * TCP data offset and flags; IPv6 version, payload length and next
 * header, TCP data offset and flags. */
static const uint16_t checked_bytes[] = {12, 13, 14, 16, 17, 18, 19,
					 20, 21, 23, 46, 47, 66, 67};

/*
 * jg_parse reads plain TCP frames on a path of its own and hands the
 * rest to the general parse. Frames of many shapes, each with one of the
 * bytes that path checks changed or cut short, must get the general
 * parse's answer, field by field. The unchanged frames of shapes 0-2 and 7
 * are plain TCP, and so are many of the changed ones.
 */
static void plain_tcp_path_agrees_with_the_general_parse(void)
{
	static uint8_t frame[PB_MAX_FRAME];
	static const uint8_t data[1448];
	uint64_t state = 0x9e3779b97f4a7c15ull;
	uint32_t compared = 0;

	fixture_pools();
	for (int shape = 0; shape < 10; shape++) {
		struct pb_spec spec;
		uint32_t length;

		pb_defaults(&spec, shape >= 7 ? 6 : 4);
		spec.payload = data;
		spec.payload_length = shape == 1 ? 0 : 1448;
		if (shape == 2) {
			spec.tcp_options_length = 12; /* timestamps' size */
			memset(spec.tcp_options, 1, 12);
		}
		if (shape == 3)
			spec.vlan = true;
		if (shape == 4) {
			spec.ip_options_length = 4;
			memset(spec.ip_options, 1, 4);
		}
		if (shape == 5) {
			spec.dont_fragment = false;
			spec.more_fragments = true;
		}
		if (shape == 6)
			spec.l4_protocol = 17;
		if (shape == 8)
			spec.ipv6_destination_options_length = 8;
		if (shape == 9)
			spec.ipv6_fragment_header = true;
		spec.ethernet_padding = shape == 1 ? 6 : 0;
		length = pb_frame(&spec, frame);
		for (int trial = 0; trial < 2000; trial++) {
			uint8_t copy[1600];
			uint32_t cut = length;
			struct jg_parsed fast, general;
			struct rte_mbuf *m;
			uint16_t segment;
			bool fast_ok, general_ok;

			memcpy(copy, frame, length);
			state = state * 6364136223846793005ull +
				1442695040888963407ull;
			if (trial > 0) {
				uint32_t pick = (uint32_t)(state >> 33);
				uint16_t at =
					checked_bytes[pick %
						      RTE_DIM(checked_bytes)];

				if (pick & 0x100)
					copy[at] ^= (uint8_t)(1u << (pick >> 9 &
								     7));
				else
					copy[at] = (uint8_t)(pick >> 12);
				if ((pick & 0x3000) == 0)
					cut = RTE_MIN(length,
						      (pick >> 16) % 80u);
			}
			if (cut == 0)
				continue;
			/* Now and then the headers span two mbufs. */
			segment = trial > 0 && (state >> 20 & 3) == 0
					  ? (uint16_t)(34 + (state >> 40) % 40)
					  : 0;
			m = pb_from_bytes(fixture_pool, copy, cut, segment);
			CHECK(m != NULL);
			/* Under ASan, neither parse may read past a cut. */
			pb_poison_slack(m);
			fast_ok = jg_parse(m, &fast);
			general_ok = jg_parse_general(m, &general);
			CHECK_EQ(fast_ok, general_ok);
			if (fast_ok && general_ok)
				CHECK(same_parse(&fast, &general));
			compared++;
			rte_pktmbuf_free(m);
		}
	}
	CHECK(compared > 19000);
}

HARNESS_MAIN("jg_test_packet_summary",
	     HARNESS_CASE(tcp_behind_vlan_and_ipv4_options),
	     HARNESS_CASE(tcp_behind_ipv6_destination_options),
	     HARNESS_CASE(udp_ports), HARNESS_CASE(fragments),
	     HARNESS_CASE(refused),
	     HARNESS_CASE(plain_tcp_path_agrees_with_the_general_parse))
