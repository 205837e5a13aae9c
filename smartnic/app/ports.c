/* SPDX-License-Identifier: Apache-2.0 */
#include "ports.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define RX_DESCRIPTORS 1024
#define TX_DESCRIPTORS 1024
/* Ethernet header, two VLAN tags and the FCS around the IP packet. */
/* The most data one mbuf can describe. */
#define MAX_DATA_SIZE ((uint32_t)UINT16_MAX - RTE_PKTMBUF_HEADROOM)
#define FRAME_OVERHEAD                                                         \
	(RTE_ETHER_HDR_LEN + 2 * RTE_VLAN_HLEN + RTE_ETHER_CRC_LEN)

static void list_ports(char *text, size_t length)
{
	uint16_t port_id;
	size_t used = 0;

	text[0] = '\0';
	RTE_ETH_FOREACH_DEV(port_id)
	{
		char name[RTE_ETH_NAME_MAX_LEN];

		if (rte_eth_dev_get_name_by_port(port_id, name) != 0)
			continue;
		used += (size_t)snprintf(text + used,
					 used < length ? length - used : 0,
					 "%s%s", used ? ", " : "", name);
	}
	if (text[0] == '\0')
		snprintf(text, length, "none");
}

static bool find_port(const char *name, uint16_t *port_id)
{
	char available[512];

	if (rte_eth_dev_get_port_by_name(name, port_id) == 0)
		return true;
	list_ports(available, sizeof(available));
	fprintf(stderr,
		"jumbogate-nic: port '%s' not found; the EAL probed: %s (add "
		"it with -a PCI_ADDRESS or --vdev before \"--\")\n",
		name, available);
	return false;
}

bool nic_ports_resolve(struct nic *nic)
{
	const struct nic_options *options = nic->options;
	uint16_t port_id;

	if (options->port_count == 0) {
		RTE_ETH_FOREACH_DEV(port_id)
		{
			struct nic_port *port;

			if (nic->port_count == NIC_MAX_PORTS)
				break;
			port = &nic->ports[nic->port_count++];
			port->port_id = port_id;
			rte_eth_dev_get_name_by_port(port_id, port->name);
		}
		if (nic->port_count == 0) {
			fprintf(stderr,
				"jumbogate-nic: no port: the EAL found none; "
				"give a PCI device (-a 0000:01:00.0) or a vdev "
				"(--vdev=net_af_packet0,iface=IFACE,...) "
				"before "
				"\"--\"\n");
			return false;
		}
	}
	for (unsigned int i = 0; i < options->port_count; i++) {
		struct nic_port *port = &nic->ports[nic->port_count];

		if (!find_port(options->ports[i], &port_id))
			return false;
		for (unsigned int j = 0; j < nic->port_count; j++)
			if (nic->ports[j].port_id == port_id) {
				fprintf(stderr,
					"jumbogate-nic: port '%s' is given "
					"twice\n",
					options->ports[i]);
				return false;
			}
		port->port_id = port_id;
		snprintf(port->name, sizeof(port->name), "%s",
			 options->ports[i]);
		nic->port_count++;
	}
	for (unsigned int p = 0; p < nic->port_count; p++)
		nic->ports[p].tx_port_id = nic->ports[p].port_id;
	for (unsigned int i = 0; i < options->return_port_count; i++) {
		const struct nic_return_port *pair = &options->return_ports[i];
		uint16_t rx, tx;
		unsigned int p;

		if (!find_port(pair->rx, &rx) || !find_port(pair->tx, &tx))
			return false;
		for (p = 0; p < nic->port_count; p++)
			if (nic->ports[p].port_id == rx)
				break;
		if (p == nic->port_count) {
			fprintf(stderr,
				"jumbogate-nic: --return-port %s=%s: %s is not "
				"one of the served ports\n",
				pair->rx, pair->tx, pair->rx);
			return false;
		}
		nic->ports[p].tx_port_id = tx;
	}
	for (unsigned int p = 0; p < nic->port_count; p++) {
		bool served = false;

		for (unsigned int q = 0; q < nic->port_count; q++)
			served |= nic->ports[q].port_id ==
				  nic->ports[p].tx_port_id;
		if (!served) {
			fprintf(stderr,
				"jumbogate-nic: the return port of %s is not "
				"served; add it with --port\n",
				nic->ports[p].name);
			return false;
		}
	}
	return true;
}

static struct rte_mempool *create_pool(const struct nic_options *options,
				       const struct nic_port *port,
				       uint32_t data_size, int socket)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	struct rte_mempool *pool;

	snprintf(name, sizeof(name), "jg_rx_%u_%u", port->port_id, data_size);
	pool = rte_pktmbuf_pool_create(
		name, options->mbufs_per_port, 256, 0,
		(uint16_t)(RTE_PKTMBUF_HEADROOM + data_size), socket);
	if (pool == NULL)
		fprintf(stderr,
			"jumbogate-nic: port %s: cannot allocate %u buffers of "
			"%u bytes: %s (give the EAL more memory, e.g. -m 512, "
			"or lower --mbufs)\n",
			port->name, options->mbufs_per_port, data_size,
			rte_strerror(rte_errno));
	return pool;
}

/* One receive and one transmit queue per worker; 0 or a negative errno. */
static int setup_queues(const struct nic_port *port, uint16_t queues,
			int socket, struct rte_mempool *pool)
{
	for (uint16_t q = 0; q < queues; q++) {
		int result = rte_eth_rx_queue_setup(
			port->port_id, q, RX_DESCRIPTORS, socket, NULL, pool);
		if (result == 0)
			result = rte_eth_tx_queue_setup(
				port->port_id, q, TX_DESCRIPTORS, socket, NULL);
		if (result != 0)
			return result;
	}
	return 0;
}

static bool setup_port(struct nic *nic, struct nic_port *port)
{
	const struct nic_options *options = nic->options;
	const uint16_t queues = (uint16_t)nic->worker_count;
	const int socket = rte_eth_dev_socket_id(port->port_id);
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	struct rte_mempool *pool;
	uint8_t rss_key[64];
	uint32_t data_size;
	int result;

	memset(&conf, 0, sizeof(conf));
	result = rte_eth_dev_info_get(port->port_id, &info);
	if (result != 0) {
		fprintf(stderr, "jumbogate-nic: port %s: no device info: %s\n",
			port->name, rte_strerror(-result));
		return false;
	}
	if (info.max_rx_queues < queues || info.max_tx_queues < queues) {
		fprintf(stderr,
			"jumbogate-nic: port %s has %u receive and %u transmit "
			"queues, %u workers need one each (for "
			"net_af_packet set qpairs=%u)\n",
			port->name, info.max_rx_queues, info.max_tx_queues,
			queues, queues);
		return false;
	}
	if (info.max_mtu < options->port_mtu) {
		fprintf(stderr,
			"jumbogate-nic: port %s carries at most MTU %u, below "
			"--port-mtu %u (for net_af_packet raise framesz and "
			"blocksz)\n",
			port->name, info.max_mtu, options->port_mtu);
		return false;
	}
	/*
	 * Some PMDs (net_af_packet among them) report a 1518-byte maximum
	 * frame while their real limit is the MTU range they advertise (for
	 * af_packet: the ring's frame size). ethdev refuses a jumbo MTU for
	 * them, so they keep their default and carry what the interface's
	 * own MTU lets through.
	 */
	if (info.max_rx_pktlen >=
	    options->port_mtu + FRAME_OVERHEAD - 2 * RTE_VLAN_HLEN)
		conf.rxmode.mtu = options->port_mtu;
	else
		fprintf(stderr,
			"jumbogate-nic: port %s reports a %u-byte maximum "
			"frame; leaving its MTU to the device (max MTU %u)\n",
			port->name, info.max_rx_pktlen, info.max_mtu);
	/* Flows are pinned to workers by the port's hash. The key repeats
	 * 0x6d5a, which makes the Toeplitz hash symmetric: both directions
	 * of a connection reach one worker, so the MSS its engine learns
	 * from outbound SYNs applies to the inbound segments it merges. */
	if (queues > 1 && info.flow_type_rss_offloads != 0) {
		for (unsigned int i = 0; i < sizeof(rss_key); i++)
			rss_key[i] = i % 2 ? 0x5a : 0x6d;
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf =
			(RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) &
			info.flow_type_rss_offloads;
		if (info.hash_key_size > 0 &&
		    info.hash_key_size <= sizeof(rss_key)) {
			conf.rx_adv_conf.rss_conf.rss_key = rss_key;
			conf.rx_adv_conf.rss_conf.rss_key_len =
				info.hash_key_size;
		}
	}
	/* Verified checksums spare the engine from summing payloads. */
	conf.rxmode.offloads =
		info.rx_offload_capa &
		(RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM |
		 RTE_ETH_RX_OFFLOAD_UDP_CKSUM);
	/* Merged and split packets are mbuf chains. */
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	result = rte_eth_dev_configure(port->port_id, queues, queues, &conf);
	if (result != 0) {
		fprintf(stderr,
			"jumbogate-nic: port %s: configure failed: %s\n",
			port->name, rte_strerror(-result));
		return false;
	}
	/* Whole jumbo frames in one buffer: the engine never has to look
	 * for headers across segments of a received packet. Some PMDs need
	 * more (net_af_packet: its whole ring frame) and say so only by
	 * refusing the queue; without --mbuf-size the buffers then grow. */
	data_size = options->mbuf_size ? options->mbuf_size
				       : options->port_mtu + FRAME_OVERHEAD;
	for (;;) {
		pool = create_pool(options, port, data_size, socket);
		if (pool == NULL)
			return false;
		result = setup_queues(port, queues, socket, pool);
		if (result != -ENOMEM || options->mbuf_size ||
		    data_size >= MAX_DATA_SIZE)
			break;
		rte_mempool_free(pool);
		data_size = RTE_MIN(data_size * 2, MAX_DATA_SIZE);
		fprintf(stderr,
			"jumbogate-nic: port %s wants larger buffers; trying "
			"%u bytes\n",
			port->name, data_size);
	}
	if (result != 0) {
		fprintf(stderr,
			"jumbogate-nic: port %s: queue setup failed: %s\n",
			port->name, rte_strerror(-result));
		if (result == -ENOMEM)
			fprintf(stderr,
				"jumbogate-nic: a buffer holds %u bytes; raise "
				"--mbuf-size to what the port needs "
				"(net_af_packet: its framesz)\n",
				data_size);
		return false;
	}
	result = rte_eth_dev_start(port->port_id);
	if (result != 0) {
		fprintf(stderr, "jumbogate-nic: port %s: start failed: %s\n",
			port->name, rte_strerror(-result));
		return false;
	}
	/* The switch forwards frames addressed to the next hop, not to the
	 * SmartNIC's own address. */
	rte_eth_promiscuous_enable(port->port_id);
	return true;
}

bool nic_ports_start(struct nic *nic)
{
	for (unsigned int p = 0; p < nic->port_count; p++)
		if (!setup_port(nic, &nic->ports[p]))
			return false;
	return true;
}

void nic_ports_stop(struct nic *nic)
{
	for (unsigned int p = 0; p < nic->port_count; p++) {
		rte_eth_dev_stop(nic->ports[p].port_id);
		rte_eth_dev_close(nic->ports[p].port_id);
	}
}
