/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options jumbogate-nic takes: each one's name, argument and help,
 * and --help, which prints them. options.c parses and applies them.
 */
#ifndef JUMBOGATE_NIC_OPTION_TABLE_H
#define JUMBOGATE_NIC_OPTION_TABLE_H

#include <stddef.h>

enum option_id {
	OPT_HELP,
	OPT_VERSION,
	OPT_CONFIG,
	OPT_EAL,
	OPT_PORT,
	OPT_RETURN_PORT,
	OPT_PORT_MTU,
	OPT_MBUFS,
	OPT_MBUF_SIZE,
	OPT_BURST,
	OPT_IDLE_SLEEP,
	OPT_GRPC,
	OPT_METRICS,
	OPT_INTERNAL_PREFIX,
	OPT_INTERNAL_MTU,
	OPT_DEFAULT_PATH_MTU_V4,
	OPT_DEFAULT_PATH_MTU_V6,
	OPT_PATH_MTU,
	OPT_MAX_FLOWS,
	OPT_MAX_SEGMENTS,
	OPT_MERGE_UNKNOWN,
	OPT_DELAY_RATE,
	OPT_DELAY_YIELD,
	OPT_DELAY_QUANTILE,
	OPT_DELAY_MAX,
	OPT_RAISE_SYN_MSS,
	OPT_CARAVAN_PACK,
	OPT_CARAVAN_DSCP,
	OPT_MAX_ONLOADED,
	OPT_ONLOAD_IDLE,
	OPT_COMMAND_TIMEOUT,
	OPT_QUEUES,
	OPT_QUEUE_SCALING,
	OPT_QUEUE_SCALE_PPS,
	OPT_QUEUE_SCALE_ELEPHANTS,
	OPT_QUEUE_SCALE_DOWN,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_TLS_CLIENT_CA,
	OPT_TLS_ALLOW,
	OPT_TLS_RELOAD,
	OPT_INSECURE,
	OPT_PMTU_DISCOVERY,
	OPT_PMTU_PORT,
	OPT_PMTU_PROBE_MTU,
	OPT_PMTU_DESTINATIONS,
	OPT_PMTU_REPROBE,
	OPT_PMTU_TIMEOUT,
	OPT_PMTU_REPLIES,
	OPT_PMTU_ROUNDS,
	OPT_PMTU_ICMP_GAP,
	OPT_PMTU_PREFIX_ROUNDS,
};

struct option_spec {
	enum option_id id;
	const char *name;
	const char *argument; /* NULL for flags */
	const char *help;
};

/* The option called name[0..length), or NULL. */
const struct option_spec *nic_option_find(const char *name, size_t length);
/* Print --help: usage, every option, an example. */
void nic_options_print_help(const char *program);

#endif /* JUMBOGATE_NIC_OPTION_TABLE_H */
