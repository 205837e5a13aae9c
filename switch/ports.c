/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switch's ports and the pools they receive into.
 *
 * Ports of one NUMA socket and one buffer size receive into one pool, as
 * DPDK's l3fwd keeps a pool per socket. A worker forwards a frame from any
 * port to any other, so a pool's buffers can wait in every transmit ring:
 * with a pool per port, each pool had to count all of them, and the sum
 * of the pools grew with the square of the ports (four NIC ports, one
 * worker: 4 x 6,592 buffers, about 260 MB). A shared pool counts each
 * receive ring, each transmit ring and each worker's cache once (9,664
 * buffers there). net_af_xdp ports keep pools of their own
 * (jg_port_shares_pools), and so does a port that refuses the shared
 * pool's buffers as too small (jg_port_setup).
 */
#include <stdio.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "port.h"
#include "ports.h"

struct pool_group {
	int socket;
	uint32_t data_size;
	bool shared;
	unsigned int member_count;
	uint16_t members[SW_MAX_DPDK_PORTS]; /* DPDK port ids */
	unsigned int first_port;	     /* index in sw->ports */
	uint32_t size;
	struct rte_mempool *pool;
	unsigned int users; /* ports that took the shared pool */
};

static struct jg_port_params port_params(const struct sw_switch *sw,
					 const struct options *options,
					 unsigned int i)
{
	return (struct jg_port_params){
		.program = PROGRAM,
		.name = sw->ports[i].name,
		.port_id = sw->ports[i].dpdk_port,
		.queues = (uint16_t)sw->worker_count,
		.mtu = options->port_mtu,
		.mbuf_size = options->ports[i].af_packet ? AF_PACKET_FRAME : 0,
	};
}

/* The NUMA socket of a port's pool. A virtual device may have none
 * (net_memif) where others take the main lcore's (net_null, net_ring): a
 * port without one takes the main lcore's too, so it shares their pool
 * instead of making one of its own. */
static int port_socket(uint16_t port_id)
{
	const int socket = rte_eth_dev_socket_id(port_id);

	return socket == SOCKET_ID_ANY ? (int)rte_socket_id() : socket;
}

/* Sorts the ports into pools: one per socket and buffer size, and one for
 * each port that cannot share. Returns the number of pools; group_of[i]
 * is port i's. */
static unsigned int group_ports(const struct sw_switch *sw,
				const struct options *options,
				struct pool_group *groups,
				unsigned int *group_of)
{
	unsigned int count = 0;

	for (unsigned int i = 0; i < sw->port_count; i++) {
		const struct jg_port_params params =
			port_params(sw, options, i);
		const int socket = port_socket(params.port_id);
		const uint32_t data_size = jg_port_data_size(&params);
		const bool shared = jg_port_shares_pools(params.port_id);
		unsigned int g = 0;

		while (g < count && !(shared && groups[g].shared &&
				      groups[g].socket == socket &&
				      groups[g].data_size == data_size))
			g++;
		if (g == count) {
			memset(&groups[g], 0, sizeof(groups[g]));
			groups[g].socket = socket;
			groups[g].data_size = data_size;
			groups[g].shared = shared;
			groups[g].first_port = i;
			count++;
		}
		groups[g].members[groups[g].member_count++] = params.port_id;
		group_of[i] = g;
	}
	return count;
}

/* What can be out of the switch's hands of a pool: its ports' receive
 * queues, every transmit queue, caches, bursts (jg_pool_reserved), and a
 * full packet-in queue, which one port's frames can fill. */
static uint32_t pool_needs(const struct sw_switch *sw,
			   const struct options *options,
			   const uint16_t *members, unsigned int member_count)
{
	uint16_t all[SW_MAX_DPDK_PORTS];

	for (unsigned int i = 0; i < sw->port_count; i++)
		all[i] = sw->ports[i].dpdk_port;
	return jg_pool_reserved(members, member_count, all, sw->port_count,
				(uint16_t)sw->worker_count,
				(uint16_t)options->burst) +
	       SW_PACKET_IN_QUEUE;
}

/* "port a's own pool", "the pool of port a", "the pool of port a and 3
 * others": for messages. */
static void describe_pool(const struct sw_switch *sw,
			  const struct pool_group *group, char *text,
			  size_t size)
{
	const char *first = sw->ports[group->first_port].name;

	if (!group->shared)
		snprintf(text, size, "port %s's own pool", first);
	else if (group->member_count == 1)
		snprintf(text, size, "the pool of port %s", first);
	else
		snprintf(text, size, "the pool of port %s and %u other%s",
			 first, group->member_count - 1,
			 group->member_count == 2 ? "" : "s");
}

/* Each pool's size: what it needs, or --mbufs where given. A smaller pool
 * starves reception under load, and an AF_XDP port that cannot fill its
 * ring receives nothing, so --mbufs below the largest need is refused,
 * naming it. */
static bool size_pools(const struct sw_switch *sw,
		       const struct options *options, struct pool_group *groups,
		       unsigned int count)
{
	uint32_t most = 0;
	unsigned int neediest = 0;
	char pool[96];

	for (unsigned int g = 0; g < count; g++) {
		groups[g].size = pool_needs(sw, options, groups[g].members,
					    groups[g].member_count);
		if (groups[g].size > most) {
			most = groups[g].size;
			neediest = g;
		}
	}
	if (options->mbufs == 0)
		return true;
	if (options->mbufs < most) {
		describe_pool(sw, &groups[neediest], pool, sizeof(pool));
		fprintf(stderr,
			PROGRAM
			": --mbufs %u is too few: %u workers can leave %u "
			"buffers of %s in receive and transmit queues (%u "
			"descriptors each on a NIC, 2048 on net_af_xdp, none "
			"on ports that copy frames), buffer caches, bursts "
			"of %u and the packet-in queue of %u; give --mbufs "
			"%u or more\n",
			options->mbufs, sw->worker_count, most, pool,
			JG_PORT_RX_DESCRIPTORS, options->burst,
			SW_PACKET_IN_QUEUE, most);
		return false;
	}
	for (unsigned int g = 0; g < count; g++)
		groups[g].size = options->mbufs;
	return true;
}

static bool create_pool(const struct sw_switch *sw, struct pool_group *group,
			unsigned int number)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	char users[96];

	snprintf(name, sizeof(name), "jg_rx_pool%u_%u", number,
		 group->data_size);
	describe_pool(sw, group, users, sizeof(users));
	group->pool = jg_pool_create(PROGRAM, name, users, group->size,
				     group->data_size, 0, group->socket);
	if (group->pool == NULL)
		return false;
	printf(PROGRAM ": %u receive buffers of %u bytes in pool %u, for "
		       "%u port%s\n",
	       group->size, group->data_size, number, group->member_count,
	       group->member_count == 1 ? "" : "s");
	return true;
}

bool sw_ports_start(struct sw_switch *sw, const struct options *options)
{
	static struct pool_group groups[SW_MAX_DPDK_PORTS];
	unsigned int group_of[SW_MAX_DPDK_PORTS];
	unsigned int count = group_ports(sw, options, groups, group_of);

	if (!size_pools(sw, options, groups, count))
		return false;
	for (unsigned int g = 0; g < count; g++) {
		char own[96];

		if (groups[g].shared) {
			if (!create_pool(sw, &groups[g], g))
				return false;
			continue;
		}
		/* jg_port_setup makes it. */
		describe_pool(sw, &groups[g], own, sizeof(own));
		printf(PROGRAM ": %u receive buffers of %u bytes in %s\n",
		       groups[g].size, groups[g].data_size, own);
	}
	fflush(stdout);
	for (unsigned int i = 0; i < sw->port_count; i++) {
		struct jg_port_params params = port_params(sw, options, i);
		struct pool_group *group = &groups[group_of[i]];
		struct rte_mempool *taken;

		params.pool = group->pool;
		/* A port that cannot share, or that refuses the shared
		 * pool's buffers, gets a pool of its own: for itself. */
		params.mbufs =
			group->shared && options->mbufs == 0
				? pool_needs(sw, options, &params.port_id, 1)
				: group->size;
		if (!jg_port_setup(&params, &taken))
			return false;
		if (taken == group->pool)
			group->users++;
	}
	/* A shared pool every port of which took one of its own. */
	for (unsigned int g = 0; g < count; g++)
		if (groups[g].shared && groups[g].users == 0) {
			rte_mempool_free(groups[g].pool);
			printf(PROGRAM ": pool %u freed: its ports took pools "
				       "of their own\n",
			       g);
		}
	fflush(stdout);
	return true;
}
