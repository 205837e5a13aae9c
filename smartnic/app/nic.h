/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The running program: ports, workers and the commands that carry
 * configuration from the control thread to the workers.
 *
 * Ownership rule: an engine and a worker's counters are touched only by
 * the worker that owns them. The control thread (gRPC, telemetry) never
 * reads or writes them directly; it posts a command on the worker's ring
 * and waits for the worker to carry it out between two bursts. New
 * engines are built by the control thread while no worker can see them
 * and handed over by a command, so configuration changes never race with
 * packet processing.
 */
#ifndef JUMBOGATE_NIC_NIC_H
#define JUMBOGATE_NIC_NIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <jumbogate/engine.h>

#include "counters.h"
#include "options.h"

struct nic_pathmtu;
struct rte_hash;
struct rte_mempool;
struct rte_ring;

#define NIC_MAX_WORKERS 16

/*
 * Which worker polls which receive queue (the same queue index on every
 * port, where symmetric RSS puts both directions of a flow). The scaler
 * (scaling.c) only writes want[]; the owner of a queue sees the change
 * between two bursts, sends everything its engines hold and only then
 * stores the new owner, so the next owner's packets of a flow always
 * leave after the old owner's. A stuck owner keeps its queues: nothing is
 * ever polled by two workers or by none.
 */
struct nic_queues {
	unsigned int count; /* queues of every port (--queues) */
	_Atomic uint16_t want[NIC_MAX_QUEUES];
	_Atomic uint16_t owner[NIC_MAX_QUEUES];
	_Atomic uint64_t handovers;	   /* queues that changed owner */
	_Atomic uint64_t handover_flushed; /* packets sent to hand over */
};

struct nic_port {
	uint16_t port_id;
	/* Where what arrives on this port leaves (itself by default). */
	uint16_t tx_port_id;
	/* Index of the port whose engines split what this port receives:
	 * the port the other direction of its flows arrives on (ports.c). */
	unsigned int split_engine_port;
	/* The port cannot send buffer chains: copy them into one buffer. */
	bool flatten_chains;
	/* Largest IP packet it carries: --port-mtu, or its own. */
	uint32_t mtu;
	char name[NIC_NAME_LEN];
};

/* What a worker reports about itself; built by the worker on request. */
struct nic_worker_snapshot {
	struct nic_counters counters;
	struct jg_stats engine; /* every engine of the worker, summed */
};

/* Per-flow counters for ListFlows, kept only for onloaded flows. */
struct nic_flow_counters {
	uint64_t packets_in;
	uint64_t merged_packets;
};

/* The prefixes inside the rack, which tell inbound from outbound. */
struct nic_prefix_list {
	unsigned int count;
	struct jg_prefix prefixes[NIC_MAX_INTERNAL_PREFIXES];
};

/* Inbound UDP datagrams (with --caravan-pack on) collected over several
 * receive bursts before they are packed, so that a flow's datagrams from
 * more than one burst can ride in one caravan. One per port and worker:
 * at most NIC_CARAVAN_HOLD_MAX datagrams (a full hold is packed at once),
 * none longer than the engine's max delay. */
#define NIC_CARAVAN_HOLD_MAX 256

struct nic_caravan_hold {
	uint16_t count;
	uint64_t deadline_ns; /* when the first of them must leave */
	struct rte_mbuf *pkts[NIC_CARAVAN_HOLD_MAX];
	uint64_t arrival_ns[NIC_CARAVAN_HOLD_MAX]; /* for the hold's delays */
};

struct nic_worker {
	unsigned int index;
	unsigned int lcore_id;
	/* Its transmit queue on every port; which receive queues it polls is
	 * in nic.queues. */
	uint16_t queue_id;
	/* One engine per port: what an engine holds must leave through the
	 * transmit port of the port it came from. */
	struct jg_engine *engines[NIC_MAX_PORTS];
	struct rte_ring *commands;
	/* Onloaded flows -> struct nic_flow_counters (worker-owned). */
	struct rte_hash *flow_counters;
	struct nic_counters counters;
	/* Counters of engines that were replaced by a reconfiguration, so
	 * that totals survive it. */
	struct jg_stats retired;
	/* Current idle sleep; doubles while idle, 0 after work. */
	uint64_t idle_sleep_ns;
	/* The worker's own copy, changed by a command between bursts. */
	struct nic_prefix_list internal;
	struct nic_caravan_hold caravan_holds[NIC_MAX_PORTS];
};

struct nic {
	struct nic_options *options;
	unsigned int port_count;
	struct nic_port ports[NIC_MAX_PORTS];
	unsigned int worker_count;
	struct nic_worker workers[NIC_MAX_WORKERS];
	struct nic_queues queues;
	struct rte_mempool *header_pool;
	/* Path MTU discovery, shared by all workers (its own locking); NULL
	 * when off. Its probes and replies come from their own pool. */
	struct nic_pathmtu *pathmtu;
	struct rte_mempool *pathmtu_pool;
	/* The configuration engines are built from; changed only by the
	 * control thread, under the control lock. */
	struct jg_engine_config engine_config;
	/* The longest buffer chain every port can send (main). */
	uint16_t max_tx_segments;
	atomic_bool stop;
	uint64_t boot_id;
	uint64_t start_ns;
};

enum nic_command_type {
	NIC_CMD_SNAPSHOT,
	NIC_CMD_PMTU_SET,
	NIC_CMD_PMTU_DELETE,
	NIC_CMD_FLOW_ONLOAD,
	NIC_CMD_FLOW_ONLOAD_UNDO,
	NIC_CMD_FLOW_OFFLOAD,
	NIC_CMD_FLOW_COUNTERS,
	NIC_CMD_FLOW_FORGET,
	NIC_CMD_SWAP_ENGINES,
	NIC_CMD_RECONFIGURE,
	NIC_CMD_SET_INTERNAL_PREFIXES,
};

enum nic_command_state {
	NIC_COMMAND_PENDING,
	NIC_COMMAND_DONE,
	NIC_COMMAND_ABANDONED, /* the waiter gave up; the worker frees it */
};

struct nic_command {
	enum nic_command_type type;
	union {
		struct {
			struct jg_prefix prefix;
			uint16_t mtu;
		} pmtu;
		struct jg_flow_key flow;
		/* In: replacements; out: the engines they replaced. */
		struct jg_engine *engines[NIC_MAX_PORTS];
		struct nic_prefix_list internal;
		/* The engines' configuration now and what it becomes. */
		struct {
			struct jg_engine_config from;
			struct jg_engine_config to;
		} reconfigure;
		/* FLOW_COUNTERS: the counters of these flows, written by
		 * the worker into counters[0..count), and in pinned[] whether
		 * any engine of the worker holds the flow's pin.
		 * FLOW_FORGET: flows that left the onload list, whose
		 * counters the worker drops. The arrays belong to the command
		 * (malloc'd), so that a command its waiter abandoned never
		 * points into memory the waiter freed or moved. */
		struct {
			struct jg_flow_key *keys;
			struct nic_flow_counters *counters;
			bool *pinned;
			size_t count;
		} flows;
	} arg;
	/* Results. */
	int result;
	uint64_t packets; /* released by an offload */
	/* FLOW_ONLOAD: what it changed on each engine of the worker (nothing
	 * when one refused: the worker took back its own engines' onloads);
	 * FLOW_ONLOAD_UNDO: the same, to take back. */
	struct nic_onload_undo {
		struct jg_onload_undo ports[NIC_MAX_PORTS];
		bool counters_added; /* the flow's counters were made */
	} onload_undo;
	struct nic_worker_snapshot snapshot;
	_Atomic int state;
};

/* Monotonic time in nanoseconds, the clock every engine call is given. */
uint64_t nic_now_ns(void);

/* A worker's counters and its engines' statistics, summed. Only the
 * worker itself may call it while it runs (a NIC_CMD_SNAPSHOT command). */
void nic_worker_snapshot(const struct nic_worker *worker,
			 struct nic_worker_snapshot *snapshot);

/* Free a command and what it owns (the flows arrays; the engines of a
 * swap): a command a worker ran after its waiter abandoned it, or one that
 * never reached a worker. */
void nic_command_discard(struct nic_command *command);

/* Worker main loop (an lcore function); arg is the struct nic_worker. */
int nic_worker_run(void *arg);

/* Set by main before workers start. */
extern struct nic *nic_instance;

#endif /* JUMBOGATE_NIC_NIC_H */
