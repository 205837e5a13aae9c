/* SPDX-License-Identifier: Apache-2.0 */
/* jumbogate-switch's command line (options.h). */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef JUMBOGATE_SWITCH_VERSION
#define JUMBOGATE_SWITCH_VERSION "unknown"
#endif

#define DEFAULT_GRPC	   "127.0.0.1:9559"
#define DEFAULT_CPU_PORT   510
#define DEFAULT_PORT_MTU   9500
#define DEFAULT_IDLE_SLEEP 100
#define DEFAULT_BURST	   32

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
		"  --mbufs N             receive buffers of each pool (one "
		"per socket and\n"
		"                        buffer size; default: what its "
		"ports' queues and\n"
		"                        the packet-in queue can keep)\n"
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

	/* Decimal digits only, as jumbogate-nic reads its numbers: base 0
	 * would read 010 as 8, and strtoull skips blanks and takes a sign
	 * after them (" -1" as 2^64 - 1). */
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno != 0 || !isdigit((unsigned char)text[0]) || *end != '\0' ||
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

int sw_parse_options(struct options *options, int argc, char **argv)
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
	options->mbufs = 0; /* what the ports need (ports.c, size_pools) */
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
	/* 0, not 1: getopt then forgets the last command line it read as
	 * well (where it stood in a cluster such as "-xy"), which a second
	 * parse in one process would otherwise resume from a stale pointer
	 * into it. */
	optind = 0;
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
