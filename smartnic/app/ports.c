/* SPDX-License-Identifier: Apache-2.0 */
#include "ports.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "port.h"
#include "prefix.h"

/*
 * Both directions of a flow must meet in one engine: the merge path keeps
 * in the flow what the split path needs (the MSS the Internet host
 * announced before the raise rewrote it) and the split path what the merge
 * path needs (the MSS the rack host announced). The two directions arrive
 * on one port in the rack (the switch hairpins) and on two in a bump in
 * the wire, where what one port receives leaves by the other, and the
 * other direction arrives there. Symmetric RSS puts both in one worker;
 * this puts both in one engine: what a port receives is split by the
 * engines of the port it transmits to. An engine's checksum mode follows
 * the port its output leaves by, so ports whose transmit ports differ in
 * checksum offload keep their own engines (and the MSS rules then hold
 * only within each).
 */
static void pair_flow_engines(struct nic *nic)
{
	for (unsigned int p = 0; p < nic->port_count; p++) {
		struct nic_port *port = &nic->ports[p];

		port->split_engine_port = p;
		for (unsigned int q = 0; q < nic->port_count; q++)
			if (nic->ports[q].port_id == port->tx_port_id &&
			    jg_port_tx_checksum_offload(
				    nic->ports[q].tx_port_id) ==
				    jg_port_tx_checksum_offload(
					    port->tx_port_id))
				port->split_engine_port = q;
	}
}

/* Which of the served ports the device `name` is, or -1 after saying why;
 * `option` (the option as given) starts the message. */
static int served_port_index(const struct nic *nic, const char *name,
			     const char *option)
{
	uint16_t port_id;

	if (!jg_port_find("jumbogate-nic", name, &port_id)) {
		fprintf(stderr, "jumbogate-nic: %s: no such port\n", option);
		return -1;
	}
	for (unsigned int p = 0; p < nic->port_count; p++)
		if (nic->ports[p].port_id == port_id)
			return (int)p;
	fprintf(stderr,
		"jumbogate-nic: %s: %s is not one of the served ports\n",
		option, name);
	return -1;
}

/* Merged packets leave by the rack side, split packets and path MTU
 * probes by the Internet side: the internal MTU must fit the largest
 * served port, every path MTU the smallest (a port of its own smaller MTU
 * is the Internet side). Checked again here because the options could
 * only be checked against the MTUs given, not those of the ports served. */
static bool check_mtus_fit_ports(struct nic *nic)
{
	struct nic_options *options = nic->options;
	const struct jg_engine_config *engine = &options->engine;
	char prefix[64];

	options->largest_port_mtu = 0;
	options->smallest_port_mtu = UINT32_MAX;
	for (unsigned int p = 0; p < nic->port_count; p++) {
		options->largest_port_mtu =
			RTE_MAX(options->largest_port_mtu, nic->ports[p].mtu);
		options->smallest_port_mtu =
			RTE_MIN(options->smallest_port_mtu, nic->ports[p].mtu);
	}
	if (engine->internal_mtu > options->largest_port_mtu) {
		fprintf(stderr,
			"jumbogate-nic: --internal-mtu %u must not exceed %u, "
			"the largest MTU of the served ports (--port-mtu)\n",
			engine->internal_mtu, options->largest_port_mtu);
		return false;
	}
	if (engine->default_path_mtu_v4 > options->smallest_port_mtu ||
	    engine->default_path_mtu_v6 > options->smallest_port_mtu) {
		fprintf(stderr,
			"jumbogate-nic: --default-path-mtu-v4 %u and "
			"--default-path-mtu-v6 %u must not exceed %u, the "
			"smallest MTU of the served ports (--port-mtu): split "
			"packets leave by the Internet side\n",
			engine->default_path_mtu_v4,
			engine->default_path_mtu_v6,
			options->smallest_port_mtu);
		return false;
	}
	for (unsigned int i = 0; i < options->path_mtu_count; i++) {
		if (options->path_mtus[i].mtu <= options->smallest_port_mtu)
			continue;
		nic_prefix_format(&options->path_mtus[i].prefix, prefix,
				  sizeof(prefix));
		fprintf(stderr,
			"jumbogate-nic: --path-mtu %s=%u must not exceed %u, "
			"the smallest MTU of the served ports (--port-mtu)\n",
			prefix, options->path_mtus[i].mtu,
			options->smallest_port_mtu);
		return false;
	}
	return true;
}

/* Each port's MTU: its own where --port-mtu NAME=BYTES names it, else the
 * default. A name that is no served port, or a second name for a port
 * that already has its own, is a mistake, not a no-op. */
static bool assign_port_mtus(struct nic *nic)
{
	struct nic_options *options = nic->options;
	bool own[NIC_MAX_PORTS] = {false};

	for (unsigned int p = 0; p < nic->port_count; p++)
		nic->ports[p].mtu = options->port_mtu;
	for (unsigned int i = 0; i < options->port_mtu_count; i++) {
		const struct nic_port_mtu *given = &options->port_mtus[i];
		char option[NIC_NAME_LEN + 32];
		int p;

		snprintf(option, sizeof(option), "--port-mtu %s=%u",
			 given->port, given->mtu);
		p = served_port_index(nic, given->port, option);
		if (p < 0)
			return false;
		if (own[p]) {
			fprintf(stderr,
				"jumbogate-nic: --port-mtu %s=%u: port %s has "
				"its own MTU already (%u)\n",
				given->port, given->mtu, nic->ports[p].name,
				nic->ports[p].mtu);
			return false;
		}
		own[p] = true;
		nic->ports[p].mtu = given->mtu;
	}
	return check_mtus_fit_ports(nic);
}

bool nic_ports_resolve(struct nic *nic)
{
	const struct nic_options *options = nic->options;
	bool returned[NIC_MAX_PORTS] = {false};
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

		if (!jg_port_find("jumbogate-nic", options->ports[i], &port_id))
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
	/* One return port per receive port: a second is a mistake, not a
	 * replacement (as a second --port or --port-mtu for it). */
	for (unsigned int i = 0; i < options->return_port_count; i++) {
		const struct nic_return_port *pair = &options->return_ports[i];
		char option[2 * NIC_NAME_LEN + 16];
		uint16_t tx;
		int p;

		snprintf(option, sizeof(option), "--return-port %s=%s",
			 pair->rx, pair->tx);
		p = served_port_index(nic, pair->rx, option);
		if (p < 0 || !jg_port_find("jumbogate-nic", pair->tx, &tx))
			return false;
		if (returned[p]) {
			fprintf(stderr,
				"jumbogate-nic: %s: port '%s' has two "
				"--return-port\n",
				option, pair->rx);
			return false;
		}
		returned[p] = true;
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
	pair_flow_engines(nic);
	return assign_port_mtus(nic);
}

static bool setup_port(struct nic *nic, struct nic_port *port)
{
	const struct nic_options *options = nic->options;
	const struct jg_port_params params = {
		.program = "jumbogate-nic",
		.name = port->name,
		.port_id = port->port_id,
		.queues = (uint16_t)nic->queues.count,
		.mtu = port->mtu,
		.mbufs = options->mbufs_per_port,
		.mbuf_size = options->mbuf_size,
		/* Room for the engine's run metadata should a PMD take the
		 * dynamic-field space (see run_meta_in_priv_area). */
		.priv_size = JG_MBUF_PRIV_SIZE,
	};

	struct rte_eth_dev_info info;

	if (!jg_port_setup(&params, NULL))
		return false;
	/* Scaling moves whole queues between workers, which every PMD
	 * allows; a redirection table could also narrow RSS onto fewer
	 * queues, but the virtual ports (memif, af_packet, af_xdp) have
	 * none, so it is only reported. */
	if (nic->queues.count > 1 &&
	    rte_eth_dev_info_get(port->port_id, &info) == 0)
		printf("jumbogate-nic: port %s: %u queues, %s\n", port->name,
		       nic->queues.count,
		       info.reta_size ? "RSS redirection table present"
				      : "no RSS redirection table (the "
					"device or its peer spreads flows)");
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
