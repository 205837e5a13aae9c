/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-switch's command line: what follows the EAL's options, checked
 * before the EAL starts (options.c).
 */
#ifndef JUMBOGATE_SWITCH_OPTIONS_H
#define JUMBOGATE_SWITCH_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "switch.h"

#define PROGRAM	     "jumbogate-switch"
#define MAX_EAL_ARGS 64
#define MAX_BURST    256 /* the largest --burst */
/* net_af_packet copies each frame into one buffer, which must hold its
 * whole ring frame; 12288 bytes carry 9000-byte frames and more. */
#define AF_PACKET_FRAME 12288

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

/* Fills `options` from the command line (the EAL's arguments are kept in
 * eal_argv). 0: run; 1: exit successfully (help, version); 2: bad options,
 * said on stderr. */
int sw_parse_options(struct options *options, int argc, char **argv);

#endif /* JUMBOGATE_SWITCH_OPTIONS_H */
