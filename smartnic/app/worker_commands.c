/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control thread's commands, run by each worker between bursts: the
 * worker owns its engines and flow counters, so every change to them
 * (path MTUs, onloads and offloads, new engines or merge rules) is a
 * command it runs itself, and a snapshot is how their counters are read.
 */
#include <stdlib.h>
#include <string.h>

#include <rte_hash.h>
#include <rte_ring.h>

#include "nic.h"
#include "stats.h"
#include "worker_internal.h"

void nic_worker_snapshot(const struct nic_worker *worker,
			 struct nic_worker_snapshot *result)
{
	const struct nic *nic = nic_instance;

	result->counters = worker->counters;
	result->engine = worker->retired;
	for (unsigned int p = 0; p < nic->port_count; p++) {
		struct jg_stats stats;

		jg_engine_get_stats(worker->engines[p], &stats);
		nic_stats_add(&result->engine, &stats);
	}
}

/* An engine's clock moves with its bursts and due timers only; the flow
 * commands date pins (and the delays of what an offload releases) by the
 * time now, also on an engine whose port was quiet or whose queues
 * another worker polls. */
static void advance_clocks(struct nic_worker *worker)
{
	uint64_t now = nic_now_ns();

	for (unsigned int p = 0; p < nic_instance->port_count; p++)
		jg_engine_advance_clock(worker->engines[p], now);
}

/* Every engine of the worker pins the flow, or none does: when one
 * refuses, those before it take their onload back at once, and undo says
 * nothing changed. */
static int onload(struct nic_worker *worker, const struct jg_flow_key *key,
		  struct nic_onload_undo *undo)
{
	const struct nic *nic = nic_instance;
	struct nic_flow_counters *flow;
	void *existing;

	memset(undo, 0, sizeof(*undo));
	advance_clocks(worker);
	for (unsigned int p = 0; p < nic->port_count; p++) {
		int result = jg_flow_onload_undoable(worker->engines[p], key,
						     &undo->ports[p]);
		if (result < 0) {
			for (unsigned int q = 0; q < p; q++)
				jg_flow_onload_undo(worker->engines[q], key,
						    &undo->ports[q]);
			memset(undo, 0, sizeof(*undo));
			return result;
		}
	}
	if (worker->flow_counters == NULL ||
	    rte_hash_lookup_data(worker->flow_counters, key, &existing) >= 0)
		return 0;
	flow = calloc(1, sizeof(*flow));
	/* Counting is best effort: a full table only loses ListFlows
	 * numbers, never the onload itself. */
	if (flow && rte_hash_add_key_data(worker->flow_counters, key, flow) < 0)
		free(flow);
	else if (flow)
		undo->counters_added = true;
	return 0;
}

/* An onload another worker refused, taken back here: each engine as it
 * was before it (see jg_flow_onload_undo), not offloaded. */
static void undo_onload(struct nic_worker *worker,
			const struct jg_flow_key *key,
			const struct nic_onload_undo *undo)
{
	const struct nic *nic = nic_instance;
	void *existing;

	advance_clocks(worker);
	for (unsigned int p = 0; p < nic->port_count; p++)
		jg_flow_onload_undo(worker->engines[p], key, &undo->ports[p]);
	if (undo->counters_added && worker->flow_counters &&
	    rte_hash_lookup_data(worker->flow_counters, key, &existing) >= 0) {
		rte_hash_del_key(worker->flow_counters, key);
		free(existing);
	}
}

static uint64_t offload(struct nic_worker *worker,
			const struct jg_flow_key *key)
{
	const struct nic *nic = nic_instance;
	struct output out;
	uint64_t released = 0;
	void *existing;

	advance_clocks(worker);
	for (unsigned int p = 0; p < nic->port_count; p++) {
		int produced;

		out.port_id = nic->ports[p].tx_port_id;
		out.count = 0;
		/* A listed UDP flow's held datagrams leave before the switch
		 * carries the flow past the SmartNIC. */
		worker_pack_held_caravans(worker, p, &out);
		worker_transmit(worker, &out);
		worker_reserve(worker, &out, JG_MAX_RUNS_PER_FLOW);
		produced = jg_flow_offload(worker->engines[p], key, out.pkts,
					   JG_MAX_RUNS_PER_FLOW);
		if (produced > 0) {
			worker_count_merged(worker, out.pkts,
					    (uint16_t)produced);
			out.count = (uint16_t)produced;
			released += (uint64_t)produced;
			worker_transmit(worker, &out);
		}
	}
	if (worker->flow_counters &&
	    rte_hash_lookup_data(worker->flow_counters, key, &existing) >= 0) {
		rte_hash_del_key(worker->flow_counters, key);
		free(existing);
	}
	return released;
}

static void swap_engines(struct nic_worker *worker, struct nic_command *command)
{
	const struct nic *nic = nic_instance;
	struct output out;

	for (unsigned int p = 0; p < nic->port_count; p++) {
		struct jg_engine *old = worker->engines[p];
		struct jg_stats stats;

		out.port_id = nic->ports[p].tx_port_id;
		out.count = 0;
		worker_pack_held_caravans(worker, p, &out);
		worker_flush_engine(worker, old, &out);
		worker_transmit(worker, &out);
		jg_engine_get_stats(old, &stats);
		/* Its counters live on in the totals; what it held and tracked
		 * (flushed, forgotten) and its memory (freed) do not. */
		stats.flows_now = 0;
		stats.flow_capacity = 0;
		stats.memory_bytes = 0;
		nic_stats_add(&worker->retired, &stats);
		worker->engines[p] = command->arg.engines[p];
		command->arg.engines[p] = old;
	}
	/* Per-flow counters describe the old engines' flows only in part;
	 * they keep counting, since onloads are replayed on the new ones. */
}

/* New merge rules and limits on the running engines: flows, learned MSS
 * and onloads stay. Held runs were cut to the old rules, so they leave
 * first when the rules change. */
static void reconfigure_engines(struct nic_worker *worker,
				struct nic_command *command)
{
	const struct nic *nic = nic_instance;
	bool flush = jg_engine_merge_rules_differ(
		&command->arg.reconfigure.from, &command->arg.reconfigure.to);
	struct output out;

	for (unsigned int p = 0; p < nic->port_count; p++) {
		struct jg_engine *engine = worker->engines[p];
		int result;

		/* Held datagrams leave too: their deadlines came from the old
		 * max delay. */
		out.port_id = nic->ports[p].tx_port_id;
		out.count = 0;
		worker_pack_held_caravans(worker, p, &out);
		if (flush)
			worker_flush_engine(worker, engine, &out);
		worker_transmit(worker, &out);
		result = jg_engine_reconfigure(engine,
					       &command->arg.reconfigure.to);
		if (result < 0 && command->result == 0)
			command->result = result;
	}
}

static void pack_all_held_caravans(struct nic_worker *worker)
{
	const struct nic *nic = nic_instance;
	struct output out;

	for (unsigned int p = 0; p < nic->port_count; p++) {
		out.port_id = nic->ports[p].tx_port_id;
		out.count = 0;
		worker_pack_held_caravans(worker, p, &out);
		worker_transmit(worker, &out);
	}
}

/* The counters of the listed flows, and whether this worker's engines
 * still pin them: a flow's traffic reaches one worker and one port, so
 * the pins of the other engines lapse by themselves. */
static void flow_counters(struct nic_worker *worker,
			  struct nic_command *command)
{
	const struct nic *nic = nic_instance;

	advance_clocks(worker);
	for (size_t i = 0; i < command->arg.flows.count; i++) {
		const struct jg_flow_key *key = &command->arg.flows.keys[i];
		void *data;

		if (worker->flow_counters &&
		    rte_hash_lookup_data(worker->flow_counters, key, &data) >=
			    0)
			command->arg.flows.counters[i] =
				*(struct nic_flow_counters *)data;
		for (unsigned int p = 0; p < nic->port_count; p++)
			command->arg.flows.pinned[i] |=
				jg_flow_is_onloaded(worker->engines[p], key);
	}
}

/* Flows whose pins lapsed on every engine left the onload list: their
 * counters go too. */
static void forget_flows(struct nic_worker *worker, struct nic_command *command)
{
	for (size_t i = 0; i < command->arg.flows.count; i++) {
		const struct jg_flow_key *key = &command->arg.flows.keys[i];
		void *data;

		if (worker->flow_counters &&
		    rte_hash_lookup_data(worker->flow_counters, key, &data) >=
			    0) {
			rte_hash_del_key(worker->flow_counters, key);
			free(data);
		}
	}
}

static void execute(struct nic_worker *worker, struct nic_command *command)
{
	const struct nic *nic = nic_instance;

	command->result = 0;
	switch (command->type) {
	case NIC_CMD_SNAPSHOT:
		nic_worker_snapshot(worker, &command->snapshot);
		break;
	case NIC_CMD_PMTU_SET:
		for (unsigned int p = 0; p < nic->port_count; p++) {
			int result = jg_pmtu_set(worker->engines[p],
						 &command->arg.pmtu.prefix,
						 command->arg.pmtu.mtu);
			if (result < 0 && command->result == 0)
				command->result = result;
		}
		break;
	case NIC_CMD_PMTU_DELETE:
		for (unsigned int p = 0; p < nic->port_count; p++) {
			int result = jg_pmtu_delete(worker->engines[p],
						    &command->arg.pmtu.prefix);
			if (result < 0 && command->result == 0)
				command->result = result;
		}
		break;
	case NIC_CMD_FLOW_ONLOAD:
		command->result = onload(worker, &command->arg.flow,
					 &command->onload_undo);
		break;
	case NIC_CMD_FLOW_ONLOAD_UNDO:
		undo_onload(worker, &command->arg.flow, &command->onload_undo);
		break;
	case NIC_CMD_FLOW_OFFLOAD:
		command->packets = offload(worker, &command->arg.flow);
		break;
	case NIC_CMD_FLOW_COUNTERS:
		flow_counters(worker, command);
		break;
	case NIC_CMD_FLOW_FORGET:
		forget_flows(worker, command);
		break;
	case NIC_CMD_SWAP_ENGINES:
		swap_engines(worker, command);
		break;
	case NIC_CMD_RECONFIGURE:
		reconfigure_engines(worker, command);
		break;
	case NIC_CMD_SET_INTERNAL_PREFIXES:
		/* A held flow may be classified otherwise from now on: what
		 * it holds leaves ahead of its next datagrams. */
		pack_all_held_caravans(worker);
		worker->internal = command->arg.internal;
		break;
	}
}

void nic_command_discard(struct nic_command *command)
{
	if (command == NULL)
		return;
	if (command->type == NIC_CMD_FLOW_COUNTERS ||
	    command->type == NIC_CMD_FLOW_FORGET) {
		free(command->arg.flows.keys);
		free(command->arg.flows.counters);
		free(command->arg.flows.pinned);
	} else if (command->type == NIC_CMD_SWAP_ENGINES) {
		/* Ran: the engines it replaced, flushed. Never ran: the
		 * replacements, which nothing else references. */
		for (unsigned int p = 0; p < NIC_MAX_PORTS; p++)
			if (command->arg.engines[p] != NULL)
				jg_engine_destroy(command->arg.engines[p]);
	}
	free(command);
}

bool worker_process_commands(struct nic_worker *worker)
{
	void *object;
	bool any = false;

	while (rte_ring_sc_dequeue(worker->commands, &object) == 0) {
		struct nic_command *command = object;
		int expected = NIC_COMMAND_PENDING;

		execute(worker, command);
		worker->counters.commands++;
		any = true;
		if (!atomic_compare_exchange_strong(&command->state, &expected,
						    NIC_COMMAND_DONE)) {
			/* The waiter gave up on it. */
			worker->counters.commands_abandoned++;
			nic_command_discard(command);
		}
	}
	return any;
}
