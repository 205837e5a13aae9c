/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DPDK port set-up shared by jumbogate-nic and jumbogate-switch: finding a
 * port by name, sizing its buffers for jumbo frames, one queue pair per
 * worker, symmetric RSS, and the messages that say what to change when a
 * port refuses.
 */
#ifndef JUMBOGATE_RUNTIME_PORT_H
#define JUMBOGATE_RUNTIME_PORT_H

#include <stdbool.h>
#include <stdint.h>

struct rte_mempool;

struct jg_port_params {
	const char *program; /* prefixes every message */
	const char *name;    /* the port, as the user named it */
	uint16_t port_id;
	uint16_t queues;    /* one receive and one transmit queue each */
	uint32_t mtu;	    /* largest IP packet the port carries */
	uint32_t mbufs;	    /* receive buffers of the port's own pool */
	uint32_t mbuf_size; /* data bytes per buffer; 0: one whole frame */
	uint16_t priv_size; /* private bytes per buffer (a multiple of 8) */
	/* A pool shared with other ports (jg_port_shares_pools), or NULL:
	 * the port gets one of its own of `mbufs` buffers. A port that refuses
	 * the shared pool's buffers as too small gets its own too. */
	struct rte_mempool *pool;
};

/* Descriptors of every receive and transmit queue jg_port_setup makes. */
#define JG_PORT_RX_DESCRIPTORS 1024u
#define JG_PORT_TX_DESCRIPTORS 1024u

/* Buffers of a receive pool that can be out of a program's hands at once
 * while it holds none, for a pool that the `member_count` ports in
 * `members` receive into and whose buffers may leave by any of the
 * `tx_count` ports in `tx_ports`: for each of `workers` workers, what each
 * member's receive queue keeps (a full ring on a NIC, twice that on
 * net_af_xdp, none on ports that copy every frame: net_af_packet,
 * net_pcap, net_null; on a bond, what its members keep), a full per-core
 * cache and two bursts in flight, and what the transmit queues keep (a NIC
 * frees what it sent only as its ring wraps; net_af_xdp keeps up to 2048
 * of its own pool and copies others').
 * What remains of the pool is what the program may keep (held segments,
 * packet-in) without starving reception (rx_nombuf). runtime/port.c says
 * what each kind keeps. */
uint32_t jg_pool_reserved(const uint16_t *members, unsigned int member_count,
			  const uint16_t *tx_ports, unsigned int tx_count,
			  uint16_t workers, uint16_t burst);

/* The same for programs that give each port a pool of its own, all of one
 * size, whose buffers may leave by any of the `count` ports: the largest
 * of the ports' figures. */
uint32_t jg_ports_pool_reserved(const uint16_t *ports, unsigned int count,
				uint16_t workers, uint16_t burst);

/* Whether the port may receive into a pool shared with other ports of its
 * socket and buffer size. net_af_xdp may not: its socket's memory is
 * registered from its pool. */
bool jg_port_shares_pools(uint16_t port_id);

/* Data bytes of each buffer of the pool jg_port_setup would make for the
 * port: a whole frame at the MTU (or mbuf_size), at least DPDK's default. */
uint32_t jg_port_data_size(const struct jg_port_params *params);

/* A receive pool of `count` buffers of `data_size` bytes on `socket`;
 * prints why, naming `users` (the port or ports it is for), when the EAL
 * cannot hold it. */
struct rte_mempool *jg_pool_create(const char *program, const char *pool_name,
				   const char *users, uint32_t count,
				   uint32_t data_size, uint16_t priv_size,
				   int socket);

/* The most buffers one transmitted packet may span on this port: 1 when it
 * cannot send chains at all (no MULTI_SEGS), else what its transmit
 * descriptors allow (many NICs cap non-TSO packets at 8). */
uint16_t jg_port_max_tx_segments(uint16_t port_id);

/* Whether the port computes IPv4 header and TCP/UDP checksums of what it
 * sends (all three): jg_port_start then turns those offloads on, and
 * packets built for it may leave their checksums to it. */
bool jg_port_tx_checksum_offload(uint16_t port_id);

/* Names of every probed port, comma-separated, for error messages. */
void jg_port_list(char *text, unsigned long length);

/* The port called `name`; prints what the EAL probed when there is none. */
bool jg_port_find(const char *program, const char *name, uint16_t *port_id);

/* Configures and starts the port (promiscuous: frames for the next hop
 * reach it). The pool is the port's receive pool. Prints the reason and
 * returns false when the port cannot be set up. */
bool jg_port_setup(const struct jg_port_params *params,
		   struct rte_mempool **pool);

/* Adaptive idle sleep for polling workers: after an empty poll sleep,
 * doubling from 1 us up to max_ns, but never past `deadline_ns`
 * (UINT64_MAX: none). Any packet resets it with *sleep_ns = 0. Returns
 * true when it slept. */
bool jg_idle_sleep(uint64_t *sleep_ns, uint64_t max_ns, uint64_t now_ns,
		   uint64_t deadline_ns);

#endif /* JUMBOGATE_RUNTIME_PORT_H */
