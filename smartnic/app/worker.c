/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data path: one worker per lcore polls its queues of every port, hands
 * each packet to the engine call for its direction, transmits what comes
 * back, runs the merge timers, and sleeps when there is nothing to do.
 */
#include <sys/prctl.h>
#include <time.h>

#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include "classify.h"
#include "nic.h"
#include "pathmtu.h"
#include "port.h"
#include "stats.h"
#include "worker_internal.h"

#define MAX_BURST 256
/* Probes one poll of path MTU discovery may send (second copies). */
#define PATHMTU_POLL_PROBES 64

struct nic *nic_instance;

uint64_t nic_now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static bool counting_flows(const struct nic_worker *worker)
{
	return worker->flow_counters != NULL &&
	       rte_hash_count(worker->flow_counters) > 0;
}

static struct nic_flow_counters *
flow_counters_of(const struct nic_worker *worker,
		 const struct jg_packet_summary *packet)
{
	void *data;

	if (!packet->has_ports)
		return NULL;
	if (rte_hash_lookup_data(worker->flow_counters, &packet->key, &data) <
	    0)
		return NULL;
	return data;
}

void worker_count_merged(struct nic_worker *worker, struct rte_mbuf **pkts,
			 uint16_t count)
{
	struct jg_packet_summary packet;
	struct nic_flow_counters *flow;

	if (!counting_flows(worker))
		return;
	for (uint16_t i = 0; i < count; i++) {
		if (pkts[i]->nb_segs < 2 ||
		    !jg_packet_summarize(pkts[i], &packet))
			continue;
		flow = flow_counters_of(worker, &packet);
		if (flow)
			flow->merged_packets++;
	}
}

typedef uint16_t (*burst_fn)(struct jg_engine *engine, struct rte_mbuf **pkts,
			     uint16_t nb_pkts, struct rte_mbuf **out,
			     uint16_t out_cap, uint16_t *consumed);

/* Run a burst through a stage that may stop early when out is full. */
static void run_stage(struct nic_worker *worker, struct jg_engine *engine,
		      burst_fn stage, struct rte_mbuf **pkts, uint16_t count,
		      struct output *out)
{
	uint16_t done = 0;

	while (done < count) {
		uint16_t room = worker_reserve(worker, out, ENGINE_MARGIN + 1);
		uint16_t consumed = 0;
		uint16_t produced =
			stage(engine, pkts + done, count - done,
			      out->pkts + out->count, room, &consumed);

		out->count += produced;
		done += consumed;
		if (consumed == 0 && produced == 0) {
			/* Only possible with a full output; send and retry. */
			worker_transmit(worker, out);
		}
	}
}

/* -- Caravan holds ------------------------------------------------------
 * A receive burst rarely holds more than a few datagrams of one flow, so
 * packing burst by burst makes short caravans. The hold collects a port's
 * candidates until the first has waited the engine's max delay or the
 * hold is full, then packs them all at once. Every datagram of a flow
 * goes through the hold, in arrival order, and the packer sends one it
 * cannot pack only after what it opened before (caravan.c), so the flow
 * stays in order. Only flows an operator listed reach the SmartNIC as
 * UDP, so only they wait; up to the same bound as merged segments. */

uint16_t worker_pack_held_caravans(struct nic_worker *worker,
				   unsigned int port_index, struct output *out)
{
	struct nic_caravan_hold *hold = &worker->caravan_holds[port_index];
	uint16_t count = hold->count;
	uint64_t now_ns;

	if (count == 0)
		return 0;
	now_ns = nic_now_ns();
	for (uint16_t i = 0; i < count; i++) {
		uint64_t waited = now_ns > hold->arrival_ns[i]
					  ? now_ns - hold->arrival_ns[i]
					  : 0;

		worker->counters
			.caravan_hold_delay_us[jg_delay_bucket(waited)]++;
		worker->counters.caravan_hold_delay_sum_ns += waited;
	}
	hold->count = 0;
	hold->deadline_ns = UINT64_MAX;
	worker->counters.caravan_held_now -= count;
	run_stage(worker, worker->engines[port_index], jg_caravan_pack,
		  hold->pkts, count, out);
	return count;
}

static void hold_caravans(struct nic_worker *worker, unsigned int port_index,
			  struct rte_mbuf **pkts, uint16_t count,
			  uint64_t now_ns, struct output *out)
{
	struct nic_caravan_hold *hold = &worker->caravan_holds[port_index];
	uint64_t wait_ns = jg_engine_max_delay_ns(worker->engines[port_index]);

	for (uint16_t i = 0; i < count; i++) {
		if (hold->count == 0)
			hold->deadline_ns = now_ns + wait_ns;
		hold->arrival_ns[hold->count] = now_ns;
		hold->pkts[hold->count++] = pkts[i];
		worker->counters.caravan_held_now++;
		if (hold->count == NIC_CARAVAN_HOLD_MAX) {
			worker->counters.caravan_hold_full_packs++;
			worker_pack_held_caravans(worker, port_index, out);
		}
	}
	/* A max delay of 0 packs within the burst, as without a hold. */
	if (hold->deadline_ns <= now_ns)
		worker_pack_held_caravans(worker, port_index, out);
}

/* Pack every hold whose deadline has come; true if any was. */
static bool release_due_caravans(struct nic_worker *worker, uint64_t now_ns,
				 struct output *out)
{
	const struct nic *nic = nic_instance;
	bool released = false;

	for (unsigned int p = 0; p < nic->port_count; p++) {
		if (worker->caravan_holds[p].count == 0 ||
		    worker->caravan_holds[p].deadline_ns > now_ns)
			continue;
		out->port_id = nic->ports[p].tx_port_id;
		out->count = 0;
		worker_pack_held_caravans(worker, p, out);
		worker_transmit(worker, out);
		released = true;
	}
	return released;
}

static void run_merge(struct nic_worker *worker, struct jg_engine *engine,
		      struct rte_mbuf **pkts, uint16_t count, uint64_t now_ns,
		      struct output *out)
{
	uint16_t room = worker_reserve(worker, out, count + ENGINE_MARGIN);
	uint16_t produced = jg_merge_burst(engine, pkts, count, now_ns,
					   out->pkts + out->count, room);

	worker_count_merged(worker, out->pkts + out->count, produced);
	out->count += produced;
}

/* Release merge runs whose deadline has come. */
static bool run_timer(struct nic_worker *worker, struct jg_engine *engine,
		      uint64_t now_ns, struct output *out)
{
	bool released = false;

	while (jg_merge_next_deadline(engine) <= now_ns) {
		uint16_t room = worker_reserve(worker, out, ENGINE_MARGIN);
		uint16_t produced = jg_merge_timer(
			engine, now_ns, out->pkts + out->count, room);

		if (produced == 0)
			break;
		worker_count_merged(worker, out->pkts + out->count, produced);
		out->count += produced;
		released = true;
	}
	return released;
}

uint64_t worker_flush_engine(struct nic_worker *worker,
			     struct jg_engine *engine, struct output *out)
{
	uint64_t released = 0;
	uint16_t produced;

	do {
		uint16_t room = worker_reserve(worker, out, ENGINE_MARGIN);

		produced = jg_merge_flush_all(engine, out->pkts + out->count,
					      room);
		worker_count_merged(worker, out->pkts + out->count, produced);
		out->count += produced;
		released += produced;
	} while (produced > 0);
	return released;
}

/* Path MTU discovery's look at a received packet: true when it was a
 * probe, a reply or a probe's fragment and is gone; a reply to a probe
 * leaves through the port the probe came in on. */
static bool take_pathmtu(struct nic_worker *worker, const struct nic_port *port,
			 struct rte_mbuf *m,
			 const struct jg_packet_summary *packet,
			 uint64_t now_ns, struct output *out,
			 struct output *back)
{
	struct nic_pathmtu *pm = nic_instance->pathmtu;
	struct rte_mbuf *replies[1];
	uint16_t count = 0;

	if (pm == NULL || !nic_pathmtu_wants(pm, packet) ||
	    !nic_pathmtu_receive(pm, m, now_ns, replies, &count))
		return false;
	worker->counters.pmtu_consumed++;
	worker->counters.pmtu_created += count;
	worker_emit(worker, port->tx_port_id == port->port_id ? out : back,
		    replies, count);
	return true;
}

/* An outbound packet may start a probe round to its destination; the
 * probes leave ahead of it. */
static void note_outbound(struct nic_worker *worker, unsigned int port_index,
			  const struct rte_mbuf *m,
			  const struct jg_packet_summary *packet,
			  uint64_t now_ns, struct output *out)
{
	struct nic_pathmtu *pm = nic_instance->pathmtu;
	struct rte_mbuf *probes[NIC_PMTU_MAX_PROBE_SIZES + 1];
	uint16_t count;

	if (pm == NULL)
		return;
	count = nic_pathmtu_note_outbound(pm, m, packet, port_index, now_ns,
					  probes, RTE_DIM(probes));
	worker->counters.pmtu_created += count;
	worker_emit(worker, out, probes, count);
}

static bool poll_port(struct nic_worker *worker, unsigned int port_index,
		      uint16_t queue, struct output *out)
{
	const struct nic *nic = nic_instance;
	const struct nic_port *port = &nic->ports[port_index];
	struct jg_engine *engine = worker->engines[port_index];
	const struct nic_prefix_set internal = {
		.count = worker->internal.count,
		.prefixes = worker->internal.prefixes,
	};
	struct rte_mbuf *pkts[MAX_BURST];
	struct rte_mbuf *merge[MAX_BURST], *pack[MAX_BURST];
	struct rte_mbuf *split[MAX_BURST], *unpack[MAX_BURST];
	uint16_t merges = 0, packs = 0, splits = 0, unpacks = 0;
	bool count_flows = counting_flows(worker);
	struct jg_packet_summary packet;
	struct output back;
	uint16_t received;
	uint64_t now_ns;

	received = rte_eth_rx_burst(port->port_id, queue, pkts,
				    nic->options->burst);
	now_ns = nic_now_ns();
	if (received == 0) {
		/* Tells the engine how soon a segment is seen after it
		 * arrives, which its merge deadlines allow for. */
		jg_merge_note_poll(engine, now_ns);
		return false;
	}
	worker->counters.rx_packets += received;
	worker->counters.rx_bursts++;
	out->port_id = port->tx_port_id;
	out->count = 0;
	back.port_id = port->port_id;
	back.count = 0;
	/* Packets of one flow always take the same branch, so sorting the
	 * burst by direction keeps the order within every flow. */
	for (uint16_t i = 0; i < received; i++) {
		struct rte_mbuf *m = pkts[i];
		enum nic_direction direction = NIC_BYPASS;

		worker->counters.rx_bytes += rte_pktmbuf_pkt_len(m);
		if (jg_packet_summarize(m, &packet)) {
			if (take_pathmtu(worker, port, m, &packet, now_ns, out,
					 &back))
				continue;
			direction = nic_classify(&internal, &packet);
		}
		if (direction == NIC_INBOUND) {
			if (count_flows) {
				struct nic_flow_counters *flow =
					flow_counters_of(worker, &packet);
				if (flow)
					flow->packets_in++;
			}
			if (packet.key.protocol == IPPROTO_UDP &&
			    nic->options->caravan_pack)
				pack[packs++] = m;
			else
				merge[merges++] = m;
		} else if (direction == NIC_OUTBOUND &&
			   packet.key.protocol == IPPROTO_TCP) {
			note_outbound(worker, port_index, m, &packet, now_ns,
				      out);
			split[splits++] = m;
		} else if (direction == NIC_OUTBOUND &&
			   packet.key.protocol == IPPROTO_UDP) {
			unpack[unpacks++] = m;
		} else {
			worker->counters.bypassed++;
			worker_emit(worker, out, &m, 1);
		}
	}
	if (merges)
		run_merge(worker, engine, merge, merges, now_ns, out);
	else
		jg_merge_note_poll(engine, now_ns);
	if (packs)
		hold_caravans(worker, port_index, pack, packs, now_ns, out);
	if (splits)
		run_stage(worker, worker->engines[port->split_engine_port],
			  jg_split_burst, split, splits, out);
	if (unpacks)
		run_stage(worker, engine, jg_caravan_unpack, unpack, unpacks,
			  out);
	worker_transmit(worker, out);
	if (back.count)
		worker_transmit(worker, &back);
	return true;
}

/* Path MTU discovery's timers (second copies, ends of rounds, expiry),
 * run by the first worker only. */
static bool poll_pathmtu(struct nic_worker *worker, uint64_t now_ns,
			 struct output *out)
{
	const struct nic *nic = nic_instance;
	struct rte_mbuf *probes[PATHMTU_POLL_PROBES];
	bool sent = false;

	if (nic->pathmtu == NULL || worker->index != 0)
		return false;
	for (unsigned int p = 0; p < nic->port_count; p++) {
		uint16_t count = nic_pathmtu_poll(nic->pathmtu, p, now_ns,
						  probes, RTE_DIM(probes));

		if (count == 0)
			continue;
		out->port_id = nic->ports[p].tx_port_id;
		out->count = 0;
		worker->counters.pmtu_created += count;
		worker_emit(worker, out, probes, count);
		worker_transmit(worker, out);
		sent = true;
	}
	return sent;
}

/* ------------------------------------------------------------------ */
/* The loop                                                            */

static uint64_t next_deadline(const struct nic_worker *worker)
{
	uint64_t earliest = UINT64_MAX;

	for (unsigned int p = 0; p < nic_instance->port_count; p++) {
		uint64_t deadline = jg_merge_next_deadline(worker->engines[p]);
		if (deadline < earliest)
			earliest = deadline;
		if (worker->caravan_holds[p].count &&
		    worker->caravan_holds[p].deadline_ns < earliest)
			earliest = worker->caravan_holds[p].deadline_ns;
	}
	return earliest;
}

/*
 * Adaptive polling: after an empty poll the worker sleeps, doubling the
 * sleep up to --idle-sleep-max-us, but never past the earliest merge
 * deadline, so an idle worker costs almost no CPU and a held tail still
 * leaves on time. Any packet resets the sleep to zero.
 */
static void idle(struct nic_worker *worker)
{
	const uint64_t max_ns =
		(uint64_t)nic_instance->options->idle_sleep_max_us * 1000;

	if (jg_idle_sleep(&worker->idle_sleep_ns, max_ns, nic_now_ns(),
			  next_deadline(worker)))
		worker->counters.idle_sleeps++;
}

static uint64_t flush_all(struct nic_worker *worker)
{
	const struct nic *nic = nic_instance;
	struct output out;
	uint64_t released = 0;

	for (unsigned int p = 0; p < nic->port_count; p++) {
		out.port_id = nic->ports[p].tx_port_id;
		out.count = 0;
		released += worker_pack_held_caravans(worker, p, &out);
		released +=
			worker_flush_engine(worker, worker->engines[p], &out);
		worker_transmit(worker, &out);
	}
	return released;
}

/* Polls the queues this worker owns. One the scaler gave to another
 * worker is handed over instead: what this one holds leaves first (the
 * engine flushes all or nothing), then the new owner may poll it, so no
 * flow is reordered across the move. */
static bool serve_queues(struct nic_worker *worker, struct output *out)
{
	struct nic_queues *queues = &nic_instance->queues;
	bool busy = false, flushed = false;

	for (uint16_t q = 0; q < queues->count; q++) {
		uint16_t want = atomic_load_explicit(&queues->want[q],
						     memory_order_relaxed);

		if (atomic_load_explicit(&queues->owner[q],
					 memory_order_acquire) != worker->index)
			continue;
		if (want == worker->index) {
			for (unsigned int p = 0; p < nic_instance->port_count;
			     p++)
				busy |= poll_port(worker, p, q, out);
			continue;
		}
		if (!flushed)
			atomic_fetch_add(&queues->handover_flushed,
					 flush_all(worker));
		busy = flushed = true;
		atomic_store_explicit(&queues->owner[q], want,
				      memory_order_release);
		atomic_fetch_add(&queues->handovers, 1);
	}
	return busy;
}

int nic_worker_run(void *arg)
{
	struct nic_worker *worker = arg;
	const struct nic *nic = nic_instance;
	struct output out = {.count = 0};
	uint64_t flushed;

	/* The default 50 us timer slack would stretch every short sleep
	 * past the merge deadlines it aims at. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	RTE_LOG(INFO, USER1, "worker %u on lcore %u sends on queue %u\n",
		worker->index, worker->lcore_id, worker->queue_id);
	while (!atomic_load_explicit(&nic->stop, memory_order_relaxed)) {
		bool busy = worker_process_commands(worker);
		uint64_t now;

		worker->counters.polls++;
		busy |= serve_queues(worker, &out);
		now = nic_now_ns();
		for (unsigned int p = 0; p < nic->port_count; p++) {
			out.port_id = nic->ports[p].tx_port_id;
			out.count = 0;
			if (run_timer(worker, worker->engines[p], now, &out)) {
				worker_transmit(worker, &out);
				busy = true;
			}
		}
		busy |= release_due_caravans(worker, now, &out);
		busy |= poll_pathmtu(worker, now, &out);
		if (busy)
			worker->idle_sleep_ns = 0;
		else
			idle(worker);
	}
	/* Commands posted during shutdown still get their answer. */
	worker_process_commands(worker);
	flushed = flush_all(worker);
	RTE_LOG(INFO, USER1,
		"worker %u stopped: flushed %" PRIu64 " held packets\n",
		worker->index, flushed);
	return 0;
}
