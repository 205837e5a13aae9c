/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-switch: the jumbogate P4 pipeline in software, on DPDK ports,
 * programmed over P4Runtime. The main lcore serves control; every worker
 * lcore polls every port and runs the pipeline (pipeline.c).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "log.h"
#include "metrics_http.h"
#include "port.h"
#include "service_notify.h"
#include "switch.h"
#include "telemetry.h"

#ifndef JUMBOGATE_SWITCH_VERSION
#define JUMBOGATE_SWITCH_VERSION "unknown"
#endif

#define PROGRAM		   "jumbogate-switch"
#define MAX_EAL_ARGS	   64
#define DEFAULT_GRPC	   "127.0.0.1:9559"
#define DEFAULT_CPU_PORT   510
#define DEFAULT_PORT_MTU   9500
#define DEFAULT_IDLE_SLEEP 100
#define DEFAULT_BURST	   32
#define MAX_BURST	   256
/* net_af_packet copies each frame into one buffer, which must hold its
 * whole ring frame; 12288 bytes carry 9000-byte frames and more. */
#define AF_PACKET_FRAME	 12288
#define PACKET_OUT_MBUFS 1023

struct port_option {
	uint16_t p4_port;
	bool af_packet; /* N@IFACE: a net_af_packet vdev on a Linux interface */
	char name[SW_NAME_LEN];
};

struct options {
	int eal_argc;
	char *eal_argv[MAX_EAL_ARGS];
	unsigned int port_count;
	struct port_option ports[SW_MAX_DPDK_PORTS];
	const char *grpc;
	const char *metrics;	   /* the own Prometheus endpoint, or NULL */
	struct jg_tls_options tls; /* how P4Runtime is secured */
	uint32_t cpu_port;
	uint32_t depth;
	uint64_t device_id;
	uint32_t port_mtu;
	uint32_t mbufs;
	uint32_t burst;
	uint32_t idle_sleep_max_us;
	bool primary_on_leave_wait;
	bool fence_election_ids;
};

static struct sw_switch the_switch;
static volatile sig_atomic_t signalled;

/* The program's own log type (jumbogate.switch; runtime/log.h): registered
 * before main so that the EAL's --log-level finds it. */
static int log_switch = RTE_LOGTYPE_USER1;
RTE_INIT(log_switch_register)
{
	log_switch = jg_log_register("jumbogate.switch", RTE_LOG_INFO);
}

uint64_t sw_now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static void on_signal(int number)
{
	signalled = number;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROGRAM " [EAL options] -- [options]\n"
		"\n"
		"Runs the jumbogate P4 pipeline (p4src/) in software and "
		"serves\n"
		"P4Runtime. Needs at least two lcores (-l 0-1): the main one\n"
		"serves control, the others forward.\n"
		"\n"
		"options:\n"
		"  --port N@IFACE        P4 port N is the Linux interface "
		"IFACE\n"
		"                        (a net_af_packet device is made for "
		"it)\n"
		"  --port N=DEVICE       P4 port N is the DPDK port DEVICE\n"
		"                        (e.g. 0000:01:00.0 given with -a)\n"
		"  --grpc ADDR           P4Runtime address, HOST:PORT or\n"
		"                        unix:PATH (default " DEFAULT_GRPC ")\n"
		"  --metrics HOST:PORT   serve Prometheus metrics of the data\n"
		"                        path on this loopback address (off\n"
		"                        unless given)\n"
		"  --device-id N         P4Runtime device id (default 1)\n"
		"  --cpu-port N          the P4 port of packet-in/out (default "
		"%d)\n"
		"  --depth 256|512       parse-depth profile (default 512)\n"
		"  --port-mtu N          largest IP packet a port carries "
		"(default %d)\n"
		"  --mbufs N             receive buffers per port (default: "
		"what the\n"
		"                        ports' queues and the packet-in "
		"queue can keep)\n"
		"  --burst N             packets per receive burst (default "
		"%d)\n"
		"  --idle-sleep-max-us N longest sleep of an idle worker "
		"(default %d; 0 spins)\n"
		"  --primary-on-leave promote|wait\n"
		"                        when the primary's stream ends: "
		"promote\n"
		"                        the highest backup at once (default), "
		"or\n"
		"                        wait for a client to re-arbitrate "
		"(the\n"
		"                        P4Runtime specification's "
		"behaviour)\n"
		"  --fence-election-ids  never make primary, nor take a write "
		"from,\n"
		"                        an election id below the highest "
		"this\n"
		"                        device has made primary (until "
		"exit)\n" JG_TLS_OPTIONS_HELP "  --help, --version\n",
		DEFAULT_CPU_PORT, DEFAULT_PORT_MTU, DEFAULT_BURST,
		DEFAULT_IDLE_SLEEP);
}

static bool parse_number(const char *option, const char *text, uint64_t min,
			 uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long value;

	errno = 0;
	value = strtoull(text, &end, 0);
	if (errno != 0 || end == text || *end != '\0' || text[0] == '-' ||
	    value < min || value > max) {
		fprintf(stderr,
			PROGRAM ": --%s takes a number from %" PRIu64
				" to %" PRIu64 ", got '%s'\n",
			option, min, max, text);
		return false;
	}
	*out = value;
	return true;
}

static bool parse_port(struct options *options, const char *text)
{
	const char *at = strpbrk(text, "@=");
	struct port_option *port;
	char number[16];
	uint64_t p4_port;

	if (at == NULL || at == text || at[1] == '\0' ||
	    (size_t)(at - text) >= sizeof(number)) {
		fprintf(stderr,
			PROGRAM ": --port takes N@IFACE or N=DEVICE, got "
				"'%s'\n",
			text);
		return false;
	}
	if (options->port_count == SW_MAX_DPDK_PORTS) {
		fprintf(stderr, PROGRAM ": at most %d ports\n",
			SW_MAX_DPDK_PORTS);
		return false;
	}
	memcpy(number, text, (size_t)(at - text));
	number[at - text] = '\0';
	if (!parse_number("port", number, 0, SW_PORTS - 2, &p4_port))
		return false;
	for (unsigned int i = 0; i < options->port_count; i++)
		if (options->ports[i].p4_port == p4_port) {
			fprintf(stderr,
				PROGRAM ": P4 port %" PRIu64
					" is given twice\n",
				p4_port);
			return false;
		}
	if (strlen(at + 1) >= SW_NAME_LEN) {
		fprintf(stderr, PROGRAM ": port name '%s' is too long\n",
			at + 1);
		return false;
	}
	port = &options->ports[options->port_count++];
	port->p4_port = (uint16_t)p4_port;
	port->af_packet = *at == '@';
	snprintf(port->name, sizeof(port->name), "%s", at + 1);
	return true;
}

/* 0: run; 1: exit successfully (help, version); 2: bad options. */
static int parse_options(struct options *options, int argc, char **argv)
{
	static const struct option long_options[] = {
		{"port", required_argument, NULL, 'p'},
		{"grpc", required_argument, NULL, 'g'},
		{"metrics", required_argument, NULL, 'M'},
		{"device-id", required_argument, NULL, 'd'},
		{"cpu-port", required_argument, NULL, 'c'},
		{"depth", required_argument, NULL, 'D'},
		{"port-mtu", required_argument, NULL, 'm'},
		{"mbufs", required_argument, NULL, 'b'},
		{"burst", required_argument, NULL, 'B'},
		{"idle-sleep-max-us", required_argument, NULL, 'i'},
		{"tls-cert", required_argument, NULL, 'T'},
		{"tls-key", required_argument, NULL, 'T'},
		{"tls-client-ca", required_argument, NULL, 'T'},
		{"tls-allow", required_argument, NULL, 'T'},
		{"tls-reload-s", required_argument, NULL, 'T'},
		{"insecure", no_argument, NULL, 'T'},
		{"primary-on-leave", required_argument, NULL, 'P'},
		{"fence-election-ids", no_argument, NULL, 'F'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'v'},
		{NULL, 0, NULL, 0},
	};
	int split = argc, opt, index;
	uint64_t value;
	char error[256];

	memset(options, 0, sizeof(*options));
	options->grpc = DEFAULT_GRPC;
	options->cpu_port = DEFAULT_CPU_PORT;
	options->depth = 512;
	options->device_id = 1;
	options->port_mtu = DEFAULT_PORT_MTU;
	options->mbufs = 0; /* what the ports need (pool_size) */
	options->burst = DEFAULT_BURST;
	options->idle_sleep_max_us = DEFAULT_IDLE_SLEEP;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 1;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf(PROGRAM " %s\n", JUMBOGATE_SWITCH_VERSION);
			return 1;
		}
		if (strcmp(argv[i], "--") == 0) {
			split = i;
			break;
		}
	}
	if (split + 1 > MAX_EAL_ARGS) {
		fprintf(stderr, PROGRAM ": too many EAL arguments\n");
		return 2;
	}
	options->eal_argc = split;
	for (int i = 0; i < split; i++)
		options->eal_argv[i] = argv[i];
	if (split == argc) {
		fprintf(stderr, PROGRAM ": no options after \"--\"; give at "
					"least one --port (see --help)\n");
		return 2;
	}
	argv[split] = argv[0];
	optind = 1;
	while ((opt = getopt_long(argc - split, argv + split, "", long_options,
				  &index)) != -1) {
		switch (opt) {
		case 'p':
			if (!parse_port(options, optarg))
				return 2;
			break;
		case 'g':
			options->grpc = optarg;
			break;
		case 'M':
			options->metrics = optarg;
			break;
		case 'P':
			if (strcmp(optarg, "promote") != 0 &&
			    strcmp(optarg, "wait") != 0) {
				fprintf(stderr,
					PROGRAM ": --primary-on-leave is "
						"promote or wait, got '%s'\n",
					optarg);
				return 2;
			}
			options->primary_on_leave_wait =
				strcmp(optarg, "wait") == 0;
			break;
		case 'F':
			options->fence_election_ids = true;
			break;
		case 'd':
			if (!parse_number("device-id", optarg, 0, UINT64_MAX,
					  &options->device_id))
				return 2;
			break;
		case 'c':
			if (!parse_number("cpu-port", optarg, 0, SW_PORTS - 2,
					  &value))
				return 2;
			options->cpu_port = (uint32_t)value;
			break;
		case 'D':
			if (!parse_number("depth", optarg, 0, 4096, &value))
				return 2;
			if (sw_builtin_p4info((uint32_t)value) == NULL) {
				fprintf(stderr,
					PROGRAM ": --depth is 256 or "
						"512 (the compiled profiles), "
						"got %s\n",
					optarg);
				return 2;
			}
			options->depth = (uint32_t)value;
			break;
		case 'm':
			if (!parse_number("port-mtu", optarg, 576, 9600,
					  &value))
				return 2;
			options->port_mtu = (uint32_t)value;
			break;
		case 'b':
			if (!parse_number("mbufs", optarg, 512, 1 << 20,
					  &value))
				return 2;
			options->mbufs = (uint32_t)value;
			break;
		case 'B':
			if (!parse_number("burst", optarg, 1, MAX_BURST,
					  &value))
				return 2;
			options->burst = (uint32_t)value;
			break;
		case 'i':
			if (!parse_number("idle-sleep-max-us", optarg, 0,
					  100000, &value))
				return 2;
			options->idle_sleep_max_us = (uint32_t)value;
			break;
		case 'T':
			if (!jg_tls_option(&options->tls,
					   long_options[index].name, optarg,
					   error, sizeof(error))) {
				fprintf(stderr, PROGRAM ": %s\n", error);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "(see " PROGRAM " --help)\n");
			return 2;
		}
	}
	if (optind < argc - split) {
		fprintf(stderr, PROGRAM ": unexpected argument '%s'\n",
			argv[split + optind]);
		return 2;
	}
	if (options->port_count == 0) {
		fprintf(stderr, PROGRAM ": no --port given (see --help)\n");
		return 2;
	}
	if (!jg_tls_options_check(&options->tls, error, sizeof(error))) {
		fprintf(stderr, PROGRAM ": %s\n", error);
		return 2;
	}
	for (unsigned int i = 0; i < options->port_count; i++)
		if (options->ports[i].p4_port == options->cpu_port) {
			fprintf(stderr,
				PROGRAM ": P4 port %u is the CPU port; give "
					"another --cpu-port\n",
				options->cpu_port);
			return 2;
		}
	return 0;
}

/* Probes a net_af_packet device for every N@IFACE port, with one queue
 * pair per worker, and resolves every port to its ethdev. */
static bool attach_ports(struct sw_switch *sw, const struct options *options)
{
	for (int i = 0; i < SW_PORTS; i++)
		sw->port_index[i] = -1;
	for (unsigned int i = 0; i < options->port_count; i++) {
		const struct port_option *option = &options->ports[i];
		struct sw_port *port = &sw->ports[sw->port_count];
		char device[SW_NAME_LEN];
		const char *name = option->name;

		if (option->af_packet) {
			char args[256];

			snprintf(device, sizeof(device), "net_af_packet_sw%u",
				 option->p4_port);
			snprintf(args, sizeof(args),
				 "%s,iface=%s,blocksz=%d,framesz=%d,"
				 "framecnt=1024,qpairs=%u",
				 device, option->name, AF_PACKET_FRAME,
				 AF_PACKET_FRAME, sw->worker_count);
			if (rte_dev_probe(args) != 0) {
				fprintf(stderr,
					PROGRAM ": cannot open interface '%s' "
						"for P4 port %u (does it exist "
						"and is it up?)\n",
					option->name, option->p4_port);
				return false;
			}
			name = device;
		}
		if (!jg_port_find(PROGRAM, name, &port->dpdk_port))
			return false;
		port->p4_port = option->p4_port;
		snprintf(port->name, sizeof(port->name), "%s", option->name);
		sw->port_index[option->p4_port] = (int16_t)sw->port_count;
		sw->port_count++;
	}
	return true;
}

/* Buffers of each port's pool: what the ports' queues may keep of it
 * (jg_port_pool_reserved: a NIC's full receive ring per worker, its buffers
 * waiting in every NIC's transmit rings, a cache and bursts in flight;
 * none on ports that copy every frame) and a full packet-in queue, which
 * one port's frames can fill. A smaller pool starves reception under load,
 * and an AF_XDP port that cannot fill its ring receives nothing, so
 * --mbufs below that is refused; without --mbufs the pool is that size.
 * Returns 0 after printing why when it is refused. */
static uint32_t pool_size(const struct sw_switch *sw,
			  const struct options *options)
{
	uint16_t port_ids[SW_MAX_DPDK_PORTS];
	uint32_t queues = 0, needed;

	for (unsigned int i = 0; i < sw->port_count; i++)
		port_ids[i] = sw->ports[i].dpdk_port;
	for (unsigned int i = 0; i < sw->port_count; i++)
		queues = RTE_MAX(queues, jg_port_pool_reserved(
						 sw->ports[i].dpdk_port,
						 (uint16_t)sw->worker_count,
						 port_ids, sw->port_count,
						 (uint16_t)options->burst));
	needed = queues + SW_PACKET_IN_QUEUE;
	if (options->mbufs == 0)
		return needed;
	if (options->mbufs < needed) {
		fprintf(stderr,
			PROGRAM
			": --mbufs %u is too few: %u workers on %u "
			"ports can leave %u buffers of each port's pool "
			"in receive and transmit queues (%u descriptors "
			"each on a NIC, none on ports that copy "
			"frames), buffer caches and bursts of %u, and "
			"%u in the packet-in queue; give --mbufs %u or "
			"more\n",
			options->mbufs, sw->worker_count, sw->port_count,
			queues, JG_PORT_RX_DESCRIPTORS, options->burst,
			SW_PACKET_IN_QUEUE, needed);
		return 0;
	}
	return options->mbufs;
}

static bool start_ports(struct sw_switch *sw, const struct options *options)
{
	const uint32_t mbufs = pool_size(sw, options);

	if (mbufs == 0)
		return false;
	printf(PROGRAM ": %u receive buffers in each port's pool\n", mbufs);
	fflush(stdout);
	for (unsigned int i = 0; i < sw->port_count; i++) {
		const struct jg_port_params params = {
			.program = PROGRAM,
			.name = sw->ports[i].name,
			.port_id = sw->ports[i].dpdk_port,
			.queues = (uint16_t)sw->worker_count,
			.mtu = options->port_mtu,
			.mbufs = mbufs,
			.mbuf_size = options->ports[i].af_packet
					     ? AF_PACKET_FRAME
					     : 0,
		};

		if (!jg_port_setup(&params, NULL))
			return false;
	}
	return true;
}

/* -- the data path -- */

struct worker {
	unsigned int index;
	unsigned int lcore_id;
	uint16_t queue;
	uint32_t burst;
	uint64_t idle_max_ns;
	uint64_t sleep_ns;
};

static struct worker workers[SW_MAX_WORKERS];

static bool digest_to_queue(void *context,
			    const struct sw_elephant_digest *digest)
{
	struct sw_switch *sw = context;

	return rte_ring_mp_enqueue_elem(sw->digests, (void *)digest,
					sizeof(*digest)) == 0;
}

struct tx_buffer {
	uint16_t count;
	struct rte_mbuf *mbufs[MAX_BURST * 2];
};

static void flush(struct sw_switch *sw, struct worker *worker,
		  struct tx_buffer *tx)
{
	for (unsigned int p = 0; p < sw->port_count; p++) {
		uint16_t sent;

		if (tx[p].count == 0)
			continue;
		sent = rte_eth_tx_burst(sw->ports[p].dpdk_port, worker->queue,
					tx[p].mbufs, tx[p].count);
		if (sent < tx[p].count) {
			sw->pipeline.internal[worker->index].tx_dropped +=
				tx[p].count - sent;
			rte_pktmbuf_free_bulk(tx[p].mbufs + sent,
					      tx[p].count - sent);
		}
		tx[p].count = 0;
	}
}

/* One packet through the pipeline, then to its port's transmit buffer,
 * the packet-in queue, or freed. */
static void forward(struct sw_switch *sw, struct worker *worker,
		    struct tx_buffer *tx, struct rte_mbuf *mbuf,
		    uint16_t ingress_port, uint64_t now)
{
	uint32_t length;
	int egress;

	if (mbuf->nb_segs > 1 && rte_pktmbuf_linearize(mbuf) != 0) {
		sw->pipeline.internal[worker->index].multi_segment_dropped++;
		rte_pktmbuf_free(mbuf);
		return;
	}
	length = rte_pktmbuf_data_len(mbuf);
	egress = sw_pipeline_run(&sw->pipeline, worker->index,
				 rte_pktmbuf_mtod(mbuf, uint8_t *), &length,
				 ingress_port, now);
	if (egress < 0) {
		rte_pktmbuf_free(mbuf);
		return;
	}
	mbuf->data_len = (uint16_t)length;
	mbuf->pkt_len = length;
	if (egress == sw->pipeline.cpu_port) {
		if (rte_ring_mp_enqueue(sw->packet_in, mbuf) != 0) {
			sw->pipeline.internal[worker->index].packet_in_lost++;
			rte_pktmbuf_free(mbuf);
		}
		return;
	}
	if (egress >= SW_PORTS || sw->port_index[egress] < 0) {
		/* A port the controller routes to but this switch lacks. */
		sw->pipeline.internal[worker->index].tx_dropped++;
		rte_pktmbuf_free(mbuf);
		return;
	}
	struct tx_buffer *buffer = &tx[sw->port_index[egress]];
	buffer->mbufs[buffer->count++] = mbuf;
}

static int worker_run(void *arg)
{
	struct worker *worker = arg;
	struct sw_switch *sw = &the_switch;
	struct tx_buffer *tx = calloc(sw->port_count, sizeof(*tx));
	struct rte_mbuf *mbufs[MAX_BURST];

	if (tx == NULL) {
		fprintf(stderr, PROGRAM ": worker %u: out of memory\n",
			worker->index);
		return -1;
	}
	while (!__atomic_load_n(&sw->stop, __ATOMIC_RELAXED)) {
		unsigned int received = 0;
		uint64_t now = sw_now_ns();

		rte_rwlock_read_lock(&sw->lock);
		for (unsigned int p = 0; p < sw->port_count; p++) {
			uint16_t n = rte_eth_rx_burst(sw->ports[p].dpdk_port,
						      worker->queue, mbufs,
						      (uint16_t)worker->burst);

			for (uint16_t i = 0; i < n; i++)
				forward(sw, worker, tx, mbufs[i],
					sw->ports[p].p4_port, now);
			received += n;
			/* A burst can send at most burst packets to one
			 * port; flush before the next could overflow it. */
			flush(sw, worker, tx);
		}
		if (worker->index == 0) {
			void *out[32];
			unsigned int n = rte_ring_sc_dequeue_burst(
				sw->packet_out, out, 32, NULL);

			for (unsigned int i = 0; i < n; i++)
				forward(sw, worker, tx, out[i],
					sw->pipeline.cpu_port, now);
			received += n;
			flush(sw, worker, tx);
		}
		rte_rwlock_read_unlock(&sw->lock);
		if (received) {
			worker->sleep_ns = 0;
			continue;
		}
		jg_idle_sleep(&worker->sleep_ns, worker->idle_max_ns, now,
			      UINT64_MAX);
	}
	free(tx);
	return 0;
}

/* -- start-up -- */

static bool create_queues(struct sw_switch *sw)
{
	sw->digests = rte_ring_create_elem(
		"sw_digests", sizeof(struct sw_elephant_digest),
		SW_DIGEST_QUEUE, SOCKET_ID_ANY, RING_F_SC_DEQ);
	sw->packet_in = rte_ring_create("sw_packet_in", SW_PACKET_IN_QUEUE,
					SOCKET_ID_ANY, RING_F_SC_DEQ);
	sw->packet_out = rte_ring_create("sw_packet_out", SW_PACKET_IN_QUEUE,
					 SOCKET_ID_ANY, RING_F_SC_DEQ);
	sw->packet_out_pool = rte_pktmbuf_pool_create(
		"sw_packet_out", PACKET_OUT_MBUFS, 0, 0,
		RTE_PKTMBUF_HEADROOM + 9600, SOCKET_ID_ANY);
	if (sw->digests == NULL || sw->packet_in == NULL ||
	    sw->packet_out == NULL || sw->packet_out_pool == NULL) {
		fprintf(stderr,
			PROGRAM ": cannot create the control queues: %s "
				"(give the EAL more memory, e.g. -m 512)\n",
			rte_strerror(rte_errno));
		return false;
	}
	return true;
}

static void print_totals(const struct sw_switch *sw)
{
	struct sw_totals totals;

	sw_totals(sw, &totals);
	printf("{\"event\": \"exit\", \"packets_in\": %" PRIu64
	       ", \"packets_out\": %" PRIu64 ", \"tx_dropped\": %" PRIu64
	       ", \"digests_lost\": %" PRIu64 ", \"packet_in_lost\": %" PRIu64
	       ", \"multi_segment_dropped\": %" PRIu64 "}\n",
	       totals.packets_in, totals.packets_out,
	       totals.internal.tx_dropped, totals.internal.digests_lost,
	       totals.internal.packet_in_lost,
	       totals.internal.multi_segment_dropped);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct options options;
	struct sw_switch *sw = &the_switch;
	char error[256];
	char *eal_argv[MAX_EAL_ARGS];
	unsigned int lcore_id;
	int status = EXIT_FAILURE, eal_used;

	switch (parse_options(&options, argc, argv)) {
	case 1:
		return EXIT_SUCCESS;
	case 2:
		return 2;
	default:
		break;
	}
	memcpy(eal_argv, options.eal_argv, sizeof(eal_argv));
	eal_used = rte_eal_init(options.eal_argc, eal_argv);
	if (eal_used < 0) {
		fprintf(stderr, PROGRAM
			": the DPDK EAL did not start (see its messages "
			"above; in development try --no-huge -m 512 "
			"--file-prefix NAME)\n");
		return EXIT_FAILURE;
	}
	jg_log_start();
	if (eal_used + 1 < options.eal_argc) {
		fprintf(stderr,
			PROGRAM ": the EAL did not take '%s'; put the "
				"program's options after \"--\"\n",
			options.eal_argv[eal_used + 1]);
		goto out;
	}
	rte_rwlock_init(&sw->lock);
	sw->device_id = options.device_id;
	sw->primary_on_leave_wait = options.primary_on_leave_wait;
	sw->fence_election_ids = options.fence_election_ids;
	sw->parse_depth = options.depth;
	sw->start_ns = sw_now_ns();
	RTE_LCORE_FOREACH_WORKER(lcore_id)
	{
		struct worker *worker;

		if (sw->worker_count == SW_MAX_WORKERS) {
			fprintf(stderr, PROGRAM ": at most %d workers\n",
				SW_MAX_WORKERS);
			goto out;
		}
		worker = &workers[sw->worker_count];
		worker->index = sw->worker_count;
		worker->lcore_id = lcore_id;
		worker->queue = (uint16_t)sw->worker_count;
		worker->burst = options.burst;
		worker->idle_max_ns =
			(uint64_t)options.idle_sleep_max_us * 1000;
		sw->worker_count++;
	}
	if (sw->worker_count == 0) {
		fprintf(stderr,
			PROGRAM ": no worker lcore: give the EAL at least two "
				"(e.g. -l 0-1); the main lcore serves control, "
				"the others forward\n");
		goto out;
	}
	if (sw_pipeline_init(&sw->pipeline, options.depth,
			     (uint16_t)options.cpu_port, sw->start_ns) != 0) {
		fprintf(stderr, PROGRAM ": out of memory for the tables\n");
		goto out;
	}
	sw->pipeline.digest_sink = digest_to_queue;
	sw->pipeline.digest_context = sw;
	if (!attach_ports(sw, &options) || !create_queues(sw) ||
	    !start_ports(sw, &options))
		goto out_pipeline;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (options.metrics != NULL &&
	    !jg_metrics_start(options.metrics, "jumbogate_switch",
			      sw_metrics_render, sw, error, sizeof(error))) {
		fprintf(stderr, PROGRAM ": %s\n", error);
		goto out_ports;
	}
	if (!sw_p4rt_start(sw, options.grpc, &options.tls, error,
			   sizeof(error))) {
		fprintf(stderr, PROGRAM ": %s\n", error);
		goto out_ports;
	}
	sw_telemetry_register(sw);
	jg_log_telemetry_register(PROGRAM);
	for (unsigned int w = 0; w < sw->worker_count; w++)
		rte_eal_remote_launch(worker_run, &workers[w],
				      workers[w].lcore_id);
	printf(PROGRAM " ready: %u ports, %u workers, parse depth %u, "
		       "device %" PRIu64 ", cpu port %u, P4Runtime %s\n",
	       sw->port_count, sw->worker_count, options.depth, sw->device_id,
	       options.cpu_port, options.grpc);
	fflush(stdout);
	jg_service_notify("READY=1\nSTATUS=forwarding");
	while (!signalled) {
		const struct timespec tick = {.tv_nsec = 20 * 1000 * 1000};
		nanosleep(&tick, NULL);
	}
	JG_LOG(log_switch, NOTICE, PROGRAM ": %s: stopping\n",
	       strsignal(signalled));
	jg_service_notify("STOPPING=1");
	sw_p4rt_stop();
	jg_metrics_stop();
	__atomic_store_n(&sw->stop, true, __ATOMIC_RELAXED);
	rte_eal_mp_wait_lcore();
	print_totals(sw);
	status = EXIT_SUCCESS;
out_ports:
	jg_metrics_stop();
	for (unsigned int i = 0; i < sw->port_count; i++) {
		rte_eth_dev_stop(sw->ports[i].dpdk_port);
		rte_eth_dev_close(sw->ports[i].dpdk_port);
	}
out_pipeline:
	sw_pipeline_free(&sw->pipeline);
out:
	rte_eal_cleanup();
	return status;
}
