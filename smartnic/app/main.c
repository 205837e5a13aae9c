/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-nic: the SmartNIC program. The main lcore serves control
 * (gRPC, telemetry, signals); every worker lcore runs nic_worker_run().
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_hash.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "control.h"
#include "engines.h"
#include "grpc_server.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"
#include "nic.h"
#include "pathmtu.h"
#include "port.h"
#include "ports.h"
#include "scaling.h"
#include "service_notify.h"
#include "stats.h"
#include "telemetry.h"

/* Small buffers for headers the engine writes (Ethernet, VLANs, IP with
 * extensions, TCP with options) and for indirect mbufs, which carry no
 * data of their own. */
#define HEADER_DATA_ROOM	     (RTE_PKTMBUF_HEADROOM + 256)
#define HEADER_MBUFS_PER_WORKER_PORT 16384
#define COMMAND_RING_SIZE	     64
#define FLOW_COUNTER_ENTRIES	     65536u
/* Probes and replies in flight: a few rounds' worth. */
#define PATHMTU_MBUFS 511

static struct nic the_nic;
static volatile sig_atomic_t signalled;

/* The program's own log type (jumbogate.nic; runtime/log.h): registered before
 * main so that the EAL's --log-level finds it. */
static int log_nic = RTE_LOGTYPE_USER1;
RTE_INIT(log_nic_register)
{
	log_nic = jg_log_register("jumbogate.nic", RTE_LOG_INFO);
}

static void on_signal(int number)
{
	signalled = number;
}

static bool create_workers(struct nic *nic)
{
	unsigned int lcore_id;

	RTE_LCORE_FOREACH_WORKER(lcore_id)
	{
		struct nic_worker *worker;

		if (nic->worker_count == NIC_MAX_WORKERS) {
			fprintf(stderr,
				"jumbogate-nic: at most %d worker lcores\n",
				NIC_MAX_WORKERS);
			return false;
		}
		worker = &nic->workers[nic->worker_count];
		worker->index = nic->worker_count;
		worker->lcore_id = lcore_id;
		worker->queue_id = (uint16_t)nic->worker_count;
		worker->internal.count = nic->options->internal_prefix_count;
		memcpy(worker->internal.prefixes,
		       nic->options->internal_prefixes,
		       sizeof(worker->internal.prefixes));
		nic->worker_count++;
	}
	if (nic->worker_count == 0) {
		fprintf(stderr,
			"jumbogate-nic: no worker lcore: give the EAL at least "
			"two (e.g. -l 0-1); the main lcore serves control, the "
			"others poll the ports\n");
		return false;
	}
	nic->queues.count =
		nic->options->queues ? nic->options->queues : nic->worker_count;
	if (nic->queues.count < nic->worker_count) {
		fprintf(stderr,
			"jumbogate-nic: --queues %u is fewer than the %u "
			"workers: each sends on a queue of its own\n",
			nic->queues.count, nic->worker_count);
		return false;
	}
	nic_scaling_init(nic);
	return true;
}

/* Every port's pool must leave buffers for merging once the rings and
 * caches of all workers have taken theirs; otherwise held segments would
 * starve reception (rx_nombuf) under load. Refused here, with the sum. */
static bool check_buffer_budget(const struct nic *nic)
{
	const struct nic_options *options = nic->options;
	uint32_t reserved = nic_pool_reserved(nic);
	uint32_t needed = reserved + NIC_MIN_HELD_SHARE * nic->worker_count;

	if (options->mbufs_per_port < needed) {
		fprintf(stderr,
			"jumbogate-nic: --mbufs %u is too few: %u queues on "
			"%u ports can leave %u buffers of each port's pool in "
			"receive and transmit rings (%u descriptors each, "
			"twice that for receiving on net_af_xdp, 2^rsize on "
			"a net_memif zero-copy client, none on ports that "
			"copy frames), "
			"buffer caches and bursts of %u, and merging needs %u "
			"more per worker; give --mbufs %u or more\n",
			options->mbufs_per_port, nic->queues.count,
			nic->port_count, reserved, JG_PORT_RX_DESCRIPTORS,
			options->burst, NIC_MIN_HELD_SHARE, needed);
		return false;
	}
	printf("jumbogate-nic: each worker may hold %u of each port's %u "
	       "buffers in merge runs\n",
	       nic_held_share(nic), options->mbufs_per_port);
	return true;
}

/* Merged packets are mbuf chains: no longer than every port can send. */
static bool fit_chains_to_ports(struct nic *nic, struct nic_options *options)
{
	nic->max_tx_segments = NIC_MAX_MAX_SEGMENTS;
	for (unsigned int p = 0; p < nic->port_count; p++) {
		uint16_t most = jg_port_max_tx_segments(nic->ports[p].port_id);

		if (jg_port_tx_checksum_offload(nic->ports[p].tx_port_id))
			printf("jumbogate-nic: what port %s receives leaves "
			       "through a port that sums what it sends: "
			       "checksums "
			       "of merged and split packets are left to it\n",
			       nic->ports[p].name);

		if (most < 2) {
			/* Its chains are copied into one buffer as they
			 * leave (worker_tx.c, prepare). */
			nic->ports[p].flatten_chains = true;
			printf("jumbogate-nic: port %s cannot send a packet "
			       "in more than one buffer (no MULTI_SEGS): "
			       "merged packets are copied into one before "
			       "they leave it\n",
			       nic->ports[p].name);
			continue;
		}
		if (most < options->engine.max_chain_segments) {
			printf("jumbogate-nic: port %s sends at most %u "
			       "buffers per packet: merged chains are held "
			       "to that (--max-segments %u)\n",
			       nic->ports[p].name, most,
			       options->engine.max_chain_segments);
			options->engine.max_chain_segments = most;
		}
		nic->max_tx_segments = RTE_MIN(nic->max_tx_segments, most);
	}
	return true;
}

/* Path MTU discovery before the engines, which ask it for learned MTUs. */
static bool create_pathmtu(struct nic *nic)
{
	struct nic_options *options = nic->options;

	if (!options->pmtu_discovery)
		return true;
	/* Probes leave by the Internet side, which may be the port of its
	 * own smaller MTU. */
	if (options->pmtu.probe_mtu == 0)
		options->pmtu.probe_mtu = (uint16_t)options->smallest_port_mtu;
	if (options->pmtu.probe_mtu > options->smallest_port_mtu) {
		fprintf(stderr,
			"jumbogate-nic: --pmtu-probe-mtu %u is larger than "
			"%u, the smallest MTU of the served ports "
			"(--port-mtu): the probes could not leave\n",
			options->pmtu.probe_mtu, options->smallest_port_mtu);
		return false;
	}
	nic->pathmtu_pool = rte_pktmbuf_pool_create(
		"jg_pathmtu", PATHMTU_MBUFS, 32, JG_MBUF_PRIV_SIZE,
		RTE_PKTMBUF_HEADROOM + options->pmtu.probe_mtu +
			RTE_ETHER_HDR_LEN + 2 * RTE_VLAN_HLEN,
		rte_socket_id());
	if (nic->pathmtu_pool != NULL)
		nic->pathmtu =
			nic_pathmtu_create(&options->pmtu, nic->pathmtu_pool);
	if (nic->pathmtu == NULL) {
		fprintf(stderr,
			"jumbogate-nic: cannot set up path MTU discovery: %s "
			"(give the EAL more memory, e.g. -m 512)\n",
			rte_strerror(rte_errno));
		return false;
	}
	return true;
}

static bool create_engines(struct nic *nic)
{
	const struct nic_options *options = nic->options;
	unsigned int pool_size = HEADER_MBUFS_PER_WORKER_PORT *
				 nic->worker_count * nic->port_count;

	nic->header_pool = rte_pktmbuf_pool_create(
		"jg_headers", pool_size, 256, JG_MBUF_PRIV_SIZE,
		HEADER_DATA_ROOM, rte_socket_id());
	if (nic->header_pool == NULL) {
		fprintf(stderr,
			"jumbogate-nic: cannot allocate %u header buffers: %s "
			"(give the EAL more memory, e.g. -m 512)\n",
			pool_size, rte_strerror(rte_errno));
		return false;
	}
	nic->engine_config = options->engine;
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		struct nic_worker *worker = &nic->workers[w];
		char name[RTE_RING_NAMESIZE];
		struct rte_hash_parameters hash = {
			.entries = RTE_MIN(options->engine.max_flows,
					   FLOW_COUNTER_ENTRIES),
			.key_len = sizeof(struct jg_flow_key),
			.socket_id = (int)rte_socket_id(),
		};

		for (unsigned int p = 0; p < nic->port_count; p++) {
			worker->engines[p] = nic_engine_create(
				nic, &nic->engine_config, w, p);
			if (worker->engines[p] == NULL) {
				fprintf(stderr,
					"jumbogate-nic: cannot create the "
					"engine of worker %u, port %s: %s "
					"(check --max-flows and the EAL "
					"memory, -m)\n",
					w, nic->ports[p].name,
					rte_strerror(rte_errno));
				return false;
			}
			for (unsigned int i = 0; i < options->path_mtu_count;
			     i++) {
				int result = jg_pmtu_set(
					worker->engines[p],
					&options->path_mtus[i].prefix,
					options->path_mtus[i].mtu);
				if (result < 0) {
					fprintf(stderr,
						"jumbogate-nic: --path-mtu "
						"number %u refused: %s\n",
						i + 1, strerror(-result));
					return false;
				}
			}
		}
		if (w == 0 && jg_engine_meta_in_priv_area(worker->engines[0]))
			printf("jumbogate-nic: a port took the mbuf "
			       "dynamic-field "
			       "space (e.g. net_pcap's Rx timestamp): merge "
			       "state is kept in the buffers' private area\n");
		snprintf(name, sizeof(name), "jg_cmd_%u", w);
		worker->commands =
			rte_ring_create(name, COMMAND_RING_SIZE, SOCKET_ID_ANY,
					RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "jg_flows_%u", w);
		hash.name = name;
		worker->flow_counters = rte_hash_create(&hash);
		if (worker->commands == NULL || worker->flow_counters == NULL) {
			fprintf(stderr,
				"jumbogate-nic: cannot create the command ring "
				"or flow counters of worker %u: %s\n",
				w, rte_strerror(rte_errno));
			return false;
		}
	}
	return true;
}

static void destroy_engines(struct nic *nic)
{
	for (unsigned int w = 0; w < nic->worker_count; w++) {
		struct nic_worker *worker = &nic->workers[w];
		const void *key;
		void *data;
		uint32_t next = 0;

		for (unsigned int p = 0; p < nic->port_count; p++)
			if (worker->engines[p])
				jg_engine_destroy(worker->engines[p]);
		if (worker->flow_counters) {
			while (rte_hash_iterate(worker->flow_counters, &key,
						&data, &next) >= 0)
				free(data);
			rte_hash_free(worker->flow_counters);
		}
		rte_ring_free(worker->commands);
	}
}

static uint64_t new_boot_id(void)
{
	uint64_t id = 0;

	/* Unique per start so the controller can tell a restart. */
	if (getrandom(&id, sizeof(id), 0) != sizeof(id) || id == 0)
		id = nic_now_ns() ^ ((uint64_t)getpid() << 32);
	return id;
}

/* One line a script can parse: the totals at exit. */
static void print_totals(const char *event, const struct nic_totals *t)
{
	printf("{\"event\": \"%s\", \"packets_in\": %" PRIu64
	       ", \"packets_out\": %" PRIu64 ", \"packets_held\": %" PRIu64
	       ", \"packets_dropped\": %" PRIu64
	       ", \"packets_absorbed\": %" PRIu64
	       ", \"packets_created\": %" PRIu64
	       ", \"merged_packets\": %" PRIu64 ", \"split_packets\": %" PRIu64
	       ", \"merge_packets_in\": %" PRIu64 ", \"commands\": %" PRIu64
	       ", \"commands_abandoned\": %" PRIu64 "}\n",
	       event, t->counters.rx_packets, t->counters.tx_packets, t->held,
	       t->dropped, t->absorbed, t->created,
	       t->engine.merge.merged_packets,
	       t->engine.split.packets_segmented, t->engine.merge.packets_in,
	       t->counters.commands, t->counters.commands_abandoned);
	fflush(stdout);
}

static void final_totals(struct nic *nic)
{
	struct nic_worker_snapshot snapshots[NIC_MAX_WORKERS];
	struct nic_totals totals;

	/* The workers have stopped: their state can be read directly. */
	for (unsigned int w = 0; w < nic->worker_count; w++)
		nic_worker_snapshot(&nic->workers[w], &snapshots[w]);
	nic_totals_compute(&totals, snapshots, nic->worker_count);
	print_totals("exit", &totals);
}

int main(int argc, char **argv)
{
	static struct nic_options options;
	struct nic *nic = &the_nic;
	char error[NIC_ERROR_LEN];
	bool grpc_started = false;
	int status = EXIT_FAILURE;
	char *eal_argv[NIC_MAX_EAL_ARGS];
	int eal_used;

	switch (nic_options_parse(&options, argc, argv)) {
	case NIC_PARSE_OK:
		break;
	case NIC_PARSE_EXIT_SUCCESS:
		nic_options_free(&options);
		return EXIT_SUCCESS;
	case NIC_PARSE_ERROR:
		nic_options_free(&options);
		return 2;
	}
	/* The EAL rewrites its argv (it moves the program name), so it gets
	 * a copy of the array and the options keep the strings they own. */
	memcpy(eal_argv, options.eal_argv, sizeof(eal_argv));
	eal_used = rte_eal_init(options.eal_argc, eal_argv);
	if (eal_used < 0) {
		fprintf(stderr,
			"jumbogate-nic: the DPDK EAL did not start (see its "
			"messages above; in development try --no-huge -m 512 "
			"--file-prefix NAME)\n");
		nic_options_free(&options);
		return EXIT_FAILURE;
	}
	jg_log_start();
	if (eal_used + 1 < options.eal_argc) {
		fprintf(stderr,
			"jumbogate-nic: the EAL did not take '%s'; put the "
			"program's options after \"--\"\n",
			options.eal_argv[eal_used + 1]);
		goto out;
	}
	nic->options = &options;
	nic->boot_id = new_boot_id();
	nic->start_ns = nic_now_ns();
	atomic_init(&nic->stop, false);
	nic_instance = nic;
	if (options.internal_prefix_count == 0)
		fprintf(stderr,
			"jumbogate-nic: warning: no --internal-prefix: nothing "
			"is inbound or outbound, every packet passes "
			"untouched\n");
	if (!create_workers(nic) || !nic_ports_resolve(nic) ||
	    !check_buffer_budget(nic) || !fit_chains_to_ports(nic, &options) ||
	    !create_pathmtu(nic) || !create_engines(nic) ||
	    !nic_ports_start(nic))
		goto out;
	nic_control_init(nic);
	nic_telemetry_register();
	jg_log_telemetry_register("jumbogate-nic");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (strcmp(options.grpc_address, "none") != 0) {
		if (!nic_grpc_start(options.grpc_address, &options.tls, error,
				    sizeof(error))) {
			fprintf(stderr, "jumbogate-nic: %s\n", error);
			goto out_ports;
		}
		grpc_started = true;
	}
	for (unsigned int w = 0; w < nic->worker_count; w++)
		rte_eal_remote_launch(nic_worker_run, &nic->workers[w],
				      nic->workers[w].lcore_id);
	/* After the workers: a scrape asks them for their counters. */
	if (options.metrics_address[0] != '\0' &&
	    !jg_metrics_start(options.metrics_address, "jumbogate_nic",
			      nic_metrics_render, NULL, error, sizeof(error))) {
		fprintf(stderr, "jumbogate-nic: %s\n", error);
		if (grpc_started)
			nic_grpc_stop();
		goto out_ports;
	}
	printf("jumbogate-nic ready: boot_id %" PRIu64
	       ", %u ports, %u workers, grpc %s%s\n",
	       nic->boot_id, nic->port_count, nic->worker_count,
	       options.grpc_address,
	       jg_tls_enabled(&options.tls) ? " (mutual TLS)" : "");
	fflush(stdout);
	jg_service_notify("READY=1\nSTATUS=merging and splitting");

	while (!signalled) {
		const struct timespec tick = {.tv_nsec = 20 * 1000 * 1000};
		nanosleep(&tick, NULL);
		nic_scaling_tick(nic, nic_now_ns());
	}
	JG_LOG(log_nic, NOTICE,
	       "jumbogate-nic: %s: flushing held packets and stopping\n",
	       strsignal(signalled));
	jg_service_notify("STOPPING=1");
	/* Control first, so that no command arrives after the workers. */
	jg_metrics_stop();
	if (grpc_started)
		nic_grpc_stop();
	atomic_store(&nic->stop, true);
	rte_eal_mp_wait_lcore();
	final_totals(nic);
	status = EXIT_SUCCESS;
out_ports:
	nic_control_fini();
	if (status != EXIT_SUCCESS) {
		atomic_store(&nic->stop, true);
		rte_eal_mp_wait_lcore();
	}
	nic_ports_stop(nic);
out:
	destroy_engines(nic);
	nic_pathmtu_free(nic->pathmtu);
	rte_mempool_free(nic->pathmtu_pool);
	rte_eal_cleanup();
	nic_options_free(&options);
	return status;
}
