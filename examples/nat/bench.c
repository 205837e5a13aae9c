/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-nat-bench: the example NAT (nat.h) on one core, on an
 * in-memory trace, with merging and without: packets per second and
 * Gbit/s it takes in, and what its own per-packet work ran on.
 *
 *   jumbogate-nat-bench [EAL options] -- [--flows N] [--packets N]
 *       [--train N] [--concurrency N] [--repeat N] [--work-ns N]
 *       [--check]
 *
 * The trace is the inbound half of downloads through the NAT: `flows`
 * TCP connections (opened outbound first, untimed) receive full
 * 1460-byte segments in trains of `train` back-to-back segments, as
 * Linux senders do with TSO, `concurrency` trains interleaved at random,
 * on a virtual 100 Gbit/s clock. Each round copies a batch of the trace
 * into fresh buffers marked checksum-verified, as a NIC would hand them
 * over (not timed), then times the NAT on it: merge, translate, split,
 * and handing the result to a send that counts and frees it. Every mode
 * sees the same batches at the same virtual times. Time is the thread's
 * CPU time; the figure is the best of `repeat` runs.
 *
 * With --check (which slows the send) a mode fails unless every payload
 * byte came out, every packet to its inside endpoint, with the checksums
 * a port would send. --work-ns N adds N ns of spinning to every packet
 * the NAT translates: an NF whose own work per packet costs more than
 * this NAT's (about 60 ns here), for the point where merging pays.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include <jumbogate/engine.h>

#include "nat.h"

#define MSS		 1460u
#define FRAME		 (14u + 20u + 20u + MSS)
#define BATCH		 4096u
#define BURST		 32u
#define LINE_GBPS	 100.0
#define PUBLIC_IP	 RTE_IPV4(198, 51, 100, 1)
#define PORT_BASE	 20000u
#define HEADER_DATA_ROOM (RTE_PKTMBUF_HEADROOM + 256)

struct params {
	uint32_t flows, packets, train, concurrency, repeat, work_ns;
	bool check;
};

struct trace {
	uint8_t *frames; /* packets * FRAME */
	uint64_t *time_ns;
	uint32_t count;
};

struct sink {
	uint64_t packets, bytes, payload, misdirected, bad_checksums;
	bool check;
};

/* What the port would send: valid checksums, or, where the port is to
 * compute them, the pseudo-header sum it starts from. */
static bool checksums_right(const struct rte_mbuf *m,
			    const struct rte_ipv4_hdr *ip)
{
	uint16_t l4 = (uint16_t)(14 + rte_ipv4_hdr_len(ip));
	const struct rte_tcp_hdr *tcp =
		rte_pktmbuf_mtod_offset(m, const struct rte_tcp_hdr *, l4);

	if (!(m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) &&
	    rte_raw_cksum(ip, rte_ipv4_hdr_len(ip)) != 0xffff)
		return false;
	if (m->ol_flags & RTE_MBUF_F_TX_L4_MASK)
		return tcp->cksum == rte_ipv4_phdr_cksum(ip, m->ol_flags);
	return rte_ipv4_udptcp_cksum_mbuf_verify(m, ip, l4) == 0;
}

struct mode {
	const char *name;
	bool merge;
	uint16_t inside_mtu;
	bool offload;
};

/* The core this program runs on is shared (2 cores here, others at
 * work): the thread's CPU time, not the wall clock, so that time other
 * programs took from it is not counted. */
static uint64_t cpu_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static uint32_t client_ip(uint32_t flow)
{
	return RTE_IPV4(10, 0, (flow >> 8) & 0xff, flow & 0xff);
}

static uint32_t server_ip(uint32_t flow)
{
	return RTE_IPV4(203, 0, 113, 1 + flow % 200);
}

/* One Ethernet/IPv4/TCP frame with valid checksums. */
static uint32_t build(uint8_t *frame, uint32_t src, uint32_t dst,
		      uint16_t sport, uint16_t dport, uint32_t seq,
		      uint16_t ip_id, uint32_t payload, uint8_t fill)
{
	struct rte_ether_hdr *eth = (void *)frame;
	struct rte_ipv4_hdr *ip = (void *)(eth + 1);
	struct rte_tcp_hdr *tcp = (void *)(ip + 1);

	memset(frame, 0, 14 + 20 + 20);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	eth->src_addr.addr_bytes[0] = 0x02;
	eth->dst_addr.addr_bytes[0] = 0x02;
	eth->dst_addr.addr_bytes[5] = 0x01;
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(40 + payload));
	ip->packet_id = rte_cpu_to_be_16(ip_id);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_TCP;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	tcp->src_port = rte_cpu_to_be_16(sport);
	tcp->dst_port = rte_cpu_to_be_16(dport);
	tcp->sent_seq = rte_cpu_to_be_32(seq);
	tcp->recv_ack = rte_cpu_to_be_32(1);
	tcp->data_off = 5 << 4;
	tcp->tcp_flags = RTE_TCP_ACK_FLAG;
	tcp->rx_win = rte_cpu_to_be_16(65535);
	memset(tcp + 1, fill, payload);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
	return 14 + 40 + payload;
}

static bool make_trace(const struct params *p, struct trace *t)
{
	uint32_t *seq = calloc(p->flows, sizeof(*seq));
	uint16_t *ids = calloc(p->flows, sizeof(*ids));
	uint32_t *train_flow = calloc(p->concurrency, sizeof(uint32_t));
	uint32_t *train_left = calloc(p->concurrency, sizeof(uint32_t));
	uint32_t next_flow = 0;
	uint64_t now = 0;

	t->frames = malloc((size_t)p->packets * FRAME);
	t->time_ns = malloc((size_t)p->packets * sizeof(uint64_t));
	if (!seq || !ids || !train_flow || !train_left || !t->frames ||
	    !t->time_ns)
		return false;
	srand(7);
	for (uint32_t n = 0; n < p->packets; n++) {
		uint32_t k = (uint32_t)rand() % p->concurrency;
		uint32_t f;

		if (train_left[k] == 0) {
			train_flow[k] = next_flow++ % p->flows;
			train_left[k] = p->train;
		}
		f = train_flow[k];
		train_left[k]--;
		build(t->frames + (size_t)n * FRAME, server_ip(f), PUBLIC_IP,
		      (uint16_t)(80 + f % 1000), (uint16_t)(PORT_BASE + f),
		      1000 + seq[f], ids[f]++, MSS, (uint8_t)(f + n));
		seq[f] += MSS;
		now += (uint64_t)((FRAME + 24) * 8 / LINE_GBPS);
		t->time_ns[n] = now;
	}
	t->count = p->packets;
	free(seq);
	free(ids);
	free(train_flow);
	free(train_left);
	return true;
}

/* What the NAT sends: counted (payload and where it goes) and freed. */
static void sink_send(void *context, enum nat_dir dir, struct rte_mbuf **pkts,
		      uint16_t count)
{
	struct sink *s = context;

	for (uint16_t n = 0; n < count; n++) {
		const struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(
			pkts[n], const struct rte_ipv4_hdr *, 14);
		const struct rte_tcp_hdr *tcp = (const void *)(ip + 1);
		uint32_t length = rte_be_to_cpu_16(ip->total_length);

		s->bytes += rte_pktmbuf_pkt_len(pkts[n]);
		s->payload += length - 20 - (tcp->data_off >> 4) * 4;
		if (dir == NAT_INBOUND &&
		    (rte_be_to_cpu_32(ip->dst_addr) >> 24) != 10)
			s->misdirected++;
		if (s->check && !checksums_right(pkts[n], ip))
			s->bad_checksums++;
	}
	s->packets += count;
	rte_pktmbuf_free_bulk(pkts, count);
}

/* Open every flow's connection, outbound, so that the trace's packets
 * have one: flow f gets public port PORT_BASE + f. */
static void open_connections(struct nat *nat, struct rte_mempool *pool,
			     uint32_t flows)
{
	for (uint32_t f = 0; f < flows; f++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
		uint8_t *data =
			m != NULL ? (uint8_t *)rte_pktmbuf_append(m, 54) : NULL;

		if (data == NULL)
			rte_exit(EXIT_FAILURE,
				 "no mbuf for connection %u of %u\n", f, flows);
		build(data, client_ip(f), server_ip(f),
		      (uint16_t)(40000 + f % 20000), (uint16_t)(80 + f % 1000),
		      1, 1, 0, 0);
		nat_receive(nat, NAT_OUTBOUND, &m, 1, 0);
	}
}

/* One run of a mode over the trace: nanoseconds spent in the NAT. */
static uint64_t run_mode(const struct params *p, const struct trace *t,
			 const struct mode *mode, struct rte_mempool *pool,
			 struct rte_mempool *headers, struct sink *sink,
			 struct nat_stats *stats)
{
	static struct rte_mbuf *batch[BATCH];
	static unsigned int generation;
	struct nat_config config;
	struct nat *nat;
	uint64_t spent = 0, start;
	char name[32];

	nat_config_init(&config);
	snprintf(name, sizeof(name), "b%u", generation++);
	config.name = name;
	config.public_ip = rte_cpu_to_be_32(PUBLIC_IP);
	config.port_base = PORT_BASE;
	config.max_connections = p->flows;
	config.merge = mode->merge;
	config.path_mtu[NAT_INBOUND] = mode->inside_mtu;
	config.checksum_offload = mode->offload;
	config.work_ns = p->work_ns;
	config.header_pool = headers;
	memset(sink, 0, sizeof(*sink));
	sink->check = p->check;
	nat = nat_create(&config, sink_send, sink);
	if (nat == NULL)
		exit(1);
	open_connections(nat, pool, p->flows);
	memset(sink, 0, sizeof(*sink));
	sink->check = p->check;
	for (uint32_t base = 0; base < t->count; base += BATCH) {
		uint32_t count = RTE_MIN(BATCH, t->count - base);

		if (rte_pktmbuf_alloc_bulk(pool, batch, count) != 0) {
			fprintf(stderr, "bench: buffers ran out\n");
			exit(1);
		}
		for (uint32_t n = 0; n < count; n++) {
			uint8_t *data =
				(uint8_t *)rte_pktmbuf_append(batch[n], FRAME);

			memcpy(data, t->frames + (size_t)(base + n) * FRAME,
			       FRAME);
			batch[n]->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_GOOD |
					     RTE_MBUF_F_RX_L4_CKSUM_GOOD;
		}
		start = cpu_ns();
		for (uint32_t n = 0; n < count; n += BURST) {
			uint16_t burst = (uint16_t)RTE_MIN(BURST, count - n);

			nat_receive(nat, NAT_INBOUND, batch + n, burst,
				    t->time_ns[base + n + burst - 1]);
		}
		spent += cpu_ns() - start;
	}
	start = cpu_ns();
	nat_flush(nat, t->time_ns[t->count - 1] + 1000000000ull);
	spent += cpu_ns() - start;
	nat_get_stats(nat, stats);
	nat_destroy(nat);
	return spent;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"flows", required_argument, NULL, 'f'},
		{"packets", required_argument, NULL, 'p'},
		{"train", required_argument, NULL, 't'},
		{"concurrency", required_argument, NULL, 'c'},
		{"repeat", required_argument, NULL, 'r'},
		{"check", no_argument, NULL, 'k'},
		{"work-ns", required_argument, NULL, 'w'},
		{NULL, 0, NULL, 0},
	};
	static const struct mode modes[] = {
		{"merge off", false, 1500, false},
		{"on, split to 1500, sw csum", true, 1500, false},
		{"on, split to 1500, offload", true, 1500, true},
		{"on, inside 9000, sw csum", true, 9000, false},
		{"on, inside 9000, offload", true, 9000, true},
	};
	struct params p = {64, 262144, 45, 4, 3, 0, false};
	struct rte_mempool *pool, *headers;
	struct trace t;
	double pps[RTE_DIM(modes)] = {0};
	int consumed = rte_eal_init(argc, argv), c, failed = 0;

	if (consumed < 0) {
		fprintf(stderr, "bench: EAL: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	argc -= consumed;
	argv += consumed;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		unsigned long v = optarg ? strtoul(optarg, NULL, 10) : 0;

		switch (c) {
		case 'f':
			p.flows = (uint32_t)RTE_MAX(1ul, RTE_MIN(v, 40000ul));
			break;
		case 'p':
			p.packets = (uint32_t)RTE_MAX(BURST, v);
			break;
		case 't':
			p.train = (uint32_t)RTE_MAX(1ul, v);
			break;
		case 'c':
			p.concurrency = (uint32_t)RTE_MAX(1ul, v);
			break;
		case 'r':
			p.repeat = (uint32_t)RTE_MAX(1ul, v);
			break;
		case 'k':
			p.check = true;
			break;
		case 'w':
			p.work_ns = (uint32_t)RTE_MIN(v, 100000ul);
			break;
		default:
			return 2;
		}
	}
	if (!make_trace(&p, &t)) {
		fprintf(stderr, "bench: no memory for the trace\n");
		return 1;
	}
	pool = rte_pktmbuf_pool_create(
		"bench_packets", 2 * BATCH + 8192, 256, JG_MBUF_PRIV_SIZE,
		RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
	headers = rte_pktmbuf_pool_create("bench_headers", 4 * BATCH + 8192,
					  256, JG_MBUF_PRIV_SIZE,
					  HEADER_DATA_ROOM, rte_socket_id());
	if (pool == NULL || headers == NULL) {
		fprintf(stderr, "bench: buffers: %s (give the EAL -m 1024)\n",
			rte_strerror(rte_errno));
		return 1;
	}
	printf("trace: %u packets of %u bytes, %u flows, trains of %u, %u "
	       "interleaved; one core, best of %u; %u ns of work per NAT op\n",
	       t.count, FRAME, p.flows, p.train, p.concurrency, p.repeat,
	       p.work_ns);
	printf("%-28s %10s %9s %12s %12s %10s\n", "merge", "Mpps in", "Gbit/s",
	       "NAT ops", "packets out", "ns/packet");
	for (unsigned int m = 0; m < RTE_DIM(modes); m++) {
		uint64_t best = UINT64_MAX;
		struct sink sink;
		struct nat_stats stats;
		const struct nat_dir_stats *in;

		for (uint32_t r = 0; r < p.repeat; r++) {
			uint64_t spent = run_mode(&p, &t, &modes[m], pool,
						  headers, &sink, &stats);

			best = RTE_MIN(best, spent);
		}
		in = &stats.dir[NAT_INBOUND];
		pps[m] = (double)t.count * 1e9 / (double)best;
		printf("%-28s %10.2f %9.2f %12" PRIu64 " %12" PRIu64
		       " %10.1f\n",
		       modes[m].name, pps[m] / 1e6,
		       (double)in->rx_bytes * 8 / (double)best, in->translated,
		       sink.packets, (double)best / (double)t.count);
		if (p.check && (sink.payload != (uint64_t)t.count * MSS ||
				sink.misdirected != 0 || in->dropped != 0 ||
				sink.bad_checksums != 0 ||
				rte_mempool_in_use_count(pool) != 0)) {
			fprintf(stderr,
				"bench: %s: %" PRIu64 " payload bytes out of "
				"%" PRIu64 ", %" PRIu64 " misdirected, %" PRIu64
				" dropped, %" PRIu64 " with bad checksums, %u "
				"buffers not freed\n",
				modes[m].name, sink.payload,
				(uint64_t)t.count * MSS, sink.misdirected,
				in->dropped, sink.bad_checksums,
				rte_mempool_in_use_count(pool));
			failed = 1;
		}
	}
	for (unsigned int m = 1; m < RTE_DIM(modes); m++)
		printf("ratio %-28s %.2fx\n", modes[m].name, pps[m] / pps[0]);
	free(t.frames);
	free(t.time_ns);
	rte_mempool_free(pool);
	rte_mempool_free(headers);
	rte_eal_cleanup();
	return failed;
}
