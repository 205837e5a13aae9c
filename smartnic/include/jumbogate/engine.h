/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jumbogate SmartNIC engine: the packet transformations at the border
 * between the 1500-byte Internet and a rack that runs jumbo frames.
 *
 * The engine owns no port and performs no I/O. A DPDK program receives
 * bursts of rte_mbuf, hands them to the engine together with the current
 * time, and transmits whatever the engine returns. Keeping I/O outside
 * lets the same code run under the conformance suite, the fuzzer and the
 * benchmark, exactly as it runs on a NIC.
 *
 * Three transformations are offered:
 *
 *  - merge (Internet -> rack): consecutive segments of one TCP flow are
 *    joined into packets as large as the internal MTU, so hosts in the
 *    rack pay per-packet costs once per 8500 bytes instead of once per
 *    1500. Merged packets are mbuf chains that reference the received
 *    buffers; payload is never copied.
 *  - split (rack -> Internet): TCP packets larger than the path MTU of
 *    their destination are segmented in software, because the rack's
 *    hosts send jumbo segments that the Internet cannot carry.
 *  - caravan: UDP has no byte stream to re-cut, so several datagrams of
 *    one flow travel together in one jumbo packet, marked by a DSCP code
 *    point, and are unpacked unchanged on the way out.
 *
 * Threading: an engine is single-threaded. Run one engine per core (per
 * RX queue); engines share nothing.
 *
 * Time: every call that can hold or release packets takes the current
 * time in nanoseconds from any monotonic clock (TSC converted, or
 * CLOCK_MONOTONIC). The engine never reads a clock itself, which makes
 * its behaviour reproducible under test and benchmark.
 *
 * Accounting: every packet handed to the merge path is, at any moment,
 * either released (returned, or waiting in the ready queue), held, or
 * dropped:
 *     merge.packets_in == merge.segments_out + merge.held_now
 *                         + merge.dropped
 * The conformance suite asserts this after every test.
 */
#ifndef JUMBOGATE_ENGINE_H
#define JUMBOGATE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rte_mbuf;
struct rte_mempool;
struct jg_engine;

/** Largest internal MTU the engine accepts (an IPv4 total length). */
#define JG_MAX_INTERNAL_MTU 65535u
/** Default internal MTU: fits 9000-byte rack links with room for tunnels. */
#define JG_DEFAULT_INTERNAL_MTU 8500u
/** Default path MTUs toward the Internet when no prefix rule matches:
 *  Ethernet's 1500 for IPv4; for IPv6 its minimum link MTU (RFC 8200),
 *  since IPv6 routers never fragment and a guess too large is a black
 *  hole wherever ICMPv6 is filtered. */
#define JG_DEFAULT_PATH_MTU_V4 1500u
#define JG_DEFAULT_PATH_MTU_V6 1280u
/** Smallest path MTU the engine takes for each family. */
#define JG_MIN_PATH_MTU_V4 576u
#define JG_MIN_PATH_MTU_V6 1280u
/** Number of buckets in the merge-delay histogram. */
#define JG_DELAY_HISTOGRAM_BUCKETS 16u

/** The delay histogram's bucket of a delay: 0 below 1 us, i for
 *  [2^(i-1), 2^i) us, the last for everything above. Shared by the
 *  engine's merge delays and the program's caravan holds. */
static inline unsigned int jg_delay_bucket(uint64_t delay_ns)
{
	uint64_t delay_us = delay_ns / 1000;
	unsigned int bucket;

	if (delay_us == 0)
		return 0;
	bucket = 64u - (unsigned int)__builtin_clzll(delay_us);
	return bucket < JG_DELAY_HISTOGRAM_BUCKETS
		       ? bucket
		       : JG_DELAY_HISTOGRAM_BUCKETS - 1;
}
/** A flow may hold at most this many disjoint runs (holes between them). */
#define JG_MAX_RUNS_PER_FLOW 4u
/** Datagrams a caravan can carry; the count is one byte on the wire. */
#define JG_CARAVAN_MAX_DATAGRAMS 255u

/** How the checksums of packets the engine builds are produced. */
enum jg_checksum_mode {
	/** The engine writes final IPv4 header and TCP/UDP checksums. */
	JG_CHECKSUM_SOFTWARE = 0,
	/**
	 * The engine writes the pseudo-header sum into the L4 checksum
	 * field and sets RTE_MBUF_F_TX_IP_CKSUM / RTE_MBUF_F_TX_TCP_CKSUM
	 * (or UDP) with l2_len/l3_len/l4_len, so the port computes them.
	 */
	JG_CHECKSUM_OFFLOAD = 1,
};

/**
 * Adaptive delayed merging. A flow's incomplete tail may wait for the
 * segments that would complete it, but only when waiting is likely to
 * pay off: the flow must be fast (above rate_threshold_gbps) and not
 * already well merged (below yield_threshold). The wait is the
 * quantile-th quantile of a Gamma(k, s) distribution, the sum of k
 * exponential inter-arrival times of the flow, where k is the number of
 * segments still missing and s is the flow's mean inter-arrival time
 * (packet size / rate). Slower flows are merged only within one burst.
 * No packet ever waits longer than max_delay_us.
 */
struct jg_delay_model {
	double rate_threshold_gbps; /**< default 0.1 */
	double yield_threshold;	    /**< default 0.93 */
	double quantile;	    /**< default 0.95 */
	uint32_t max_delay_us;	    /**< default 300, at most 10000 */
	/** Every incomplete run waits the whole max_delay_us, whatever its
	 *  flow's rate, yield or ETM (default off). Not a way to run a
	 *  border: the benchmark's yield ceiling, what waiting as long as
	 *  the engine can reaches under the same merge rules. */
	bool wait_always;
};

struct jg_engine_config {
	/** Largest IP packet (IPv4 total length / IPv6 40 + payload) built
	 *  by merge and by caravan pack. Default 8500. */
	uint32_t internal_mtu;
	/** Capacity of the flow table (rounded up to a power of two, at
	 *  least 64). Memory is allocated once at creation. Default 65536. */
	uint32_t max_flows;
	/** Most mbufs in one merged chain; a run reaching it is emitted,
	 *  since NICs cap the descriptors of one TX packet. Default 16. */
	uint16_t max_chain_segments;
	/** Most input segments held across all flows; above it new
	 *  segments pass through unmerged. Default 65536. */
	uint32_t max_held_segments;
	struct jg_delay_model delay;
	enum jg_checksum_mode checksum_mode;
	/** Verify TCP checksums in software when the port did not mark the
	 *  packet as checked (RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN). A segment
	 *  whose checksum is unknown and unverified is never merged.
	 *  Default true. */
	bool verify_unknown_checksums;
	/** Merge flows nobody onloaded explicitly. Default true: the switch
	 *  steers only eligible traffic to the engine. */
	bool merge_unknown_flows;
	/** Path MTUs used when nothing learned and no prefix matches.
	 *  Defaults 1500 (IPv4) and 1280 (IPv6). */
	uint16_t default_path_mtu_v4;
	uint16_t default_path_mtu_v6;
	/** Path MTUs learned at run time (path MTU discovery), asked before
	 *  the prefix tables: the MTU of the path to dst (4 or 16 bytes,
	 *  network order), or 0 when it knows nothing better than them.
	 *  Called on the data path, from every engine's lcore at once, so it
	 *  must be lock-free for readers. NULL (default): none. */
	uint16_t (*learned_path_mtu)(const void *context, uint8_t ip_version,
				     const uint8_t *dst);
	const void *learned_path_mtu_context;
	/** Capacity of the path-MTU tables. Defaults 1024 and 1024. */
	uint32_t pmtu_max_rules_v4;
	uint32_t pmtu_max_rules_v6;
	/** DSCP that marks a caravan. Default 43 (pool 2, local use). */
	uint8_t caravan_dscp;
	/** Pool for the small mbufs the engine creates: copied headers and
	 *  indirect mbufs that reference received payload. Required. */
	struct rte_mempool *header_pool;
	/** NUMA socket for engine memory; default SOCKET_ID_ANY (-1). */
	int socket_id;
	/**
	 * The caller promises that every mbuf it gives the engine (and every
	 * mbuf of header_pool) has a private area of at least
	 * JG_MBUF_PRIV_SIZE bytes. The engine keeps per-run metadata in an
	 * mbuf dynamic field; the dynamic-field space is small (32 aligned
	 * bytes in DPDK 22.11) and a PMD may take part of it (net_pcap
	 * registers the Rx timestamp), so with this set the engine falls back
	 * to the private area instead of failing. Default false.
	 */
	bool run_meta_in_priv_area;
	/** Unique name (DPDK objects such as LPM tables are named). */
	const char *name;
	/**
	 * Raise the MSS option of SYNs and SYN-ACKs entering the rack
	 * (seen by jg_merge_burst) from at most an Ethernet-sized MSS (the
	 * larger of 1500 and the family's default path MTU, less 40 (IPv4) /
	 * 60 (IPv6)) to internal_mtu - 40 / - 60, with the TCP
	 * checksum updated. The jumbo host then sends the Internet peer
	 * large segments, and jg_split_burst cuts them to the path MTU on
	 * the way out: without it split has nothing to split. Counted in
	 * merge.mss_raised. A SYN without an MSS option, or announcing
	 * more, is left alone. This does not touch the learned-MSS rule:
	 * a flow whose internal endpoint advertised a legacy MSS (at most
	 * 1460, seen by jg_split_burst) is still never merged. Default true.
	 */
	bool raise_syn_mss;
	/** Seed of the flow table's keyed hash. 0 (default): a secret drawn
	 *  from the kernel at creation, so that no outsider can choose
	 *  5-tuples that share a victim's buckets. Tests set one to get the
	 *  same placement every run. */
	uint64_t hash_seed;
	/** Most flows onloaded (pinned) at once; jg_flow_onload refuses more
	 *  (merge.onloads_refused). 0 (default): a quarter of the table. */
	uint32_t max_onloaded_flows;
	/** An onloaded flow not seen for this long loses its pin and is an
	 *  ordinary flow again (merge.pins_expired). Default 60. */
	uint32_t onload_idle_s;
};

/** Fill a config with the defaults documented above. */
void jg_engine_config_init(struct jg_engine_config *config);

/** Create an engine; returns NULL and sets rte_errno on failure.
 *  Requires an initialised DPDK EAL (for the mbuf dynamic field and LPM). */
struct jg_engine *jg_engine_create(const struct jg_engine_config *config);

/** Free the engine and every packet it still holds. */
void jg_engine_destroy(struct jg_engine *engine);

/* ------------------------------------------------------------------ */
/* Merge (inbound)                                                     */

/**
 * Process a burst of received packets. Mergeable TCP segments are
 * absorbed into per-flow runs; everything else passes through in
 * arrival order after whatever its flow held. Packets ready to transmit
 * (pass-throughs, completed merged packets, and flows whose deadline is
 * due at now_ns) are written to out, at most out_cap of them; any excess
 * waits in the engine's ready queue and is returned first by the next
 * call. Give out_cap >= nb_pkts + 64 to keep that queue empty.
 * Ownership of every input mbuf passes to the engine.
 */
uint16_t jg_merge_burst(struct jg_engine *engine, struct rte_mbuf **pkts,
			uint16_t nb_pkts, uint64_t now_ns,
			struct rte_mbuf **out, uint16_t out_cap);

/**
 * Note a receive poll of the port that brought no packets for merging.
 * A held run waits for its missing segments plus the time a segment may
 * sit in the port before a poll hands it over; the engine learns that
 * time from the gap between a burst and the poll before it. Without this
 * call it takes the gap between bursts, which overstates it when traffic
 * is sparse (a poll loop that spins or sleeps briefly sees a segment long
 * before the next one arrives).
 */
void jg_merge_note_poll(struct jg_engine *engine, uint64_t now_ns);

/** Release held runs whose deadline is at or before now_ns. Call it when
 *  a poll returns no packets so tails do not wait for the next burst. */
uint16_t jg_merge_timer(struct jg_engine *engine, uint64_t now_ns,
			struct rte_mbuf **out, uint16_t out_cap);

/** Earliest deadline of any held run (exact: jg_merge_timer at that time
 *  releases it, a nanosecond before does not), or UINT64_MAX when nothing
 *  is held; lets an idle program sleep exactly until it has work. Cheap
 *  enough to ask after every empty poll. */
uint64_t jg_merge_next_deadline(const struct jg_engine *engine);

/** The longest an input may wait in the engine (delay.max_delay_us, in
 *  ns): a program that holds packets itself before handing them over
 *  (jumbogate-nic's caravan holds) keeps to the same bound. */
uint32_t jg_engine_max_delay_ns(const struct jg_engine *engine);

/** Release everything held (shutdown, failover). Call repeatedly until
 *  it returns 0 when out_cap is small. */
uint16_t jg_merge_flush_all(struct jg_engine *engine, struct rte_mbuf **out,
			    uint16_t out_cap);

/* ------------------------------------------------------------------ */
/* Per-flow control                                                    */

/** A flow in the direction the engine merges: from src (Internet) to
 *  dst (rack). Addresses and ports in network byte order. */
struct jg_flow_key {
	uint8_t ip_version; /**< 4 or 6 */
	uint8_t protocol;   /**< IPPROTO_TCP (merge) or IPPROTO_UDP */
	uint16_t src_port;
	uint16_t dst_port;
	union {
		uint32_t v4;
		uint8_t v6[16];
	} src, dst;
};

/** Merge this flow even when merge_unknown_flows is false, and protect
 *  its entry from eviction (a pin) while it is seen at least every
 *  onload_idle_s. Returns 0, or -ENOSPC when max_onloaded_flows are
 *  pinned already or both of its buckets hold pinned flows. */
int jg_flow_onload(struct jg_engine *engine, const struct jg_flow_key *key);

/** What one jg_flow_onload_undoable changed, so that an onload another
 *  engine refused can be taken back here as if it never came. */
struct jg_onload_undo {
	bool changed;	/**< the onload succeeded: there is something to undo */
	bool created;	/**< it made the flow's entry */
	bool pinned;	/**< it pinned the flow (it held no pin before) */
	bool offloaded; /**< the flow was offloaded before */
	uint32_t seen_before;	 /**< the flow's last-seen time before */
	uint32_t seen_by_onload; /**< the last-seen time the onload set */
};

/** jg_flow_onload, recording in undo what it changed. */
int jg_flow_onload_undoable(struct jg_engine *engine,
			    const struct jg_flow_key *key,
			    struct jg_onload_undo *undo);

/** Take back what jg_flow_onload_undoable recorded: the pin it gave is
 *  dropped, an offloaded flow is offloaded again, and an entry it made is
 *  removed unless the flow's packets came since (it holds segments or a
 *  learned MSS: it stays, as an ordinary flow). Nothing is released and
 *  nothing is marked offloaded that was not. A flow evicted since, or a
 *  record of a refused onload, changes nothing. */
void jg_flow_onload_undo(struct jg_engine *engine,
			 const struct jg_flow_key *key,
			 const struct jg_onload_undo *undo);

/** Whether the flow holds its pin: onloaded, and seen or onloaded again
 *  within onload_idle_s, the rule eviction applies. A pin found idle for
 *  longer is dropped here as eviction would drop it (merge.pins_expired).
 *  Never creates an entry. */
bool jg_flow_is_onloaded(struct jg_engine *engine,
			 const struct jg_flow_key *key);

/** The most flows engines built from this configuration pin at once:
 *  max_onloaded_flows, at most the flow table's capacity, or a quarter of
 *  that capacity when 0. */
uint32_t jg_engine_pin_budget(const struct jg_engine_config *config);

/**
 * Move the engine's clock on to now_ns (never back). The clock moves with
 * jg_merge_burst and jg_merge_timer, which a poll loop calls only when
 * packets arrive or a deadline is due; jg_flow_onload and
 * jg_flow_is_onloaded date pins by it. A program that calls them after a
 * quiet spell, or on an engine that saw no packet yet, calls this first
 * with the time of the clock it gives jg_merge_burst. Nothing is released.
 */
void jg_engine_advance_clock(struct jg_engine *engine, uint64_t now_ns);

/**
 * Stop merging this flow (the switch will now carry it directly). What
 * the flow holds is released into out in sequence order; its pin is
 * dropped. An unknown flow is left unknown (returns 0). Returns the
 * number of packets written, or -ENOSPC when out_cap is too small
 * (nothing is released then; 2 * JG_MAX_RUNS_PER_FLOW suffices).
 */
int jg_flow_offload(struct jg_engine *engine, const struct jg_flow_key *key,
		    struct rte_mbuf **out, uint16_t out_cap);

/** MSS the internal endpoint of a flow advertised, 0 if unknown. Learned
 *  from SYNs the split path sees going out. A flow whose internal
 *  endpoint advertised at most 1460 is not merged: merging would send it
 *  segments larger than it agreed to receive. */
uint16_t jg_flow_internal_mss(struct jg_engine *engine,
			      const struct jg_flow_key *key);

/* ------------------------------------------------------------------ */
/* Split (outbound)                                                    */

/**
 * Segment TCP packets larger than the path MTU of their destination.
 * Other packets pass unchanged (a non-TCP packet above the path MTU is
 * counted as oversize and passed; fragmenting it is not the engine's
 * job). Segments are a copied header mbuf plus indirect mbufs that
 * reference the original payload. Processing stops before an input
 * whose segments would not fit in out; *consumed tells how many inputs
 * were taken (never 0 when out_cap >= 64).
 */
uint16_t jg_split_burst(struct jg_engine *engine, struct rte_mbuf **pkts,
			uint16_t nb_pkts, struct rte_mbuf **out,
			uint16_t out_cap, uint16_t *consumed);

/** A prefix of the path-MTU table (address in network byte order). */
struct jg_prefix {
	uint8_t ip_version; /**< 4 or 6 */
	uint8_t depth;	    /**< prefix length */
	union {
		uint32_t v4;
		uint8_t v6[16];
	} addr;
};

/** Set the path MTU (576..65535) for a prefix. 0 or negative errno. */
int jg_pmtu_set(struct jg_engine *engine, const struct jg_prefix *prefix,
		uint16_t mtu);
/** Remove a prefix; 0, or -ENOENT. */
int jg_pmtu_delete(struct jg_engine *engine, const struct jg_prefix *prefix);
/** Path MTU toward a destination (longest prefix match, else default). */
uint16_t jg_pmtu_lookup_v4(const struct jg_engine *engine, uint32_t dst_be);
uint16_t jg_pmtu_lookup_v6(const struct jg_engine *engine,
			   const uint8_t dst[16]);

/* ------------------------------------------------------------------ */
/* UDP caravan                                                         */

/*
 * Wire format, inside an ordinary IPv4/IPv6 + UDP packet whose 5-tuple is
 * the datagrams' and whose DSCP is the caravan code point:
 *
 *   struct jg_caravan_header, then count records, then the payloads
 *   back to back in order.
 *
 * The records keep what differs between the datagrams (payload length,
 * IPv4 ID, UDP checksum as sent), so unpacking rebuilds each datagram
 * byte for byte; the header keeps the original TOS / traffic class
 * that the caravan DSCP replaced.
 */
#define JG_CARAVAN_MAGIC   0x4a43u /* "JC" */
#define JG_CARAVAN_VERSION 1u

struct jg_caravan_header {
	uint16_t magic;	      /**< JG_CARAVAN_MAGIC, network order */
	uint8_t version;      /**< JG_CARAVAN_VERSION */
	uint8_t count;	      /**< datagrams carried, >= 1 */
	uint8_t original_tos; /**< TOS / traffic class of the datagrams */
	uint8_t reserved;     /**< zero */
} __attribute__((packed));

struct jg_caravan_record {
	uint16_t payload_length; /**< UDP payload bytes, network order */
	uint16_t ipv4_id;	 /**< IPv4 ID as sent (0 for IPv6) */
	uint16_t udp_checksum;	 /**< UDP checksum as sent */
} __attribute__((packed));

/**
 * Pack consecutive UDP datagrams of the same flow (same addresses, ports,
 * TTL, TOS, DF, flow label; no IP options or fragments) found in this
 * burst into caravans of at most the internal MTU. A datagram that has
 * no partner passes unchanged. Order within a flow is kept; *consumed
 * as for jg_split_burst.
 */
uint16_t jg_caravan_pack(struct jg_engine *engine, struct rte_mbuf **pkts,
			 uint16_t nb_pkts, struct rte_mbuf **out,
			 uint16_t out_cap, uint16_t *consumed);

/**
 * Unpack caravans (UDP packets carrying the caravan DSCP) into the
 * original datagrams; other packets pass unchanged. A malformed caravan
 * is dropped and counted under its reason.
 */
uint16_t jg_caravan_unpack(struct jg_engine *engine, struct rte_mbuf **pkts,
			   uint16_t nb_pkts, struct rte_mbuf **out,
			   uint16_t out_cap, uint16_t *consumed);

/* ------------------------------------------------------------------ */
/* Statistics                                                          */

#define JG_DROP_REASONS(X)                                                     \
	X(JG_DROP_READY_QUEUE_FULL, "ready-queue-full")                        \
	X(JG_DROP_NO_MBUF, "no-mbuf")                                          \
	X(JG_DROP_CARAVAN_TRUNCATED, "caravan-truncated")                      \
	X(JG_DROP_CARAVAN_BAD_MAGIC, "caravan-bad-magic")                      \
	X(JG_DROP_CARAVAN_BAD_VERSION, "caravan-bad-version")                  \
	X(JG_DROP_CARAVAN_BAD_COUNT, "caravan-bad-count")                      \
	X(JG_DROP_CARAVAN_LENGTH_MISMATCH, "caravan-length-mismatch")          \
	X(JG_DROP_CARAVAN_BAD_CHECKSUM, "caravan-bad-checksum")

enum jg_drop_reason {
#define JG_DROP_ENUM(name, text) name,
	JG_DROP_REASONS(JG_DROP_ENUM)
#undef JG_DROP_ENUM
		JG_DROP_REASON_COUNT
};

/** An IPv6 header's extension chain, as the engine follows it. */
struct jg_ipv6_chain {
	uint8_t protocol;    /**< upper-layer protocol after the chain */
	uint16_t length;     /**< IPv6 header plus extension headers */
	bool fragment;	     /**< a fragment header is present */
	bool first_fragment; /**< ... and its offset is 0 */
	bool routing;	     /**< a routing header is present */
};

/**
 * Walk the extension headers (hop-by-hop, routing, destination options,
 * fragment; at most 4) of the IPv6 packet at `l3`, of which `available`
 * bytes are present. False when the chain runs past those bytes or is
 * longer than the engine follows: such a packet is never transformed.
 * jg_packet_summarize walks the same way.
 */
bool jg_ipv6_walk(const uint8_t *l3, uint32_t available,
		  struct jg_ipv6_chain *chain);

/** What the engine's parser reads from a packet: enough for a program to
 *  decide which transformation, if any, the packet is for. */
struct jg_packet_summary {
	/** Version and addresses always. protocol is the upper-layer
	 *  protocol, 0 for a later fragment (which shows no L4 header).
	 *  Ports are set when has_ports, else 0. */
	struct jg_flow_key key;
	/** TCP or UDP with at least its ports in the first segment. */
	bool has_ports;
};

/**
 * Parse the first segment of a packet exactly as the engine does (up to
 * two VLAN tags, IPv4 with options, the IPv6 extension chain of
 * jg_ipv6_walk, lengths checked against the bytes present). False when
 * the packet is not IPv4/IPv6 or the engine would find it inconsistent:
 * the engine passes such a packet on untouched, so its caller need not
 * hand it over. A program that classifies packets for the engine uses
 * this instead of a parser of its own, so that both always agree.
 */
bool jg_packet_summarize(const struct rte_mbuf *m,
			 struct jg_packet_summary *summary);

/**
 * Change a running engine's merge rules and limits in place, keeping its
 * flows (sequence state, learned MSS, onloads), path MTUs and statistics,
 * which a new engine would start without. Only these fields of `config`
 * are read: internal_mtu, max_chain_segments, delay, the default path
 * MTUs and merge_unknown_flows (the rest size or name the engine: build a new
 * one to change them). A change of internal_mtu, max_chain_segments or the
 * delay model needs nothing held, since held runs were cut to the old rules:
 * flush first (jg_merge_flush_all), else -EBUSY. Returns 0, or -EINVAL for
 * values jg_engine_create would refuse; on an error nothing changed.
 */
int jg_engine_reconfigure(struct jg_engine *engine,
			  const struct jg_engine_config *config);

/** Whether going from `from` to `to` changes the merge rules, so that an
 *  engine must hold nothing when jg_engine_reconfigure applies it. */
bool jg_engine_merge_rules_differ(const struct jg_engine_config *from,
				  const struct jg_engine_config *to);

/** Private-area bytes per mbuf that run_meta_in_priv_area asks for. */
#define JG_MBUF_PRIV_SIZE 32

/** Whether this engine keeps run metadata in the mbuf private area (its
 *  dynamic field could not be registered), for the caller's logs. */
bool jg_engine_meta_in_priv_area(const struct jg_engine *e);

/** Stable short name of a drop reason, for logs and metrics. */
const char *jg_drop_reason_name(enum jg_drop_reason reason);

struct jg_merge_stats {
	uint64_t packets_in;	 /**< every packet given to merge */
	uint64_t bytes_in;	 /**< their frame bytes */
	uint64_t segments_out;	 /**< inputs released (merged or not), including
				      those still in the ready queue */
	uint64_t packets_out;	 /**< mbuf packets returned */
	uint64_t bytes_out;	 /**< their frame bytes */
	uint64_t merged_packets; /**< returned packets built of >1 input */
	uint64_t passed_through; /**< inputs returned as they came */
	uint64_t held_now;	 /**< inputs held in runs now */
	uint64_t ready_now;	 /**< released packets not yet returned */
	uint64_t dropped;	 /**< inputs dropped (see drops[]) */
	uint64_t tcp_payload_in; /**< payload bytes of mergeable segments */
	uint64_t tcp_payload_full; /**< of which left in packets >= 90% iMTU */
	uint64_t flows_created;
	uint64_t flows_evicted;	     /**< evictions that freed a slot */
	uint64_t evictions_flushing; /**< evictions that released held runs */
	uint64_t deadline_flushes;   /**< runs released by their deadline */
	uint64_t delayed_flows;	     /**< runs that were allowed to wait */
	uint64_t legacy_mss_passes;  /**< segments not merged: legacy MSS */
	uint64_t bad_checksum_passes;
	uint64_t overlap_passes;    /**< retransmitted / overlapping segments */
	uint64_t overlap_restarts;  /**< overlapping segments that reached the
					 stream's end and began a new run */
	uint64_t held_full_passes;  /**< segments not held: max_held_segments
					 reached (the buffer budget) */
	uint64_t mss_raised;	    /**< SYNs whose MSS option was raised */
	uint64_t onloads_refused;   /**< onloads over the pin budget */
	uint64_t pins_expired;	    /**< onload pins dropped after idling */
	uint64_t connection_resets; /**< sequence state forgotten: SYN, FIN,
					 RST or 5 s of silence */
	/** Per input segment, time from arrival (now_ns of the call that
	 *  took it) to the call that returned it. Bucket 0: < 1 us; bucket
	 *  i: [2^(i-1), 2^i) us; the last bucket takes everything above. */
	uint64_t delay_histogram_us[JG_DELAY_HISTOGRAM_BUCKETS];
	uint64_t delay_sum_ns; /**< sum of those delays */
};

struct jg_split_stats {
	uint64_t packets_in;
	uint64_t packets_segmented; /**< inputs cut into segments */
	uint64_t segments_out;	    /**< segments produced */
	uint64_t passed_through;    /**< inputs that fit their path MTU */
	uint64_t oversize_non_tcp;  /**< passed although above path MTU */
	uint64_t dropped;
	uint64_t mss_learned; /**< SYNs whose MSS option was recorded */
	/** Packets cut to the MSS their Internet-side endpoint announced,
	 *  which was below the path MTU (the raise hid it from the host) */
	uint64_t peer_mss_limited;
};

struct jg_caravan_stats {
	uint64_t datagrams_packed;
	uint64_t caravans_packed;
	uint64_t caravans_unpacked;
	uint64_t datagrams_unpacked;
	uint64_t passed_through;
	uint64_t dropped;
};

struct jg_stats {
	struct jg_merge_stats merge;
	struct jg_split_stats split;
	struct jg_caravan_stats caravan;
	uint64_t drops[JG_DROP_REASON_COUNT];
	uint32_t flows_now;
	uint32_t flow_capacity;
	uint32_t flow_entry_bytes; /**< memory per flow-table entry */
	/** Memory per flow in all: the entry, the full key it is checked
	 *  against and its share of the bucket's signatures. */
	uint32_t flow_state_bytes;
	uint64_t memory_bytes; /**< memory the engine allocated */
	/** The longest any input segment waited (ns), exactly: the
	 *  histogram's power-of-two buckets cannot show a bound. */
	uint64_t merge_delay_max_ns;
};

void jg_engine_get_stats(const struct jg_engine *engine,
			 struct jg_stats *stats);

/** Share of mergeable TCP payload that left in packets of at least 90%
 *  of the internal MTU (0..1); 0 when no payload left yet. */
double jg_stats_conversion_yield(const struct jg_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_ENGINE_H */
