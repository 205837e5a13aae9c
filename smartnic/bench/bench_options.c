/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-bench's command line: the trace to build or read, the paths
 * to run, and how to report them.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jumbogate/engine.h>

#include "bench.h"

void bench_usage(const char *program)
{
	fprintf(stderr,
		"usage: %s [--label NAME] [--flows N] [--packets N] "
		"[--train N] [--concurrency N]\n"
		"  [--reorder SHARE] [--loss SHARE] [--ipv6 SHARE] "
		"[--mice N] [--gbps G] [--seed N]\n"
		"  [--pcap FILE] [--mtu N] [--max-delay-us N] [--repeat N]\n"
		"  [--paths engine,gro,gro-timed,pass,ceiling] [--workers N]"
		" [--software-checksums]\n"
		"  [--verify] [--json FILE]\n",
		program);
}

static bool select_paths(struct options *o, const char *list)
{
	char copy[128], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", list);
	memset(o->paths, 0, sizeof(o->paths));
	for (char *name = strtok_r(copy, ",", &save); name != NULL;
	     name = strtok_r(NULL, ",", &save)) {
		unsigned int k;

		for (k = 0; k < PATHS; k++)
			if (strcmp(name, path_names[k]) == 0)
				break;
		if (k == PATHS)
			return false;
		o->paths[k] = true;
	}
	return true;
}

bool bench_parse_options(int argc, char **argv, struct options *o)
{
	static const struct option long_options[] = {
		{"label", required_argument, NULL, 'l'},
		{"flows", required_argument, NULL, 'f'},
		{"packets", required_argument, NULL, 'n'},
		{"train", required_argument, NULL, 't'},
		{"concurrency", required_argument, NULL, 'c'},
		{"reorder", required_argument, NULL, 'r'},
		{"loss", required_argument, NULL, 'x'},
		{"ipv6", required_argument, NULL, '6'},
		{"mice", required_argument, NULL, 'm'},
		{"gbps", required_argument, NULL, 'g'},
		{"seed", required_argument, NULL, 's'},
		{"pcap", required_argument, NULL, 'p'},
		{"mtu", required_argument, NULL, 'u'},
		{"max-delay-us", required_argument, NULL, 'd'},
		{"repeat", required_argument, NULL, 'R'},
		{"paths", required_argument, NULL, 'P'},
		{"software-checksums", no_argument, NULL, 'S'},
		{"verify", no_argument, NULL, 'V'},
		{"json", required_argument, NULL, 'j'},
		{"workers", required_argument, NULL, 'w'},
		{NULL, 0, NULL, 0},
	};
	int c;

	struct jg_engine_config defaults;

	/* The engine's own default bound, which gro-timed's flush shares. */
	jg_engine_config_init(&defaults);
	o->max_delay_us = defaults.delay.max_delay_us;
	trace_params_default(&o->trace);
	o->label = "custom";
	o->internal_mtu = JG_DEFAULT_INTERNAL_MTU;
	o->repeat = 3;
	o->workers = 1;
	for (unsigned int k = 0; k < PATHS; k++)
		o->paths[k] = true;
	while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
		switch (c) {
		case 'l':
			o->label = optarg;
			break;
		case 'f':
			o->trace.flows = (uint32_t)atol(optarg);
			break;
		case 'n':
			o->trace.packets = (uint32_t)atol(optarg);
			break;
		case 't':
			o->trace.train = (uint32_t)atol(optarg);
			break;
		case 'c':
			o->trace.concurrency = (uint32_t)atol(optarg);
			break;
		case 'r':
			o->trace.reorder = atof(optarg);
			break;
		case 'x':
			o->trace.loss = atof(optarg);
			break;
		case '6':
			o->trace.ipv6_share = atof(optarg);
			break;
		case 'm':
			o->trace.mice = (uint32_t)atol(optarg);
			break;
		case 'g':
			o->trace.line_gbps = atof(optarg);
			break;
		case 's':
			o->trace.seed = (uint64_t)atoll(optarg);
			break;
		case 'p':
			o->pcap = optarg;
			break;
		case 'u':
			o->internal_mtu = (uint32_t)atol(optarg);
			break;
		case 'd':
			o->max_delay_us = (uint32_t)atol(optarg);
			break;
		case 'R':
			o->repeat = (uint32_t)atol(optarg);
			break;
		case 'P':
			if (!select_paths(o, optarg))
				return false;
			break;
		case 'S':
			o->software_checksums = true;
			break;
		case 'V':
			o->verify = true;
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'w':
			o->workers = (uint32_t)atol(optarg);
			break;
		default:
			return false;
		}
	}
	return optind == argc && o->repeat > 0 && o->trace.line_gbps > 0 &&
	       o->max_delay_us > 0 && o->max_delay_us <= 1000 &&
	       o->workers >= 1 && o->workers <= MAX_WORKERS;
}
