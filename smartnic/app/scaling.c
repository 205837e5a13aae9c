/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scaler behind --queue-scaling. Every port has --queues receive
 * queues and the port's hash spreads flows over all of them; on the virtual
 * ports (memif, af_packet, af_xdp) the peer or the kernel chooses the
 * queue and there is no redirection table to narrow, so what scales is
 * how many workers serve the queues: queue q goes to worker q mod N. An
 * idle program gathers every queue on one worker and the others sleep;
 * under load each worker takes its share. The move itself is the owning
 * worker's (serve_queues in worker.c): it sends what it holds before
 * it lets go, so no packet is lost or reordered within a flow.
 *
 * Once a second: the received packets per second and the onloaded flows
 * (the controller onloads elephants). Up is immediate, to what the sample
 * asks for, as a queue that waits loses packets; down is one worker at a
 * time, after the load stayed below 80% of the smaller share for
 * --queue-scale-down-s samples, so that a load near a threshold does not
 * move queues back and forth.
 */
#include "scaling.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "control.h"
#include "control_internal.h"
#include "nic.h"

#define SAMPLE_NS   1000000000ull
#define DOWN_MARGIN 0.8

static struct {
	pthread_mutex_t lock;
	unsigned int target;
	unsigned int forced;
	bool pinned;	    /* owners given queue by queue */
	unsigned int below; /* samples in a row that allow one fewer */
	uint64_t changes;
	uint64_t last_ns;
	uint64_t last_rx;
	uint64_t packets_per_s;
	uint64_t elephants;
} scaler = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct nic *scaled_nic;

/* Hands queue q to worker q mod `workers`; the owners move them. */
static void give_queues(struct nic *nic, unsigned int workers)
{
	for (unsigned int q = 0; q < nic->queues.count; q++)
		atomic_store(&nic->queues.want[q], (uint16_t)(q % workers));
	if (workers != scaler.target || scaler.pinned) {
		printf("jumbogate-nic: %u of %u workers serve the %u queues\n",
		       workers, nic->worker_count, nic->queues.count);
		fflush(stdout);
		scaler.changes++;
	}
	scaler.target = workers;
	scaler.pinned = false;
}

void nic_scaling_init(struct nic *nic)
{
	unsigned int first =
		nic->options->queue_scaling ? 1 : nic->worker_count;

	scaled_nic = nic;
	for (unsigned int q = 0; q < nic->queues.count; q++) {
		atomic_init(&nic->queues.want[q], (uint16_t)(q % first));
		atomic_init(&nic->queues.owner[q], (uint16_t)(q % first));
	}
	atomic_init(&nic->queues.handovers, 0);
	atomic_init(&nic->queues.handover_flushed, 0);
	scaler.target = first;
}

static unsigned int shares(uint64_t amount, double per_worker)
{
	return (unsigned int)((double)amount / per_worker + 0.999999);
}

/* The workers a sample asks for, up and (with the margin) down. */
static unsigned int wanted(const struct nic *nic, double margin)
{
	const struct nic_options *options = nic->options;
	unsigned int n =
		shares(scaler.packets_per_s, options->queue_scale_pps * margin);
	unsigned int by_flows = shares(scaler.elephants,
				       options->queue_scale_elephants * margin);

	if (by_flows > n)
		n = by_flows;
	if (n < 1)
		n = 1;
	return n < nic->worker_count ? n : nic->worker_count;
}

static void decide(struct nic *nic)
{
	unsigned int up = wanted(nic, 1.0);
	unsigned int down = wanted(nic, DOWN_MARGIN);

	if (up > scaler.target) {
		scaler.below = 0;
		give_queues(nic, up);
	} else if (down < scaler.target) {
		if (++scaler.below >= nic->options->queue_scale_down_s) {
			scaler.below = 0;
			give_queues(nic, scaler.target - 1);
		}
	} else {
		scaler.below = 0;
	}
}

static bool sample(uint64_t now_ns)
{
	struct nic_totals totals;
	uint64_t elapsed = now_ns - scaler.last_ns;

	if (nic_control_stats(&totals).status != NIC_STATUS_OK)
		return false;
	pthread_mutex_lock(&control_state.lock);
	scaler.elephants = control_state.flow_count;
	pthread_mutex_unlock(&control_state.lock);
	if (scaler.last_ns != 0 && elapsed > 0)
		scaler.packets_per_s =
			(totals.counters.rx_packets - scaler.last_rx) *
			1000000000ull / elapsed;
	scaler.last_rx = totals.counters.rx_packets;
	scaler.last_ns = now_ns;
	return true;
}

void nic_scaling_tick(struct nic *nic, uint64_t now_ns)
{
	/* Without the scaler nothing is sampled: no command reaches the
	 * workers that the operator did not ask for. */
	if (!nic->options->queue_scaling || now_ns - scaler.last_ns < SAMPLE_NS)
		return;
	/* Statistics outside the scaler's lock: they wait for workers. */
	if (!sample(now_ns)) {
		scaler.last_ns = now_ns;
		return;
	}
	pthread_mutex_lock(&scaler.lock);
	if (scaler.forced == 0)
		decide(nic);
	pthread_mutex_unlock(&scaler.lock);
}

void nic_scaling_force(unsigned int workers)
{
	struct nic *nic = scaled_nic;

	if (nic == NULL)
		return;
	pthread_mutex_lock(&scaler.lock);
	if (workers > nic->worker_count)
		workers = nic->worker_count;
	scaler.forced = workers;
	scaler.below = 0;
	/* Back to the scaler: from its present count, laid out q mod N
	 * again; without it, every worker. */
	if (workers == 0)
		workers = nic->options->queue_scaling ? scaler.target
						      : nic->worker_count;
	give_queues(nic, workers);
	pthread_mutex_unlock(&scaler.lock);
}

bool nic_scaling_pin(const unsigned int *owners, unsigned int count)
{
	struct nic *nic = scaled_nic;
	bool serves[NIC_MAX_WORKERS] = {false};
	unsigned int serving = 0;

	if (nic == NULL || count != nic->queues.count)
		return false;
	for (unsigned int q = 0; q < count; q++)
		if (owners[q] >= nic->worker_count)
			return false;
	pthread_mutex_lock(&scaler.lock);
	for (unsigned int q = 0; q < count; q++) {
		serving += !serves[owners[q]];
		serves[owners[q]] = true;
		atomic_store(&nic->queues.want[q], (uint16_t)owners[q]);
	}
	scaler.forced = serving;
	scaler.pinned = true;
	scaler.target = serving;
	scaler.changes++;
	pthread_mutex_unlock(&scaler.lock);
	return true;
}

void nic_scaling_read(struct nic_scaling_view *view)
{
	struct nic *nic = scaled_nic;
	bool owns[NIC_MAX_WORKERS] = {false};
	size_t used = 0;

	memset(view, 0, sizeof(*view));
	if (nic == NULL)
		return;
	pthread_mutex_lock(&scaler.lock);
	view->queues = nic->queues.count;
	view->workers = nic->worker_count;
	view->target = scaler.target;
	view->forced = scaler.forced;
	view->pinned = scaler.pinned;
	view->scaling = nic->options->queue_scaling;
	view->changes = scaler.changes;
	view->packets_per_s = scaler.packets_per_s;
	view->elephants = scaler.elephants;
	pthread_mutex_unlock(&scaler.lock);
	view->handovers = atomic_load(&nic->queues.handovers);
	view->handover_flushed = atomic_load(&nic->queues.handover_flushed);
	for (unsigned int q = 0; q < nic->queues.count; q++) {
		uint16_t owner = atomic_load(&nic->queues.owner[q]);

		if (owner < NIC_MAX_WORKERS)
			owns[owner] = true;
		used += (size_t)snprintf(view->owners + used,
					 sizeof(view->owners) - used, "%s%u",
					 q ? "," : "", owner);
		if (used >= sizeof(view->owners))
			break;
	}
	for (unsigned int w = 0; w < nic->worker_count; w++)
		view->serving += owns[w];
}
