/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate-switch: the P4 pipeline of p4src/ on DPDK ports, programmed over
 * P4Runtime. Workers run the pipeline; the P4Runtime server (C++) owns the
 * table entries and writes them into the pipeline under the write lock.
 */
#ifndef JUMBOGATE_SWITCH_SWITCH_H
#define JUMBOGATE_SWITCH_SWITCH_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_rwlock.h>

#include "pipeline.h"
#include "tls_options.h"

struct rte_mempool;
struct rte_ring;

#define SW_MAX_DPDK_PORTS 32
#define SW_NAME_LEN	  64

/* Bounds on what the data path hands to the control thread; past them
 * the newest is dropped and counted. */
#define SW_DIGEST_QUEUE	   4096
#define SW_PACKET_IN_QUEUE 1024

struct sw_port {
	uint16_t p4_port;   /* the number the P4 program sees */
	uint16_t dpdk_port; /* the ethdev */
	char name[SW_NAME_LEN];
};

struct sw_switch {
	struct sw_pipeline pipeline;
	/* Workers hold it for reading around each burst; the P4Runtime
	 * server holds it for writing while it changes tables. */
	rte_rwlock_t lock;
	unsigned int worker_count;
	unsigned int port_count;
	struct sw_port ports[SW_MAX_DPDK_PORTS];
	/* P4 port -> index in ports[], or -1. */
	int16_t port_index[SW_PORTS];
	uint64_t device_id;
	/* P4Runtime arbitration (--primary-on-leave wait): no primary until
	 * a client re-arbitrates, instead of promoting the highest backup. */
	bool primary_on_leave_wait;
	/* --fence-election-ids: no id below the highest ever primary may be
	 * primary or write again. */
	bool fence_election_ids;
	uint32_t parse_depth;
	/* struct sw_elephant_digest elements, from workers to control. */
	struct rte_ring *digests;
	/* mbufs sent to the CPU port, for packet-in. */
	struct rte_ring *packet_in;
	/* mbufs from packet-out, injected at the CPU port by worker 0. */
	struct rte_ring *packet_out;
	struct rte_mempool *packet_out_pool;
	bool stop; /* set once by main; workers poll it atomically */
	uint64_t start_ns;
};

#ifdef __cplusplus
extern "C" {
#endif

uint64_t sw_now_ns(void);

/* Stream messages (digests, packet-in, idle-timeout notifications,
 * arbitration updates, errors) dropped because a client's outbox was full
 * (its messages or its bytes) or it was gone; the bytes all outboxes hold
 * now. */
uint64_t sw_p4rt_stream_messages_dropped(void);
uint64_t sw_p4rt_stream_outbox_bytes(void);
/* Digests the P4Runtime server dropped: none configured, or no primary. */
uint64_t sw_p4rt_digests_dropped(void);
/* StreamChannel calls open now, and those refused past their bound. */
uint64_t sw_p4rt_streams_open(void);
uint64_t sw_p4rt_streams_refused(void);
/* Streams open that have not arbitrated yet, and those closed for it (past
 * the arbitration deadline, or to make room past their bound). */
uint64_t sw_p4rt_streams_unarbitrated(void);
uint64_t sw_p4rt_streams_unarbitrated_closed(void);
/* Reads refused past the entities one Read may look at. */
uint64_t sw_p4rt_reads_refused(void);
/* Named P4Runtime roles now; arbitrations refused past their bound; writes'
 * updates, pipeline pushes and packet-outs a role's config refused. */
uint64_t sw_p4rt_roles(void);
uint64_t sw_p4rt_roles_refused(void);
uint64_t sw_p4rt_role_denials(void);
/* Packet-outs refused (answered with a stream error) or not sent. */
uint64_t sw_p4rt_packet_outs_refused(void);
/* Multicast group and clone session INSERTs refused past their bounds. */
uint64_t sw_p4rt_multicast_groups_refused(void);
uint64_t sw_p4rt_clone_sessions_refused(void);
/* Multicast group and clone session writes refused past the replicas all
 * of them may hold. */
uint64_t sw_p4rt_replicas_refused(void);

struct rte_tel_data;
/* /jumbogate_switch/writes: accepted write updates per election id. */
void sw_p4rt_writes_telemetry(struct rte_tel_data *d);

/* Serve P4Runtime on address (HOST:PORT or unix:PATH), secured as tls
 * says (runtime/grpc_listen.h). false with the reason when it cannot. */
bool sw_p4rt_start(struct sw_switch *sw, const char *address,
		   const struct jg_tls_options *tls, char *error,
		   unsigned long error_len);
void sw_p4rt_stop(void);

/* The P4Info this switch implements, for a parse-depth profile (text
 * format, as p4c writes it); NULL for an unknown profile. */
const char *sw_builtin_p4info(uint32_t parse_depth);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_SWITCH_SWITCH_H */
