/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: path MTU discovery (app/pathmtu.c) fed arbitrary packets and
 * its own probes and replies, cut and reordered, as jumbogate-nic's worker
 * feeds it. One instance plays prober and responder: its probes come back
 * to it (as the far border would see them, whole or in fragments), and so
 * do its replies, so a fuzzed input reaches every path, accepted replies
 * included. Checked after every step: each packet it builds is one
 * well-formed buffer with correct lengths and checksums; a reply is never
 * larger than the probe that asked for it; a learned MTU is 0 or one IP
 * allows; every buffer is back in its pool after each input.
 *
 * Input: records of
 *   op (1 byte)   bits 0-2: what to do, bits 4-7: time step in ms before it
 *   arg (1)       op-specific (fragment size, port, which probe)
 *   length (2)    big endian, then that many bytes
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <jumbogate/engine.h>

#include "packet_builder.h"
#include "pathmtu.h"

#define POOL_SIZE     1023u
#define DATA_ROOM     (9216u + 256u)
#define RECORD_HEADER 4u
#define KEPT	      16u /* probes and replies kept for feeding back */
#define NS_PER_MS     1000000ull

enum op {
	OP_RECEIVE,	   /* bytes as a received frame */
	OP_OUTBOUND,	   /* bytes as an outbound frame: may start a round */
	OP_POLL,	   /* timers of port arg & 1 */
	OP_FEED_WHOLE,	   /* kept packet arg % KEPT, as it was */
	OP_FEED_FRAGMENTS, /* kept packet, cut in fragments of arg * 8 bytes */
	OP_REQUEST,	   /* a round to the destination of a kept packet */
	OP_LOOKUP,	   /* the data path's lookup of bytes as an address */
	OP_CLEAR,	   /* forget the kept packets */
};

static struct nic_pathmtu *pm;
/* Buffers pathmtu.c builds its probes and replies in; the frames fed to
 * it have a pool of their own, whose head- and tailroom are
 * unaddressable under AddressSanitizer (pb_poison_slack). */
static struct rte_mempool *pool, *frame_pool;
static uint64_t now_ns = 1000 * NS_PER_MS;
static uint8_t kept[KEPT][DATA_ROOM];
static uint32_t kept_length[KEPT];
static unsigned int kept_next, kept_count;

static void die(const char *what)
{
	fprintf(stderr, "fuzz invariant broken: %s\n", what);
	abort();
}

static void init_once(void)
{
	static char *eal_argv[] = {
		"fuzz",
		"--no-huge",
		"--no-pci",
		"-l",
		"0",
		"-m",
		"256",
		"--no-shconf",
		"--no-telemetry",
		"--log-level",
		"*:critical",
		"--file-prefix=jumbogate-fuzz-pmtu",
	};
	struct nic_pmtu_config config;

	if (pm != NULL)
		return;
	if (rte_eal_init((int)RTE_DIM(eal_argv), eal_argv) < 0)
		die("EAL init");
	pool = pb_pool("fuzz_pmtu", POOL_SIZE, DATA_ROOM);
	frame_pool = pb_pool("fuzz_pmtu_frames", POOL_SIZE, DATA_ROOM);
	if (pool == NULL || frame_pool == NULL)
		die("pools");
	nic_pathmtu_config_init(&config);
	config.probe_mtu = 9000;
	config.capacity = 64;
	config.timeout_ms = 20;
	config.icmp_gap_s = 1;
	config.replies_per_s = 1000000;
	config.rounds_per_s = 1000000;
	pm = nic_pathmtu_create(&config, pool);
	if (pm == NULL)
		die("create");
}

static void keep(const struct rte_mbuf *m)
{
	uint32_t length = rte_pktmbuf_pkt_len(m);
	const void *bytes;

	if (length > DATA_ROOM)
		die("a built packet is larger than any buffer");
	bytes = rte_pktmbuf_read(m, 0, length, kept[kept_next]);
	/* rte_pktmbuf_read copies only a chain; one buffer it points into. */
	if (bytes != kept[kept_next])
		memcpy(kept[kept_next], bytes, length);
	kept_length[kept_next] = length;
	kept_next = (kept_next + 1) % KEPT;
	if (kept_count < KEPT)
		kept_count++;
}

/* What pathmtu.c built: one buffer, lengths and checksums right; kept for
 * feeding back, then freed. max_ip: the largest IP length allowed. */
static void check_built(struct rte_mbuf **pkts, uint16_t count, uint32_t max_ip)
{
	static uint8_t buffer[DATA_ROOM + 64];

	for (uint16_t i = 0; i < count; i++) {
		struct pb_view view;
		const char *reason = NULL;

		if (rte_mbuf_check(pkts[i], 1, &reason) != 0)
			die(reason);
		if (pkts[i]->nb_segs != 1)
			die("a built packet is a chain");
		reason = pb_check(pkts[i], buffer, sizeof(buffer), &view);
		if (reason != NULL)
			die(reason);
		if (view.l4_protocol != IPPROTO_UDP || view.ip_length > max_ip)
			die("a built packet is not what it should be");
		keep(pkts[i]);
		rte_pktmbuf_free(pkts[i]);
	}
}

/* A frame of the fuzzer's bytes that pathmtu.c may read only within. */
static struct rte_mbuf *frame_of(const uint8_t *bytes, uint32_t length)
{
	struct rte_mbuf *m = pb_from_bytes(frame_pool, bytes, length, 0);

	if (m != NULL)
		pb_poison_slack(m);
	return m;
}

/* Hand a frame to the module as the worker does. */
static void receive(const uint8_t *bytes, uint32_t length)
{
	struct jg_packet_summary summary;
	struct rte_mbuf *m, *replies[1];
	uint16_t count = 0;
	uint32_t ip_length = 0;

	m = frame_of(bytes, length);
	if (m == NULL)
		return;
	if (!jg_packet_summarize(m, &summary) ||
	    !nic_pathmtu_wants(pm, &summary)) {
		rte_pktmbuf_free(m);
		return;
	}
	/* A reply to a whole probe is never larger than the probe; one to
	 * fragments never larger than IPv6 + UDP + header + 32 sizes. */
	ip_length = 40 + 8 + 20 + 2 * NIC_PMTU_MAX_FRAGMENTS;
	if (length >= 14 + 20 && (bytes[14] >> 4) == 4 &&
	    (bytes[20] & 0x3f) == 0 && bytes[21] == 0)
		ip_length = RTE_MIN(ip_length,
				    (uint32_t)bytes[16] << 8 | bytes[17]);
	else if (length >= 14 + 40 && (bytes[14] >> 4) == 6)
		ip_length = RTE_MIN(
			ip_length, 40 + ((uint32_t)bytes[18] << 8 | bytes[19]));
	if (!nic_pathmtu_receive(pm, m, now_ns, replies, &count))
		rte_pktmbuf_free(m);
	check_built(replies, count, ip_length);
}

static void outbound(const uint8_t *bytes, uint32_t length, unsigned int port)
{
	struct jg_packet_summary summary;
	struct rte_mbuf *m, *probes[NIC_PMTU_MAX_PROBE_SIZES + 1];
	uint16_t count;

	m = frame_of(bytes, length);
	if (m == NULL)
		return;
	if (jg_packet_summarize(m, &summary)) {
		count = nic_pathmtu_note_outbound(pm, m, &summary, port, now_ns,
						  probes, RTE_DIM(probes));
		check_built(probes, count, 9000);
	}
	rte_pktmbuf_free(m);
}

static void poll_timers(unsigned int port)
{
	struct rte_mbuf *probes[64];
	uint16_t count = nic_pathmtu_poll(pm, port, now_ns, probes, 64);

	check_built(probes, count, 9000);
}

/* A kept IPv4 packet cut as a router cuts it, fragments fed in an order
 * the arg picks (reversed when its top bit is set). */
static void feed_fragments(unsigned int which, uint8_t arg)
{
	const uint8_t *frame = kept[which];
	uint32_t length = kept_length[which], l2 = 14, data_size;
	uint32_t ihl, payload, offsets[64], count = 0;
	static uint8_t fragment[DATA_ROOM];

	if (length < l2 + 20 || (frame[l2] >> 4) != 4)
		return;
	ihl = (frame[l2] & 0xf) * 4u;
	payload = length - l2 - ihl;
	data_size = ((arg & 0x7f) + 1u) * 8u;
	for (uint32_t off = 0; off < payload && count < 64; off += data_size)
		offsets[count++] = off;
	for (uint32_t k = 0; k < count; k++) {
		uint32_t off = offsets[arg & 0x80 ? count - 1 - k : k];
		uint32_t size =
			payload - off < data_size ? payload - off : data_size;
		struct rte_ipv4_hdr *ip;
		uint16_t flags;

		memcpy(fragment, frame, l2 + ihl);
		memcpy(fragment + l2 + ihl, frame + l2 + ihl + off, size);
		ip = (struct rte_ipv4_hdr *)(fragment + l2);
		flags = (uint16_t)(off / 8);
		if (off + size < payload)
			flags |= RTE_IPV4_HDR_MF_FLAG;
		ip->fragment_offset = rte_cpu_to_be_16(flags);
		ip->total_length = rte_cpu_to_be_16((uint16_t)(ihl + size));
		ip->hdr_checksum = 0;
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		receive(fragment, l2 + ihl + size);
	}
}

static void request(unsigned int which)
{
	const uint8_t *frame = kept[which];
	/* Half the requests want the exact value: refinement rounds. */
	bool exact = which & 1;

	if (kept_length[which] < 14 + 40)
		return;
	if ((frame[14] >> 4) == 4)
		(void)nic_pathmtu_request_round(pm, 4, frame + 14 + 16, exact);
	else
		(void)nic_pathmtu_request_round(pm, 6, frame + 14 + 24, exact);
}

static void lookup(const uint8_t *bytes, uint16_t length)
{
	uint8_t addr[16] = {0};
	uint16_t mtu;
	uint8_t version = length > 0 && (bytes[0] & 1) ? 6 : 4;

	memcpy(addr, bytes + (length > 0),
	       RTE_MIN(16, length > 0 ? length - 1 : 0));
	mtu = nic_pathmtu_learned(pm, version, addr);
	if (mtu != 0 && (mtu < (version == 4 ? 576 : 1280) || mtu > 9000))
		die("a learned MTU IP does not allow");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t at = 0;
	unsigned int available, frames_available;

	init_once();
	available = rte_mempool_avail_count(pool);
	frames_available = rte_mempool_avail_count(frame_pool);
	kept_count = kept_next = 0;
	while (at + RECORD_HEADER <= size) {
		uint8_t op = data[at], arg = data[at + 1];
		uint16_t length = (uint16_t)(data[at + 2] << 8 | data[at + 3]);
		const uint8_t *bytes = data + at + RECORD_HEADER;

		at += RECORD_HEADER;
		if (length > size - at)
			length = (uint16_t)(size - at);
		at += length;
		now_ns += (uint64_t)(op >> 4) * NS_PER_MS;
		switch ((enum op)(op & 7)) {
		case OP_RECEIVE:
			receive(bytes, length);
			break;
		case OP_OUTBOUND:
			outbound(bytes, length, arg & 1);
			break;
		case OP_POLL:
			poll_timers(arg & 1);
			break;
		case OP_FEED_WHOLE:
			if (kept_count)
				receive(kept[arg % kept_count],
					kept_length[arg % kept_count]);
			break;
		case OP_FEED_FRAGMENTS:
			if (kept_count)
				feed_fragments(length % kept_count, arg);
			break;
		case OP_REQUEST:
			if (kept_count)
				request(arg % kept_count);
			break;
		case OP_LOOKUP:
			lookup(bytes, length);
			break;
		case OP_CLEAR:
			kept_count = kept_next = 0;
			break;
		}
	}
	/* Rounds end, fragment groups expire: what is held goes back. */
	now_ns += 10ull * 1000 * NS_PER_MS;
	poll_timers(0);
	poll_timers(1);
	if (rte_mempool_avail_count(pool) != available ||
	    rte_mempool_avail_count(frame_pool) != frames_available)
		die("a buffer was not returned");
	if (getenv("FUZZ_PATHMTU_STATS") != NULL) {
		/* Which paths an input reached, for whoever grows the corpus.
		 */
		struct nic_pmtu_stats stats;

		nic_pathmtu_get_stats(pm, &stats);
#define FUZZ_PRINT(name) fprintf(stderr, " " #name "=%" PRIu64, stats.name);
		NIC_PMTU_COUNTERS(FUZZ_PRINT)
#undef FUZZ_PRINT
		fprintf(stderr, "\n");
	}
	return 0;
}
