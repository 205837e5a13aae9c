/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An example network function that embeds the jumbogate engine: a source
 * NAT for IPv4 TCP and UDP between an inside network and an outside one.
 *
 * Inside -> outside, a connection's source address and port become the
 * NAT's public address and a port of its own; outside -> inside, packets
 * to that public port go back to the connection's inside endpoint.
 *
 * With merging on, each direction has an engine (engine.h) of its own:
 *
 *     receive -> jg_merge_burst -> translate -> jg_split_burst -> send
 *
 * so the NAT's per-packet work (parse, connection lookup, header rewrite,
 * checksum update) runs once per merged packet of up to merge_mtu bytes
 * instead of once per 1500-byte segment, and what leaves is cut to the
 * path MTU of the side it leaves through. One engine per direction, used
 * for both merging and splitting in that direction, keeps the engine's
 * per-flow state (the MSS an endpoint announced) apart between the
 * directions. With merging off the engines are not created and packets
 * go straight from receive to translate to send.
 *
 * Bounded state: the connection table has max_connections entries, made
 * once. A connection idle for idle_timeout_ns may be evicted (the least
 * recently used first) when a new one needs its place; when none is idle
 * that long, the new connection is refused. All three are counted.
 *
 * Every packet is checked before it is used: what is not a well-formed
 * IPv4 TCP/UDP packet is counted under its reason and dropped.
 */
#ifndef JUMBOGATE_EXAMPLE_NAT_H
#define JUMBOGATE_EXAMPLE_NAT_H

#include <stdbool.h>
#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;
struct jg_engine;

enum nat_dir {
	NAT_OUTBOUND = 0, /* received inside, sent outside */
	NAT_INBOUND = 1,  /* received outside, sent inside */
	NAT_DIRS = 2,
};

#define NAT_DROP_REASONS(X)                                                    \
	X(NAT_DROP_NOT_IPV4, "not-ipv4")                                       \
	X(NAT_DROP_MALFORMED, "malformed")                                     \
	X(NAT_DROP_FRAGMENT, "fragment")                                       \
	X(NAT_DROP_UNSUPPORTED, "unsupported-protocol")                        \
	X(NAT_DROP_NO_MAPPING, "no-mapping")                                   \
	X(NAT_DROP_TABLE_FULL, "table-full")

enum nat_drop_reason {
#define NAT_DROP_ENUM(name, text) name,
	NAT_DROP_REASONS(NAT_DROP_ENUM)
#undef NAT_DROP_ENUM
		NAT_DROP_REASON_COUNT
};

struct nat_config {
	uint32_t public_ip;	     /* network order */
	uint16_t port_base;	     /* first public port (host order) */
	uint32_t max_connections;    /* public ports port_base.. */
	uint64_t idle_timeout_ns;    /* evictable after this long idle */
	bool merge;		     /* embed the engine */
	uint32_t merge_mtu;	     /* the engines' internal MTU */
	uint16_t path_mtu[NAT_DIRS]; /* toward the side a direction sends to */
	uint32_t merge_wait_us; /* > 0: every run waits this long (tests) */
	/* The ports compute the IPv4 and TCP/UDP checksums of what they
	 * send: the engines build packets in JG_CHECKSUM_OFFLOAD mode. */
	bool checksum_offload;
	/* Benchmark only: spin this long on every packet translated, to
	 * stand for an NF whose own per-packet work costs more. */
	uint32_t work_ns;
	struct rte_mempool *header_pool; /* the engines' small mbufs */
	const char *name;
};

void nat_config_init(struct nat_config *config);

struct nat_dir_stats {
	uint64_t rx_packets, rx_bytes; /* received (frames) */
	uint64_t translated;	       /* packets the NAT worked on */
	uint64_t translated_bytes;     /* their frame bytes */
	uint64_t tx_packets, tx_bytes; /* handed to the send callback */
	uint64_t dropped;	       /* by the NAT, all reasons */
};

struct nat_stats {
	struct nat_dir_stats dir[NAT_DIRS];
	uint64_t drops[NAT_DROP_REASON_COUNT];
	uint32_t connections_now;
	uint32_t connections_max;
	uint64_t connections_created;
	uint64_t connections_evicted; /* idle ones whose place was reused */
	uint64_t connections_refused; /* table full, nothing idle */
};

struct nat;

/* Called with packets ready to leave in a direction; ownership passes. */
typedef void (*nat_send_fn)(void *context, enum nat_dir dir,
			    struct rte_mbuf **pkts, uint16_t count);

/* NULL with a message on stderr on failure. Needs an initialised EAL. */
struct nat *nat_create(const struct nat_config *config, nat_send_fn send,
		       void *send_context);
void nat_destroy(struct nat *nat);

/* A burst received in direction dir at now_ns; ownership passes. */
void nat_receive(struct nat *nat, enum nat_dir dir, struct rte_mbuf **pkts,
		 uint16_t count, uint64_t now_ns);

/* A poll that received nothing: release held runs that are due. */
void nat_idle(struct nat *nat, enum nat_dir dir, uint64_t now_ns);

/* Release everything the engines hold (shutdown). */
void nat_flush(struct nat *nat, uint64_t now_ns);

/* Earliest time a held run is due, UINT64_MAX if none. */
uint64_t nat_next_deadline(const struct nat *nat);

void nat_get_stats(const struct nat *nat, struct nat_stats *stats);
const char *nat_drop_reason_name(enum nat_drop_reason reason);

/* The engine of a direction (NULL with merging off), for its stats. */
struct jg_engine *nat_engine(struct nat *nat, enum nat_dir dir);

#endif /* JUMBOGATE_EXAMPLE_NAT_H */
