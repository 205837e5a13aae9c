/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Queues that follow the load: how many workers serve the ports' queues,
 * chosen once a second from the packet rate and the onloaded (elephant)
 * flows, or forced through telemetry (/jumbogate/queues,N or ,W0,W1,...).
 */
#ifndef JUMBOGATE_NIC_SCALING_H
#define JUMBOGATE_NIC_SCALING_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nic;

struct nic_scaling_view {
	unsigned int queues;  /* of every port */
	unsigned int workers; /* worker lcores */
	unsigned int target;  /* workers the queues are given to */
	unsigned int serving; /* workers that own a queue now */
	unsigned int forced;  /* 0: the scaler chooses */
	bool pinned;	      /* owners set queue by queue */
	bool scaling;	      /* --queue-scaling */
	uint64_t changes;     /* targets set */
	uint64_t handovers;   /* queues that changed owner */
	uint64_t handover_flushed;
	uint64_t packets_per_s;	 /* last sample */
	uint64_t elephants;	 /* last sample */
	char owners[3 * 64 + 1]; /* "0,1,0,1": the owner of each queue */
};

/* Before the workers start: every queue to its first owner (all workers,
 * or one when scaling starts from idle). */
void nic_scaling_init(struct nic *nic);

/* The control thread's tick: samples once a second and moves queues. */
void nic_scaling_tick(struct nic *nic, uint64_t now_ns);

/* 0 hands the choice back to the scaler (or to every worker when it is
 * off); N gives the queues to N workers (at most all). */
void nic_scaling_force(unsigned int workers);

/* Queue q to worker owners[q], for every queue (count must be the queue
 * count, every owner a worker); until nic_scaling_force. */
bool nic_scaling_pin(const unsigned int *owners, unsigned int count);

void nic_scaling_read(struct nic_scaling_view *view);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_NIC_SCALING_H */
