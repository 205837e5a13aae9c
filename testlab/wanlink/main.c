/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-wanlink: a WAN between two DPDK ports for the test lab, whose
 * kernels have no netem. Each direction holds what crosses it for a fixed
 * one-way delay, loses packets with a seeded probability, and optionally
 * caps the rate with a token bucket in front of a bounded, drop-tail queue
 * (link.h). Frames cross unchanged: the link is a wire, not a router.
 *
 *   jumbogate-wanlink EAL... -- [--port-a DEV --port-b DEV]
 *       [--delay-us US] [--loss P] [--seed N] [--rate-mbit M]
 *       [--burst-bytes B] [--limit N] [--port-mtu BYTES] [--mbuf-size B]
 *       [--idle-sleep-max-us US]
 *
 * It says "jumbogate-wanlink ready: ..." once it forwards, serves its
 * counters as telemetry (/jumbogate/wanlink, /jumbogate/buffers), and prints
 * them as one JSON line ({"event": "exit", ...}) when SIGINT or SIGTERM
 * stops it. One lcore polls both ports and sleeps while nothing is due, so
 * it costs little CPU on a shared machine.
 */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_seqlock.h>
#include <rte_telemetry.h>

#include "link.h"
#include "pool_telemetry.h"
#include "port.h"

#define PROGRAM "jumbogate-wanlink"
#define BURST	32

struct options {
	const char *port[2];
	struct wl_config link;
	uint32_t port_mtu;
	uint32_t mbuf_size;
	uint64_t idle_sleep_max_ns;
};

struct wanlink {
	uint16_t port_id[2];
	const char *name[2];
	/* dir[d] carries what port d receives to port 1 - d. */
	struct wl_dir dir[2];
	/* What telemetry reads: a copy the forwarding loop publishes, so the
	 * telemetry thread never reads counters while they change. */
	rte_seqlock_t lock;
	struct wl_counters published[2];
	uint32_t held[2];
};

static volatile sig_atomic_t signalled;
static struct wanlink the_link;
static const char *const direction_name[2] = {"a_to_b", "b_to_a"};

static void on_signal(int signal)
{
	signalled = signal;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROGRAM " EAL... -- [options]\n"
		"  --port-a DEV, --port-b DEV  the link's two ends (default: "
		"the first two probed ports)\n"
		"  --delay-us US          one-way delay of each direction "
		"(default 0)\n"
		"  --loss P               probability a packet is lost, 0..1 "
		"(default 0; 0.0001 is 0.01%%)\n"
		"  --seed N               seed of the loss pattern (default "
		"1)\n"
		"  --rate-mbit M          token bucket rate of each direction "
		"(default 0: no cap)\n"
		"  --burst-bytes B        the bucket's depth (default 32768)\n"
		"  --limit N              most packets a direction holds, "
		"queued and in flight; more are dropped (default 10000)\n"
		"  --port-mtu BYTES       largest IP packet (default 9000)\n"
		"  --mbuf-size BYTES      data bytes of a buffer (default: "
		"what the port needs)\n"
		"  --idle-sleep-max-us US longest idle sleep, never past a "
		"release (default 50; 0 busy-polls)\n");
}

static bool parse_number(const char *name, const char *text, double low,
			 double high, double *value)
{
	char *end;

	*value = strtod(text, &end);
	if (end == text || *end != '\0' || !(*value >= low && *value <= high)) {
		fprintf(stderr, PROGRAM ": --%s %s is not a number in %g..%g\n",
			name, text, low, high);
		return false;
	}
	return true;
}

/* 0: run; 1: exit successfully (--help); 2: usage error. */
static int parse_options(struct options *o, int argc, char **argv)
{
	static const struct option longs[] = {
		{"port-a", required_argument, NULL, 'a'},
		{"port-b", required_argument, NULL, 'b'},
		{"delay-us", required_argument, NULL, 'd'},
		{"loss", required_argument, NULL, 'l'},
		{"seed", required_argument, NULL, 's'},
		{"rate-mbit", required_argument, NULL, 'r'},
		{"burst-bytes", required_argument, NULL, 'B'},
		{"limit", required_argument, NULL, 'L'},
		{"port-mtu", required_argument, NULL, 'm'},
		{"mbuf-size", required_argument, NULL, 'M'},
		{"idle-sleep-max-us", required_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	double v;
	int c;

	*o = (struct options){
		.link = {.seed = 1, .burst_bytes = 32768, .limit = 10000},
		.port_mtu = 9000,
		.idle_sleep_max_ns = 50000,
	};
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		const char *name = "";

		for (const struct option *l = longs; l->name; l++)
			if (l->val == c)
				name = l->name;
		switch (c) {
		case 'a':
		case 'b':
			o->port[c - 'a'] = optarg;
			continue;
		case 'h':
			usage(stdout);
			return 1;
		case '?':
			usage(stderr);
			return 2;
		}
		if (c == 's') {
			/* A seed is any 64-bit number: strtod would round. */
			char *end;

			o->link.seed = strtoull(optarg, &end, 0);
			if (end == optarg || *end != '\0') {
				fprintf(stderr,
					PROGRAM ": --seed %s is not a number\n",
					optarg);
				return 2;
			}
			continue;
		}
		/* Counts and sizes must fit their 32 bits before a cast. */
		if (!parse_number(name, optarg, 0,
				  c == 'l'		     ? 1
				  : strchr("dri", c) != NULL ? 1e12
							     : UINT32_MAX,
				  &v))
			return 2;
		switch (c) {
		case 'd':
			o->link.delay_ns = (uint64_t)(v * 1000.0);
			break;
		case 'l':
			o->link.loss = v;
			break;
		case 'r':
			o->link.rate_bps = (uint64_t)(v * 1e6);
			break;
		case 'B':
			o->link.burst_bytes = (uint32_t)v;
			break;
		case 'L':
			o->link.limit = (uint32_t)v;
			break;
		case 'm':
			o->port_mtu = (uint32_t)v;
			break;
		case 'M':
			o->mbuf_size = (uint32_t)v;
			break;
		case 'i':
			o->idle_sleep_max_ns = (uint64_t)(v * 1000.0);
			break;
		}
	}
	if (optind != argc) {
		fprintf(stderr, PROGRAM ": unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	return 0;
}

static bool find_ports(struct wanlink *w, const struct options *o)
{
	uint16_t probed[2], count = 0, id;

	RTE_ETH_FOREACH_DEV(id)
	{
		if (count < 2)
			probed[count] = id;
		count++;
	}
	for (int p = 0; p < 2; p++) {
		static char names[2][RTE_ETH_NAME_MAX_LEN];

		if (o->port[p] != NULL) {
			if (!jg_port_find(PROGRAM, o->port[p], &w->port_id[p]))
				return false;
			w->name[p] = o->port[p];
			continue;
		}
		if (count < 2) {
			fprintf(stderr,
				PROGRAM ": two ports needed, the EAL probed "
					"%u (add them with --vdev)\n",
				count);
			return false;
		}
		w->port_id[p] = probed[p];
		rte_eth_dev_get_name_by_port(probed[p], names[p]);
		w->name[p] = names[p];
	}
	if (w->port_id[0] == w->port_id[1]) {
		fprintf(stderr,
			PROGRAM ": --port-a and --port-b are one port\n");
		return false;
	}
	return true;
}

static bool start_ports(struct wanlink *w, const struct options *o)
{
	for (int p = 0; p < 2; p++) {
		/* A port's buffers wait on the direction it feeds: room for
		 * the limit, besides what the rings and cache take. */
		const struct jg_port_params params = {
			.program = PROGRAM,
			.name = w->name[p],
			.port_id = w->port_id[p],
			.queues = 1,
			.mtu = o->port_mtu,
			.mbufs = o->link.limit +
				 jg_pool_reserved(&w->port_id[p], 1, w->port_id,
						  2, 1, BURST),
			.mbuf_size = o->mbuf_size,
		};

		if (!jg_port_setup(&params, NULL))
			return false;
	}
	return true;
}

static void publish(struct wanlink *w)
{
	rte_seqlock_write_lock(&w->lock);
	for (int d = 0; d < 2; d++) {
		w->published[d] = w->dir[d].counters;
		w->held[d] = w->dir[d].held;
	}
	rte_seqlock_write_unlock(&w->lock);
}

static void add_counters(struct rte_tel_data *d, const struct wl_counters *c,
			 uint32_t held)
{
	jg_tel_u64(d, "received", c->received);
	jg_tel_u64(d, "received_bytes", c->received_bytes);
	jg_tel_u64(d, "largest", c->largest);
	jg_tel_u64(d, "lost", c->lost);
	jg_tel_u64(d, "overflow", c->overflow);
	jg_tel_u64(d, "sent", c->sent);
	jg_tel_u64(d, "sent_bytes", c->sent_bytes);
	jg_tel_u64(d, "held", held);
	jg_tel_u64(d, "held_max", c->held_max);
	jg_tel_u64(d, "shaped", c->shaped);
	jg_tel_u64(d, "tx_refused", c->tx_refused);
}

static int wanlink_command(const char *command, const char *params,
			   struct rte_tel_data *d)
{
	struct wanlink *w = &the_link;
	struct wl_counters counters[2];
	uint32_t held[2];
	uint32_t sequence;

	(void)command;
	(void)params;
	do {
		sequence = rte_seqlock_read_begin(&w->lock);
		memcpy(counters, w->published, sizeof(counters));
		memcpy(held, w->held, sizeof(held));
	} while (rte_seqlock_read_retry(&w->lock, sequence));
	rte_tel_data_start_dict(d);
	for (int dir = 0; dir < 2; dir++) {
		struct rte_tel_data *c = rte_tel_data_alloc();

		if (c == NULL)
			return -1;
		rte_tel_data_start_dict(c);
		add_counters(c, &counters[dir], held[dir]);
		rte_tel_data_add_dict_container(d, direction_name[dir], c, 0);
	}
	jg_tel_u64(d, "delay_us", w->dir[0].config.delay_ns / 1000);
	jg_tel_u64(d, "loss_ppm",
		   (uint64_t)(w->dir[0].config.loss * 1e6 + 0.5));
	jg_tel_u64(d, "seed", w->dir[0].config.seed);
	jg_tel_u64(d, "rate_bps", w->dir[0].config.rate_bps);
	jg_tel_u64(d, "limit", w->dir[0].config.limit);
	return 0;
}

/* Sends what is due in direction d; returns how many left. */
static uint32_t release(struct wanlink *w, int d, uint64_t now)
{
	struct rte_mbuf *due[BURST];
	uint32_t n = wl_dir_due(&w->dir[d], now, (void **)due, BURST);
	uint16_t sent;
	uint64_t bytes = 0;

	if (n == 0)
		return 0;
	sent = rte_eth_tx_burst(w->port_id[1 - d], 0, due, (uint16_t)n);
	for (uint16_t i = 0; i < sent; i++)
		bytes += due[i]->pkt_len;
	/* Refused packets stay first in line: a busy port delays them
	 * further, as a real link's full transmit queue would. */
	wl_dir_sent(&w->dir[d], sent, bytes, sent < n);
	return sent;
}

static void forward(struct wanlink *w, uint64_t idle_sleep_max_ns)
{
	uint64_t sleep_ns = 0;

	while (!signalled) {
		struct rte_mbuf *packets[BURST];
		uint64_t now = now_ns();
		uint32_t moved = 0;

		for (int d = 0; d < 2; d++) {
			uint16_t n = rte_eth_rx_burst(w->port_id[d], 0, packets,
						      BURST);

			for (uint16_t i = 0; i < n; i++)
				if (wl_dir_offer(&w->dir[d], packets[i],
						 packets[i]->pkt_len,
						 now) != WL_KEPT)
					rte_pktmbuf_free(packets[i]);
			moved += n;
		}
		now = now_ns();
		for (int d = 0; d < 2; d++)
			moved += release(w, d, now);
		if (moved) {
			publish(w);
			sleep_ns = 0;
			continue;
		}
		jg_idle_sleep(&sleep_ns, idle_sleep_max_ns, now,
			      RTE_MIN(wl_dir_next_release(&w->dir[0]),
				      wl_dir_next_release(&w->dir[1])));
	}
}

static void print_totals(const struct wanlink *w)
{
	printf("{\"event\": \"exit\"");
	for (int d = 0; d < 2; d++) {
		const struct wl_counters *c = &w->dir[d].counters;

		printf(", \"%s\": {\"received\": %" PRIu64
		       ", \"received_bytes\": %" PRIu64
		       ", \"largest\": %" PRIu64 ", \"lost\": %" PRIu64
		       ", \"overflow\": %" PRIu64 ", \"sent\": %" PRIu64
		       ", \"sent_bytes\": %" PRIu64 ", \"held\": %u"
		       ", \"held_max\": %" PRIu64 ", \"shaped\": %" PRIu64
		       ", \"tx_refused\": %" PRIu64 "}",
		       direction_name[d], c->received, c->received_bytes,
		       c->largest, c->lost, c->overflow, c->sent, c->sent_bytes,
		       w->dir[d].held, c->held_max, c->shaped, c->tx_refused);
	}
	printf("}\n");
	fflush(stdout);
}

/* Frees what is still held at exit, so the buffer count shows no leak. */
static void drain(struct wl_dir *dir)
{
	void *packets[BURST];
	uint32_t n;

	while ((n = wl_dir_due(dir, UINT64_MAX, packets, BURST)) > 0) {
		for (uint32_t i = 0; i < n; i++)
			rte_pktmbuf_free(packets[i]);
		wl_dir_discard(dir, n);
	}
}

int main(int argc, char **argv)
{
	struct wanlink *w = &the_link;
	struct options o;
	char error[256];
	int used, status = EXIT_FAILURE;

	used = rte_eal_init(argc, argv);
	if (used < 0) {
		fprintf(stderr,
			PROGRAM ": the DPDK EAL did not start (try "
				"--no-huge -m 512 --file-prefix NAME)\n");
		return EXIT_FAILURE;
	}
	argv[used] = argv[0];
	switch (parse_options(&o, argc - used, argv + used)) {
	case 1:
		rte_eal_cleanup();
		return EXIT_SUCCESS;
	case 2:
		rte_eal_cleanup();
		return 2;
	}
	rte_seqlock_init(&w->lock);
	for (int d = 0; d < 2; d++)
		if (!wl_dir_init(&w->dir[d], &o.link, (uint64_t)d, error,
				 sizeof(error))) {
			fprintf(stderr, PROGRAM ": %s\n", error);
			goto out;
		}
	if (!find_ports(w, &o) || !start_ports(w, &o))
		goto out;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	jg_telemetry_register(PROGRAM, "/jumbogate/wanlink", wanlink_command,
			      PROGRAM ": counters of each direction");
	jg_telemetry_register_buffers("/jumbogate/buffers", PROGRAM);
	printf(PROGRAM " ready: %s <-> %s, delay %" PRIu64
		       " us each way, loss %g (seed %" PRIu64
		       "), rate %s%.3f Mbit/s, limit %u packets\n",
	       w->name[0], w->name[1], o.link.delay_ns / 1000, o.link.loss,
	       o.link.seed, o.link.rate_bps ? "" : "uncapped ",
	       (double)o.link.rate_bps / 1e6, o.link.limit);
	fflush(stdout);
	forward(w, o.idle_sleep_max_ns);
	print_totals(w);
	status = EXIT_SUCCESS;
	for (int d = 0; d < 2; d++)
		drain(&w->dir[d]);
	for (int p = 0; p < 2; p++) {
		rte_eth_dev_stop(w->port_id[p]);
		rte_eth_dev_close(w->port_id[p]);
	}
out:
	for (int d = 0; d < 2; d++)
		wl_dir_free(&w->dir[d]);
	rte_eal_cleanup();
	return status;
}
