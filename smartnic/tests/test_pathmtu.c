/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Path MTU discovery (app/pathmtu*.c) under attack: what an outsider can
 * make the prober send, forged fragments and replies, colliding
 * destinations, stray fragments and probe floods. One instance plays
 * prober and responder, as jumbogate-nic's worker drives it: its probes
 * are fed back to it as the far border would receive them, and its
 * replies as the prober would.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <jumbogate/engine.h>

#include "harness.h"
#include "packet_builder.h"
#include "pathmtu.h"

#define NS_PER_MS     1000000ull
#define PORT	      48999
#define ETHER_LEN     14
#define PROBE_MTU     9000
#define ROUND_PROBES  6 /* a fragment probe and 1280, 1500, 4000, 8000, 9000 */
#define MESSAGE_AT    (ETHER_LEN + 20 + 8)
#define RACK_HOST     0x0a010001u /* 10.1.0.1 */
#define PEER_HOST     0x0a020001u /* 10.2.0.1 */
#define TCP_SYN	      0x02
#define TCP_ACK	      0x10
#define MAX_FRAME     (PROBE_MTU + ETHER_LEN)
#define FIRST_DATA    1480u /* data of a first fragment on a 1500 path */
#define HELLO_SIZE_V4 68

static struct rte_mempool *pool;
static uint64_t now_ns = 1000 * NS_PER_MS;

static struct nic_pathmtu *create(uint32_t replies_per_s)
{
	struct nic_pmtu_config config;

	if (pool == NULL)
		pool = pb_pool("test_pathmtu", 2047, MAX_FRAME + 256);
	nic_pathmtu_config_init(&config);
	config.probe_mtu = PROBE_MTU;
	config.replies_per_s = replies_per_s;
	return nic_pathmtu_create(&config, pool);
}

/* An Ethernet + IPv4 frame around payload; fragment is the IP header's
 * flags and offset field (host order). Returns its length. */
static uint32_t ipv4_frame(uint8_t *frame, uint32_t src, uint32_t dst,
			   uint16_t id, uint16_t fragment, uint8_t protocol,
			   const uint8_t *payload, uint32_t length)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + ETHER_LEN);

	memset(frame, 0, ETHER_LEN + sizeof(*ip));
	frame[0] = 0x02, frame[6] = 0x02, frame[11] = 1;
	frame[12] = 0x08;
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + length));
	ip->packet_id = rte_cpu_to_be_16(id);
	ip->fragment_offset = rte_cpu_to_be_16(fragment);
	ip->time_to_live = 64;
	ip->next_proto_id = protocol;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	memcpy(frame + ETHER_LEN + sizeof(*ip), payload, length);
	return ETHER_LEN + sizeof(*ip) + length;
}

/* Buffers this long make a jumbo frame a chain, as a port with
 * --mbuf-size below its MTU receives it. */
static uint16_t segment_size;

static struct rte_mbuf *mbuf_of(const uint8_t *frame, uint32_t length)
{
	return pb_from_bytes(pool, frame, length, segment_size);
}

/* A TCP segment from the rack host to dst: flags, seq, payload bytes. */
static struct rte_mbuf *segment(uint32_t dst, uint8_t flags, uint32_t seq,
				uint32_t payload)
{
	static uint8_t frame[MAX_FRAME], tcp[MAX_FRAME];
	uint16_t ports[2] = {rte_cpu_to_be_16(40000), rte_cpu_to_be_16(80)};
	rte_be32_t seq_be = rte_cpu_to_be_32(seq);

	memset(tcp, 0, 20 + payload);
	memcpy(tcp, ports, 4);
	memcpy(tcp + 4, &seq_be, 4);
	tcp[12] = 5 << 4;
	tcp[13] = flags;
	return mbuf_of(frame, ipv4_frame(frame, RACK_HOST, dst, 1, 0x4000,
					 IPPROTO_TCP, tcp, 20 + payload));
}

/* The packet to the prober as an outbound packet; probes it sends are
 * stored (the caller frees them). */
static uint16_t outbound(struct nic_pathmtu *pm, struct rte_mbuf *m,
			 struct rte_mbuf **probes)
{
	struct jg_packet_summary summary;
	uint16_t count = 0;

	if (jg_packet_summarize(m, &summary))
		count = nic_pathmtu_note_outbound(pm, m, &summary, 0, now_ns,
						  probes,
						  NIC_PMTU_MAX_PROBE_SIZES + 1);
	rte_pktmbuf_free(m);
	return count;
}

/* A received packet, as the worker hands it over; returns the reply it
 * made, if any. */
static struct rte_mbuf *receive(struct nic_pathmtu *pm, struct rte_mbuf *m)
{
	struct jg_packet_summary summary;
	struct rte_mbuf *replies[1] = {NULL};
	uint16_t count = 0;

	if (!jg_packet_summarize(m, &summary) ||
	    !nic_pathmtu_wants(pm, &summary) ||
	    !nic_pathmtu_receive(pm, m, now_ns, replies, &count))
		rte_pktmbuf_free(m);
	return count ? replies[0] : NULL;
}

static uint16_t poll_port(struct nic_pathmtu *pm, struct rte_mbuf **probes)
{
	return nic_pathmtu_poll(pm, 0, now_ns, probes, 64);
}

static void free_all(struct rte_mbuf **pkts, uint16_t count)
{
	for (uint16_t i = 0; i < count; i++)
		rte_pktmbuf_free(pkts[i]);
}

static uint32_t ip_length(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m) - ETHER_LEN;
}

static struct nic_pmtu_stats stats_of(const struct nic_pathmtu *pm)
{
	struct nic_pmtu_stats stats;

	nic_pathmtu_get_stats(pm, &stats);
	return stats;
}

static uint16_t learned(const struct nic_pathmtu *pm, uint32_t host)
{
	rte_be32_t addr = rte_cpu_to_be_32(host);

	return nic_pathmtu_learned(pm, 4, (const uint8_t *)&addr);
}

static bool tracked(struct nic_pathmtu *pm, uint32_t host)
{
	rte_be32_t addr = rte_cpu_to_be_32(host);
	struct nic_pmtu_view view;

	return nic_pathmtu_view(pm, 4, (const uint8_t *)&addr, now_ns, &view);
}

/* A UDP header and the message header (docs/pathmtu.md) in udp. */
static void message_header(uint8_t *udp, uint16_t udp_length, uint8_t type,
			   uint8_t kind, uint8_t count, const uint8_t *nonce,
			   uint16_t probe_size)
{
	rte_be16_t be = rte_cpu_to_be_16(PORT);

	memcpy(udp, &be, 2);
	memcpy(udp + 2, &be, 2);
	be = rte_cpu_to_be_16(udp_length);
	memcpy(udp + 4, &be, 2);
	memcpy(udp + 8, "JGPM", 4);
	udp[12] = 1, udp[13] = type, udp[14] = kind, udp[15] = count;
	memcpy(udp + 16, nonce, 8);
	be = rte_cpu_to_be_16(probe_size);
	memcpy(udp + 24, &be, 2);
}

/* A reply from host as the far border would send it: kind, the probe
 * size it names, the sizes it lists, the nonce. */
static struct rte_mbuf *reply(uint32_t host, const uint8_t *nonce, uint8_t kind,
			      uint16_t probe_size, const uint16_t *sizes,
			      uint8_t count)
{
	static uint8_t frame[MAX_FRAME];
	uint8_t udp[8 + 20 + 64] = {0};
	uint16_t length = (uint16_t)(8 + 20 + 2 * count);

	message_header(udp, length, 2, kind, count, nonce, probe_size);
	for (uint8_t i = 0; i < count; i++) {
		rte_be16_t be = rte_cpu_to_be_16(sizes[i]);

		memcpy(udp + 28 + 2 * i, &be, 2);
	}
	return mbuf_of(frame, ipv4_frame(frame, host, RACK_HOST, 7, 0,
					 IPPROTO_UDP, udp, length));
}

/* A round to PEER_HOST under way, its hello answered: the nonce. */
static void round_under_way(struct nic_pathmtu *pm, uint8_t *nonce)
{
	struct rte_mbuf *probes[64], *answer;
	uint16_t count =
		outbound(pm, segment(PEER_HOST, TCP_SYN, 1, 0), probes);

	CHECK_EQ(count, 1);
	if (count == 0)
		return;
	memcpy(nonce,
	       rte_pktmbuf_mtod_offset(probes[0], uint8_t *, MESSAGE_AT + 8),
	       8);
	if (count != 1) { /* no hello: the round is under way already */
		free_all(probes, count);
		return;
	}
	/* The far border answers the hello ... */
	answer = receive(pm, probes[0]);
	CHECK(answer != NULL);
	if (answer != NULL)
		CHECK(receive(pm, answer) == NULL);
	/* ... and the usual set follows. */
	now_ns += NS_PER_MS;
	count = poll_port(pm, probes);
	CHECK_EQ(count, ROUND_PROBES);
	free_all(probes, count);
}

/* Finding: one spoofed SYN to a jumbo instance made the border send 12
 * probes (65,728 bytes) to the spoofed source. */
static void an_outsiders_syn_makes_the_border_probe_no_one(void)
{
	struct nic_pathmtu *pm = create(1000);
	struct rte_mbuf *probes[64];
	uint16_t count;

	/* The instance's answer to a spoofed SYN, and its RST. */
	count = outbound(pm, segment(PEER_HOST, TCP_SYN | TCP_ACK, 1, 0),
			 probes);
	CHECK_EQ(count, 0);
	free_all(probes, count);
	count = outbound(pm, segment(PEER_HOST, 0x04, 1, 0), probes);
	CHECK_EQ(count, 0);
	free_all(probes, count);
	now_ns += 10 * NS_PER_MS;
	count = poll_port(pm, probes);
	CHECK_EQ(count, 0);
	free_all(probes, count);
	CHECK(!tracked(pm, PEER_HOST));
	CHECK_EQ(stats_of(pm).outbound_ignored, 1);
	CHECK_EQ(stats_of(pm).probe_bytes, 0);
	nic_pathmtu_free(pm);
}

/* What the rack starts gets one probe no larger than a bare SYN's frame
 * and its answer, and the usual set only once a responder answered. */
static void a_hello_comes_first_and_the_set_only_after_its_answer(void)
{
	struct nic_pathmtu *pm = create(1000);
	struct rte_mbuf *probes[64], *answer;
	uint16_t count;

	count = outbound(pm, segment(PEER_HOST, TCP_SYN, 1, 0), probes);
	CHECK_EQ(count, 1);
	if (count != 1)
		goto out;
	CHECK_EQ(ip_length(probes[0]), HELLO_SIZE_V4);
	/* Nobody answers: no second copy, nothing more. */
	now_ns += 50 * NS_PER_MS;
	count = poll_port(pm, probes + 1);
	CHECK_EQ(count, 0);
	/* A responder answers: the usual set follows. */
	answer = receive(pm, probes[0]);
	CHECK(answer != NULL);
	if (answer != NULL)
		CHECK(receive(pm, answer) == NULL);
	count = poll_port(pm, probes);
	CHECK_EQ(count, ROUND_PROBES);
	free_all(probes, count);
	CHECK_EQ(stats_of(pm).hellos_answered, 1);
	CHECK_EQ(stats_of(pm).probe_bytes, HELLO_SIZE_V4 + PROBE_MTU + 1280 +
						   1500 + 4000 + 8000 +
						   PROBE_MTU);
out:
	nic_pathmtu_free(pm);
}

/* A jumbo segment whose buffers are chained starts a round like any
 * other, and is remembered for matching ICMP errors: only its headers
 * need to be in the first buffer. */
static void a_segment_in_a_chain_of_buffers_starts_a_round(void)
{
	struct nic_pathmtu *pm = create(1000);
	struct rte_mbuf *probes[64];
	uint16_t count;

	segment_size = 2048;
	count = outbound(pm, segment(PEER_HOST, TCP_ACK, 1, 8000), probes);
	segment_size = 0;
	CHECK_EQ(count, 1);
	free_all(probes, count);
	CHECK(tracked(pm, PEER_HOST));
	nic_pathmtu_free(pm);
}

/* An ICMP "fragmentation needed" about PEER_HOST quoting a TCP segment
 * on the test's ports with this sequence number. */
static struct rte_mbuf *icmp_too_big(uint32_t seq)
{
	static uint8_t frame[256];
	uint8_t icmp[8 + 20 + 8] = {3, 4, 0, 0, 0, 0, 0x05, 0xdc};
	uint8_t quoted[8] = {0x9c, 0x40, 0, 80};
	rte_be32_t seq_be = rte_cpu_to_be_32(seq);

	memcpy(quoted + 4, &seq_be, 4);
	ipv4_frame(frame, RACK_HOST, PEER_HOST, 1, 0x4000, IPPROTO_TCP, quoted,
		   sizeof(quoted));
	memcpy(icmp + 8, frame + ETHER_LEN, 28);
	return mbuf_of(frame, ipv4_frame(frame, 0x0a0c0001u, RACK_HOST, 9, 0,
					 IPPROTO_ICMP, icmp, sizeof(icmp)));
}

/* Finding: a forged "fragmentation needed" from anyone asked for a new
 * round (12 probes) once every 10 s per destination. */
static void
only_an_icmp_error_quoting_what_the_border_sent_asks_for_a_round(void)
{
	struct nic_pathmtu *pm = create(1000);
	struct rte_mbuf *probes[64];
	uint8_t nonce[8];
	uint16_t count;

	round_under_way(pm, nonce);
	now_ns += 20000 * NS_PER_MS; /* the round is over, and the ICMP gap */
	count = poll_port(pm, probes);
	free_all(probes, count);
	/* Data to the peer: sequence 1,000,000 to 1,008,000. */
	count = outbound(pm, segment(PEER_HOST, TCP_ACK, 1000000, 8000),
			 probes);
	free_all(probes, count);
	/* Guesses 64 MiB apart, none near the segment. */
	for (uint32_t guess = 0; guess < 64; guess++)
		CHECK(receive(pm, icmp_too_big(guess * 0x04000000u +
					       0x02000000u)) == NULL);
	count = poll_port(pm, probes);
	CHECK_EQ(count, 0);
	free_all(probes, count);
	CHECK_EQ(stats_of(pm).icmp_unmatched, 64);
	CHECK_EQ(stats_of(pm).icmp_reprobes, 0);
	/* A router's errors about the pieces the segment was cut in: the
	 * first asks for a round, the second finds it asked for. */
	CHECK(receive(pm, icmp_too_big(1004000)) == NULL);
	CHECK(receive(pm, icmp_too_big(1000000)) == NULL);
	CHECK_EQ(stats_of(pm).icmp_ignored, 1);
	count = poll_port(pm, probes);
	CHECK_EQ(count, ROUND_PROBES);
	free_all(probes, count);
	CHECK_EQ(stats_of(pm).icmp_reprobes, 1);
	nic_pathmtu_free(pm);
}

/* Finding: the prober learned the largest size any fragment claimed; one
 * planted fragment made a border learn 7,020 on a 1,500-byte path. */
static void fragment_sizes_must_add_up_to_the_probe(void)
{
	struct nic_pathmtu *pm = create(1000);
	/* 9000 bytes cut by a 1500-byte link: six of 1500 and one of 120. */
	const uint16_t planted[] = {1500, 7020, 500};
	const uint16_t unequal[] = {1500, 1492, 1500, 1500, 1500, 1500, 128};
	const uint16_t short_sum[] = {1500, 1500, 1500};
	const uint16_t honest[] = {1500, 1500, 1500, 1500, 1500, 1500, 120};
	uint8_t nonce[8];

	round_under_way(pm, nonce);
	CHECK(receive(pm, reply(PEER_HOST, nonce, 1, PROBE_MTU, planted,
				RTE_DIM(planted))) == NULL);
	CHECK(receive(pm, reply(PEER_HOST, nonce, 1, PROBE_MTU, unequal,
				RTE_DIM(unequal))) == NULL);
	CHECK(receive(pm, reply(PEER_HOST, nonce, 1, PROBE_MTU, short_sum,
				RTE_DIM(short_sum))) == NULL);
	CHECK_EQ(learned(pm, PEER_HOST), 0);
	CHECK_EQ(stats_of(pm).replies_malformed, 3);
	CHECK(receive(pm, reply(PEER_HOST, nonce, 1, PROBE_MTU, honest,
				RTE_DIM(honest))) == NULL);
	CHECK_EQ(learned(pm, PEER_HOST), 1500);
	nic_pathmtu_free(pm);
}

/* Finding: take_reply accepted replies after the round ended, and for
 * sizes the prober never sent. */
static void replies_count_only_for_probes_of_the_round_under_way(void)
{
	struct nic_pathmtu *pm = create(1000);
	struct rte_mbuf *probes[64];
	const uint16_t unsent[] = {4200}, sent[] = {4000};
	uint8_t nonce[8];
	uint16_t count;

	round_under_way(pm, nonce);
	CHECK(receive(pm, reply(PEER_HOST, nonce, 2, 4200, unsent, 1)) == NULL);
	CHECK_EQ(learned(pm, PEER_HOST), 0);
	CHECK_EQ(stats_of(pm).replies_forged, 1);
	now_ns += 2000 * NS_PER_MS;
	count = poll_port(pm, probes); /* the round ends unanswered */
	free_all(probes, count);
	CHECK(receive(pm, reply(PEER_HOST, nonce, 2, 4000, sent, 1)) == NULL);
	CHECK_EQ(learned(pm, PEER_HOST), 0);
	CHECK_EQ(stats_of(pm).replies_late, 1);
	nic_pathmtu_free(pm);
}

/* A probe of ip_len bytes as one datagram's UDP bytes; returns their
 * number. */
static uint32_t probe_datagram(uint8_t *udp, uint8_t kind, uint16_t ip_len)
{
	static const uint8_t nonce[8] = {0x5a, 0x5a, 0x5a, 0x5a,
					 0x5a, 0x5a, 0x5a, 0x5a};
	uint16_t length = (uint16_t)(ip_len - 20);

	memset(udp, 0, length);
	message_header(udp, length, 1, kind, 0, nonce, ip_len);
	return length;
}

/* Fragment [offset, offset + length) of a datagram, MF as given. */
static struct rte_mbuf *fragment(uint32_t src, uint16_t id,
				 const uint8_t *datagram, uint32_t offset,
				 uint32_t length, bool more)
{
	static uint8_t frame[MAX_FRAME];

	return mbuf_of(frame,
		       ipv4_frame(frame, src, PEER_HOST, id,
				  (uint16_t)(offset / 8 | (more ? 0x2000 : 0)),
				  IPPROTO_UDP, datagram + offset, length));
}

/* The sizes a reply lists, and how many. */
static uint8_t reply_sizes(const struct rte_mbuf *m, uint16_t *sizes)
{
	uint8_t count =
		*rte_pktmbuf_mtod_offset(m, const uint8_t *, MESSAGE_AT + 7);

	for (uint8_t i = 0; i < count; i++) {
		rte_be16_t be;

		memcpy(&be,
		       rte_pktmbuf_mtod_offset(m, const uint8_t *,
					       MESSAGE_AT + 20 + 2 * i),
		       2);
		sizes[i] = rte_be_to_cpu_16(be);
	}
	return count;
}

/* Finding: the responder took the first fragment at an offset, the end
 * from any fragment with MF clear, and completion from a sum of lengths,
 * so a planted fragment made it report 7,020 for a 1,500-byte path. */
static void the_responder_answers_only_an_exact_cut(void)
{
	static uint8_t datagram[PROBE_MTU];
	struct nic_pathmtu *pm = create(1000);
	uint32_t length = probe_datagram(datagram, 1, PROBE_MTU);
	struct rte_mbuf *answer = NULL;
	uint16_t sizes[32];
	uint32_t at;

	/* A planted last fragment right after the real first: it ends the
	 * datagram at 8480 of the UDP length's 8980. */
	CHECK(receive(pm, fragment(RACK_HOST, 1, datagram, 0, FIRST_DATA,
				   true)) == NULL);
	CHECK(receive(pm, fragment(RACK_HOST, 1, datagram, FIRST_DATA, 7000,
				   false)) == NULL);
	/* One overlapping the real first where the real second is missing:
	 * the lengths still add up to the datagram's. */
	CHECK(receive(pm, fragment(RACK_HOST, 2, datagram, 0, FIRST_DATA,
				   true)) == NULL);
	CHECK(receive(pm, fragment(RACK_HOST, 2, datagram, 8, FIRST_DATA,
				   true)) == NULL);
	for (at = 2 * FIRST_DATA; at < length; at += FIRST_DATA)
		CHECK(receive(pm, fragment(RACK_HOST, 2, datagram, at,
					   RTE_MIN(FIRST_DATA, length - at),
					   at + FIRST_DATA < length)) == NULL);
	CHECK_EQ(stats_of(pm).probes_answered, 0);
	CHECK_EQ(stats_of(pm).fragment_groups_conflicting, 2);

	/* The real cut, a duplicate in it: answered, each size once. */
	for (at = 0; at < length; at += FIRST_DATA) {
		answer = receive(pm, fragment(RACK_HOST, 3, datagram, at,
					      RTE_MIN(FIRST_DATA, length - at),
					      at + FIRST_DATA < length));
		if (at == FIRST_DATA)
			CHECK(receive(pm, fragment(RACK_HOST, 3, datagram, at,
						   FIRST_DATA, true)) == NULL);
		if (at + FIRST_DATA < length)
			CHECK(answer == NULL);
	}
	CHECK(answer != NULL);
	if (answer != NULL) {
		CHECK_EQ(reply_sizes(answer, sizes), 7);
		CHECK_EQ(sizes[0], 1500);
		CHECK_EQ(sizes[6], 20 + length - 6 * FIRST_DATA);
		rte_pktmbuf_free(answer);
	}
	nic_pathmtu_free(pm);
}

/* Finding: every fragment took one of 256 groups, the oldest evicted, so
 * stray fragments (anyone's) pushed out a probe waiting for its rest. */
static void stray_fragments_do_not_evict_a_pending_probe(void)
{
	static uint8_t datagram[PROBE_MTU], stray[2 * FIRST_DATA];
	struct nic_pathmtu *pm = create(1000);
	uint32_t length = probe_datagram(datagram, 1, PROBE_MTU);
	struct rte_mbuf *answer = NULL;

	CHECK(receive(pm, fragment(RACK_HOST, 5, datagram, 0, FIRST_DATA,
				   true)) == NULL);
	/* 1,000 later fragments of other datagrams, which show no port. */
	for (uint32_t i = 0; i < 1000; i++) {
		now_ns += 1000;
		answer = receive(pm,
				 fragment(0x0b000000u + i, (uint16_t)i, stray,
					  FIRST_DATA, FIRST_DATA, true));
		CHECK(answer == NULL);
		rte_pktmbuf_free(answer);
	}
	for (uint32_t at = FIRST_DATA; at < length; at += FIRST_DATA)
		answer = receive(pm, fragment(RACK_HOST, 5, datagram, at,
					      RTE_MIN(FIRST_DATA, length - at),
					      at + FIRST_DATA < length));
	CHECK(answer != NULL);
	rte_pktmbuf_free(answer);
	CHECK_EQ(stats_of(pm).probes_answered, 1);
	nic_pathmtu_free(pm);
}

/* Finding: one global reply budget, so a flood of spoofed probes from one
 * network starved every other border of answers. */
static void a_probe_flood_from_one_prefix_leaves_others_answered(void)
{
	static uint8_t datagram[1500], frame[MAX_FRAME];
	struct nic_pathmtu *pm = create(10);
	uint32_t length = probe_datagram(datagram, 2, 1500);
	unsigned int answered = 0;

	for (uint32_t i = 0; i < 100; i++) {
		struct rte_mbuf *answer = receive(
			pm, mbuf_of(frame,
				    ipv4_frame(frame, 0x0a090000u + i,
					       PEER_HOST, (uint16_t)i, 0x4000,
					       IPPROTO_UDP, datagram, length)));

		answered += answer != NULL;
		rte_pktmbuf_free(answer);
	}
	CHECK_EQ(answered, 10);
	CHECK_EQ(stats_of(pm).replies_rate_limited, 90);
	for (uint32_t i = 0; i < 3; i++) {
		struct rte_mbuf *answer = receive(
			pm, mbuf_of(frame,
				    ipv4_frame(frame, RACK_HOST + i, PEER_HOST,
					       (uint16_t)i, 0x4000, IPPROTO_UDP,
					       datagram, length)));

		CHECK(answer != NULL);
		rte_pktmbuf_free(answer);
	}
	nic_pathmtu_free(pm);
}

/* CRC32-C without its seed (linear: the seed cancels out of a
 * difference). */
static uint32_t crc_of(uint32_t host)
{
	rte_be32_t addr = rte_cpu_to_be_32(host);

	return rte_hash_crc_4byte(addr, 0);
}

/* Finding: the table's hash was CRC32-C with a secret seed; CRC is
 * linear, so eight addresses computed from the public CRC shared a
 * victim's slot whatever the seed, and evicted its entry. */
static void addresses_colliding_under_crc_leave_a_victim_alone(void)
{
	struct nic_pathmtu *pm = create(1000);
	struct rte_mbuf *probes[64];
	const uint32_t victim = PEER_HOST, mask = NIC_PMTU_DEFAULT_CAPACITY - 1;
	unsigned int colliders = 0;
	uint16_t count;

	count = outbound(pm, segment(victim, TCP_SYN, 1, 0), probes);
	free_all(probes, count);
	for (uint32_t delta = 1; colliders < 8; delta++) {
		uint32_t other = victim ^ delta;

		/* The same slot as the victim's for every seed. */
		if (((crc_of(other) ^ crc_of(victim)) & mask) != 0)
			continue;
		now_ns += NS_PER_MS;
		count = outbound(pm, segment(other, TCP_SYN, 1, 0), probes);
		free_all(probes, count);
		colliders++;
	}
	CHECK(tracked(pm, victim));
	CHECK_EQ(stats_of(pm).destinations_evicted, 0);
	nic_pathmtu_free(pm);
}

HARNESS_MAIN(
	"test_pathmtu",
	HARNESS_CASE(an_outsiders_syn_makes_the_border_probe_no_one),
	HARNESS_CASE(a_hello_comes_first_and_the_set_only_after_its_answer),
	HARNESS_CASE(a_segment_in_a_chain_of_buffers_starts_a_round),
	HARNESS_CASE(
		only_an_icmp_error_quoting_what_the_border_sent_asks_for_a_round),
	HARNESS_CASE(fragment_sizes_must_add_up_to_the_probe),
	HARNESS_CASE(replies_count_only_for_probes_of_the_round_under_way),
	HARNESS_CASE(the_responder_answers_only_an_exact_cut),
	HARNESS_CASE(stray_fragments_do_not_evict_a_pending_probe),
	HARNESS_CASE(a_probe_flood_from_one_prefix_leaves_others_answered),
	HARNESS_CASE(addresses_colliding_under_crc_leave_a_victim_alone))
