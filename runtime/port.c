/* SPDX-License-Identifier: Apache-2.0 */
#include "port.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_eth_bond.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#define RX_DESCRIPTORS JG_PORT_RX_DESCRIPTORS
#define TX_DESCRIPTORS JG_PORT_TX_DESCRIPTORS
#define POOL_CACHE     256
/* The most data one mbuf can describe. */
#define MAX_DATA_SIZE ((uint32_t)UINT16_MAX - RTE_PKTMBUF_HEADROOM)
/* Pools of doubling buffer sizes a port that refuses its buffers is
 * offered: 2 KB up to MAX_DATA_SIZE. */
#define MAX_RETRIES 8
/* Ethernet header, two VLAN tags and the FCS around the IP packet. */
#define FRAME_OVERHEAD                                                         \
	(RTE_ETHER_HDR_LEN + 2 * RTE_VLAN_HLEN + RTE_ETHER_CRC_LEN)

void jg_port_list(char *text, unsigned long length)
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

bool jg_port_find(const char *program, const char *name, uint16_t *port_id)
{
	char available[512];

	if (rte_eth_dev_get_port_by_name(name, port_id) == 0)
		return true;
	jg_port_list(available, sizeof(available));
	fprintf(stderr,
		"%s: port '%s' not found; the EAL probed: %s (add it with -a "
		"PCI_ADDRESS or --vdev before \"--\")\n",
		program, name, available);
	return false;
}

struct rte_mempool *jg_pool_create(const char *program, const char *pool_name,
				   const char *users, uint32_t count,
				   uint32_t data_size, uint16_t priv_size,
				   int socket)
{
	struct rte_mempool *pool = rte_pktmbuf_pool_create(
		pool_name, count, POOL_CACHE, priv_size,
		(uint16_t)(RTE_PKTMBUF_HEADROOM + data_size), socket);

	if (pool == NULL)
		fprintf(stderr,
			"%s: %s: cannot allocate %u buffers of %u bytes: "
			"%s (give the EAL more memory, e.g. -m 1024; the "
			"buffers a port needs grow with the workers and "
			"ports)\n",
			program, users, count, data_size,
			rte_strerror(rte_errno));
	return pool;
}

static struct rte_mempool *create_pool(const struct jg_port_params *p,
				       uint32_t data_size, int socket)
{
	char name[RTE_MEMPOOL_NAMESIZE], users[RTE_ETH_NAME_MAX_LEN + 8];

	snprintf(name, sizeof(name), "jg_rx_%u_%u", p->port_id, data_size);
	snprintf(users, sizeof(users), "port %s", p->name);
	return jg_pool_create(p->program, name, users, p->mbufs, data_size,
			      p->priv_size, socket);
}

/* One receive and one transmit queue per worker; 0 or a negative errno.
 * *pool_used says whether a queue was set up from the pool before one
 * failed. */
static int setup_queues(const struct jg_port_params *p, int socket,
			struct rte_mempool *pool, bool *pool_used)
{
	*pool_used = false;
	for (uint16_t q = 0; q < p->queues; q++) {
		int result = rte_eth_rx_queue_setup(
			p->port_id, q, RX_DESCRIPTORS, socket, NULL, pool);
		if (result != 0)
			return result;
		*pool_used = true;
		result = rte_eth_tx_queue_setup(p->port_id, q, TX_DESCRIPTORS,
						socket, NULL);
		if (result != 0)
			return result;
	}
	return 0;
}

#define TX_CHECKSUM_OFFLOADS                                                   \
	(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM |        \
	 RTE_ETH_TX_OFFLOAD_UDP_CKSUM)

bool jg_port_tx_checksum_offload(uint16_t port_id)
{
	struct rte_eth_dev_info info;

	return rte_eth_dev_info_get(port_id, &info) == 0 &&
	       (info.tx_offload_capa & TX_CHECKSUM_OFFLOADS) ==
		       TX_CHECKSUM_OFFLOADS;
}

uint16_t jg_port_max_tx_segments(uint16_t port_id)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port_id, &info) != 0 ||
	    !(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS))
		return 1;
	if (info.tx_desc_lim.nb_mtu_seg_max != 0)
		return info.tx_desc_lim.nb_mtu_seg_max;
	if (info.tx_desc_lim.nb_seg_max != 0)
		return info.tx_desc_lim.nb_seg_max;
	return UINT16_MAX;
}

/*
 * What a port's queues keep of a pool, by the kind of port (DPDK 22.11):
 *
 * - PORT_COPIES: net_af_packet, net_pcap and net_null copy every frame
 *   between a buffer and memory of their own. A received frame goes into
 *   a buffer taken from the pool as it arrives, and a sent one is copied
 *   out and freed at once: their queues keep none. (net_pcap's
 *   infinite_rx mode, which keeps a capture in buffers, is not used here.)
 * - PORT_AF_XDP: net_af_xdp's buffers are its socket's memory. It hands
 *   the kernel twice a ring's worth (2048) at set-up, tops them up one
 *   for one as frames arrive, and receives nothing while it cannot: counted
 *   as one ring, a pool that looked large enough stopped receiving for good
 *   under a TCP transfer (test_nic_tcp.py). It sends its own pool's buffers
 *   as they are, which wait in the transmit and completion rings (up to
 *   2048 again), and copies another pool's into one of its own, freeing
 *   the original at once. Its socket's memory is registered from its
 *   pool, so it is never given a shared one (jg_port_shares_pools).
 * - PORT_BOND: net_bonding sets up each member's queues from the bond's
 *   pool, so its queues keep what its members' keep, each by its kind.
 * - PORT_MEMIF: net_memif copies every frame between a buffer and the
 *   shared memory, keeping none, unless it is a client in zero-copy mode
 *   (zero-copy=yes; a server ignores it). Then the receive ring holds a
 *   buffer of the pool in each of its 2^rsize slots (rsize: 10 unless
 *   given, up to 14), topped up as frames are taken, and a sent buffer of
 *   any pool waits in its ring until the peer hands the slot back. Counted
 *   as a NIC's 1024, a ring of 4096 was three quarters short each way.
 *   DPDK 22.11 connects only one such client per process: it closes the
 *   shared memory's descriptors once the first has connected.
 * - PORT_NIC: every other port is counted as a NIC: a buffer per
 *   receive descriptor from start, and a transmit ring that frees what it
 *   sent only as it wraps. Ports that in fact copy (net_vhost) are
 *   over-counted, which is safe; net_tap does keep a buffer per receive
 *   descriptor.
 */
#define AF_XDP_RING_BUFFERS 2048u

enum port_kind { PORT_COPIES, PORT_AF_XDP, PORT_BOND, PORT_MEMIF, PORT_NIC };

static enum port_kind port_kind(uint16_t port_id)
{
	static const char *const copying[] = {"net_af_packet", "net_pcap",
					      "net_null"};
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port_id, &info) != 0 ||
	    info.driver_name == NULL)
		return PORT_NIC;
	for (size_t i = 0; i < RTE_DIM(copying); i++)
		if (strcmp(info.driver_name, copying[i]) == 0)
			return PORT_COPIES;
	if (strcmp(info.driver_name, "net_af_xdp") == 0)
		return PORT_AF_XDP;
	if (strcmp(info.driver_name, "net_bonding") == 0)
		return PORT_BOND;
	if (strcmp(info.driver_name, "net_memif") == 0)
		return PORT_MEMIF;
	return PORT_NIC;
}

/* Whether a net_memif role argument makes a server, read as DPDK 22.11's
 * driver reads it: "server" anywhere in it, else "client", else "master"
 * (a client when absent). */
static bool memif_role_is_server(const char *role)
{
	return role != NULL && (strstr(role, "server") != NULL ||
				(strstr(role, "client") == NULL &&
				 strstr(role, "master") != NULL));
}

/* Buffers each queue of a net_memif port keeps (PORT_MEMIF above), read
 * from the arguments the port was created with, as the driver reads them:
 * the role, zero-copy ("yes" anywhere in its value, ignored by a server)
 * and rsize. Arguments that cannot be read count as a NIC's ring, and an
 * rsize the driver would refuse never gets here. */
static uint32_t memif_queue_keeps(uint16_t port_id)
{
	const struct rte_devargs *devargs = NULL;
	struct rte_eth_dev_info info;
	struct rte_kvargs *kvargs = NULL;
	const char *role, *zero_copy, *rsize;
	uint32_t keeps = 0;

	if (rte_eth_dev_info_get(port_id, &info) == 0 && info.device != NULL)
		devargs = rte_dev_devargs(info.device);
	if (devargs == NULL || devargs->args == NULL ||
	    (kvargs = rte_kvargs_parse(devargs->args, NULL)) == NULL)
		return RX_DESCRIPTORS;
	role = rte_kvargs_get(kvargs, "role");
	zero_copy = rte_kvargs_get(kvargs, "zero-copy");
	rsize = rte_kvargs_get(kvargs, "rsize");
	if (!memif_role_is_server(role) && zero_copy != NULL &&
	    strstr(zero_copy, "yes") != NULL) {
		unsigned long log2_size = rsize ? strtoul(rsize, NULL, 10) : 10;

		keeps = log2_size >= 1 && log2_size <= 14 ? 1u << log2_size
							  : RX_DESCRIPTORS;
	}
	rte_kvargs_free(kvargs);
	return keeps;
}

/* A bond's members; 0 for any other port. A bond learns the members its
 * arguments name (slave=: a port's name, PCI address or number) only when
 * first configured, which jg_port_setup does after the pools are sized, so
 * a bond that has none yet is configured here with one queue pair (and
 * again by jg_port_setup). */
static unsigned int bond_members(uint16_t port_id,
				 uint16_t members[RTE_MAX_ETHPORTS])
{
	int count = rte_eth_bond_slaves_get(port_id, members, RTE_MAX_ETHPORTS);

	if (count == 0) {
		struct rte_eth_conf conf;

		memset(&conf, 0, sizeof(conf));
		if (rte_eth_dev_configure(port_id, 1, 1, &conf) == 0)
			count = rte_eth_bond_slaves_get(port_id, members,
							RTE_MAX_ETHPORTS);
	}
	return count > 0 ? (unsigned int)count : 0;
}

/* Buffers of a pool one queue of port_id keeps: its receive queue (the pool
 * is the one it receives into), or its transmit queue, own_pool saying
 * whether the pool is the one it receives into. */
static uint32_t queue_keeps(uint16_t port_id, bool receive, bool own_pool)
{
	uint16_t members[RTE_MAX_ETHPORTS];
	unsigned int count;
	uint32_t sum = 0;

	switch (port_kind(port_id)) {
	case PORT_COPIES:
		return 0;
	case PORT_AF_XDP:
		/* Only its own pool's buffers wait in its rings. */
		return receive || own_pool ? AF_XDP_RING_BUFFERS : 0;
	case PORT_MEMIF:
		return memif_queue_keeps(port_id);
	case PORT_BOND:
		count = bond_members(port_id, members);
		for (unsigned int i = 0; i < count; i++)
			sum += queue_keeps(members[i], receive, own_pool);
		/* Members it does not know yet: at least a NIC's. */
		if (count > 0)
			return sum;
		/* fall through */
	default:
		return receive ? RX_DESCRIPTORS : TX_DESCRIPTORS;
	}
}

uint32_t jg_pool_reserved(const uint16_t *members, unsigned int member_count,
			  const uint16_t *tx_ports, unsigned int tx_count,
			  uint16_t workers, uint16_t burst)
{
	/* A per-core cache fills up to 1.5 times its size before it
	 * flushes back to the pool (RTE_MEMPOOL_CACHE_FLUSHTHRESH). */
	const uint32_t cache = POOL_CACHE * 3 / 2;
	uint32_t per_worker = cache + 2u * burst;

	for (unsigned int i = 0; i < member_count; i++)
		per_worker += queue_keeps(members[i], true, true);
	for (unsigned int i = 0; i < tx_count; i++) {
		bool own_pool = false;

		for (unsigned int m = 0; m < member_count; m++)
			own_pool |= members[m] == tx_ports[i];
		per_worker += queue_keeps(tx_ports[i], false, own_pool);
	}
	return (uint32_t)workers * per_worker;
}

uint32_t jg_ports_pool_reserved(const uint16_t *ports, unsigned int count,
				uint16_t workers, uint16_t burst)
{
	uint32_t most = 0;

	for (unsigned int i = 0; i < count; i++)
		most = RTE_MAX(most, jg_pool_reserved(&ports[i], 1, ports,
						      count, workers, burst));
	return most;
}

bool jg_port_shares_pools(uint16_t port_id)
{
	uint16_t members[RTE_MAX_ETHPORTS];
	unsigned int count;

	switch (port_kind(port_id)) {
	case PORT_AF_XDP:
		return false;
	case PORT_BOND:
		count = bond_members(port_id, members);
		for (unsigned int i = 0; i < count; i++)
			if (!jg_port_shares_pools(members[i]))
				return false;
		return true;
	default:
		return true;
	}
}

uint32_t jg_port_data_size(const struct jg_port_params *p)
{
	/* Whole jumbo frames in one buffer: headers are never split across
	 * segments of a received packet. Some PMDs need more (net_af_packet:
	 * its whole ring frame) and say so only by refusing the queue;
	 * without an explicit buffer size the buffers then grow
	 * (jg_port_setup). */
	uint32_t data_size =
		p->mbuf_size ? p->mbuf_size : p->mtu + FRAME_OVERHEAD;

	/* Never below DPDK's default buffer: net_af_xdp hands each buffer to
	 * the kernel as one frame of its socket's memory, which the kernel
	 * refuses below 2 KB (a 1500-byte MTU alone would ask for less). */
	return RTE_MAX(data_size, (uint32_t)RTE_MBUF_DEFAULT_DATAROOM);
}

bool jg_port_setup(const struct jg_port_params *p, struct rte_mempool **out)
{
	const int socket = rte_eth_dev_socket_id(p->port_id);
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	struct rte_mempool *pool, *refused[MAX_RETRIES];
	unsigned int refused_count = 0;
	uint8_t rss_key[64];
	uint32_t data_size;
	int result;

	memset(&conf, 0, sizeof(conf));
	result = rte_eth_dev_info_get(p->port_id, &info);
	if (result != 0) {
		fprintf(stderr, "%s: port %s: no device info: %s\n", p->program,
			p->name, rte_strerror(-result));
		return false;
	}
	if (info.max_rx_queues < p->queues || info.max_tx_queues < p->queues) {
		fprintf(stderr,
			"%s: port %s has %u receive and %u transmit queues, "
			"%u workers need one each (for net_af_packet set "
			"qpairs=%u)\n",
			p->program, p->name, info.max_rx_queues,
			info.max_tx_queues, p->queues, p->queues);
		return false;
	}
	if (info.max_mtu < p->mtu) {
		fprintf(stderr,
			"%s: port %s carries at most MTU %u, below the %u "
			"asked for (for net_af_packet raise framesz and "
			"blocksz; net_af_xdp's frames are one page each)\n",
			p->program, p->name, info.max_mtu, p->mtu);
		return false;
	}
	/*
	 * Some PMDs (net_af_packet among them) report a 1518-byte maximum
	 * frame while their real limit is the MTU range they advertise (for
	 * af_packet: the ring's frame size). ethdev refuses a jumbo MTU for
	 * them, so they keep their default and carry what the interface's
	 * own MTU lets through.
	 */
	if (info.max_rx_pktlen >= p->mtu + FRAME_OVERHEAD - 2 * RTE_VLAN_HLEN)
		conf.rxmode.mtu = p->mtu;
	else
		JG_LOG(jg_log_port, NOTICE,
		       "%s: port %s reports a %u-byte maximum frame; leaving "
		       "its MTU to the device (max MTU %u)\n",
		       p->program, p->name, info.max_rx_pktlen, info.max_mtu);
	/* Flows are pinned to workers by the port's hash. The key repeats
	 * 0x6d5a, which makes the Toeplitz hash symmetric: both directions
	 * of a connection reach one worker, so the state a worker learns
	 * from one direction applies to the other. */
	if (p->queues > 1 && info.flow_type_rss_offloads != 0) {
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
	/* Verified checksums spare the programs from summing payloads. */
	conf.rxmode.offloads =
		info.rx_offload_capa &
		(RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM |
		 RTE_ETH_RX_OFFLOAD_UDP_CKSUM);
	/* Merged and split packets are mbuf chains. */
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	/* Summing an 8500-byte merged packet costs more than merging it: a
	 * port that can sum what it sends does it (only all three together,
	 * so that one mode serves every packet the programs build). */
	if (jg_port_tx_checksum_offload(p->port_id))
		conf.txmode.offloads |= TX_CHECKSUM_OFFLOADS;
	result = rte_eth_dev_configure(p->port_id, p->queues, p->queues, &conf);
	if (result != 0) {
		fprintf(stderr, "%s: port %s: configure failed: %s\n",
			p->program, p->name, rte_strerror(-result));
		return false;
	}
	data_size = jg_port_data_size(p);
	pool = p->pool;
	if (pool != NULL)
		data_size =
			rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM;
	else if ((pool = create_pool(p, data_size, socket)) == NULL)
		return false;
	for (;;) {
		bool pool_used;

		result = setup_queues(p, socket, pool, &pool_used);
		if (result != -ENOMEM || p->mbuf_size ||
		    data_size >= MAX_DATA_SIZE || refused_count == MAX_RETRIES)
			break;
		/* Queues set up before the one that refused may hold buffers
		 * of this pool until they are set up again: it is freed only
		 * once they are. Refused by the first, it goes at once. */
		if (pool != p->pool && pool_used)
			refused[refused_count++] = pool;
		else if (pool != p->pool)
			rte_mempool_free(pool);
		data_size = RTE_MIN(data_size * 2, MAX_DATA_SIZE);
		/* The port takes these buffers as too small (a shared pool's
		 * or its own): it gets a pool of its own (p->mbufs) of larger
		 * ones. */
		JG_LOG(jg_log_port, NOTICE,
		       "%s: port %s wants larger buffers; trying %u of %u "
		       "bytes in a pool of its own\n",
		       p->program, p->name, p->mbufs, data_size);
		pool = create_pool(p, data_size, socket);
		if (pool == NULL)
			return false;
	}
	if (result != 0) {
		fprintf(stderr, "%s: port %s: queue setup failed: %s\n",
			p->program, p->name, rte_strerror(-result));
		if (result == -ENOMEM)
			fprintf(stderr,
				"%s: a buffer holds %u bytes; the port may "
				"need more (net_af_packet: its framesz; "
				"jumbogate-nic sets it with --mbuf-size)\n",
				p->program, data_size);
		return false;
	}
	while (refused_count > 0)
		rte_mempool_free(refused[--refused_count]);
	result = rte_eth_dev_start(p->port_id);
	if (result != 0) {
		fprintf(stderr, "%s: port %s: start failed: %s\n", p->program,
			p->name, rte_strerror(-result));
		return false;
	}
	rte_eth_promiscuous_enable(p->port_id);
	if (out != NULL)
		*out = pool;
	return true;
}

bool jg_idle_sleep(uint64_t *sleep_ns, uint64_t max_ns, uint64_t now_ns,
		   uint64_t deadline_ns)
{
	uint64_t duration_ns;
	struct timespec duration;

	if (max_ns == 0) {
		rte_pause();
		return false;
	}
	*sleep_ns = *sleep_ns ? RTE_MIN(*sleep_ns * 2, max_ns) : 1000;
	duration_ns = *sleep_ns;
	if (deadline_ns != UINT64_MAX) {
		if (deadline_ns <= now_ns)
			return false;
		duration_ns = RTE_MIN(duration_ns, deadline_ns - now_ns);
	}
	duration.tv_sec = (time_t)(duration_ns / 1000000000ull);
	duration.tv_nsec = (long)(duration_ns % 1000000000ull);
	nanosleep(&duration, NULL);
	return true;
}
