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
	uint32_t mbufs;	    /* receive buffers of the port's pool */
	uint32_t mbuf_size; /* data bytes per buffer; 0: one whole frame */
};

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
