/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The load generator of the switch's port benchmark (bench/switch_ports.py):
 * sends the frames of a capture round-robin out of one DPDK port as fast as
 * the port takes them, counts what comes back on the others, and prints one
 * JSON line with the counts of the measured window.
 *
 *   jumbogate-loadgen EAL... -- --pcap F --tx PORT
 *                               (--rx PORT[,PORT...] | --count-iface
 * IF[,IF...])
 *                               [--seconds S] [--warmup S]
 *
 * Ports are DPDK port names (the vdev names). --count-iface counts what
 * Linux interfaces received instead (their kernel counters, read at the
 * window's edges): receiving through DPDK costs the generator a copy per
 * frame on the same cores as the forwarder, which would cap the offered
 * load at what one core both sends and receives. Every forwarder under test
 * (jumbogate-switch, dpdk-testpmd, BMv2) sees the same frames at the same
 * offered load, from the same process, so their rates compare.
 *
 * Why the frames are sent without copying: each template buffer is sent
 * again with its reference count raised; a copying PMD (af_packet, the one
 * the benchmark uses) only reads it, so the generator's own cost per frame
 * is the PMD's.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define BURST	   32
#define MAX_FRAMES 4096
#define MAX_RX	   4
#define POOL_MBUFS (MAX_FRAMES + 8192)
/* af_packet copies each ring frame into one buffer: the ring frames of the
 * benchmark (12288 bytes, as jumbogate-switch opens them) must fit. */
#define FRAME_LIMIT 12288

struct rx_port {
	uint16_t id;
	const char *name;
	bool kernel; /* a Linux interface's counters, not a DPDK port */
	uint64_t packets;
	uint64_t bytes;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: jumbogate-loadgen EAL... -- --pcap F --tx PORT "
		     "(--rx PORT[,PORT...] | --count-iface IF[,IF...]) "
		     "[--seconds S] [--warmup S]\n");
}

static int fail(const char *what, const char *detail)
{
	fprintf(stderr, "jumbogate-loadgen: %s%s%s\n", what, detail ? ": " : "",
		detail ? detail : "");
	return 1;
}

static bool find_port(const char *name, uint16_t *id)
{
	if (rte_eth_dev_get_port_by_name(name, id) == 0)
		return true;
	fprintf(stderr, "jumbogate-loadgen: no DPDK port '%s'\n", name);
	return false;
}

static bool start_port(uint16_t id, struct rte_mempool *pool)
{
	struct rte_eth_conf conf = {0};

	if (rte_eth_dev_configure(id, 1, 1, &conf) < 0 ||
	    rte_eth_rx_queue_setup(id, 0, 1024, rte_eth_dev_socket_id(id), NULL,
				   pool) < 0 ||
	    rte_eth_tx_queue_setup(id, 0, 1024, rte_eth_dev_socket_id(id),
				   NULL) < 0 ||
	    rte_eth_dev_start(id) < 0)
		return false;
	rte_eth_promiscuous_enable(id);
	return true;
}

/* The capture's frames, each in one template buffer. */
static int load_frames(const char *path, struct rte_mempool *pool,
		       struct rte_mbuf **frames)
{
	char error[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *header;
	const u_char *data;
	pcap_t *pcap = pcap_open_offline(path, error);
	int count = 0;

	if (!pcap) {
		fail("cannot read the capture", error);
		return -1;
	}
	while (count < MAX_FRAMES && pcap_next_ex(pcap, &header, &data) == 1) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
		char *to;

		if (header->caplen != header->len ||
		    header->caplen > rte_pktmbuf_tailroom(m)) {
			fprintf(stderr,
				"jumbogate-loadgen: frame %d of %s is cut or "
				"longer than a buffer (%u bytes)\n",
				count + 1, path, header->len);
			rte_pktmbuf_free(m);
			pcap_close(pcap);
			return -1;
		}
		to = rte_pktmbuf_append(m, (uint16_t)header->caplen);
		memcpy(to, data, header->caplen);
		frames[count++] = m;
	}
	pcap_close(pcap);
	if (count == 0)
		fail("the capture has no frames", path);
	return count == 0 ? -1 : count;
}

static uint64_t kernel_counter(const char *iface, const char *name)
{
	char path[256];
	unsigned long long value = 0;
	FILE *file;

	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", iface,
		 name);
	file = fopen(path, "r");
	if (file) {
		if (fscanf(file, "%llu", &value) != 1)
			value = 0;
		fclose(file);
	}
	return value;
}

/* Kernel-counted ports: counters go negative at the window's start and
 * positive at its end, leaving the window's difference. */
static void add_kernel_counts(struct rx_port *ports, int count, int sign)
{
	for (int i = 0; i < count; i++) {
		if (!ports[i].kernel)
			continue;
		ports[i].packets += (uint64_t)sign *
				    kernel_counter(ports[i].name, "rx_packets");
		ports[i].bytes += (uint64_t)sign *
				  kernel_counter(ports[i].name, "rx_bytes");
	}
}

static void drain(struct rx_port *ports, int count, bool counting)
{
	struct rte_mbuf *burst[BURST];

	for (int i = 0; i < count; i++) {
		uint16_t got;

		if (ports[i].kernel)
			continue;
		got = rte_eth_rx_burst(ports[i].id, 0, burst, BURST);

		for (uint16_t j = 0; j < got; j++) {
			if (counting) {
				ports[i].packets++;
				ports[i].bytes += burst[j]->pkt_len;
			}
			rte_pktmbuf_free(burst[j]);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"pcap", required_argument, NULL, 'p'},
		{"tx", required_argument, NULL, 't'},
		{"rx", required_argument, NULL, 'r'},
		{"count-iface", required_argument, NULL, 'k'},
		{"seconds", required_argument, NULL, 's'},
		{"warmup", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct rte_mbuf *frames[MAX_FRAMES];
	struct rx_port rx[MAX_RX];
	const char *pcap_path = NULL, *tx_name = NULL;
	char *rx_names = NULL;
	bool rx_kernel = false;
	double seconds = 2.0, warmup = 0.5;
	int rx_count = 0, frame_count, next = 0, option, eal;
	uint64_t sent = 0, sent_bytes = 0, refused = 0, hz, start, end;
	struct rte_mempool *pool;
	uint16_t tx_id;
	bool counting = false;

	eal = rte_eal_init(argc, argv);
	if (eal < 0)
		return fail("the EAL did not start", NULL);
	argc -= eal;
	argv += eal;
	while ((option = getopt_long(argc, argv, "", long_options, NULL)) !=
	       -1) {
		switch (option) {
		case 'p':
			pcap_path = optarg;
			break;
		case 't':
			tx_name = optarg;
			break;
		case 'r':
		case 'k':
			if (rx_names) {
				usage(stderr);
				return 2;
			}
			rx_names = optarg;
			rx_kernel = option == 'k';
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'w':
			warmup = atof(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!pcap_path || !tx_name || !rx_names || seconds <= 0 || warmup < 0) {
		usage(stderr);
		return 2;
	}

	pool = rte_pktmbuf_pool_create("loadgen", POOL_MBUFS, 256, 0,
				       FRAME_LIMIT + RTE_PKTMBUF_HEADROOM,
				       rte_socket_id());
	if (!pool)
		return fail("no buffer pool", rte_strerror(rte_errno));
	if (!find_port(tx_name, &tx_id) || !start_port(tx_id, pool))
		return fail("cannot start the transmit port", tx_name);
	for (char *name = strtok(rx_names, ","); name;
	     name = strtok(NULL, ",")) {
		if (rx_count == MAX_RX)
			return fail("too many receive ports", name);
		rx[rx_count].name = name;
		rx[rx_count].kernel = rx_kernel;
		rx[rx_count].packets = rx[rx_count].bytes = 0;
		if (rx_kernel) {
			rx_count++;
			continue;
		}
		if (!find_port(name, &rx[rx_count].id))
			return 1;
		if (rx[rx_count].id != tx_id &&
		    !start_port(rx[rx_count].id, pool))
			return fail("cannot start a receive port", name);
		rx_count++;
	}
	frame_count = load_frames(pcap_path, pool, frames);
	if (frame_count < 0)
		return 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	hz = rte_get_tsc_hz();
	start = rte_get_tsc_cycles() + (uint64_t)(warmup * (double)hz);
	end = start + (uint64_t)(seconds * (double)hz);
	for (uint64_t now = rte_get_tsc_cycles(); !stop && now < end;
	     now = rte_get_tsc_cycles()) {
		struct rte_mbuf *burst[BURST];
		uint16_t taken;

		if (!counting && now >= start) {
			counting = true;
			for (int i = 0; i < rx_count; i++)
				rx[i].packets = rx[i].bytes = 0;
			add_kernel_counts(rx, rx_count, -1);
		}
		for (int i = 0; i < BURST; i++) {
			burst[i] = frames[next];
			rte_mbuf_refcnt_update(burst[i], 1);
			next = next + 1 == frame_count ? 0 : next + 1;
		}
		taken = rte_eth_tx_burst(tx_id, 0, burst, BURST);
		if (counting) {
			sent += taken;
			refused += BURST - taken;
			for (uint16_t i = 0; i < taken; i++)
				sent_bytes += burst[i]->pkt_len;
		}
		for (uint16_t i = taken; i < BURST; i++)
			rte_mbuf_refcnt_update(burst[i], -1);
		drain(rx, rx_count, counting);
	}
	/* What was sent in the window and is still on its way. */
	for (uint64_t until = rte_get_tsc_cycles() + hz / 5;
	     rte_get_tsc_cycles() < until;)
		drain(rx, rx_count, counting);
	add_kernel_counts(rx, rx_count, 1);

	printf("{\"seconds\": %.3f, \"frames\": %d, \"sent\": %" PRIu64
	       ", \"sent_bytes\": %" PRIu64 ", \"refused\": %" PRIu64
	       ", \"received\": {",
	       seconds, frame_count, sent, sent_bytes, refused);
	for (int i = 0; i < rx_count; i++)
		printf("%s\"%s\": {\"packets\": %" PRIu64
		       ", \"bytes\": %" PRIu64 "}",
		       i ? ", " : "", rx[i].name, rx[i].packets, rx[i].bytes);
	printf("}}\n");
	for (int i = 0; i < frame_count; i++)
		rte_pktmbuf_free(frames[i]);
	rte_eth_dev_stop(tx_id);
	for (int i = 0; i < rx_count; i++)
		if (!rx[i].kernel && rx[i].id != tx_id)
			rte_eth_dev_stop(rx[i].id);
	rte_eal_cleanup();
	return 0;
}
