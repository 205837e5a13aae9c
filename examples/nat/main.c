/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-nat: the example NAT (nat.h) on two DPDK ports, inside and
 * outside, on one core.
 *
 *   jumbogate-nat [EAL options] -- --inside PORT --outside PORT
 *       --public-ip A.B.C.D --inside-peer MAC --outside-peer MAC
 *       [--merge on|off] [--merge-mtu N] [--inside-mtu N]
 *       [--outside-mtu N] [--port-base N] [--max-connections N]
 *       [--idle-timeout-ms N] [--merge-wait-us N] [--mbufs N]
 *       [--stats FILE]
 *
 * PORT is a DPDK device name (net_af_packet0). Frames leave with the
 * port's own MAC as source and the peer's MAC (the next hop on that side)
 * as destination. --stats FILE is rewritten with every counter, as JSON,
 * five times a second and at exit (SIGINT, SIGTERM).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include <jumbogate/engine.h>

#include "nat.h"

#define BURST		 32
#define RX_DESCRIPTORS	 1024
#define TX_DESCRIPTORS	 1024
#define HEADER_DATA_ROOM (RTE_PKTMBUF_HEADROOM + 256)
#define HEADER_MBUFS	 32768
#define MAX_DATA_ROOM	 (RTE_PKTMBUF_HEADROOM + 65536 - 1)
#define TX_MAX_STALLS	 1000
#define STATS_PERIOD_NS	 200000000ull
#define TX_CHECKSUMS                                                           \
	(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM |        \
	 RTE_ETH_TX_OFFLOAD_UDP_CKSUM)

struct side {
	const char *name;
	uint16_t port_id;
	struct rte_ether_addr own, peer;
	uint64_t tx_failed;
};

struct program {
	struct side side[NAT_DIRS]; /* [NAT_OUTBOUND]: receives inside */
	struct nat_config config;
	const char *stats_path;
	unsigned int mbufs;
	struct rte_mempool *pool;
	struct nat *nat;
};

static volatile sig_atomic_t quit;

static void on_signal(int signal)
{
	(void)signal;
	quit = 1;
}

static uint64_t now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* Side a direction receives on, and the one it sends through. */
static struct side *rx_side(struct program *p, enum nat_dir dir)
{
	return &p->side[dir == NAT_OUTBOUND ? 0 : 1];
}

static struct side *tx_side(struct program *p, enum nat_dir dir)
{
	return &p->side[dir == NAT_OUTBOUND ? 1 : 0];
}

static void send_packets(void *context, enum nat_dir dir,
			 struct rte_mbuf **pkts, uint16_t count)
{
	struct program *p = context;
	struct side *side = tx_side(p, dir);
	uint16_t sent = 0;
	unsigned int stalls = 0;

	for (uint16_t n = 0; n < count; n++) {
		struct rte_ether_hdr *eth =
			rte_pktmbuf_mtod(pkts[n], struct rte_ether_hdr *);

		rte_ether_addr_copy(&side->own, &eth->src_addr);
		rte_ether_addr_copy(&side->peer, &eth->dst_addr);
	}
	while (sent < count && stalls < TX_MAX_STALLS) {
		uint16_t n = rte_eth_tx_burst(side->port_id, 0, pkts + sent,
					      count - sent);

		sent += n;
		stalls = n ? 0 : stalls + 1;
	}
	if (sent < count) {
		side->tx_failed += count - sent;
		rte_pktmbuf_free_bulk(pkts + sent, count - sent);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: jumbogate-nat [EAL options] -- --inside PORT "
			"--outside PORT --public-ip A.B.C.D --inside-peer MAC "
			"--outside-peer MAC [--merge on|off] [--merge-mtu N] "
			"[--inside-mtu N] [--outside-mtu N] [--port-base N] "
			"[--max-connections N] [--idle-timeout-ms N] "
			"[--merge-wait-us N] [--mbufs N] [--stats FILE]\n");
}

static bool number(const char *text, unsigned long min, unsigned long max,
		   unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(text, &end, 10);
	return errno == 0 && *text != '\0' && *end == '\0' && *out >= min &&
	       *out <= max;
}

static bool parse_options(struct program *p, int argc, char **argv)
{
	static const struct option options[] = {
		{"inside", required_argument, NULL, 'i'},
		{"outside", required_argument, NULL, 'o'},
		{"public-ip", required_argument, NULL, 'a'},
		{"inside-peer", required_argument, NULL, 'I'},
		{"outside-peer", required_argument, NULL, 'O'},
		{"merge", required_argument, NULL, 'm'},
		{"merge-mtu", required_argument, NULL, 'M'},
		{"inside-mtu", required_argument, NULL, 'x'},
		{"outside-mtu", required_argument, NULL, 'y'},
		{"port-base", required_argument, NULL, 'b'},
		{"max-connections", required_argument, NULL, 'c'},
		{"idle-timeout-ms", required_argument, NULL, 't'},
		{"merge-wait-us", required_argument, NULL, 'w'},
		{"mbufs", required_argument, NULL, 'n'},
		{"stats", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	bool have_ip = false, have_peer[2] = {false, false};
	unsigned long v;
	int c;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case 'i':
			p->side[0].name = optarg;
			break;
		case 'o':
			p->side[1].name = optarg;
			break;
		case 'a':
			ok = have_ip = inet_pton(AF_INET, optarg,
						 &p->config.public_ip) == 1;
			break;
		case 'I':
		case 'O': {
			int s = c == 'I' ? 0 : 1;

			ok = have_peer[s] =
				rte_ether_unformat_addr(optarg,
							&p->side[s].peer) == 0;
			break;
		}
		case 'm':
			ok = !strcmp(optarg, "on") || !strcmp(optarg, "off");
			p->config.merge = !strcmp(optarg, "on");
			break;
		case 'M':
			ok = number(optarg, 1500, JG_MAX_INTERNAL_MTU, &v);
			p->config.merge_mtu = (uint32_t)v;
			break;
		case 'x':
		case 'y':
			/* Inbound packets leave inside, outbound outside. */
			ok = number(optarg, JG_MIN_PATH_MTU_V4, 65535, &v);
			p->config.path_mtu[c == 'x' ? NAT_INBOUND
						    : NAT_OUTBOUND] =
				(uint16_t)v;
			break;
		case 'b':
			ok = number(optarg, 1, 65535, &v);
			p->config.port_base = (uint16_t)v;
			break;
		case 'c':
			ok = number(optarg, 1, 65535, &v);
			p->config.max_connections = (uint32_t)v;
			break;
		case 't':
			ok = number(optarg, 1, 86400000ul, &v);
			p->config.idle_timeout_ns = (uint64_t)v * 1000000ull;
			break;
		case 'w':
			ok = number(optarg, 0, 10000, &v);
			p->config.merge_wait_us = (uint32_t)v;
			break;
		case 'n':
			ok = number(optarg, 1024, 1u << 22, &v);
			p->mbufs = (unsigned int)v;
			break;
		case 's':
			p->stats_path = optarg;
			break;
		default:
			ok = false;
		}
		if (!ok) {
			if (c != '?')
				fprintf(stderr,
					"jumbogate-nat: bad value '%s'\n",
					optarg);
			usage();
			return false;
		}
	}
	if (!p->side[0].name || !p->side[1].name || !have_ip || !have_peer[0] ||
	    !have_peer[1]) {
		usage();
		return false;
	}
	return true;
}

static int setup_queues(uint16_t port, struct rte_mempool *pool)
{
	int result =
		rte_eth_rx_queue_setup(port, 0, RX_DESCRIPTORS,
				       rte_eth_dev_socket_id(port), NULL, pool);

	if (result == 0)
		result = rte_eth_tx_queue_setup(port, 0, TX_DESCRIPTORS,
						rte_eth_dev_socket_id(port),
						NULL);
	return result;
}

/* Both ports on one pool. Some PMDs need buffers larger than a frame
 * (net_af_packet: its whole ring frame) and say so only by refusing the
 * queue, so the buffers grow until both ports take them. */
static bool setup_ports(struct program *p)
{
	uint32_t data_room = RTE_PKTMBUF_HEADROOM + 2048;
	int result = 0;

	/* Summing a merged packet costs more than merging it: where both
	 * ports compute the checksums of what they send, the engines leave
	 * them to the ports (JG_CHECKSUM_OFFLOAD). */
	p->config.checksum_offload = true;
	for (int s = 0; s < 2; s++) {
		struct rte_eth_dev_info info;

		if (rte_eth_dev_get_port_by_name(p->side[s].name,
						 &p->side[s].port_id) ||
		    rte_eth_dev_info_get(p->side[s].port_id, &info) ||
		    (info.tx_offload_capa & TX_CHECKSUMS) != TX_CHECKSUMS)
			p->config.checksum_offload = false;
	}
	for (int s = 0; s < 2; s++) {
		struct side *side = &p->side[s];
		struct rte_eth_conf conf = {0};
		struct rte_eth_dev_info info;

		if (rte_eth_dev_get_port_by_name(side->name, &side->port_id)) {
			fprintf(stderr, "jumbogate-nat: no port %s\n",
				side->name);
			return false;
		}
		rte_eth_dev_info_get(side->port_id, &info);
		if (p->config.checksum_offload)
			conf.txmode.offloads |= TX_CHECKSUMS;
		/* Merged and split packets are mbuf chains. */
		if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
			conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
		else if (p->config.merge)
			fprintf(stderr,
				"jumbogate-nat: port %s cannot send chains; "
				"merged packets will be dropped by it\n",
				side->name);
		result = rte_eth_dev_configure(side->port_id, 1, 1, &conf);
		if (result != 0) {
			fprintf(stderr, "jumbogate-nat: configure %s: %s\n",
				side->name, rte_strerror(-result));
			return false;
		}
		rte_eth_macaddr_get(side->port_id, &side->own);
	}
	for (;;) {
		p->pool = rte_pktmbuf_pool_create("nat_packets", p->mbufs, 256,
						  JG_MBUF_PRIV_SIZE, data_room,
						  rte_socket_id());
		if (p->pool == NULL) {
			fprintf(stderr,
				"jumbogate-nat: %u buffers of %u bytes: %s\n",
				p->mbufs, data_room, rte_strerror(rte_errno));
			return false;
		}
		for (int s = 0; s < 2 && result == 0; s++)
			result = setup_queues(p->side[s].port_id, p->pool);
		if (result != -ENOMEM || data_room >= MAX_DATA_ROOM)
			break;
		rte_mempool_free(p->pool);
		data_room = RTE_MIN(data_room * 2, (uint32_t)MAX_DATA_ROOM);
		result = 0;
	}
	if (result != 0) {
		fprintf(stderr, "jumbogate-nat: queue setup: %s\n",
			rte_strerror(-result));
		return false;
	}
	for (int s = 0; s < 2; s++) {
		result = rte_eth_dev_start(p->side[s].port_id);
		if (result != 0) {
			fprintf(stderr, "jumbogate-nat: start %s: %s\n",
				p->side[s].name, rte_strerror(-result));
			return false;
		}
		rte_eth_promiscuous_enable(p->side[s].port_id);
	}
	return true;
}

static void write_dir(FILE *f, const char *name, const struct nat_dir_stats *s,
		      struct jg_engine *engine)
{
	fprintf(f,
		"\"%s\": {\"rx_packets\": %" PRIu64 ", \"rx_bytes\": %" PRIu64
		", \"translated\": %" PRIu64 ", \"translated_bytes\": %" PRIu64
		", \"tx_packets\": %" PRIu64 ", \"tx_bytes\": %" PRIu64
		", \"dropped\": %" PRIu64,
		name, s->rx_packets, s->rx_bytes, s->translated,
		s->translated_bytes, s->tx_packets, s->tx_bytes, s->dropped);
	if (engine != NULL) {
		struct jg_stats e;

		jg_engine_get_stats(engine, &e);
		fprintf(f,
			", \"merged_packets\": %" PRIu64
			", \"merge_packets_in\": %" PRIu64
			", \"merge_packets_out\": %" PRIu64
			", \"held_now\": %" PRIu64
			", \"split_packets\": %" PRIu64
			", \"split_segments_out\": %" PRIu64,
			e.merge.merged_packets, e.merge.packets_in,
			e.merge.packets_out, e.merge.held_now,
			e.split.packets_segmented, e.split.segments_out);
	}
	fputc('}', f);
}

static void write_stats(struct program *p)
{
	char tmp[4096];
	struct nat_stats s;
	FILE *f;

	if (p->stats_path == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", p->stats_path);
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	nat_get_stats(p->nat, &s);
	fprintf(f, "{\"merge\": %s, ", p->config.merge ? "true" : "false");
	write_dir(f, "outbound", &s.dir[NAT_OUTBOUND],
		  nat_engine(p->nat, NAT_OUTBOUND));
	fputs(", ", f);
	write_dir(f, "inbound", &s.dir[NAT_INBOUND],
		  nat_engine(p->nat, NAT_INBOUND));
	fprintf(f,
		", \"connections\": {\"now\": %u, \"max\": %u, \"created\": "
		"%" PRIu64 ", \"evicted\": %" PRIu64 ", \"refused\": %" PRIu64
		"}, \"tx_failed\": %" PRIu64 ", \"drops\": {",
		s.connections_now, s.connections_max, s.connections_created,
		s.connections_evicted, s.connections_refused,
		p->side[0].tx_failed + p->side[1].tx_failed);
	for (int r = 0; r < NAT_DROP_REASON_COUNT; r++)
		fprintf(f, "%s\"%s\": %" PRIu64, r ? ", " : "",
			nat_drop_reason_name((enum nat_drop_reason)r),
			s.drops[r]);
	fputs("}}\n", f);
	fclose(f);
	rename(tmp, p->stats_path);
}

static void run(struct program *p)
{
	struct rte_mbuf *pkts[BURST];
	uint64_t next_stats = 0;

	while (!quit) {
		uint64_t now = now_ns();

		for (int d = 0; d < NAT_DIRS; d++) {
			enum nat_dir dir = (enum nat_dir)d;
			uint16_t n = rte_eth_rx_burst(rx_side(p, dir)->port_id,
						      0, pkts, BURST);

			if (n > 0)
				nat_receive(p->nat, dir, pkts, n, now);
			else
				nat_idle(p->nat, dir, now);
		}
		if (now >= next_stats) {
			write_stats(p);
			next_stats = now + STATS_PERIOD_NS;
		}
	}
	nat_flush(p->nat, now_ns());
	write_stats(p);
}

int main(int argc, char **argv)
{
	struct program p = {.mbufs = 8192};
	int consumed = rte_eal_init(argc, argv);

	if (consumed < 0) {
		fprintf(stderr, "jumbogate-nat: EAL: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	argc -= consumed;
	argv += consumed;
	nat_config_init(&p.config);
	if (!parse_options(&p, argc, argv) || !setup_ports(&p))
		return 2;
	p.config.header_pool = rte_pktmbuf_pool_create(
		"nat_headers", HEADER_MBUFS, 256, JG_MBUF_PRIV_SIZE,
		HEADER_DATA_ROOM, rte_socket_id());
	if (p.config.header_pool == NULL) {
		fprintf(stderr, "jumbogate-nat: header buffers: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	p.nat = nat_create(&p.config, send_packets, &p);
	if (p.nat == NULL)
		return 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("jumbogate-nat: inside %s, outside %s, merge %s, up to %u "
	       "connections, checksums %s\n",
	       p.side[0].name, p.side[1].name, p.config.merge ? "on" : "off",
	       p.config.max_connections,
	       p.config.checksum_offload ? "by the ports" : "in software");
	fflush(stdout);
	run(&p);
	for (int s = 0; s < 2; s++) {
		rte_eth_dev_stop(p.side[s].port_id);
		rte_eth_dev_close(p.side[s].port_id);
	}
	nat_destroy(p.nat);
	rte_eal_cleanup();
	return 0;
}
