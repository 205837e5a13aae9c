/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the worker's files share: the packets waiting to leave through a
 * port, and the calls that send them, release an engine's held runs into
 * them, count merged packets, and run the control thread's commands.
 * Nothing outside the worker includes this.
 */
#ifndef JUMBOGATE_NIC_WORKER_INTERNAL_H
#define JUMBOGATE_NIC_WORKER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include "nic.h"

/* Room for a whole burst cut into the smallest segments plus the
 * engine's own margin (engine.h asks for out_cap >= nb_pkts + 64). */
#define OUTPUT_CAPACITY 2048
#define ENGINE_MARGIN	64

/* Packets waiting to leave through one port. */
struct output {
	uint16_t port_id;
	uint16_t count;
	struct rte_mbuf *pkts[OUTPUT_CAPACITY];
};

/* worker_tx.c: everything in out leaves (or is dropped and counted), and
 * out is empty after. */
void worker_transmit(struct nic_worker *worker, struct output *out);
/* Free room in out, transmitting first if less than needed is left. */
uint16_t worker_reserve(struct nic_worker *worker, struct output *out,
			uint16_t needed);
/* Append pkts to out, transmitting whenever it fills. */
void worker_emit(struct nic_worker *worker, struct output *out,
		 struct rte_mbuf **pkts, uint16_t count);

/* worker.c: every run the engine holds, released into out; how many. */
uint64_t worker_flush_engine(struct nic_worker *worker,
			     struct jg_engine *engine, struct output *out);
/* Pack what the port's caravan hold collected into out (which must be
 * bound for that port's transmit port); how many datagrams it held. */
uint16_t worker_pack_held_caravans(struct nic_worker *worker,
				   unsigned int port_index, struct output *out);
/* Merged packets are chains the engine built; count them per onloaded
 * flow for ListFlows. */
void worker_count_merged(struct nic_worker *worker, struct rte_mbuf **pkts,
			 uint16_t count);

/* worker_commands.c: run what the control thread posted; true if any. */
bool worker_process_commands(struct nic_worker *worker);

#endif
