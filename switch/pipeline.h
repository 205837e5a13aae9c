/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jumbogate P4 pipeline (p4src/v1model/jumbogate.p4) in C.
 *
 * Each function names the P4 parser, control or table it mirrors; the
 * constants come from the P4 source itself (p4_constants.h is generated
 * from defines.p4, drop_reasons.p4 and flow_hash.p4 at build time).
 *
 * The pipeline works on one contiguous frame. It never allocates: routing
 * rewrites the frame in place, and the ICMP signal is built in place over
 * the offending frame, which is always longer than the error (the frame
 * exceeded an MTU of at least 576 bytes, the error is at most 1298).
 */
#ifndef JUMBOGATE_SWITCH_PIPELINE_H
#define JUMBOGATE_SWITCH_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "p4_constants.h"
#include "p4_tables.h"
#include "tables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* port_t: as wide as port_roles' key. */
#define SW_PORTS       (1 << P4_TABLE_PORT_ROLES_KEY_INGRESS_PORT_BITS)
#define SW_MAX_WORKERS 16

struct sw_next_hop {
	uint16_t port;
	uint8_t src_mac[6];
	uint8_t dst_mac[6];
};

/* What a next_hops entry points at: one member, or a group's members in
 * member-id order (weights expanded), as the selector chooses among them. */
struct sw_hop_set {
	uint32_t count;
	struct sw_next_hop hops[];
};

/* signal_source's action. */
struct sw_signal_source {
	bool configured; /* set_signal_source; else the original destination */
	uint8_t ipv4[4];
	uint8_t ipv6[16];
};

/* Everything the control plane writes. Read by workers under the read
 * lock; written by the P4Runtime server under the write lock. */
struct sw_tables {
	uint8_t port_role[SW_PORTS];	/* port_roles */
	bool depth_forward;		/* depth_policy */
	bool fleet_jumbo;		/* fleet_policy */
	uint16_t guest_jumbo_mtu;	/* fleet_policy */
	uint16_t default_mtu;		/* fleet_policy */
	int32_t nic_port;		/* nic_port; -1: no_nic_port */
	uint32_t elephant_threshold;	/* elephant_config */
	struct sw_signal_source signal; /* signal_source */
	struct sw_hash instances_v4;	/* value: jumbo flag */
	struct sw_hash instances_v6;
	struct sw_lpm path_mtu_v4; /* value: MTU */
	struct sw_lpm path_mtu_v6;
	uint16_t path_mtu_default_v4; /* the tables' default actions */
	uint16_t path_mtu_default_v6;
	struct sw_hash merge_flows; /* value: idle timeout in ns (0: none) */
	struct sw_ternary merge_services;
	struct sw_lpm routes_v4; /* value: next-hop group id */
	struct sw_lpm routes_v6;
	/* by group id */
	struct sw_hop_set *next_hops[1 << P4_TABLE_NEXT_HOPS_KEY_GROUP_ID_BITS];
};

/* The merge_flows key: the P4 key fields in order, byte-aligned. */
#define SW_FLOW_KEY_LEN P4_TABLE_MERGE_FLOWS_KEY_BYTES

/* A trTCM meter in packets (v1model's MeterType.packets as BMv2 runs it):
 * red when the peak bucket is empty, yellow when the committed one is. */
struct sw_meter {
	bool configured; /* unconfigured meters are always green */
	uint64_t cir, cburst, pir, pburst; /* packets per second, packets */
	/* Tokens in millionths of a packet, so that slow rates refill. */
	uint64_t committed_tokens, peak_tokens;
	uint64_t last_ns;
	uint8_t lock; /* a spinlock, with GCC's atomic builtins */
};

enum sw_color { SW_GREEN = 0, SW_YELLOW = 1, SW_RED = 2 };

struct sw_packets_bytes {
	uint64_t packets;
	uint64_t bytes;
};

/* The indexed counters of counters.p4, one set per worker so that workers
 * never share a cache line; reads add the workers up. */
struct sw_counters {
	struct sw_packets_bytes port_rx[P4_PORT_COUNTER_SIZE];
	struct sw_packets_bytes port_tx[P4_PORT_COUNTER_SIZE];
	struct sw_packets_bytes drop_reasons[P4_DROP_REASON_COUNTER_SIZE];
	struct sw_packets_bytes paths[P4_PATH_COUNTER_SIZE];
	struct sw_packets_bytes icmp_signals[P4_ICMP_COUNTER_SIZE];
};

enum sw_counter_id {
	SW_COUNTER_PORT_RX,
	SW_COUNTER_PORT_TX,
	SW_COUNTER_DROP_REASONS,
	SW_COUNTER_PATHS,
	SW_COUNTER_ICMP_SIGNALS,
	SW_COUNTER_COUNT,
};

/* elephant_digest_t, as the P4 struct orders it. */
struct sw_elephant_digest {
	uint8_t ip_version;
	uint8_t src_addr[16];
	uint8_t dst_addr[16];
	uint8_t protocol;
	uint16_t src_port;
	uint16_t dst_port;
	uint32_t estimated_bytes;
};

/* Where a digest goes: a bounded queue the control thread drains. Returns
 * false when the queue is full (the digest is then counted as lost). */
typedef bool (*sw_digest_sink)(void *context,
			       const struct sw_elephant_digest *digest);

/* The registers of ElephantDetector. Shared by the workers: with several
 * workers two packets may race on one cell, which can only lose a few
 * bytes of an estimate (the same as a sketch collision). The P4's pair of
 * registers for each row (sketch_row<N>_bytes and _epoch) is one word per
 * cell here (pipeline_elephant.c packs it), so that a packet reads and writes
 * each of its three cells once, in one cache line. */
struct sw_sketch {
	uint64_t row[3][P4_SKETCH_COLUMNS];
	uint16_t bloom_epoch[P4_BLOOM_BITS];
};

/* What the switch itself counts beyond the P4 counters. */
struct sw_internal_counters {
	uint64_t digests_lost; /* the digest queue was full */
	uint64_t multi_segment_dropped;
	uint64_t tx_dropped;
	uint64_t packet_in_lost;
};

struct sw_pipeline {
	uint32_t parse_depth_bytes; /* the profile: 256 or 512 */
	uint16_t cpu_port;
	struct sw_tables tables;
	struct sw_meter icmp_signal_meter[P4_ICMP_METER_SIZE];
	struct sw_meter icmp_source_meter[P4_ICMP_SOURCE_METER_SIZE];
	struct sw_sketch sketch;
	struct sw_counters counters[SW_MAX_WORKERS];
	/* Counter values set over P4Runtime: reads add the workers to it. */
	struct sw_counters counter_base;
	struct sw_internal_counters internal[SW_MAX_WORKERS];
	uint64_t start_ns; /* the ingress timestamp counts from here */
	sw_digest_sink digest_sink;
	void *digest_context;
};

/* 0, or a negative errno. Tables get the sizes of the P4 program. */
int sw_pipeline_init(struct sw_pipeline *pipeline, uint32_t parse_depth,
		     uint16_t cpu_port, uint64_t now_ns);
void sw_pipeline_free(struct sw_pipeline *pipeline);
/* Back to the P4 program's defaults: every table empty, every default
 * action the program's, meters unconfigured (SetForwardingPipelineConfig). */
void sw_tables_reset(struct sw_pipeline *pipeline);
/* What the data path keeps of a table's default action (P4Info aliases of
 * the table and the action, its arguments by parameter name); tables
 * whose default the data path never reads are ignored. The one reader of
 * default actions: sw_tables_reset gives it the compile's, the P4Runtime
 * server a controller's. */
void sw_set_default(struct sw_tables *tables, const char *table,
		    const char *action, const struct p4_default_arg *args,
		    uint32_t count);

/* Runs one frame through ingress and egress. `frame` holds `*length`
 * bytes; the pipeline may rewrite it and change `*length`. Returns the
 * egress port, or -1 when the packet is dropped. */
int sw_pipeline_run(struct sw_pipeline *pipeline, unsigned int worker,
		    uint8_t *frame, uint32_t *length, uint16_t ingress_port,
		    uint64_t now_ns);

/* Configures (rates > 0) or resets (all 0) one meter cell. */
void sw_meter_set(struct sw_meter *meter, uint64_t cir, uint64_t cburst,
		  uint64_t pir, uint64_t pburst, uint64_t now_ns);
enum sw_color sw_meter_execute(struct sw_meter *meter, uint64_t now_ns);

/* BMv2's crc16, over the same bytes BMv2 hashes. */
uint16_t sw_crc16(const uint8_t *data, uint32_t length);

/* A counter cell summed over workers plus its base. */
struct sw_packets_bytes sw_counter_read(const struct sw_pipeline *pipeline,
					unsigned int worker_count,
					enum sw_counter_id counter,
					uint32_t index);
void sw_counter_write(struct sw_pipeline *pipeline, unsigned int worker_count,
		      enum sw_counter_id counter, uint32_t index,
		      struct sw_packets_bytes value);
uint32_t sw_counter_size(enum sw_counter_id counter);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_SWITCH_PIPELINE_H */
