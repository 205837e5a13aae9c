/* SPDX-License-Identifier: Apache-2.0 */
#include "option_table.h"
#include "options.h"

#include <stdio.h>
#include <string.h>

static const struct option_spec option_specs[] = {
	{OPT_HELP, "help", NULL, "print this help and exit"},
	{OPT_VERSION, "version", NULL, "print the version and exit"},
	{OPT_CONFIG, "config", "FILE",
	 "read options from FILE (\"key = value\" lines, keys are the long "
	 "option names); options are applied in order, so later ones "
	 "override"},
	{OPT_EAL, "eal", "ARGS",
	 "DPDK EAL arguments as one string (instead of putting them before "
	 "\"--\")"},
	{OPT_PORT, "port", "DEVICE",
	 "serve this DPDK device (PCI address or vdev name, e.g. "
	 "net_af_packet0); repeatable; default: every probed port"},
	{OPT_RETURN_PORT, "return-port", "RX=TX",
	 "send what arrives on device RX out of device TX instead of back "
	 "out of RX; repeatable"},
	{OPT_PORT_MTU, "port-mtu", "[PORT=]BYTES",
	 "largest IP packet the ports carry (default 9000); PORT=BYTES "
	 "sets one port's own (a 1500-byte Internet side, such as "
	 "net_af_xdp, which carries no jumbo frame); repeatable"},
	{OPT_MBUFS, "mbufs", "N",
	 "packet buffers per port (default 8192); held segments use them"},
	{OPT_MBUF_SIZE, "mbuf-size", "BYTES",
	 "data bytes of a packet buffer (default: one whole frame of "
	 "the port's MTU, doubled until the port accepts it; net_af_packet "
	 "needs its framesz)"},
	{OPT_BURST, "burst", "N", "packets per receive burst (default 32)"},
	{OPT_IDLE_SLEEP, "idle-sleep-max-us", "US",
	 "longest sleep of an idle worker, never past a merge deadline "
	 "(default 100; 0 busy-polls)"},
	{OPT_GRPC, "grpc", "ADDRESS",
	 "gRPC control address: HOST:PORT or unix:PATH, \"none\" to disable "
	 "(default " NIC_DEFAULT_GRPC_ADDRESS ")"},
	{OPT_METRICS, "metrics", "HOST:PORT",
	 "serve Prometheus metrics of the data path on this loopback address "
	 "(off unless given)"},
	{OPT_INTERNAL_PREFIX, "internal-prefix", "CIDR",
	 "addresses inside the rack; repeatable. Packets to them are merged "
	 "(inbound), packets from them to elsewhere are split (outbound); "
	 "the rest passes untouched"},
	{OPT_INTERNAL_MTU, "internal-mtu", "BYTES",
	 "largest merged packet, IP length (default 8500)"},
	{OPT_DEFAULT_PATH_MTU_V4, "default-path-mtu-v4", "BYTES",
	 "path MTU toward IPv4 destinations without a rule (default 1500)"},
	{OPT_DEFAULT_PATH_MTU_V6, "default-path-mtu-v6", "BYTES",
	 "path MTU toward IPv6 destinations without a rule (default 1280, "
	 "the IPv6 minimum)"},
	{OPT_PATH_MTU, "path-mtu", "CIDR=BYTES",
	 "path MTU for a destination prefix; repeatable"},
	{OPT_MAX_FLOWS, "max-flows", "N",
	 "flow-table capacity per worker (default 65536)"},
	{OPT_MAX_SEGMENTS, "max-segments", "N",
	 "longest mbuf chain of a merged packet (default 16)"},
	{OPT_MERGE_UNKNOWN, "merge-unknown-flows", "on|off",
	 "merge every eligible TCP flow, not only onloaded ones (default "
	 "on)"},
	{OPT_DELAY_RATE, "delay-rate-threshold-gbps", "GBPS",
	 "flows slower than this merge only within a burst (default 0.1)"},
	{OPT_DELAY_YIELD, "delay-yield-threshold", "SHARE",
	 "flows merged better than this are not delayed (default 0.93)"},
	{OPT_DELAY_QUANTILE, "delay-quantile", "Q",
	 "quantile of the estimated time of merge (default 0.95)"},
	{OPT_DELAY_MAX, "delay-max-us", "US",
	 "upper bound on any added delay, at most 10000 (default 300)"},
	{OPT_RAISE_SYN_MSS, "raise-syn-mss", "on|off",
	 "raise the MSS of SYNs entering the rack to fit the internal MTU, "
	 "so that jumbo hosts send large segments that are split on the "
	 "way out (default on)"},
	{OPT_CARAVAN_PACK, "caravan-pack", "on|off",
	 "pack inbound UDP datagrams of one flow into caravans (default off: "
	 "only receivers that unpack caravans can take them); outbound "
	 "caravans are always unpacked"},
	{OPT_CARAVAN_DSCP, "caravan-dscp", "DSCP",
	 "DSCP that marks a caravan (default 43)"},
	{OPT_MAX_ONLOADED, "max-onloaded-flows", "N",
	 "most onloaded (eviction-protected) flows per worker and port; "
	 "more onloads are refused (default: a quarter of --max-flows)"},
	{OPT_ONLOAD_IDLE, "onload-idle-s", "SECONDS",
	 "an onloaded flow not seen for this long loses its protection "
	 "(default 60)"},
	{OPT_COMMAND_TIMEOUT, "command-timeout-ms", "MS",
	 "how long a control request waits for the workers before it "
	 "answers UNAVAILABLE (default 2000)"},
	{OPT_QUEUES, "queues", "N",
	 "receive and transmit queues of every port, at least one per worker "
	 "(default: one per worker; net_af_packet needs qpairs=N)"},
	{OPT_QUEUE_SCALING, "queue-scaling", "on|off",
	 "follow the load: fewer workers serve the queues when idle, more "
	 "under load (default off: every worker serves its share)"},
	{OPT_QUEUE_SCALE_PPS, "queue-scale-pps", "PPS",
	 "received packets per second one serving worker is given before "
	 "another joins (default 200000)"},
	{OPT_QUEUE_SCALE_ELEPHANTS, "queue-scale-elephants", "N",
	 "onloaded (elephant) flows per serving worker (default 4)"},
	{OPT_QUEUE_SCALE_DOWN, "queue-scale-down-s", "S",
	 "seconds the load must stay below the hysteresis before a worker "
	 "leaves (default 3)"},
	{OPT_TLS_CERT, "tls-cert", "FILE",
	 "serve the control API over TLS with this certificate (PEM); with "
	 "--tls-key and --tls-client-ca: mutual TLS, clients need a "
	 "certificate from that CA"},
	{OPT_TLS_KEY, "tls-key", "FILE", "the private key of --tls-cert (PEM)"},
	{OPT_TLS_CLIENT_CA, "tls-client-ca", "FILE",
	 "the CA client certificates must chain to (PEM)"},
	{OPT_TLS_ALLOW, "tls-allow", "NAME",
	 "a client identity allowed to call: a DNS subject alternative name "
	 "of its certificate (repeat, at most 16; mutual TLS needs at least "
	 "one: the CA signs more than the controllers)"},
	{OPT_TLS_RELOAD, "tls-reload-s", "SECONDS",
	 "read the three TLS files again this often (default 60): renew a "
	 "certificate by writing new files over the old ones, no restart"},
	{OPT_INSECURE, "insecure", NULL,
	 "allow a plaintext control API on an address other than loopback "
	 "(anyone who reaches it may reconfigure the SmartNIC; warned at "
	 "start)"},
	{OPT_PMTU_DISCOVERY, "pmtu-discovery", "on|off",
	 "find the path MTU to each external destination of outbound "
	 "traffic with one round of probes, and answer other borders' "
	 "probes (docs/pathmtu.md; default off)"},
	{OPT_PMTU_PORT, "pmtu-port", "PORT",
	 "UDP port of probes and replies (default 48999)"},
	{OPT_PMTU_PROBE_MTU, "pmtu-probe-mtu", "BYTES",
	 "largest probe: the next hop's MTU (default: the smallest "
	 "--port-mtu)"},
	{OPT_PMTU_DESTINATIONS, "pmtu-destinations", "N",
	 "destinations tracked; the least recently used is evicted past it "
	 "(default 4096)"},
	{OPT_PMTU_REPROBE, "pmtu-reprobe-s", "SECONDS",
	 "a destination in use is probed again after this (default 600)"},
	{OPT_PMTU_TIMEOUT, "pmtu-timeout-ms", "MS",
	 "a round with no answer by then falls back to the configured path "
	 "MTU (default 1000)"},
	{OPT_PMTU_REPLIES, "pmtu-replies-per-s", "N",
	 "most probes answered per second from one source prefix (/24, "
	 "/48); eight prefixes' worth in all (default 1000)"},
	{OPT_PMTU_ROUNDS, "pmtu-rounds-per-s", "N",
	 "most probe rounds begun per second (default 100)"},
	{OPT_PMTU_ICMP_GAP, "pmtu-icmp-gap-s", "SECONDS",
	 "an ICMP 'too big' about a tracked destination starts a new round "
	 "only this long after its last (default 10)"},
	{OPT_PMTU_PREFIX_ROUNDS, "pmtu-prefix-rounds-per-min", "N",
	 "most probe rounds begun per minute toward one destination prefix "
	 "(/24, /48), the operator's requests aside (default 30)"},
};

#define OPTION_COUNT (sizeof(option_specs) / sizeof(option_specs[0]))

/* Print text wrapped to 80 columns, every line indented by indent. */
static void print_wrapped(const char *text, int indent)
{
	const int width = 80 - indent;

	while (*text) {
		int length = (int)strlen(text);
		int cut = length;

		if (length > width) {
			cut = width;
			while (cut > 0 && text[cut] != ' ')
				cut--;
			if (cut == 0)
				cut = width;
		}
		printf("%*s%.*s\n", indent, "", cut, text);
		text += cut;
		while (*text == ' ')
			text++;
	}
}

void nic_options_print_help(const char *program)
{
	printf("Usage: jumbogate-nic [EAL options] -- [options]\n"
	       "       jumbogate-nic --config FILE [options]\n\n");
	print_wrapped("jumbogate-nic runs the jumbogate engine on DPDK ports: "
		      "it merges inbound TCP segments into jumbo packets, "
		      "splits outbound TCP packets to the path MTU, packs and "
		      "unpacks UDP caravans, and passes everything else "
		      "through. Every worker lcore of the EAL (-l) polls one "
		      "queue of each port; the main lcore serves control.",
		      0);
	printf("\nOptions:\n");
	for (size_t i = 0; i < OPTION_COUNT; i++) {
		const struct option_spec *spec = &option_specs[i];

		printf("  --%s%s%s\n", spec->name, spec->argument ? " " : "",
		       spec->argument ? spec->argument : "");
		print_wrapped(spec->help, 6);
	}
	printf("\nExample (development, on a veth):\n"
	       "  jumbogate-nic --no-huge -m 512 --no-pci --file-prefix nic1 "
	       "-l 0-1 \\\n"
	       "    --vdev=net_af_packet0,iface=nic0,blocksz=12288,"
	       "framesz=12288,framecnt=1024 \\\n"
	       "    -- --mbuf-size 12288 --internal-prefix 10.10.0.0/16\n\n");
	print_wrapped(
		"Statistics: the GetStats RPC, and DPDK telemetry "
		"(dpdk-telemetry.py -f PREFIX, commands /jumbogate/stats, "
		"/jumbogate/delay, /jumbogate/caravan_delay, /jumbogate/info). "
		"SIGINT/SIGTERM flush "
		"held packets and exit.",
		0);
	(void)program;
}

const struct option_spec *nic_option_find(const char *name, size_t length)
{
	for (size_t i = 0; i < OPTION_COUNT; i++)
		if (strlen(option_specs[i].name) == length &&
		    strncmp(option_specs[i].name, name, length) == 0)
			return &option_specs[i];
	return NULL;
}
