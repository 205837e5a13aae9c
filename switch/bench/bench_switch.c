/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The software switch's pipeline in memory, on one core: packets per second
 * of sw_pipeline_run for 1500-byte TCP over IPv4 and IPv6, on the bypass
 * path (routed, ECMP over two uplinks) and on the steering path (a
 * merge_flows hit, sent to the SmartNIC), next to a pass-through that does
 * the same per-packet work outside the pipeline (copy the frame in, swap
 * the MACs). No ports, no P4Runtime: this is the pipeline's own cost.
 * UDP runs both paths too: unlisted UDP bypasses, and UDP an operator
 * listed in merge_flows goes to the SmartNIC (so the smoke test, which
 * the sanitized build also runs, walks that lookup).
 *
 *   jumbogate-switch-bench [--seconds S] [--flows N]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline.h"

#define FRAME_BYTES	1514 /* a 1500-byte IP packet */
#define PORT_EXTERNAL	1
#define PORT_EXTERNAL_2 2
#define PORT_INTERNAL	3
#define PORT_NIC	5

static uint64_t now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static void store16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t checksum(const uint8_t *data, int length)
{
	uint32_t sum = 0;

	for (int i = 0; i + 1 < length; i += 2)
		sum += (uint32_t)(data[i] << 8 | data[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Ethernet / IPv4 or IPv6 / TCP or UDP, 1500 bytes of IP, from the
 * Internet to an instance (10.1.0.5 or fd00:1::5), source port `sport`. */
static void build_frame(uint8_t *frame, bool v6, uint8_t protocol,
			uint16_t sport)
{
	uint8_t *ip = frame + 14, *l4;

	memset(frame, 0, FRAME_BYTES);
	memcpy(frame, "\x00\x00\x00\x00\x00\xfe\x00\x00\x00\x00\xaa\x01", 12);
	if (v6) {
		store16(frame + 12, P4_ETHERTYPE_IPV6);
		ip[0] = 0x60;
		store16(ip + 4, 1460);
		ip[6] = protocol;
		ip[7] = 64;
		memcpy(ip + 8, "\x20\x01\x0d\xb8\x01\x00", 6);
		ip[23] = 0x10;
		memcpy(ip + 24, "\xfd\x00\x00\x01", 4);
		ip[39] = 5;
		l4 = ip + 40;
	} else {
		store16(frame + 12, P4_ETHERTYPE_IPV4);
		ip[0] = 0x45;
		store16(ip + 2, 1500);
		ip[6] = 0x40; /* DF */
		ip[8] = 64;
		ip[9] = protocol;
		memcpy(ip + 12, "\xc6\x33\x64\x0a", 4); /* 198.51.100.10 */
		memcpy(ip + 16, "\x0a\x01\x00\x05", 4); /* 10.1.0.5 */
		store16(ip + 10, checksum(ip, 20));
		l4 = ip + 20;
	}
	store16(l4, sport);
	store16(l4 + 2, 443);
	if (protocol == P4_IP_PROTO_UDP) {
		store16(l4 + 4, (uint16_t)(FRAME_BYTES - (l4 - frame)));
	} else {
		l4[12] = 0x50;
		l4[13] = P4_TCP_FLAG_ACK;
	}
}

static struct sw_hop_set *hops(int count, const uint16_t *ports)
{
	struct sw_hop_set *set =
		calloc(1, sizeof(*set) + (size_t)count * sizeof(set->hops[0]));

	set->count = (uint32_t)count;
	for (int i = 0; i < count; i++)
		set->hops[i].port = ports[i];
	return set;
}

/* The tables the controller would write for a small rack. */
#define FLOW_AT(field) P4_TABLE_MERGE_FLOWS_KEY_##field##_OFFSET

static void program(struct sw_pipeline *pipeline, int flows)
{
	struct sw_tables *t = &pipeline->tables;
	static const uint16_t uplinks[] = {PORT_EXTERNAL, PORT_EXTERNAL_2};
	static const uint16_t rack[] = {PORT_INTERNAL};
	uint8_t key[SW_KEY_MAX] = {0};
	uint8_t v4[4] = {10, 1, 0, 0}, v6[16] = {0xfd, 0, 0, 1};

	t->port_role[PORT_EXTERNAL] = P4_PORT_ROLE_EXTERNAL;
	t->port_role[PORT_EXTERNAL_2] = P4_PORT_ROLE_EXTERNAL;
	t->port_role[PORT_INTERNAL] = P4_PORT_ROLE_INTERNAL;
	t->port_role[PORT_NIC] = P4_PORT_ROLE_NIC;
	t->fleet_jumbo = true;
	t->nic_port = PORT_NIC;
	/* Elephant detection on, with a threshold these flows never reach
	 * within an epoch of the run: the sketch is updated for every
	 * bypassed packet, as in service. */
	t->elephant_threshold = 4000000000u;
	memcpy(key, "\x0a\x01\x00\x05", 4);
	sw_hash_put(&t->instances_v4, key, 1, 0);
	memset(key, 0, sizeof(key));
	memcpy(key, "\xfd\x00\x00\x01", 4);
	key[15] = 5;
	sw_hash_put(&t->instances_v6, key, 1, 0);
	sw_lpm_put(&t->routes_v4, v4, 16, 2);
	sw_lpm_put(&t->routes_v6, v6, 32, 2);
	t->next_hops[1] = hops(2, uplinks);
	t->next_hops[2] = hops(1, rack);
	/* The steering scenarios' flows (source ports 20000..) are onloaded,
	 * TCP and UDP, over IPv4 and IPv6. */
	for (int flow = 0; flow < 4 * flows; flow++) {
		int v = flow / flows % 2, f = flow % flows;
		uint8_t protocol =
			flow < 2 * flows ? P4_IP_PROTO_TCP : P4_IP_PROTO_UDP;

		uint8_t *src = key + FLOW_AT(SRC_ADDR);
		uint8_t *dst = key + FLOW_AT(DST_ADDR);

		/* At the compile's offsets (p4_tables.h), as the
		 * data path packs a packet's flow. */
		memset(key, 0, sizeof(key));
		key[FLOW_AT(IP_VERSION)] = v ? 6 : 4;
		if (v) {
			memcpy(src, "\x20\x01\x0d\xb8\x01\x00", 6);
			src[15] = 0x10;
			memcpy(dst, "\xfd\x00\x00\x01", 4);
			dst[15] = 5;
		} else {
			memcpy(src + 12, "\xc6\x33\x64\x0a", 4);
			memcpy(dst + 12, "\x0a\x01\x00\x05", 4);
		}
		key[FLOW_AT(PROTOCOL)] = protocol;
		store16(key + FLOW_AT(SRC_PORT), (uint16_t)(20000 + f));
		store16(key + FLOW_AT(DST_PORT), 443);
		if (sw_hash_put(&t->merge_flows, key, 0, 0) != 0) {
			fprintf(stderr,
				"bench: merge_flows holds fewer than "
				"%d flows\n",
				4 * flows);
			exit(1);
		}
	}
}

struct scenario {
	const char *label;
	bool v6;
	uint8_t protocol;
	uint16_t first_port; /* 10000: bypass flows, 20000: onloaded flows */
	int expected_port;   /* where every packet must go */
};

static double run(struct sw_pipeline *pipeline, const struct scenario *s,
		  int flows, double seconds, bool pass_through)
{
	uint8_t *templates = malloc((size_t)flows * FRAME_BYTES);
	uint8_t frame[FRAME_BYTES];
	uint64_t packets = 0, start = now_ns(), deadline;

	for (int f = 0; f < flows; f++)
		build_frame(templates + (size_t)f * FRAME_BYTES, s->v6,
			    s->protocol, (uint16_t)(s->first_port + f));
	deadline = start + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t burst_time = now_ns();

		for (int f = 0; f < flows; f++) {
			uint32_t length = FRAME_BYTES;
			int egress;

			/* A worker reads the clock once per receive burst. */
			if (f % 32 == 31)
				burst_time = now_ns();
			memcpy(frame, templates + (size_t)f * FRAME_BYTES,
			       FRAME_BYTES);
			if (pass_through) {
				uint8_t mac[6];

				memcpy(mac, frame, 6);
				memcpy(frame, frame + 6, 6);
				memcpy(frame + 6, mac, 6);
				egress = s->expected_port;
			} else {
				egress = sw_pipeline_run(pipeline, 0, frame,
							 &length, PORT_EXTERNAL,
							 burst_time);
			}
			if (egress != s->expected_port &&
			    !(s->expected_port == PORT_EXTERNAL &&
			      egress == PORT_EXTERNAL_2)) {
				fprintf(stderr,
					"bench: %s: a packet went to port %d, "
					"not %d\n",
					s->label, egress, s->expected_port);
				exit(1);
			}
		}
		packets += (uint64_t)flows;
		if (now_ns() >= deadline)
			break;
	}
	free(templates);
	return (double)packets / ((double)(now_ns() - start) / 1e9) / 1e6;
}

int main(int argc, char **argv)
{
	static struct sw_pipeline pipeline;
	static const struct option options[] = {
		{"seconds", required_argument, NULL, 's'},
		{"flows", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	double seconds = 1.0;
	int flows = 1024, opt;
	const struct scenario scenarios[] = {
		{"bypass-ipv4", false, P4_IP_PROTO_TCP, 10000, PORT_INTERNAL},
		{"bypass-ipv6", true, P4_IP_PROTO_TCP, 10000, PORT_INTERNAL},
		{"steer-ipv4", false, P4_IP_PROTO_TCP, 20000, PORT_NIC},
		{"steer-ipv6", true, P4_IP_PROTO_TCP, 20000, PORT_NIC},
		{"udp-bypass-v4", false, P4_IP_PROTO_UDP, 10000, PORT_INTERNAL},
		{"udp-bypass-v6", true, P4_IP_PROTO_UDP, 10000, PORT_INTERNAL},
		{"udp-steer-v4", false, P4_IP_PROTO_UDP, 20000, PORT_NIC},
		{"udp-steer-v6", true, P4_IP_PROTO_UDP, 20000, PORT_NIC},
	};

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 's':
			seconds = atof(optarg);
			break;
		case 'f':
			flows = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [--seconds S] [--flows N]\n",
				argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	/* Four sets of onloaded flows share merge_flows. */
	if (seconds <= 0 || flows < 1 ||
	    flows > P4_TABLE_MERGE_FLOWS_SIZE / 4) {
		fprintf(stderr,
			"bench: --seconds must be positive and --flows "
			"within 1..%d\n",
			P4_TABLE_MERGE_FLOWS_SIZE / 4);
		return 2;
	}
	if (sw_pipeline_init(&pipeline, 512, 255, now_ns()) != 0) {
		fprintf(stderr, "bench: out of memory\n");
		return 1;
	}
	program(&pipeline, flows);
	printf("jumbogate-switch pipeline, one core, %d flows, 1500-byte IP "
	       "packets, %.1f s per run\n",
	       flows, seconds);
	printf("%-14s %14s %16s %7s\n", "scenario", "pipeline Mpps",
	       "pass-through Mpps", "ratio");
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		double switched =
			run(&pipeline, &scenarios[i], flows, seconds, false);
		double passed =
			run(&pipeline, &scenarios[i], flows, seconds, true);

		printf("%-14s %14.2f %16.2f %6.2fx\n", scenarios[i].label,
		       switched, passed, switched / passed);
	}
	sw_pipeline_free(&pipeline);
	return 0;
}
