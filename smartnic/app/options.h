/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Options of jumbogate-nic: command line and config file.
 *
 * Everything is parsed before the DPDK EAL starts, so that --help and
 * mistakes in the options never need a working DPDK environment.
 */
#ifndef JUMBOGATE_NIC_OPTIONS_H
#define JUMBOGATE_NIC_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <jumbogate/engine.h>

#include "pathmtu.h"
#include "prefix.h"
#include "tls_options.h"

#define NIC_MAX_PORTS		  8
#define NIC_MAX_QUEUES		  64
#define NIC_MAX_EAL_ARGS	  64
#define NIC_MAX_INTERNAL_PREFIXES 64
#define NIC_MAX_STARTUP_PATH_MTUS 256
#define NIC_NAME_LEN		  128
#define NIC_DEFAULT_GRPC_ADDRESS  "127.0.0.1:50061"

/* Set by the build from the project version. */
#ifndef JUMBOGATE_NIC_VERSION
#define JUMBOGATE_NIC_VERSION "unknown"
#endif

struct nic_return_port {
	char rx[NIC_NAME_LEN];
	char tx[NIC_NAME_LEN];
};

/* One port's own MTU (--port-mtu NAME=BYTES), over the ports' default. */
struct nic_port_mtu {
	char port[NIC_NAME_LEN];
	uint32_t mtu;
};

struct nic_startup_path_mtu {
	struct jg_prefix prefix;
	uint16_t mtu;
};

struct nic_options {
	/* EAL arguments: from before "--" on the command line, or from the
	 * config file's "eal" key. argv[0] is the program name. */
	int eal_argc;
	char *eal_argv[NIC_MAX_EAL_ARGS];

	/* Ports by DPDK device name; empty means every probed port. */
	unsigned int port_count;
	char ports[NIC_MAX_PORTS][NIC_NAME_LEN];
	unsigned int return_port_count;
	struct nic_return_port return_ports[NIC_MAX_PORTS];

	/* Largest IP packet a port carries (9000 for the rack underlay),
	 * unless the port has its own (an Internet-side port at 1500, such
	 * as an AF_XDP socket, which carries no jumbo frame). */
	uint32_t port_mtu;
	unsigned int port_mtu_count;
	struct nic_port_mtu port_mtus[NIC_MAX_PORTS];
	/* The largest and the smallest MTU of the served ports (ports.c;
	 * of the MTUs given until the ports are known). Merged packets leave
	 * by the rack side, so the internal MTU is held to the largest; split
	 * packets and path MTU probes leave by the Internet side, so path
	 * MTUs and probes are held to the smallest. A packet larger than the
	 * port it leaves by is dropped there (worker_tx.c). */
	uint32_t largest_port_mtu;
	uint32_t smallest_port_mtu;
	uint32_t mbufs_per_port;
	/* Data bytes per buffer; 0 means one frame of port_mtu. */
	uint32_t mbuf_size;
	uint16_t burst;
	uint32_t idle_sleep_max_us;
	/* How long a control request waits for the workers. */
	uint32_t command_timeout_ms;
	/* Queues of every port (0: one per worker) and the scaler that
	 * chooses how many workers serve them (scaling.c). */
	uint16_t queues;
	bool queue_scaling;
	uint32_t queue_scale_pps;
	uint32_t queue_scale_elephants;
	uint32_t queue_scale_down_s;

	/* "none" disables the server. */
	char grpc_address[NIC_NAME_LEN];
	/* The own Prometheus endpoint (runtime/metrics_http.h); "" when off. */
	char metrics_address[NIC_NAME_LEN];
	struct jg_tls_options tls; /* how the control API is secured */

	unsigned int internal_prefix_count;
	struct jg_prefix internal_prefixes[NIC_MAX_INTERNAL_PREFIXES];

	unsigned int path_mtu_count;
	struct nic_startup_path_mtu path_mtus[NIC_MAX_STARTUP_PATH_MTUS];

	/* Engine settings; fields the options do not set keep the engine's
	 * defaults (jg_engine_config_init). */
	struct jg_engine_config engine;
	bool caravan_pack;
	/* Path MTU discovery (pathmtu.h): off unless asked for. */
	bool pmtu_discovery;
	struct nic_pmtu_config pmtu;
};

enum nic_parse_result {
	NIC_PARSE_OK = 0,
	NIC_PARSE_EXIT_SUCCESS, /* --help or --version was handled */
	NIC_PARSE_ERROR,	/* a message naming the problem was printed */
};

/* Fill options from argv (and the config file it names). */
enum nic_parse_result nic_options_parse(struct nic_options *options, int argc,
					char **argv);

/* Release the strings the parser duplicated. */
void nic_options_free(struct nic_options *options);

/* Bounds shared by the command line and the control API, so that the same
 * value is accepted or refused the same way wherever it comes from. */
#define NIC_MIN_PORT_MTU     1280u
#define NIC_MAX_PORT_MTU     9216u
#define NIC_MIN_PATH_MTU     576u
#define NIC_MIN_INTERNAL_MTU 1280u
#define NIC_MIN_MAX_FLOWS    64u
#define NIC_MAX_MAX_FLOWS    (1u << 22)
#define NIC_MIN_MAX_SEGMENTS 2u
#define NIC_MAX_MAX_SEGMENTS 64u
#define NIC_MAX_DELAY_US     10000u

#endif /* JUMBOGATE_NIC_OPTIONS_H */
