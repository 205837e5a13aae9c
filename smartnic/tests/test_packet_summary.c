/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jg_packet_summarize: what jumbogate-nic classifies packets by. It is the
 * engine's own parser, so the cases here are about what a classifier
 * needs: addresses and ports behind VLAN tags, IPv4 options and IPv6
 * extension headers, no ports from later fragments, and no answer at all
 * for what the engine would refuse to touch.
 */
#include <string.h>

#include <rte_common.h>
#include <rte_mbuf.h>

#include <jumbogate/engine.h>

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

HARNESS_MAIN("jg_test_packet_summary",
	     HARNESS_CASE(tcp_behind_vlan_and_ipv4_options),
	     HARNESS_CASE(tcp_behind_ipv6_destination_options),
	     HARNESS_CASE(udp_ports), HARNESS_CASE(fragments),
	     HARNESS_CASE(refused))
