/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-split-bench: the engine's outbound path (jg_split_burst) on
 * one core. Jumbo TCP packets of many flows, as a rack host sends them to
 * the Internet, are cut to the path MTU. Three cases, each timed on the
 * same packets:
 *
 *   unknown       no flow state: split looks each packet's flow up and
 *                 misses (the learned path MTU and prefix tables decide),
 *   known         every flow's SYN went through the merge path, whose MSS
 *                 raise keeps the MSS the Internet host announced (1460 /
 *                 1440): the lookup hits, and the path MTU still decides,
 *   peer-limited  the Internet hosts announced 1200: the flow's MSS cuts
 *                 below the path MTU (more, smaller segments).
 *
 * A flow whose SYN state the flow table evicted (its bucket was full:
 * column "evicted") is cut to the path MTU like an unknown one.
 *
 * Packets arrive as chains of 2048-byte mbufs (what a jumbo RX ring
 * gives), built outside the timed region; the timed region is the call
 * plus freeing its output, which stands in for transmission. Prints
 * packets in and segments out per second, Gbit/s of input and ns per
 * packet, the fastest of --repeat passes (checksums written in software,
 * or with --offload-checksums left to a NIC that offloads them); checks that
 * every pass cut every packet into the number of segments its limit gives, and
 * that nothing leaked.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include <jumbogate/engine.h>

#include "packet_builder.h"

#define BURST	    32u
#define OUT_CAP	    1024u
#define CHAIN_BYTES 2048u

enum split_case { CASE_UNKNOWN, CASE_KNOWN, CASE_PEER_LIMITED, CASES };

static const char *const case_names[CASES] = {"unknown", "known",
					      "peer-limited"};

struct options {
	uint32_t flows;
	uint32_t packets; /* per pass */
	uint32_t ip_length;
	uint32_t repeat;
	uint8_t ip_version;
	bool offload_checksums;
};

struct result {
	uint64_t best_cycles;
	uint64_t segments;
	uint32_t largest;
	uint64_t flows_evicted; /* flows whose SYN state the table lost */
};

static struct rte_mempool *input_pool, *header_pool;
static struct rte_mbuf *inputs[1u << 16];
static struct rte_mbuf *out[OUT_CAP];
static uint8_t payload[PB_MAX_FRAME];

/* Flow i: rack host 10.0.0.2 port 10000 + i and Internet host number i
 * (port 443), so that flows spread over the flow table's buckets. */
static void flow_spec(struct pb_spec *spec, const struct options *o,
		      uint32_t flow, bool outbound)
{
	uint32_t internet_v4 = 0xc6336400u | (flow & 0xff); /* 198.51.100.x */
	uint32_t rack_v4 = 0x0a000002u;			    /* 10.0.0.2 */
	uint16_t internet_port = 443, rack_port = (uint16_t)(10000 + flow);
	uint8_t internet_v6[16], rack_v6[16];

	pb_defaults(spec, o->ip_version);
	memcpy(internet_v6, spec->src_v6, 16);
	memcpy(rack_v6, spec->dst_v6, 16);
	internet_v6[15] = (uint8_t)flow;
	internet_v6[14] = (uint8_t)(flow >> 8);
	spec->src_v4 = outbound ? rack_v4 : internet_v4;
	spec->dst_v4 = outbound ? internet_v4 : rack_v4;
	memcpy(spec->src_v6, outbound ? rack_v6 : internet_v6, 16);
	memcpy(spec->dst_v6, outbound ? internet_v6 : rack_v6, 16);
	spec->src_port = outbound ? rack_port : internet_port;
	spec->dst_port = outbound ? internet_port : rack_port;
}

/* The Internet host's SYN, through the merge path: its MSS is raised and
 * the flow keeps the original. */
static bool announce_mss(struct jg_engine *engine, const struct options *o,
			 uint32_t flow, uint16_t mss)
{
	struct pb_spec syn;
	struct rte_mbuf *m;
	uint16_t n;

	flow_spec(&syn, o, flow, false);
	syn.tcp_flags = PB_TCP_SYN;
	syn.tcp_options[0] = 2;
	syn.tcp_options[1] = 4;
	syn.tcp_options[2] = (uint8_t)(mss >> 8);
	syn.tcp_options[3] = (uint8_t)mss;
	syn.tcp_options_length = 4;
	m = pb_build(input_pool, &syn);
	if (m == NULL)
		return false;
	n = jg_merge_burst(engine, &m, 1, 0, out, OUT_CAP);
	n += jg_merge_flush_all(engine, out + n, (uint16_t)(OUT_CAP - n));
	rte_pktmbuf_free_bulk(out, n);
	return true;
}

static bool build_inputs(const struct options *o)
{
	for (uint32_t i = 0; i < o->packets; i++) {
		struct pb_spec spec;
		uint32_t headers = o->ip_version == 4 ? 40u : 60u;

		flow_spec(&spec, o, i % o->flows, true);
		spec.seq = 1000 + (i / o->flows) * (o->ip_length - headers);
		spec.payload = payload;
		spec.payload_length = o->ip_length - headers;
		spec.segment_size = CHAIN_BYTES;
		inputs[i] = pb_build(input_pool, &spec);
		if (inputs[i] == NULL) {
			fprintf(stderr, "input pool exhausted at %u\n", i);
			rte_pktmbuf_free_bulk(inputs, i);
			return false;
		}
	}
	return true;
}

static uint64_t segments_per_packet(const struct options *o, uint16_t mtu)
{
	uint32_t headers = o->ip_version == 4 ? 40u : 60u;
	uint32_t data = o->ip_length - headers, mss = mtu - headers;

	return (data + mss - 1) / mss;
}

/* One timed pass over freshly built inputs. A packet is cut to peer_mtu
 * when split found its flow's announced MSS (counted in
 * split.peer_mss_limited), else to path_mtu: the count of segments must
 * add up exactly. */
static bool run_pass(struct jg_engine *engine, const struct options *o,
		     struct result *r, uint16_t path_mtu, uint16_t peer_mtu)
{
	uint64_t segments = 0, start, cycles, limited, expected;
	struct jg_stats before, after;
	uint32_t taken = 0;

	if (!build_inputs(o))
		return false;
	jg_engine_get_stats(engine, &before);
	start = rte_rdtsc_precise();
	while (taken < o->packets) {
		uint16_t n = (uint16_t)RTE_MIN(BURST, o->packets - taken);
		uint16_t consumed = 0;
		uint16_t count = jg_split_burst(engine, inputs + taken, n, out,
						OUT_CAP, &consumed);

		for (uint16_t k = 0; k < count; k++)
			if (rte_pktmbuf_pkt_len(out[k]) > r->largest)
				r->largest = rte_pktmbuf_pkt_len(out[k]);
		rte_pktmbuf_free_bulk(out, count);
		segments += count;
		taken += consumed;
		if (consumed == 0) {
			fprintf(stderr, "split took nothing\n");
			rte_pktmbuf_free_bulk(inputs + taken,
					      o->packets - taken);
			return false;
		}
	}
	cycles = rte_rdtsc_precise() - start;
	if (r->best_cycles == 0 || cycles < r->best_cycles)
		r->best_cycles = cycles;
	r->segments = segments;
	jg_engine_get_stats(engine, &after);
	limited = after.split.peer_mss_limited - before.split.peer_mss_limited;
	expected = limited * segments_per_packet(o, peer_mtu) +
		   (o->packets - limited) * segments_per_packet(o, path_mtu);
	if (segments != expected) {
		fprintf(stderr,
			"%" PRIu64 " segments, expected %" PRIu64 " (%" PRIu64
			" packets limited by their peer's MSS)\n",
			segments, expected, limited);
		return false;
	}
	return true;
}

static bool run_case(enum split_case c, const struct options *o,
		     struct result *r)
{
	struct jg_engine_config config;
	struct jg_engine *engine;
	uint16_t path_mtu, mtu;
	bool ok = true;

	jg_engine_config_init(&config);
	config.name = case_names[c];
	config.header_pool = header_pool;
	config.checksum_mode = o->offload_checksums ? JG_CHECKSUM_OFFLOAD
						    : JG_CHECKSUM_SOFTWARE;
	config.max_flows = RTE_MAX(o->flows * 2, 1024u);
	/* A path that carries what a peer announcing 1460 takes, so the
	 * known case cuts exactly where the unknown one does. */
	path_mtu = o->ip_version == 4 ? config.default_path_mtu_v4
				      : config.default_path_mtu_v6;
	engine = jg_engine_create(&config);
	if (engine == NULL) {
		fprintf(stderr, "cannot create the engine\n");
		return false;
	}
	mtu = path_mtu;
	for (uint32_t f = 0; f < o->flows && c != CASE_UNKNOWN && ok; f++)
		ok = announce_mss(
			engine, o, f,
			c == CASE_KNOWN
				? (uint16_t)(path_mtu -
					     (o->ip_version == 4 ? 40 : 60))
				: 1200);
	if (c == CASE_PEER_LIMITED)
		mtu = (uint16_t)(1200 + (o->ip_version == 4 ? 40 : 60));
	for (uint32_t pass = 0; pass < o->repeat && ok; pass++)
		ok = run_pass(engine, o, r, path_mtu, mtu);
	if (ok) {
		struct jg_stats stats;

		jg_engine_get_stats(engine, &stats);
		r->flows_evicted = stats.merge.flows_evicted;
		/* Only where the peer announced less may split cut below the
		 * path MTU. */
		if ((c != CASE_PEER_LIMITED) !=
		    (stats.split.peer_mss_limited == 0)) {
			fprintf(stderr, "%s: %" PRIu64 " packets limited\n",
				case_names[c], stats.split.peer_mss_limited);
			ok = false;
		}
	}
	jg_engine_destroy(engine);
	return ok;
}

static void usage(const char *program)
{
	fprintf(stderr,
		"usage: %s [--flows N] [--packets N] [--ip-length BYTES] "
		"[--ipv6] [--repeat N] [--offload-checksums]\n",
		program);
}

static bool parse_options(int argc, char **argv, struct options *o)
{
	static const struct option long_options[] = {
		{"flows", required_argument, NULL, 'f'},
		{"packets", required_argument, NULL, 'n'},
		{"ip-length", required_argument, NULL, 'l'},
		{"ipv6", no_argument, NULL, '6'},
		{"repeat", required_argument, NULL, 'R'},
		{"offload-checksums", no_argument, NULL, 'O'},
		{NULL, 0, NULL, 0},
	};
	int c;

	o->flows = 1024;
	o->packets = 16384;
	o->ip_length = 8500;
	o->repeat = 5;
	o->ip_version = 4;
	while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->flows = (uint32_t)atol(optarg);
			break;
		case 'n':
			o->packets = (uint32_t)atol(optarg);
			break;
		case 'l':
			o->ip_length = (uint32_t)atol(optarg);
			break;
		case '6':
			o->ip_version = 6;
			break;
		case 'R':
			o->repeat = (uint32_t)atol(optarg);
			break;
		case 'O':
			o->offload_checksums = true;
			break;
		default:
			return false;
		}
	}
	return optind == argc && o->flows >= 1 && o->flows <= 65535 &&
	       o->packets >= 1 && o->packets <= RTE_DIM(inputs) &&
	       o->ip_length >= 1600 && o->ip_length <= 9000 && o->repeat >= 1;
}

int main(int argc, char **argv)
{
	static struct options o;
	static struct result results[CASES];
	char *eal_argv[] = {
		argv[0],
		"--no-huge",
		"--no-pci",
		"-l",
		"0",
		"-m",
		"1024",
		"--no-telemetry",
		"--log-level",
		"*:error",
		"--file-prefix=jumbogate-split-bench",
		"--no-shconf",
	};
	double hz;
	bool ok = true;

	if (!parse_options(argc, argv, &o)) {
		usage(argv[0]);
		return 2;
	}
	if (rte_eal_init((int)RTE_DIM(eal_argv), eal_argv) < 0) {
		fprintf(stderr, "cannot initialise DPDK EAL\n");
		return 1;
	}
	/* Each input is a chain of ceil(ip_length / 2048) + 1 mbufs; every
	 * segment out is a header mbuf and one or two indirect ones. */
	input_pool = rte_pktmbuf_pool_create(
		"split_in", o.packets * (o.ip_length / CHAIN_BYTES + 2) + 1024,
		256, JG_MBUF_PRIV_SIZE, CHAIN_BYTES + RTE_PKTMBUF_HEADROOM,
		SOCKET_ID_ANY);
	header_pool = rte_pktmbuf_pool_create(
		"split_hdr", OUT_CAP * 4 + 4096, 256, JG_MBUF_PRIV_SIZE,
		256 + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
	if (input_pool == NULL || header_pool == NULL) {
		fprintf(stderr, "cannot create the mbuf pools\n");
		rte_eal_cleanup();
		return 1;
	}
	pb_stream_fill(0, 0, payload, sizeof(payload));
	hz = (double)rte_get_tsc_hz();
	printf("split: %u packets of %u bytes (IPv%u) per pass, %u flows, "
	       "checksums %s, fastest of %u passes, one core\n",
	       o.packets, o.ip_length, o.ip_version, o.flows,
	       o.offload_checksums ? "left to the NIC" : "in software",
	       o.repeat);
	printf("%-13s %9s %10s %9s %9s %6s %7s\n", "case", "Mpps in",
	       "Mseg/s out", "Gbit/s in", "ns/pkt", "frame", "evicted");
	for (unsigned int c = 0; c < CASES && ok; c++) {
		struct result *r = &results[c];
		double seconds;

		ok = run_case((enum split_case)c, &o, r);
		if (!ok)
			break;
		seconds = (double)r->best_cycles / hz;
		printf("%-13s %9.3f %10.3f %9.2f %9.1f %6u %7" PRIu64 "\n",
		       case_names[c], o.packets / seconds / 1e6,
		       r->segments / seconds / 1e6,
		       (double)o.packets * o.ip_length * 8 / seconds / 1e9,
		       seconds * 1e9 / o.packets, r->largest, r->flows_evicted);
	}
	if (ok && rte_mempool_in_use_count(input_pool) +
				  rte_mempool_in_use_count(header_pool) !=
			  0) {
		fprintf(stderr, "leaked %u input and %u header mbufs\n",
			rte_mempool_in_use_count(input_pool),
			rte_mempool_in_use_count(header_pool));
		ok = false;
	}
	rte_mempool_free(input_pool);
	rte_mempool_free(header_pool);
	rte_eal_cleanup();
	return ok ? 0 : 1;
}
