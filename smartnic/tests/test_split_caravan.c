/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Split: every size from one byte past the path MTU to the largest IP
 * packet, IPv4 and IPv6, both checksum modes, against the path-MTU table.
 * Caravan: round trips that must return every datagram byte for byte, and
 * malformed caravans that must be dropped with their reason counted.
 */
#include <string.h>

#include <rte_mbuf.h>

#include "fixture.h"

static uint8_t frame_out[PB_MAX_FRAME];

/* Split one packet of `payload` bytes and check the segments. */
static void split_and_check(struct fixture *fx, uint8_t version,
			    uint32_t payload, uint16_t path_mtu, uint8_t flags)
{
	static uint8_t data[PB_MAX_FRAME];
	struct pb_spec spec;
	struct rte_mbuf *out[128];
	uint16_t count;
	uint32_t header = (version == 4 ? 20u : 40u) + 20u;
	uint32_t mss = path_mtu - header, expected, covered = 0;
	bool ok = true;

	pb_defaults(&spec, version);
	spec.tcp_flags = flags;
	spec.ip_id = 65530; /* IDs wrap while counting up */
	pb_stream_fill(0, 0, data, payload);
	spec.payload = data;
	spec.payload_length = payload;
	count = fixture_split_one(fx, &spec, out, RTE_DIM(out));
	expected = payload + header <= path_mtu ? 1 : (payload + mss - 1) / mss;
	CHECK_EQ(count, expected);
	for (uint16_t i = 0; i < count; i++) {
		struct pb_view v;
		const char *problem =
			pb_check(out[i], frame_out, sizeof(frame_out), &v);

		if (problem != NULL) {
			fprintf(stderr, "  segment %u of %u bytes: %s\n", i,
				payload, problem);
			ok = false;
			continue;
		}
		ok &= v.ip_length <= path_mtu;
		ok &= v.seq == spec.seq + covered;
		ok &= memcmp(v.payload, data + covered, v.payload_length) == 0;
		if (version == 4 && count > 1)
			ok &= v.ip_id == (uint16_t)(65530 + i);
		ok &= !!(v.tcp_flags & PB_TCP_CWR) ==
		      (i == 0 && (flags & PB_TCP_CWR));
		ok &= !!(v.tcp_flags & PB_TCP_PSH) ==
		      (i + 1 == count && (flags & PB_TCP_PSH));
		ok &= !!(v.tcp_flags & PB_TCP_FIN) ==
		      (i + 1 == count && (flags & PB_TCP_FIN));
		ok &= (v.tcp_flags & PB_TCP_ACK) != 0;
		covered += v.payload_length;
	}
	CHECK(ok);
	CHECK_EQ(covered, payload);
	rte_pktmbuf_free_bulk(out, count);
}

/* With no rule, every size splits to the family's default path MTU: 1500
 * for IPv4, IPv6's minimum of 1280 for IPv6. */
static void split_every_size(void)
{
	for (int mode = 0; mode < 2; mode++) {
		for (uint8_t version = 4; version <= 6; version += 2) {
			struct fixture fx;
			uint32_t header = (version == 4 ? 20u : 40u) + 20u;
			uint32_t largest = 65535 - (version == 4 ? 40u : 20u);
			uint32_t path = version == 4 ? 1500u : 1280u;

			fixture_config(&fx);
			fx.config.checksum_mode = mode;
			fixture_start(&fx);
			/* Every size near the MTU, then a stride to the max
			 * (checking every size to 64 KB twice over would take
			 * minutes; the stride is prime so all residues of the
			 * MSS are visited). */
			for (uint32_t p = path - header - 2;
			     p < path - header + 3000; p++)
				split_and_check(&fx, version, p, path,
						PB_TCP_ACK | PB_TCP_PSH |
							PB_TCP_CWR);
			for (uint32_t p = 4500; p <= largest; p += 97)
				split_and_check(&fx, version, p, path,
						PB_TCP_ACK | PB_TCP_FIN);
			split_and_check(&fx, version, largest, path,
					PB_TCP_ACK | PB_TCP_PSH);
			fixture_finish(&fx);
		}
	}
}

/* The longest matching prefix decides the MTU; deleting restores it. */
static void path_mtu_table(void)
{
	struct fixture fx;
	struct jg_prefix wide = {.ip_version = 4, .depth = 8};
	struct jg_prefix narrow = {.ip_version = 4, .depth = 24};
	struct jg_prefix v6 = {.ip_version = 6, .depth = 32};
	const uint8_t v6_addr[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 9};
	const uint8_t v6_unlisted[16] = {0x20, 0x01, 0x0d, 0xb9, [15] = 9};

	fixture_config(&fx);
	fixture_start(&fx);
	wide.addr.v4 = rte_cpu_to_be_32(0xc6000000);
	narrow.addr.v4 = rte_cpu_to_be_32(0xc6336400);
	memcpy(v6.addr.v6, v6_addr, 16);
	CHECK_EQ(jg_pmtu_set(fx.engine, &wide, 9000), 0);
	CHECK_EQ(jg_pmtu_set(fx.engine, &narrow, 1280), 0);
	CHECK_EQ(jg_pmtu_set(fx.engine, &v6, 1400), 0);
	CHECK_EQ(jg_pmtu_set(fx.engine, &v6, 100), -EINVAL);
	CHECK_EQ(jg_pmtu_lookup_v4(fx.engine, rte_cpu_to_be_32(0xc6336401)),
		 1280);
	CHECK_EQ(jg_pmtu_lookup_v4(fx.engine, rte_cpu_to_be_32(0xc6010101)),
		 9000);
	CHECK_EQ(jg_pmtu_lookup_v4(fx.engine, rte_cpu_to_be_32(0x0a000001)),
		 1500);
	CHECK_EQ(jg_pmtu_lookup_v6(fx.engine, v6_addr), 1400);
	CHECK_EQ(jg_pmtu_lookup_v6(fx.engine, v6_unlisted), 1280);
	CHECK_EQ(jg_pmtu_delete(fx.engine, &narrow), 0);
	CHECK_EQ(jg_pmtu_delete(fx.engine, &narrow), -ENOENT);
	CHECK_EQ(jg_pmtu_lookup_v4(fx.engine, rte_cpu_to_be_32(0xc6336401)),
		 9000);

	/* The IPv6 test destination gets 1400: segments must fit it. */
	struct jg_prefix dst6 = {.ip_version = 6, .depth = 48};
	struct pb_spec spec;

	pb_defaults(&spec, 6);
	memcpy(dst6.addr.v6, spec.dst_v6, 16);
	CHECK_EQ(jg_pmtu_set(fx.engine, &dst6, 1400), 0);
	split_and_check(&fx, 6, 5000, 1400, PB_TCP_ACK);
	fixture_finish(&fx);
}

/* Small packets and non-TCP pass the split path untouched. */
static void split_passes_small_and_udp(void)
{
	struct fixture fx;
	struct pb_spec spec;
	static uint8_t data[3000];
	struct rte_mbuf *in[2], *out[4];
	uint16_t consumed, count;
	struct jg_stats stats;

	fixture_config(&fx);
	fixture_start(&fx);
	pb_defaults(&spec, 4);
	spec.payload = data;
	spec.payload_length = 100;
	in[0] = pb_build(fixture_pool, &spec);
	spec.l4_protocol = 17;
	spec.payload_length = 3000;
	spec.segment_size = 2048;
	in[1] = pb_build(fixture_pool, &spec);
	count = jg_split_burst(fx.engine, in, 2, out, 4, &consumed);
	CHECK_EQ(count, 2);
	CHECK(count == 2 && out[0] == in[0] && out[1] == in[1]);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.split.oversize_non_tcp, 1);
	rte_pktmbuf_free_bulk(out, count);
	fixture_finish(&fx);
}

/* ------------------------------------------------------------------ */

static struct rte_mbuf *datagram(uint8_t version, uint32_t index,
				 uint32_t length, uint16_t src_port,
				 uint32_t *frame_length, uint8_t *frame)
{
	static uint8_t data[PB_MAX_FRAME];
	struct pb_spec spec;

	pb_defaults(&spec, version);
	spec.l4_protocol = 17;
	spec.src_port = src_port;
	spec.tos = 0x01; /* ECT(1): must survive */
	spec.ip_id = (uint16_t)(7 * index + 3);
	spec.udp_no_checksum = version == 4 && index % 3 == 0;
	pb_stream_fill(index, 0, data, length);
	spec.payload = data;
	spec.payload_length = length;
	*frame_length = pb_frame(&spec, frame);
	return pb_build(fixture_pool, &spec);
}

/* Pack a burst, unpack the caravans, compare every byte. */
static void caravan_round_trip(void)
{
	for (int mode = 0; mode < 2; mode++) {
		for (uint8_t version = 4; version <= 6; version += 2) {
			struct fixture fx;
			struct rte_mbuf *in[40], *packed[40], *back[64];
			static uint8_t originals[40][1600];
			uint32_t lengths[40];
			uint16_t consumed, packed_count, back_count;
			struct jg_stats stats;

			fixture_config(&fx);
			fx.config.checksum_mode = mode;
			fixture_start(&fx);
			for (uint32_t i = 0; i < 40; i++)
				in[i] = datagram(version, i,
						 1 + (i * 37) % 1400,
						 (uint16_t)(5000 + i % 2),
						 &lengths[i], originals[i]);
			packed_count = jg_caravan_pack(fx.engine, in, 40,
						       packed, 40, &consumed);
			CHECK_EQ(consumed, 40);
			CHECK(packed_count < 20);
			/* Caravans are valid UDP packets within the MTU. */
			for (uint16_t i = 0; i < packed_count; i++) {
				struct pb_view v;

				CHECK(pb_check(packed[i], frame_out,
					       sizeof(frame_out), &v) == NULL);
				CHECK(v.ip_length <= 8500);
			}
			/* A checksum-offload caravan needs the port to
			 * finish it before it is "received". */
			for (uint16_t i = 0; i < packed_count; i++) {
				struct pb_view v;

				if (pb_check(packed[i], frame_out,
					     sizeof(frame_out), &v) != NULL)
					continue;
				rte_pktmbuf_free(packed[i]);
				packed[i] =
					pb_from_bytes(fixture_pool, frame_out,
						      v.frame_length, 0);
			}
			back_count = jg_caravan_unpack(fx.engine, packed,
						       packed_count, back, 64,
						       &consumed);
			CHECK_EQ(consumed, packed_count);
			CHECK_EQ(back_count, 40);
			/* Per source port (flow), order is kept. */
			uint32_t next[2] = {0, 1};

			for (uint16_t i = 0; i < back_count; i++) {
				struct pb_view v;
				const char *problem =
					pb_check(back[i], frame_out,
						 sizeof(frame_out), &v);

				CHECK(problem == NULL);
				if (problem != NULL)
					continue;
				uint32_t flow = v.src_port - 5000;
				uint32_t index = next[flow];

				next[flow] += 2;
				CHECK(index < 40 &&
				      v.frame_length == lengths[index] &&
				      memcmp(frame_out, originals[index],
					     lengths[index]) == 0);
			}
			rte_pktmbuf_free_bulk(back, back_count);
			jg_engine_get_stats(fx.engine, &stats);
			CHECK_EQ(stats.caravan.datagrams_unpacked,
				 stats.caravan.datagrams_packed);
			fixture_finish(&fx);
		}
	}
}

/*
 * With long chains allowed (--max-segments 64) a caravan of tiny datagrams
 * could collect more records than fit one header buffer (256 data bytes in
 * jumbogate-nic); building it then failed and every datagram in it was
 * dropped as no-mbuf. Caravans now stop growing at what the buffer holds.
 */
static void caravan_fits_header_buffer(void)
{
	static struct rte_mempool *small_headers;
	struct fixture fx;
	struct rte_mbuf *in[60], *packed[60];
	/* Ethernet + IPv6 + UDP + 10 bytes of data = 72 bytes. */
	static uint8_t originals[60][128];
	uint32_t lengths[60];
	uint16_t consumed, packed_count;
	struct jg_stats stats;

	if (small_headers == NULL)
		small_headers = pb_pool("small_headers", 1024, 256);
	CHECK(small_headers != NULL);
	fixture_config(&fx);
	fx.config.header_pool = small_headers;
	fx.config.max_chain_segments = 64;
	fixture_start(&fx);
	for (uint32_t i = 0; i < 60; i++)
		in[i] = datagram(6, i, 10, 5000, &lengths[i], originals[i]);
	packed_count =
		jg_caravan_pack(fx.engine, in, 60, packed, 60, &consumed);
	CHECK_EQ(consumed, 60);
	jg_engine_get_stats(fx.engine, &stats);
	CHECK_EQ(stats.caravan.dropped, 0);
	CHECK_EQ(stats.drops[JG_DROP_NO_MBUF], 0);
	CHECK_EQ(stats.caravan.datagrams_packed, 60);
	CHECK(packed_count > 1 && packed_count < 10);
	for (uint16_t i = 0; i < packed_count; i++)
		CHECK(rte_pktmbuf_data_len(packed[i]) <= 256);
	rte_pktmbuf_free_bulk(packed, packed_count);
	fixture_finish(&fx);
}

/*
 * A first fragment shows no whole UDP datagram, so the packer cannot tell
 * its flow; it was passed through at once, ahead of the caravan holding
 * its flow's earlier datagrams (which leaves at the end of the burst, or
 * of the worker's hold). It now leaves after every caravan opened before.
 */
static void caravan_keeps_order_around_a_fragment(void)
{
	for (uint8_t version = 4; version <= 6; version += 2) {
		struct fixture fx;
		struct rte_mbuf *in[4], *out[4];
		static uint8_t original[1600];
		static uint8_t data[1600];
		uint32_t length;
		uint16_t consumed, count;
		struct pb_spec spec;

		fixture_config(&fx);
		fixture_start(&fx);
		for (uint32_t i = 0; i < 3; i++)
			in[i] = datagram(version, i, 200, 5000, &length,
					 original);
		pb_defaults(&spec, version);
		spec.l4_protocol = 17;
		spec.src_port = 5000;
		spec.more_fragments = true;
		spec.ipv6_fragment_header = version == 6;
		spec.udp_checksum_override = 0x1234; /* of the whole datagram */
		pb_stream_fill(9, 0, data, 1000);
		spec.payload = data;
		spec.payload_length = 1000;
		in[3] = pb_build(fixture_pool, &spec);
		CHECK(in[3] != NULL);
		count = jg_caravan_pack(fx.engine, in, 4, out, 4, &consumed);
		CHECK_EQ(consumed, 4);
		CHECK_EQ(count, 2);
		CHECK(out[count - 1] == in[3]);
		rte_pktmbuf_free_bulk(out, count);
		fixture_finish(&fx);
	}
}

/* Corrupt caravans in every way the format can be wrong. */
static void caravan_malformed_dropped(void)
{
	struct fixture fx;
	struct rte_mbuf *in[4], *packed[4], *back[8];
	static uint8_t originals[4][1600];
	uint32_t lengths[4];
	uint16_t consumed, count;
	struct jg_stats stats;
	struct pb_view v;
	static uint8_t good[PB_MAX_FRAME];
	uint32_t good_length, payload_at;

	fixture_config(&fx);
	fixture_start(&fx);
	for (uint32_t i = 0; i < 4; i++)
		in[i] = datagram(4, i, 200, 6000, &lengths[i], originals[i]);
	count = jg_caravan_pack(fx.engine, in, 4, packed, 4, &consumed);
	CHECK_EQ(count, 1);
	CHECK(pb_check(packed[0], good, sizeof(good), &v) == NULL);
	good_length = v.frame_length;
	payload_at = (uint32_t)(v.payload - good);
	rte_pktmbuf_free(packed[0]);

	struct {
		uint32_t offset; /* within the caravan header area */
		uint8_t value;
		enum jg_drop_reason reason;
	} corruptions[] = {
		{0, 0x00, JG_DROP_CARAVAN_BAD_MAGIC},
		{2, 0x09, JG_DROP_CARAVAN_BAD_VERSION},
		{3, 0x00, JG_DROP_CARAVAN_BAD_COUNT},
		{3, 0xff, JG_DROP_CARAVAN_TRUNCATED},
		{6, 0x7f, JG_DROP_CARAVAN_LENGTH_MISMATCH},
	};

	for (unsigned int c = 0; c < RTE_DIM(corruptions); c++) {
		static uint8_t bad[PB_MAX_FRAME];
		uint32_t l3 = 14, l4 = 34;

		memcpy(bad, good, good_length);
		bad[payload_at + corruptions[c].offset] = corruptions[c].value;
		/* Keep the UDP checksum right so the format is what fails. */
		bad[l4 + 6] = bad[l4 + 7] = 0;
		uint32_t sum =
			pb_sum(bad + l3 + 12, 8, 0) + 17 + (good_length - l4);
		uint16_t checksum = (uint16_t)~pb_fold(
			pb_sum(bad + l4, good_length - l4, sum));

		bad[l4 + 6] = (uint8_t)(checksum >> 8);
		bad[l4 + 7] = (uint8_t)checksum;
		packed[0] = pb_from_bytes(fixture_pool, bad, good_length, 0);
		count = jg_caravan_unpack(fx.engine, packed, 1, back, 8,
					  &consumed);
		CHECK_EQ(count, 0);
		CHECK_EQ(consumed, 1);
		jg_engine_get_stats(fx.engine, &stats);
		CHECK_EQ(stats.drops[corruptions[c].reason], 1);
	}
	/* A flipped payload byte fails the outer checksum. */
	{
		static uint8_t bad[PB_MAX_FRAME];

		memcpy(bad, good, good_length);
		bad[good_length - 1] ^= 0xff;
		packed[0] = pb_from_bytes(fixture_pool, bad, good_length, 0);
		count = jg_caravan_unpack(fx.engine, packed, 1, back, 8,
					  &consumed);
		CHECK_EQ(count, 0);
		jg_engine_get_stats(fx.engine, &stats);
		CHECK_EQ(stats.drops[JG_DROP_CARAVAN_BAD_CHECKSUM], 1);
		CHECK_EQ(stats.caravan.dropped, RTE_DIM(corruptions) + 1);
	}
	fixture_finish(&fx);
}

HARNESS_MAIN("jg_test_split_caravan", HARNESS_CASE(split_every_size),
	     HARNESS_CASE(path_mtu_table),
	     HARNESS_CASE(split_passes_small_and_udp),
	     HARNESS_CASE(caravan_round_trip),
	     HARNESS_CASE(caravan_fits_header_buffer),
	     HARNESS_CASE(caravan_keeps_order_around_a_fragment),
	     HARNESS_CASE(caravan_malformed_dropped))
