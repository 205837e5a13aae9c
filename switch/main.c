/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-switch: the jumbogate P4 pipeline in software, on DPDK ports,
 * programmed over P4Runtime. The main lcore serves control; every worker
 * lcore polls every port and runs the pipeline (pipeline.c).
 */
#include <errno.h>
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
#include "options.h"
#include "port.h"
#include "ports.h"
#include "service_notify.h"
#include "switch.h"
#include "telemetry.h"

/* Buffers of packet-out frames from the controller. */
#define PACKET_OUT_MBUFS 1023

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

	switch (sw_parse_options(&options, argc, argv)) {
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
	    !sw_ports_start(sw, &options))
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
